"""The reference feature hasher: sklearn's ``FeatureHasher`` semantics without sklearn.

Each distinct token is hashed once (MurmurHash3 x86_32, seed 0, by numpy:
:func:`fastprep.planning.sketch.hash_values`) and looked up per entry; the entries are laid out
row by row in input order and the matrix is finished exactly as sklearn finishes it
(values cast to the output dtype, then ``sum_duplicates``), so the result is bit-identical
to ``FeatureHasher(n_features, input_type="pair", alternate_sign=..., dtype=...)``.
Needs no compiled kernel and no scikit-learn (which stays the tests' oracle).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.emit.csr import CsrArrays
from fastprep.planning.sketch import hash_values

if TYPE_CHECKING:
    import scipy.sparse as sp

INT32_MIN = -(2**31)


def signed_hashes(tokens: Sequence[str]) -> np.ndarray:
    """sklearn's ``murmurhash3_32(token, seed=0, positive=False)`` of each token (int64)."""
    if not len(tokens):
        return np.zeros(0, np.int64)
    return hash_values(np.asarray(tokens, dtype=object)).view(np.int32).astype(np.int64)


def columns_and_signs(hashes: np.ndarray, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Column ``abs(h) % n_features`` (sklearn's rule for ``h == -2**31``) and sign of
    each signed hash (+1 when ``h >= 0``)."""
    columns = np.abs(hashes) % n_features
    columns[hashes == INT32_MIN] = (2**31 - 1 - (n_features - 1)) % n_features
    return columns.astype(np.int32), np.where(hashes >= 0, 1.0, -1.0)


def finish(
    columns: np.ndarray, values: np.ndarray, indptr: np.ndarray, n_features: int, dtype: Any
) -> sp.csr_matrix:
    """The CSR matrix of entries laid out row by row (signed values in float64), finished
    as sklearn does: values cast to ``dtype``, then duplicates summed (indices sorted)."""
    import scipy.sparse as sp

    index_dtype = np.int64 if indptr[-1] > 2**31 - 1 else np.int32
    with np.errstate(over="ignore"):  # beyond float32: inf, as sklearn stores it
        values = values.astype(dtype)
    matrix = sp.csr_matrix(
        (values, columns.astype(index_dtype, copy=False), indptr.astype(index_dtype)),
        shape=(len(indptr) - 1, n_features),
        dtype=dtype,
    )
    matrix.sum_duplicates()  # also sorts the indices (what FeatureHasher.transform does)
    return matrix


def _finish_pairs(
    inputs: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    n_rows: int,
    n_features: int,
    dtype: Any,
) -> CsrArrays:
    """What :func:`finish` makes of rows of one or two entries (``inputs`` as
    :func:`hash_entries` takes them), in numpy, without scipy: values cast to ``dtype``,
    each row's entries in column order, two in one column summed (in ``dtype``; a sum of
    two is the same in either order, so equal to scipy's) and kept even when 0."""

    def rows(a: Any, kind: Any) -> np.ndarray:  # an input may give one value for all rows
        return np.broadcast_to(np.asarray(a).astype(kind, copy=False), (n_rows,))

    kept = [rows(present, bool) & rows(value != 0, bool) for present, _, value in inputs]
    with np.errstate(over="ignore"):  # beyond float32: inf, as sklearn stores it
        values = [rows(value, dtype) for _, _, value in inputs]
    columns = [rows(column, np.int32) for _, column, _ in inputs]
    if len(inputs) == 2:
        (c0, c1), (v0, v1), (k0, k1) = columns, values, kept
        swap = c1 < c0
        columns = [np.minimum(c0, c1), np.maximum(c0, c1)]
        values, kept = list(_swapped(v0, v1, swap)), list(_swapped(k0, k1, swap))
        same = kept[0] & kept[1] & (columns[0] == columns[1])
        if same.any():
            with np.errstate(over="ignore", invalid="ignore"):  # inf + -inf: NaN, as scipy's
                values[0] = np.where(same, values[0] + values[1], values[0])
            kept[1] &= ~same
    k = len(inputs)
    # each (n_rows, k), row-major: a row's entries side by side (stack: one pass per array)
    pair_columns = np.stack(columns, axis=1)
    pair_values = np.stack(values, axis=1)
    pair_kept = np.stack(kept, axis=1)
    counts = kept[0].astype(np.int32)
    for more in kept[1:]:
        counts += more
    indptr = np.zeros(n_rows + 1, np.int32)
    np.cumsum(counts, out=indptr[1:])
    shape = (n_rows, n_features)
    if indptr[-1] == n_rows * k:  # every row has every entry: row-major as it is
        return CsrArrays(pair_values.ravel(), pair_columns.ravel(), indptr, shape)
    return CsrArrays(pair_values[pair_kept], pair_columns[pair_kept], indptr, shape)


def _swapped(a: np.ndarray, b: np.ndarray, swap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(where(swap, b, a), where(swap, a, b))`` bit for bit, by XOR on the raw bits:
    ``np.where`` on a condition with no pattern mispredicts a branch per row (~6x slower)."""
    raw = np.dtype(f"u{a.dtype.itemsize}")
    x, y = a.view(raw), b.view(raw)
    mask = swap.astype(raw)
    np.negative(mask, out=mask)  # all ones where swapped (unsigned wrap-around), else 0
    mask &= x ^ y
    return (x ^ mask).view(a.dtype), (y ^ mask).view(a.dtype)


def hash_pairs(
    rows: Iterable[Iterable[tuple[str, Any]]],
    n_features: int,
    alternate_sign: bool = True,
    dtype: Any = np.float32,
) -> sp.csr_matrix:
    """``FeatureHasher(input_type="pair")`` of ``rows``: a ``str`` value gives token
    ``"name=value"`` (value 1), a number gives token ``name`` with that value; zero values
    are skipped. Tokens are hashed once each."""
    tokens: dict[str, int] = {}
    positions: list[int] = []
    values: list[float] = []
    indptr = [0]
    for row in rows:
        for name, value in row:
            if isinstance(value, str):
                name, value = f"{name}={value}", 1.0
            if value == 0:
                continue
            positions.append(tokens.setdefault(name, len(tokens)))
            values.append(float(value))
        indptr.append(len(values))
    columns, signs = columns_and_signs(signed_hashes(list(tokens)), n_features)
    at = np.asarray(positions, dtype=np.int64)
    signed = np.asarray(values, dtype=np.float64)
    if alternate_sign:
        signed = signed * signs[at]
    return finish(columns[at], signed, np.asarray(indptr, np.int64), n_features, dtype)


def hash_entries(
    inputs: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    n_rows: int,
    n_features: int,
    dtype: Any = np.float32,
) -> sp.csr_matrix | CsrArrays:
    """Hash inputs given column-wise: per input ``(present, column, signed value)`` arrays
    over the rows (an input gives a row at most one entry; zero values are skipped), laid
    out row by row in input order — what ``FeatureHasher`` gives for each row's pairs."""
    k = len(inputs)
    if 1 <= k <= 2 and n_rows * k <= 2**31 - 1:
        return _finish_pairs(inputs, n_rows, n_features, dtype)
    kept = np.empty((n_rows, k), bool)
    columns = np.empty((n_rows, k), np.int32)
    values = np.empty((n_rows, k), np.float64)
    for i, (present, column, value) in enumerate(inputs):
        np.logical_and(present, value != 0, out=kept[:, i])
        columns[:, i] = column
        values[:, i] = value
    indptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum(np.count_nonzero(kept, axis=1), out=indptr[1:])
    if indptr[-1] == n_rows * k:  # every row has every entry: row-major as it is
        return finish(columns.ravel(), values.ravel(), indptr, n_features, dtype)
    return finish(columns[kept], values[kept], indptr, n_features, dtype)
