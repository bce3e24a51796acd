"""Dictionary codes for hashing: hash each distinct value (or value combination) once.

Real categorical columns repeat their values (tailnum: 4,043 distinct in 336,776 rows), so
MurmurHash over every row's bytes repeats the same work. Here a text column becomes int32
codes + its distinct values (the parallel encoder of ``fastprep.data.text_encode``, or an
Arrow dictionary as given), and a cross of 2-3 such columns is addressed by the combined code
``(c0 * n1 + c1) * n2 + c2``: the caller hashes the tokens of the combinations (all, or those
present) and the CSR kernels (``hash_csr``) look each row's up. Missing members give code -1
(the cross does not fire).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from fastprep.data import text_encode
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import jit as njit  # made on first use
from fastprep.native.kernel_files import prange

#: a cross is hashed by combination when the member cardinalities' product is at most this
#: (a table of one uint32 per combination) and not more than this many per row
MAX_COMBINATIONS = 1 << 24
MAX_COMBINATIONS_PER_ROW = 4


def codes_and_uniques(array: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """int32 codes (-1 missing) and the distinct values (large_string) of a text column."""
    if pa.types.is_dictionary(array.type):
        merged = array.unify_dictionaries().combine_chunks() if array.num_chunks else None
        if merged is None:
            return np.empty(0, np.int32), pa.array([], pa.large_string())
        indices = merged.indices.cast(pa.int32())
        codes = np.asarray(indices.fill_null(-1).to_numpy(), dtype=np.int32)
        return codes, merged.dictionary.cast(pa.large_string())
    return text_encode.encode(array)


def combinable(cardinalities: list[int], n_rows: int) -> bool:
    """Whether a cross's combinations fit a table (else each row's token is hashed)."""
    product = 1
    for n in cardinalities:
        product *= max(n, 1)
    return product <= min(MAX_COMBINATIONS, max(MAX_COMBINATIONS_PER_ROW * n_rows, 1 << 16))


def present(ccodes: np.ndarray, sources: np.ndarray, cardinalities: list[int]) -> np.ndarray:
    """The sorted distinct combined codes ``(c0 * n1 + c1) * n2 + c2`` present over rows
    with no member missing; members are rows ``sources`` of ``ccodes``."""
    product = 1
    for n in cardinalities:
        product *= n
    seen = ARENA.zeros(product, np.bool_)
    mul = np.ones(3, np.int64)
    mul[: len(cardinalities)] = cardinalities
    srcs = np.full(3, -1, np.int64)
    srcs[: len(sources)] = sources
    _mark_rows(ccodes, srcs, mul, seen)
    return np.flatnonzero(seen)


@njit(parallel=True, cache=True)
def _mark_rows(ccodes, srcs, mul, seen):  # pragma: no cover - compiled
    # a store only where not yet marked: threads storing to one cache line again and again
    # made it bounce between cores (3x slower than the loads)
    for i in prange(ccodes.shape[1]):
        k = np.int64(0)
        for m in range(3):
            s = srcs[m]
            if s < 0:
                break
            c = ccodes[s, i]
            if c < 0:
                k = -1
                break
            k = k * mul[m] + c
        if k >= 0 and not seen[k]:
            seen[k] = True


def present_combinations(combined: np.ndarray, product: int) -> np.ndarray:
    """The sorted distinct non-missing combined codes (int64)."""
    seen = ARENA.zeros(product, np.bool_)
    _mark(combined, seen)
    return np.flatnonzero(seen)


def member_values(
    combos: np.ndarray, uniques: list[pa.Array], cardinalities: list[int]
) -> list[pa.Array]:
    """For each combination, each member's value (Arrow arrays aligned with ``combos``)."""
    members, rest = [], combos
    for k in range(len(uniques) - 1, -1, -1):
        members.append(uniques[k].take(pa.array(rest % cardinalities[k])))
        rest = rest // cardinalities[k]
    return members[::-1]


@njit(cache=True)
def _mark(combined, seen):  # pragma: no cover - compiled
    for i in range(combined.shape[0]):
        k = combined[i]
        if k >= 0:
            seen[k] = True
