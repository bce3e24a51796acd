"""Numba kernels: streaming MurmurHash3 x86_32 and CSR assembly for hashing."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# All arithmetic is done in uint64 holding 32-bit values, masked after each op:
# this avoids numba's int/uint promotion to float64 and signed-overflow UB.
_M32 = np.uint64(0xFFFFFFFF)
_C1 = np.uint64(0xCC9E2D51)
_C2 = np.uint64(0x1B873593)
_N = np.uint64(0xE6546B64)
_F1 = np.uint64(0x85EBCA6B)
_F2 = np.uint64(0xC2B2AE35)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U4 = np.uint64(4)
_U5 = np.uint64(5)
_U8 = np.uint64(8)
_U13 = np.uint64(13)
_U15 = np.uint64(15)
_U16 = np.uint64(16)
_U17 = np.uint64(17)
_U19 = np.uint64(19)
_INT_MIN = -2147483648


@njit(cache=True)
def _mix_k(k):
    k = (k * _C1) & _M32
    k = ((k << _U15) | (k >> _U17)) & _M32
    return (k * _C2) & _M32


@njit(cache=True)
def _block(h, k):
    h ^= _mix_k(k)
    h = ((h << _U13) | (h >> _U19)) & _M32
    return (h * _U5 + _N) & _M32


@njit(cache=True)
def _load32(buf, i):
    return (
        np.uint64(buf[i])
        | (np.uint64(buf[i + 1]) << _U8)
        | (np.uint64(buf[i + 2]) << _U16)
        | (np.uint64(buf[i + 3]) << np.uint64(24))
    )


@njit(cache=True)
def _feed(buf, start, end, h, carry, nc):
    """Feed ``buf[start:end]`` into the hash state ``(h, carry, nc)``.

    ``carry`` holds ``nc`` (< 4) pending little-endian bytes of a partial block,
    so a token can be hashed as the concatenation of several segments.
    """
    i = start
    if nc == _U0:
        while i + 4 <= end:
            h = _block(h, _load32(buf, i))
            i += 4
    else:
        # ``nc`` bytes pending: each 32-bit word completes one block and
        # leaves its top ``nc`` bytes pending.
        s = _U8 * nc
        rs = np.uint64(32) - s
        while i + 4 <= end:
            w = _load32(buf, i)
            h = _block(h, (carry | (w << s)) & _M32)
            carry = w >> rs
            i += 4
    while i < end:
        carry |= np.uint64(buf[i]) << (_U8 * nc)
        nc += _U1
        i += 1
        if nc == _U4:
            h = _block(h, carry)
            carry = _U0
            nc = _U0
    return h, carry, nc


@njit(cache=True)
def _finish(h, carry, nc, length):
    """Finalize; returns the signed 32-bit hash as int64."""
    if nc != _U0:
        h ^= _mix_k(carry)
    h ^= np.uint64(length) & _M32
    h ^= h >> _U16
    h = (h * _F1) & _M32
    h ^= h >> np.uint64(13)
    h = (h * _F2) & _M32
    h ^= h >> _U16
    r = np.int64(h)
    if r >= 2147483648:
        r -= 4294967296
    return r


@njit(cache=True)
def murmur3_32(buf):
    """MurmurHash3 x86_32 (seed 0) of a uint8 array, as signed int."""
    h, c, nc = _feed(buf, 0, buf.shape[0], _U0, _U0, _U0)
    return _finish(h, c, nc, buf.shape[0])


@njit(parallel=True, cache=True)
def hash_rows(
    sep, sep_off, m, d0, o0, v0, d1, o1, v1, d2, o2, v2, seg_start, tasks, out_h, out_valid
):  # pragma: no cover - compiled
    """Hash per row the token ``sep[0] + s0 [+ sep[1] + s1 [+ sep[2] + s2]]``.

    ``sep`` / ``sep_off`` hold the literal separators (``"col="``,
    ``"^col2="``, ...).  ``d*`` / ``o*`` / ``v*`` are typed lists, one entry per
    segment, of the UTF-8 data, int64 offsets and validity of the ``m`` member
    columns; segment ``s`` starts at row ``seg_start[s]``.  ``tasks`` rows are
    ``(segment, row_lo, row_hi)``.  Rows with a missing member get
    ``out_valid = False``.
    """
    h0, c0, n0 = _feed(sep, sep_off[0], sep_off[1], _U0, _U0, _U0)
    len0 = sep_off[1] - sep_off[0]
    len1 = sep_off[2] - sep_off[1]
    len2 = sep_off[3] - sep_off[2]
    for t in prange(tasks.shape[0]):
        sg = tasks[t, 0]
        base = seg_start[sg]
        bd0, bo0, bv0 = d0[sg], o0[sg], v0[sg]
        bd1, bo1, bv1 = d1[sg], o1[sg], v1[sg]
        bd2, bo2, bv2 = d2[sg], o2[sg], v2[sg]
        for i in range(tasks[t, 1], tasks[t, 2]):
            r = i - base
            ok = bv0[r]
            if m > 1:
                ok = ok and bv1[r]
            if m > 2:
                ok = ok and bv2[r]
            out_valid[i] = ok
            if not ok:
                out_h[i] = 0
                continue
            h, c, nc = _feed(bd0, bo0[r], bo0[r + 1], h0, c0, n0)
            length = len0 + bo0[r + 1] - bo0[r]
            if m > 1:
                h, c, nc = _feed(sep, sep_off[1], sep_off[2], h, c, nc)
                h, c, nc = _feed(bd1, bo1[r], bo1[r + 1], h, c, nc)
                length += len1 + bo1[r + 1] - bo1[r]
            if m > 2:
                h, c, nc = _feed(sep, sep_off[2], sep_off[3], h, c, nc)
                h, c, nc = _feed(bd2, bo2[r], bo2[r + 1], h, c, nc)
                length += len2 + bo2[r + 1] - bo2[r]
            out_h[i] = _finish(h, c, nc, length)


@njit(parallel=True, cache=True)
def gather_codes(table_h, table_valid, codes, valid, out_h, out_valid):  # pragma: no cover
    """Per-row lookup of dictionary hashes by code (dictionary path)."""
    for i in prange(codes.shape[0]):
        ok = valid[i]
        if ok:
            c = codes[i]
            ok = table_valid[c]
            out_h[i] = table_h[c]
        else:
            out_h[i] = 0
        out_valid[i] = ok


@njit(parallel=True, cache=True)
def count_nnz(s_valid, num_vals, counts):  # pragma: no cover - compiled
    """Entries per row before merging duplicates (missing / zero dropped)."""
    ks = s_valid.shape[0]
    kn = num_vals.shape[0]
    for i in prange(counts.shape[0]):
        c = 0
        for p in range(ks):
            if s_valid[p, i]:
                c += 1
        for p in range(kn):
            v = num_vals[p, i]
            if v == v and v != 0.0:
                c += 1
        counts[i] = c


def fastmod_params(n_features: int) -> tuple[np.uint64, np.int64]:
    """Lemire's fastmod constant for ``n_features`` and the INT_MIN index.

    sklearn's _hashing_fast.pyx maps h == INT_MIN (abs() undefined in C) to
    ``(2147483647 - (n_features - 1)) % n_features``.
    """
    m = ((2**64 - 1) // n_features + 1) % 2**64
    return np.uint64(m), np.int64((2147483647 - (n_features - 1)) % n_features)


@njit(cache=True)
def _index(h, m, d, imin_idx):
    """``abs(h) % d`` via Lemire's exact 32-bit fastmod (3 multiplies)."""
    if h == _INT_MIN:
        return imin_idx
    a = np.uint64(abs(h))
    low = m * a
    hi = (low >> np.uint64(32)) * d + (((low & _M32) * d) >> np.uint64(32))
    return np.int64(hi >> np.uint64(32))


