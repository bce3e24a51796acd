"""Numba kernels: streaming MurmurHash3 x86_32 and CSR assembly for hashing."""

from __future__ import annotations

import numpy as np

from fastprep.native.kernel_files import jit as njit  # made on first use
from fastprep.native.kernel_files import prange

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
# Packed per-row code ``index * 2 + negative`` is stored as uint32; this marks
# "no entry" (index <= 2**31 - 2 so codes never reach it).
MISSING = 4294967295


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


_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_CACHE_BITS = 14


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


@njit(cache=True)
def _code(h, fm):
    """Packed ``index * 2 + negative`` for hash ``h``; ``fm`` = (m, d, imin, alt)."""
    idx = _index(h, np.uint64(fm[0]), np.uint64(fm[1]), fm[2])
    return idx * 2 + (1 if (fm[3] != 0 and h < 0) else 0)


@njit(cache=True)
def _bit(bitmap, q):
    return (bitmap[q >> 3] >> (q & 7)) & 1 == 1


@njit(cache=True)
def _short(buf, lo, n):
    """Bytes ``buf[lo:lo+n]`` (n <= 8) packed little-endian into a uint64."""
    if n >= 4:
        # Two possibly overlapping words; overlapping bytes OR onto themselves.
        hi = _load32(buf, lo + n - 4) << (_U8 * np.uint64(n - 4))
        return _load32(buf, lo) | hi
    if lo + 4 <= buf.shape[0]:
        return _load32(buf, lo) & _MASKS[n]
    k = _U0
    for t in range(n):
        k |= np.uint64(buf[lo + t]) << (_U8 * np.uint64(t))
    return k


@njit(nogil=True, cache=True)
def hash_rows(
    sep, sep_off, m, d0, o0, v0, q0, d1, o1, v1, q1, d2, o2, v2, q2, base, lo, hi, fm, out
):  # pragma: no cover - compiled
    """Hash per row ``i`` in ``lo:hi`` the token ``sep[0] + s0 [+ sep[1] + s1 [+ sep[2] + s2]]``.

    ``sep`` / ``sep_off`` hold the literal separators (``"col="``, ``"^col2="``, ...).
    ``d*`` / ``o*`` / ``v*`` are the UTF-8 data, int64 offsets and validity bitmap of one
    segment (a piece where no member changes Arrow chunk) of the ``m`` member columns,
    whose first row is ``base``; ``q*`` is the bitmap's bit offset, -1 if no nulls. Plain
    arrays, not typed lists: a ``numba.typed.List`` compiles its methods in every new
    process (~2 s), which the on-disk cache does not save. One call per (segment, thread),
    GIL released, with its own cache keyed by the exact member bytes + lengths when they
    total <= 8 bytes. ``out[i]`` gets the packed code (``_code``), or ``MISSING``.
    """
    h0, c0, n0 = _feed(sep, sep_off[0], sep_off[1], _U0, _U0, _U0)
    len0 = sep_off[1] - sep_off[0]
    len1 = sep_off[2] - sep_off[1]
    len2 = sep_off[3] - sep_off[2]
    shift = np.uint64(64 - _CACHE_BITS)
    ckey = np.zeros(1 << _CACHE_BITS, dtype=np.uint64)
    cval = np.full(1 << _CACHE_BITS, -1, dtype=np.int64)  # (lens << 40) | code
    for i in range(lo, hi):
        r = i - base
        if q0 >= 0 and not _bit(v0, q0 + r):
            out[i] = MISSING
            continue
        if m > 1 and q1 >= 0 and not _bit(v1, q1 + r):
            out[i] = MISSING
            continue
        if m > 2 and q2 >= 0 and not _bit(v2, q2 + r):
            out[i] = MISSING
            continue
        a0 = o0[r]
        n0_ = o0[r + 1] - a0
        a1 = o1[r]
        n1_ = o1[r + 1] - a1 if m > 1 else 0
        a2 = o2[r]
        n2_ = o2[r + 1] - a2 if m > 2 else 0
        tot = n0_ + n1_ + n2_
        slot = -1
        if tot <= 8:
            key = _short(d0, a0, n0_)
            if m > 1:
                key |= _short(d1, a1, n1_) << np.uint64(min(8 * n0_, 56))
            if m > 2:
                key |= _short(d2, a2, n2_) << np.uint64(min(8 * (n0_ + n1_), 56))
            lk = (n0_ | (n1_ << 4) | (n2_ << 8)) + 1
            slot = np.int64(((key ^ np.uint64(lk)) * _GOLD) >> shift)
            cv = cval[slot]
            if (cv >> 40) == lk and ckey[slot] == key:
                out[i] = cv & 0xFFFFFFFFFF
                continue
        h, c, nc = h0, c0, n0
        for j in range(m):  # one _feed call site each: keeps compile time down
            if j > 0:
                h, c, nc = _feed(sep, sep_off[j], sep_off[j + 1], h, c, nc)
            bd = d0 if j == 0 else (d1 if j == 1 else d2)
            a = a0 if j == 0 else (a1 if j == 1 else a2)
            nn = n0_ if j == 0 else (n1_ if j == 1 else n2_)
            h, c, nc = _feed(bd, a, a + nn, h, c, nc)
        length = len0 + tot + (len1 if m > 1 else 0) + (len2 if m > 2 else 0)
        code = _code(_finish(h, c, nc, length), fm)
        out[i] = code
        if slot >= 0:
            ckey[slot] = key
            cval[slot] = (lk << 40) | code


@njit(parallel=True, cache=True)
def compact(indptr, indices, data, new_indptr, new_indices, new_data):  # pragma: no cover
    """Copy each row's merged prefix into tightly packed arrays."""
    for i in prange(new_indptr.shape[0] - 1):
        src = indptr[i]
        dst = new_indptr[i]
        for t in range(new_indptr[i + 1] - dst):
            new_indices[dst + t] = indices[src + t]
            new_data[dst + t] = data[src + t]
