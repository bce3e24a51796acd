"""The reference feature hasher: sklearn's ``FeatureHasher`` semantics without sklearn.

Each distinct token is hashed once (MurmurHash3 x86_32, seed 0, by numpy:
:func:`fastprep.sketch.hash_values`) and looked up per entry; the entries are laid out
row by row in input order and the matrix is finished exactly as sklearn finishes it
(values cast to the output dtype, then ``sum_duplicates``), so the result is bit-identical
to ``FeatureHasher(n_features, input_type="pair", alternate_sign=..., dtype=...)``.
Needs no compiled kernel and no scikit-learn (which stays the tests' oracle).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.sketch import hash_values

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
    return columns, np.where(hashes >= 0, 1.0, -1.0)


def finish(
    columns: np.ndarray,
    values: np.ndarray,
    per_row: np.ndarray,
    n_features: int,
    alternate_sign: bool,
    signs: np.ndarray,
    dtype: Any,
) -> sp.csr_matrix:
    """The CSR matrix of entries laid out row by row (``per_row`` entries each), as
    sklearn builds it: value times sign in float64, cast to ``dtype``, duplicates summed."""
    import scipy.sparse as sp

    values = values * signs if alternate_sign else values
    indptr = np.zeros(len(per_row) + 1, np.int64)
    np.cumsum(per_row, out=indptr[1:])
    index_dtype = np.int64 if indptr[-1] > 2**31 - 1 else np.int32
    with np.errstate(over="ignore"):  # beyond float32: inf, as sklearn stores it
        values = values.astype(dtype)
    matrix = sp.csr_matrix(
        (values, columns.astype(index_dtype), indptr.astype(index_dtype)),
        shape=(len(per_row), n_features),
        dtype=dtype,
    )
    matrix.sum_duplicates()  # also sorts the indices (what FeatureHasher.transform does)
    return matrix


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
    per_row: list[int] = []
    for row in rows:
        before = len(values)
        for name, value in row:
            if isinstance(value, str):
                name, value = f"{name}={value}", 1.0
            if value == 0:
                continue
            positions.append(tokens.setdefault(name, len(tokens)))
            values.append(float(value))
        per_row.append(len(values) - before)
    columns, signs = columns_and_signs(signed_hashes(list(tokens)), n_features)
    at = np.asarray(positions, dtype=np.int64)
    return finish(
        columns[at], np.asarray(values, dtype=np.float64), np.asarray(per_row, np.int64),
        n_features, alternate_sign, signs[at], dtype,
    )  # fmt: skip


def hash_entries(
    inputs: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    n_rows: int,
    n_features: int,
    alternate_sign: bool,
    dtype: Any = np.float32,
) -> sp.csr_matrix:
    """Hash inputs given column-wise: per input ``(present, hash, value)`` arrays over the
    rows (each input gives a row at most one entry, in input order) — what
    ``FeatureHasher`` gives for each row's pairs in that order."""
    if not inputs:
        present = np.zeros((n_rows, 0), bool)
        hashes = np.zeros((n_rows, 0), np.int64)
        values = np.zeros((n_rows, 0))
    else:
        present = np.stack([p for p, _, _ in inputs], axis=1)
        hashes = np.stack([h for _, h, _ in inputs], axis=1)
        values = np.stack([v for _, _, v in inputs], axis=1)
    present = present & (values != 0)
    columns, signs = columns_and_signs(hashes[present], n_features)
    return finish(
        columns, values[present], present.sum(axis=1), n_features, alternate_sign, signs, dtype
    )
