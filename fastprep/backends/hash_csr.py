"""The CSR matrix of a hashing call in two parallel passes, written in its final layout.

Why: writing every row's entries first and compacting after the duplicates were merged
touched the ~80 MB output of a 3.4M-row call twice, and the per-feature packed codes were
written to and read back from a row array each. Here each row's entries are produced on
the fly from what the features are made of — a per-row packed code (``s_code``, hashed per
row), a number, or a table lookup by dictionary code (``gtab[goff + (c0 * n1 + c1) * n2 +
c2]`` over the rows' codes of 1-3 encoded source columns) — once to count the merged
entries per row, once to write them sorted and summed where ``indptr`` says.

Semantics are sklearn's ``FeatureHasher``: each value cast to the output dtype, then the
row's entries stably sorted by index and duplicates summed in that dtype, left to right;
a sum that cancels stays an explicit 0; missing values and numeric zeros give no entry.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from fastprep.backends._murmur import MISSING

#: rows per parallel task (each task owns small scratch arrays)
BLOCK = 8192
#: feature kinds in ``kind``
DIRECT, NUMBER, GATHERED = 0, 1, 2


@njit(cache=True, inline="always")
def _entry(k, i, kind, pos, s_code, num_code, num_vals, ccodes, gsrc, gmul, goff, gtab):
    """(packed code ``index * 2 + negative``, value) of feature ``k`` in row ``i``; code -1
    when the feature gives no entry."""
    p = pos[k]
    t = kind[k]
    if t == 0:
        c = np.int64(s_code[p, i])
        if c == MISSING:
            return np.int64(-1), 0.0
        return c, 1.0
    if t == 1:
        v = num_vals[p, i]
        if v == v and v != 0.0:
            return np.int64(num_code[p]), v
        return np.int64(-1), 0.0
    return _gathered(p, i, ccodes, gsrc, gmul, goff, gtab), 1.0


@njit(cache=True, inline="always")
def _gathered(g, i, ccodes, gsrc, gmul, goff, gtab):
    """Packed code of gathered feature ``g`` in row ``i``, -1 if a member is missing (the
    table has a code for every combination that occurs)."""
    key = np.int64(0)
    for m in range(3):
        s = gsrc[g, m]
        if s < 0:
            break
        c = ccodes[s, i]
        if c < 0:
            return np.int64(-1)
        key = key * gmul[g, m] + c
    return np.int64(gtab[goff[g] + key])


@njit(cache=True, inline="always")
def _distinct(x, c, x0, x1, x2, seen):
    """Count index ``x`` if new: the first 3 in registers, more in ``seen``."""
    if (x == x0) | (x == x1) | (x == x2):  # one branch, not three
        return c, x0, x1, x2
    if c == 0:
        return 1, x, x1, x2
    if c == 1:
        return 2, x0, x, x2
    if c == 2:
        return 3, x0, x1, x
    if c == 3:
        seen[0], seen[1], seen[2] = x0, x1, x2
    for t in range(3, c):
        if seen[t] == x:
            return c, x0, x1, x2
    seen[c] = x
    return c + 1, x0, x1, x2


@njit(cache=True, inline="always")
def _keep(x, v, c, k0, k1, k2, vals):
    """Entry ``c`` (index ``x``, value ``v``): key ``x * 4 + c`` in a register, the value
    in ``vals[c]`` (read back by ``key & 3``: a branch on random slots mispredicts)."""
    if c < 3:
        vals[c] = v
    if c == 0:
        return 1, x * 4, k1, k2
    if c == 1:
        return 2, k0, x * 4 + 1, k2
    if c == 2:
        return 3, k0, k1, x * 4 + 2
    return c + 1, k0, k1, k2


@njit(parallel=True, cache=True)
def count_rows(
    kind, pos, s_code, num_code, num_vals, ccodes, gsrc, gmul, goff, gtab, counts
):  # pragma: no cover - compiled
    """``counts[i]``: the number of distinct indices among row ``i``'s entries. (One loop
    per kind of feature: the order does not matter for a count, and a kind switch per
    entry doubled the time.)"""
    n = counts.shape[0]
    ng, nd, nn = goff.shape[0], s_code.shape[0], num_vals.shape[0]
    for b in prange((n + BLOCK - 1) // BLOCK):
        seen = np.empty(max(kind.shape[0], 1), np.int64)
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            c = 0
            x0 = x1 = x2 = np.int64(-1)
            for g in range(ng):
                code = _gathered(g, i, ccodes, gsrc, gmul, goff, gtab)
                if code >= 0:
                    c, x0, x1, x2 = _distinct(code >> 1, c, x0, x1, x2, seen)
            for p in range(nd):
                code = np.int64(s_code[p, i])
                if code != MISSING:
                    c, x0, x1, x2 = _distinct(code >> 1, c, x0, x1, x2, seen)
            for p in range(nn):
                v = num_vals[p, i]
                if v == v and v != 0.0:
                    c, x0, x1, x2 = _distinct(num_code[p] >> 1, c, x0, x1, x2, seen)
            counts[i] = c


@njit(parallel=True, cache=True)
def fill_rows(
    kind, pos, s_code, num_code, num_vals, ccodes, gsrc, gmul, goff, gtab, indptr, indices, data
):  # pragma: no cover - compiled
    """Row ``i``'s merged entries into ``indices`` / ``data`` from ``indptr[i]`` on.

    A row of up to 3 entries with distinct indices (almost all rows) is built in
    registers in any feature order and sorted by index; any other row is rebuilt in
    feature order through scratch arrays, stably sorted and merged."""
    n = indptr.shape[0] - 1
    nk = kind.shape[0]
    ng, nd, nn = goff.shape[0], s_code.shape[0], num_vals.shape[0]
    for b in prange((n + BLOCK - 1) // BLOCK):
        sx = np.empty(max(nk, 1), np.int64)
        sv = np.empty(max(nk, 1), data.dtype)
        vals = np.empty(3, np.float64)
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            start = indptr[i]
            size = indptr[i + 1] - start
            if size == 0:
                continue
            c = 0
            k0 = k1 = k2 = np.int64(0)
            for g in range(ng):
                code = _gathered(g, i, ccodes, gsrc, gmul, goff, gtab)
                if code >= 0:
                    v = 1.0 - 2.0 * (code & 1)
                    c, k0, k1, k2 = _keep(code >> 1, v, c, k0, k1, k2, vals)
            for p in range(nd):
                code = np.int64(s_code[p, i])
                if code != MISSING:
                    v = 1.0 - 2.0 * (code & 1)
                    c, k0, k1, k2 = _keep(code >> 1, v, c, k0, k1, k2, vals)
            for p in range(nn):
                v = num_vals[p, i]
                if v == v and v != 0.0:
                    code = num_code[p]
                    v *= 1.0 - 2.0 * (code & 1)  # exact: v is never 0 or NaN
                    c, k0, k1, k2 = _keep(code >> 1, v, c, k0, k1, k2, vals)
            if c == size and c == 1:
                indices[start] = k0 >> 2
                data[start] = vals[0]
                continue
            if c == size and c == 2:
                lo, hi = min(k0, k1), max(k0, k1)
                indices[start], indices[start + 1] = lo >> 2, hi >> 2
                data[start] = vals[lo & 3]
                data[start + 1] = vals[hi & 3]
                continue
            if c == size and c == 3:
                a, m = min(k0, k1), max(k0, k1)
                m, z = min(m, k2), max(m, k2)
                a, m = min(a, m), max(a, m)
                indices[start], indices[start + 1], indices[start + 2] = a >> 2, m >> 2, z >> 2
                data[start] = vals[a & 3]
                data[start + 1] = vals[m & 3]
                data[start + 2] = vals[z & 3]
                continue
            # duplicates or more than 3 entries: in feature order, stable sort and merge
            c = 0
            for k in range(nk):
                code, v = _entry(k, i, kind, pos, s_code, num_code, num_vals, ccodes,
                                 gsrc, gmul, goff, gtab)  # fmt: skip
                if code >= 0:
                    sx[c] = code >> 1
                    sv[c] = v * (1.0 - 2.0 * (code & 1))  # cast to the output dtype
                    c += 1
            for t in range(sort_merge(sx, sv, 0, c)):
                indices[start + t] = sx[t]
                data[start + t] = sv[t]


@njit(cache=True, inline="always")
def sort_merge(indices, data, start, end):  # pragma: no cover - compiled
    """Row ``indices[start:end]`` / ``data[start:end]`` in place: stable insertion sort by
    index, then runs of equal indices summed (in ``data``'s dtype, left to right) into the
    front; returns the merged count. Shared by the hashing and ``fp.Dict`` kernels."""
    for a in range(start + 1, end):
        ki = indices[a]
        kv = data[a]
        b = a - 1
        while b >= start and indices[b] > ki:
            indices[b + 1] = indices[b]
            data[b + 1] = data[b]
            b -= 1
        indices[b + 1] = ki
        data[b + 1] = kv
    if end - start < 2:
        return end - start
    w = start
    for a in range(start + 1, end):
        if indices[a] == indices[w]:
            data[w] += data[a]
        else:
            w += 1
            indices[w] = indices[a]
            data[w] = data[a]
    return w - start + 1