@njit(parallel=True, cache=True)
def fill_rows(
    s_h,
    s_valid,
    num_h,
    num_vals,
    kind,
    pos,
    fm_m,
    fm_d,
    imin_idx,
    alternate_sign,
    indptr,
    indices,
    data,
    merged,
):  # pragma: no cover - compiled
    """Write each row's entries in feature order, stable-sort, sum duplicates.

    Mirrors sklearn: value cast to ``data.dtype`` then duplicates summed in
    that dtype in (stable) sorted order; cancelled entries stay as explicit 0.
    """
    nk = kind.shape[0]
    for i in prange(merged.shape[0]):
        start = indptr[i]
        j = start
        for k in range(nk):
            p = pos[k]
            if kind[k] == 0:
                if not s_valid[p, i]:
                    continue
                h = np.int64(s_h[p, i])
                v = 1.0
            else:
                v = num_vals[p, i]
                if not (v == v and v != 0.0):
                    continue
                h = np.int64(num_h[p])
            if alternate_sign and h < 0:
                v = -v
            indices[j] = _index(h, fm_m, fm_d, imin_idx)
            data[j] = v
            j += 1
        for a in range(start + 1, j):
            ki = indices[a]
            kv = data[a]
            b = a - 1
            while b >= start and indices[b] > ki:
                indices[b + 1] = indices[b]
                data[b + 1] = data[b]
                b -= 1
            indices[b + 1] = ki
            data[b + 1] = kv
        if j == start:
            merged[i] = 0
            continue
        w = start
        for a in range(start + 1, j):
            if indices[a] == indices[w]:
                data[w] += data[a]
            else:
                w += 1
                indices[w] = indices[a]
                data[w] = data[a]
        merged[i] = w - start + 1


@njit(parallel=True, cache=True)
def compact(indptr, indices, data, new_indptr, new_indices, new_data):  # pragma: no cover
    """Copy each row's merged prefix into tightly packed arrays."""
    for i in prange(new_indptr.shape[0] - 1):
        src = indptr[i]
        dst = new_indptr[i]
        for t in range(new_indptr[i + 1] - dst):
            new_indices[dst + t] = indices[src + t]
            new_data[dst + t] = data[src + t]
