"""Dictionary codes for hashing: hash each distinct value (or value combination) once.

Real categorical columns repeat their values (tailnum: 4,043 distinct in 336,776 rows), so
MurmurHash over every row's bytes repeats the same work. Here a text column becomes int32
codes + its distinct values (the parallel encoder of ``fastprep.validate.text_encode``, or an
Arrow dictionary as given), and a cross of 2-3 such columns becomes one combined code per
row, ``(c0 * n1 + c1) * n2 + c2``: the caller hashes the tokens of the combinations present
and gathers per row. Missing members give code -1 (the cross does not fire).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit, prange

from fastprep.emit.arena import ARENA
from fastprep.validate import text_encode

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


def combined_and_present(
    codes: list[np.ndarray], cardinalities: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """One int64 code per row for a cross of 2-3 coded columns (-1 if a member is
    missing), and the sorted distinct codes present, in one parallel pass (the marks are
    idempotent byte stores, so threads may race on them harmlessly)."""
    empty = np.zeros(1, np.int32)
    c2 = codes[2] if len(codes) == 3 else empty
    n2 = cardinalities[2] if len(codes) == 3 else 1
    product = 1
    for n in cardinalities:
        product *= n
    out = ARENA.empty(len(codes[0]), np.int64)
    seen = ARENA.zeros(product, np.bool_)
    _combine_mark(codes[0], codes[1], c2, len(codes) == 3, cardinalities[1], n2, out, seen)
    return out, np.flatnonzero(seen)


@njit(parallel=True, cache=True)
def _combine_mark(c0, c1, c2, three, n1, n2, out, seen):  # pragma: no cover - compiled
    for i in prange(out.shape[0]):
        a = c0[i]
        b = c1[i]
        c = c2[i] if three else 0
        if a < 0 or b < 0 or c < 0:
            out[i] = -1
        else:
            k = (np.int64(a) * n1 + b) * n2 + c
            out[i] = k
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


#: below this many rows the gather runs serially (starting threads costs more)
PARALLEL_MIN_ROWS = 1 << 17


def gather_combined(table, combined, out, missing) -> None:
    """Per row, the packed hash code of its combination (``missing`` where -1)."""
    if len(combined) < PARALLEL_MIN_ROWS:
        _gather_serial(table, combined, out, missing)
    else:
        _gather_parallel(table, combined, out, missing)


@njit(parallel=True, cache=True)
def _gather_parallel(table, combined, out, missing):  # pragma: no cover - compiled
    for i in prange(combined.shape[0]):
        k = combined[i]
        out[i] = table[k] if k >= 0 else missing


@njit(cache=True)
def _gather_serial(table, combined, out, missing):  # pragma: no cover - compiled
    for i in range(combined.shape[0]):
        k = combined[i]
        out[i] = table[k] if k >= 0 else missing
