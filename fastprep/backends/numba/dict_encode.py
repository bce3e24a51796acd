"""Dict columns (``fp.Dict``) hashed or vectorized from their flattened entries.

A :class:`~fastprep.data.dict_column.DictColumn` holds per entry a key code and either a
string-value code or a number. Tokens are ``key=value`` (value 1) for a string and ``key``
(the number) otherwise — exactly sklearn's ``FeatureHasher(input_type="dict")`` and
``DictVectorizer`` on the same dicts. Each distinct (key, value) pair and each distinct key
is hashed (or looked up in the vocabulary) once, then gathered per entry; one Numba kernel
then sorts each row's entries and sums duplicates, as sklearn's ``sum_duplicates`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastprep.backends.numba import hash_codes
from fastprep.backends.numba import murmur as mm
from fastprep.backends.numba.hash_csr import sort_merge
from fastprep.backends.numba.hashing import _MAX_FEATURES, _run_hash
from fastprep.data.dict_column import DictColumn
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import jit as njit  # made on first use
from fastprep.native.kernel_files import prange

if TYPE_CHECKING:
    import scipy.sparse as sp

_KEY_ONLY = (np.frombuffer(b"\0", dtype=np.uint8), np.zeros(4, dtype=np.int64))
_KEY_EQ_VALUE = (np.frombuffer(b"=", dtype=np.uint8), np.array([0, 0, 1, 1], dtype=np.int64))


def _pairs(column: DictColumn) -> tuple[np.ndarray, np.ndarray, pa.Array, pa.Array]:
    """String entries' positions, their distinct-pair index, and the pairs' keys and values."""
    pos = np.flatnonzero(column.value_codes >= 0)
    n_values = max(len(column.value_uniques), 1)
    combined = column.key_codes[pos].astype(np.int64) * n_values + column.value_codes[pos]
    product = max(len(column.key_uniques), 1) * n_values
    if product <= hash_codes.MAX_COMBINATIONS:  # a table per pair: no sort
        distinct = hash_codes.present_combinations(combined, product)
        lookup = np.empty(product, dtype=np.int64)
        lookup[distinct] = np.arange(len(distinct))
        inverse = lookup[combined]
    else:
        distinct, inverse = np.unique(combined, return_inverse=True)
    keys = column.key_uniques.take(pa.array(distinct // n_values))
    values = column.value_uniques.take(pa.array(distinct % n_values))
    return pos, inverse.astype(np.int64).ravel(), keys, values


def hash_dicts(
    column: DictColumn, n_features: int, *, alternate_sign: bool = True, dtype: Any = np.float32
) -> sp.csr_matrix:
    """``FeatureHasher(n_features, input_type="dict", alternate_sign=...)`` of the rows."""
    if not 1 <= int(n_features) <= _MAX_FEATURES:
        raise ValueError(f"n_features must be in [1, {_MAX_FEATURES}], got {n_features}")
    m, imin = mm.fastmod_params(int(n_features))
    fm = np.array([np.int64(m.view(np.int64)), int(n_features), imin, int(bool(alternate_sign))])
    n_entries = len(column.key_codes)
    codes = ARENA.empty(n_entries, np.uint32)  # retained pages: see fastprep.native.arena
    pos, inverse, keys, values = _pairs(column)
    if len(pos):
        pair_codes = np.empty(len(keys), dtype=np.uint32)
        _run_hash(mm, *_KEY_EQ_VALUE, [pa.chunked_array([keys]), pa.chunked_array([values])],
                  fm, pair_codes)  # fmt: skip
        codes[pos] = pair_codes[inverse]
    num = np.flatnonzero(column.value_codes < 0)
    if len(num):
        key_codes = np.empty(len(column.key_uniques), dtype=np.uint32)
        _run_hash(mm, *_KEY_ONLY, [pa.chunked_array([column.key_uniques])], fm, key_codes)
        codes[num] = key_codes[column.key_codes[num]]
    index = np.right_shift(codes, 1, out=ARENA.empty(n_entries, np.int64))
    values_ = ARENA.empty(n_entries, np.float64)
    np.copyto(values_, column.numbers)
    np.copyto(values_, 1.0, where=column.value_codes >= 0)
    np.negative(values_, out=values_, where=(codes & 1) != 0)
    keep = values_ != 0.0  # FeatureHasher skips zero values
    return _to_csr(column, keep, index, values_, int(n_features), np.dtype(dtype))


def _join(keys: pa.Array, values: pa.Array) -> pa.Array:
    """``key=value`` per pair (large_string)."""
    return pc.binary_join_element_wise(keys, values, pa.scalar("=", pa.large_string()))


def fit_vocabulary(column: DictColumn) -> list[str]:
    """Every feature name present (``key`` or ``key=value``), sorted like Python's sort."""
    _, _, keys, values = _pairs(column)
    pair_names = _join(keys, values)
    used = np.unique(column.key_codes[column.value_codes < 0])
    key_names = column.key_uniques.take(pa.array(used, type=pa.int64()))
    names = pc.unique(pa.concat_arrays([pair_names.cast(pa.large_string()), key_names]))
    return names.take(pc.sort_indices(names)).to_pylist()  # UTF-8 byte order = code points


