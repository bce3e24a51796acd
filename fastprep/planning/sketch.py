"""A small, mergeable HyperLogLog for the planner's cardinality pre-flight.

Why a sketch: the memory pre-flight must know roughly how many categories a column has
*before* fitting, without holding its distinct values. HyperLogLog keeps ``2**p`` one-byte
registers (16 KiB at the default ``p=14``), has a relative standard error of about
``1.04 / sqrt(2**p)`` (0.81 %), and two sketches merge by an element-wise maximum, so one
sketch per Parquet row group (or partition) merges into the column's.

Values are hashed with MurmurHash3 x86_32 (seed 0) — the same function as the Numba kernel
:func:`fastprep.backends.numba.murmur.murmur3_32`, written here with numpy so the pre-flight
neither imports nor compiles Numba: strings are UTF-8 bytes, numbers the bytes of their
float64 value (``-0.0`` as ``0.0``). Inputs are usually *dictionaries* (the distinct values
of a row group), so hashing them is cheap; whole columns work too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

#: default precision: 16,384 registers, 0.81 % standard error
PRECISION = 14
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_F1, _F2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k(k: np.ndarray) -> np.ndarray:
    return _rotl(k * _C1, 15) * _C2


def murmur3_32_padded(data: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """MurmurHash3 x86_32 (seed 0, unsigned) of each row of ``data`` (uint8, zero-padded to
    a multiple of 4 bytes), whose first ``lengths[i]`` bytes are the key."""
    n, width = data.shape
    blocks = data.view("<u4").reshape(n, width // 4) if n else np.zeros((0, 0), np.uint32)
    lengths = lengths.astype(np.int64)
    full, tail = lengths // 4, lengths % 4
    h = np.zeros(n, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for j in range(width // 4):
            k = blocks[:, j].astype(np.uint32)
            body = j < full
            mixed = _rotl(h ^ _mix_k(k), 13) * np.uint32(5) + np.uint32(0xE6546B64)
            h = np.where(body, mixed, h)
            h = np.where((j == full) & (tail > 0), h ^ _mix_k(k), h)  # zero-padded tail
        h ^= lengths.astype(np.uint32)
        h ^= h >> np.uint32(16)
        h *= _F1
        h ^= h >> np.uint32(13)
        h *= _F2
        h ^= h >> np.uint32(16)
    return h


def hash_values(values: Iterable[object] | np.ndarray) -> np.ndarray:
    """Unsigned 32-bit Murmur hashes of strings (UTF-8) or numbers (float64 bytes)."""
    array = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if array.dtype.kind in "fiub":
        numbers = array.astype(np.float64) + 0.0  # -0.0 -> 0.0
        data = np.ascontiguousarray(numbers).view(np.uint8).reshape(len(numbers), 8)
        return murmur3_32_padded(data, np.full(len(numbers), 8))
    encoded = [str(v).encode("utf-8") for v in array]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    out = np.empty(len(encoded), dtype=np.uint32)
    if not encoded:
        return out
    # group by padded width (powers of two) so one long outlier does not pad every key
    widths = np.maximum(4, 1 << np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64))
    for width in sorted(set(widths.tolist())):  # not np.unique: it imports numpy.ma
        rows = np.flatnonzero(widths == width)
        packed = np.array([encoded[i] for i in rows], dtype=f"S{int(width)}")
        data = packed.view(np.uint8).reshape(len(rows), int(width))
        out[rows] = murmur3_32_padded(data, lengths[rows])
    return out


@dataclass
class HyperLogLog:
    """Flajolet et al.'s HyperLogLog over 32-bit hashes, with the small- and large-range
    corrections; :meth:`merge` of two sketches equals the sketch of the union."""

    p: int = PRECISION
    registers: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if not 4 <= self.p <= 18:
            raise ValueError(f"HyperLogLog precision p={self.p}: must be in 4..18")
        if self.registers is None:
            self.registers = np.zeros(1 << self.p, dtype=np.uint8)

    def add_hashes(self, hashes: np.ndarray) -> HyperLogLog:
        bits = 32 - self.p
        hashes = hashes.astype(np.uint32)
        index = (hashes >> np.uint32(bits)).astype(np.int64)
        rest = hashes & np.uint32((1 << bits) - 1)
        _, exponent = np.frexp(rest.astype(np.float64))  # bit length (0 for 0)
        rank = (bits - exponent + 1).astype(np.uint8)
        np.maximum.at(self.registers, index, rank)
        return self

    def add(self, values: Iterable[object] | np.ndarray) -> HyperLogLog:
        return self.add_hashes(hash_values(values))

    def merge(self, other: HyperLogLog) -> HyperLogLog:
        if other.p != self.p:
            raise ValueError(f"cannot merge HyperLogLog p={self.p} with p={other.p}")
        return HyperLogLog(self.p, np.maximum(self.registers, other.registers))

    def estimate(self) -> float:
        m = float(1 << self.p)
        alpha = 0.7213 / (1 + 1.079 / m)
        raw = alpha * m * m / float(np.sum(np.ldexp(1.0, -self.registers.astype(np.int64))))
        zeros = int(np.count_nonzero(self.registers == 0))
        if raw <= 2.5 * m and zeros:
            return m * math.log(m / zeros)  # linear counting
        if raw > 2**32 / 30:
            return -(2.0**32) * math.log1p(-raw / 2**32)
        return raw

    @property
    def relative_error(self) -> float:
        """One standard error of :meth:`estimate`, relative."""
        return 1.04 / math.sqrt(1 << self.p)
