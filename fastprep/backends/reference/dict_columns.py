"""The reference for dict columns: Python dicts again, FeatureHasher's rules, a dict loop.

Slow on purpose (one Python object per entry); the Numba backend's
:mod:`fastprep.backends.numba.dict_encode` must give the same matrices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.backends.reference.hashing import hash_pairs
from fastprep.data.dict_column import DictColumn

if TYPE_CHECKING:
    import scipy.sparse as sp


def hash_dicts(column: DictColumn, n_features: int, alternate_sign: bool = True) -> sp.csr_matrix:
    """sklearn ``FeatureHasher(input_type="dict")``'s matrix of the rows as Python dicts."""
    import scipy.sparse as sp

    if len(column) == 0:
        return sp.csr_matrix((0, n_features), dtype=np.float32)
    rows = (row.items() for row in column.to_dicts())
    return hash_pairs(rows, n_features, alternate_sign, np.float32)


def feature_name(key: str, value: Any) -> str:
    return f"{key}={value}" if isinstance(value, str) else key


def fit_vocabulary(column: DictColumn) -> list[str]:
    """Sorted distinct feature names (DictVectorizer's ``feature_names_``)."""
    names = {feature_name(k, v) for row in column.to_dicts() for k, v in row.items()}
    return sorted(names)


def vectorize_dicts(column: DictColumn, vocabulary: list[str]) -> sp.csr_matrix:
    """Row by row: known names only, explicit zeros kept, duplicates summed."""
    import scipy.sparse as sp

    position = {name: i for i, name in enumerate(vocabulary)}
    indptr, indices, data = [0], [], []
    for row in column.to_dicts():
        for key, value in row.items():
            j = position.get(feature_name(key, value))
            if j is not None:
                indices.append(j)
                data.append(np.float32(1.0 if isinstance(value, str) else value))
        indptr.append(len(indices))
    out = sp.csr_matrix(
        (np.array(data, dtype=np.float32), np.array(indices, dtype=np.int32), np.array(indptr)),
        shape=(len(column), len(vocabulary)),
    )
    out.sum_duplicates()
    return out