def vectorize_dicts(
    column: DictColumn, vocabulary: list[str], *, dtype: Any = np.float32
) -> sp.csr_matrix:
    """``DictVectorizer`` transform with a fitted ``vocabulary``: unseen names are ignored;
    explicit zeros are kept (as DictVectorizer keeps them), duplicates summed."""
    known = pa.array(vocabulary, type=pa.large_string())
    index = np.full(len(column.key_codes), -1, dtype=np.int64)
    pos, inverse, keys, values = _pairs(column)
    if len(pos):
        names = _join(keys, values).cast(pa.large_string())
        found = pc.index_in(names, value_set=known).fill_null(-1).to_numpy()
        index[pos] = found[inverse]
    num = np.flatnonzero(column.value_codes < 0)
    if len(num):
        found = pc.index_in(column.key_uniques, value_set=known).fill_null(-1).to_numpy()
        index[num] = found[column.key_codes[num]]
    values_ = np.where(column.value_codes >= 0, 1.0, column.numbers)
    return _to_csr(column, index >= 0, index, values_, len(vocabulary), np.dtype(dtype))


def _to_csr(column, keep, index, values, width, dtype) -> sp.csr_matrix:
    """Kept entries per row, sorted by index (stable), duplicates summed in ``dtype``."""
    import scipy.sparse as sp

    n = len(column)
    counts = np.bincount(column.entry_rows()[keep], minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    idx_dtype = np.int32 if max(int(indptr[-1]), width) <= 2**31 - 1 else np.int64
    nnz = int(indptr[-1])
    indices = ARENA.empty(nnz, idx_dtype)
    indices[...] = np.compress(keep, index, out=ARENA.empty(nnz, index.dtype))
    data = ARENA.empty(nnz, dtype)
    data[...] = np.compress(keep, values, out=ARENA.empty(nnz, values.dtype))
    merged = np.zeros(n, dtype=np.int64)
    _sort_rows(indptr, indices, data, merged)
    if merged.any():
        new_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts - merged, out=new_indptr[1:])
        new_indices = np.empty(int(new_indptr[-1]), dtype=idx_dtype)
        new_data = np.empty(int(new_indptr[-1]), dtype=dtype)
        mm.compact(indptr, indices, data, new_indptr, new_indices, new_data)
        indptr, indices, data = new_indptr, new_indices, new_data
    out = sp.csr_matrix((data, indices, indptr.astype(idx_dtype)), shape=(n, width), copy=False)
    out.has_sorted_indices = True
    return out


@njit(parallel=True, cache=True)
def _sort_rows(indptr, indices, data, merged):  # pragma: no cover - compiled
    """Per row: stable sort by index, then sum runs of equal indices in place."""
    for i in prange(indptr.shape[0] - 1):
        start, end = indptr[i], indptr[i + 1]
        merged[i] = end - start - sort_merge(indices, data, start, end)
