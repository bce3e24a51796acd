"""Hand an output's X (and y) to pandas or Polars as a DataFrame with the feature names.

A dense X becomes one column per feature, named by the feature names, in X's dtype
(bfloat16 bit patterns are widened to float32, which no DataFrame library lacks); the row
ids are pandas' index (Polars has none: ``row_ids=True`` adds a ``row_id`` column). A CSR X
is refused with :class:`~fastprep.errors.SparseOutputError` naming the blocks that made it
sparse, unless pandas is asked for a sparse frame. Polars is imported here, when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.emit.layout import SPARSE_ONEHOT_MIN_CATEGORIES
from fastprep.errors import SparseOutputError

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp

ROW_ID = "row_id"


def to_pandas(
    X: np.ndarray | sp.csr_matrix,
    y: np.ndarray | None,
    names: Sequence[str],
    row_ids: np.ndarray,
    *,
    out_dtype: str = "float32",
    target: str | None = None,
    sparse: bool = False,
    copy: bool = True,
) -> pd.DataFrame:
    """X as a pandas DataFrame (see :meth:`fastprep.Output.to_pandas`)."""
    import pandas as pd
    import scipy.sparse as sp

    index = pd.Index(row_ids, name=ROW_ID, copy=True)
    columns = _columns(names, target)
    if sp.issparse(X):
        if not sparse:
            raise SparseOutputError(_sparse_message(X, names, "to_pandas(sparse=True)"))
        frame = pd.DataFrame.sparse.from_spmatrix(X, index=index, columns=columns)
    else:
        frame = pd.DataFrame(_dense(X, out_dtype), index=index, columns=columns, copy=copy)
    if target is not None:
        frame[target] = _target(y, target)
    return frame


def to_polars(
    X: np.ndarray | sp.csr_matrix,
    y: np.ndarray | None,
    names: Sequence[str],
    row_ids: np.ndarray,
    *,
    out_dtype: str = "float32",
    target: str | None = None,
    row_ids_column: bool = False,
) -> Any:
    """X as a Polars DataFrame (see :meth:`fastprep.Output.to_polars`)."""
    import scipy.sparse as sp

    if sp.issparse(X):
        raise SparseOutputError(_sparse_message(X, names, None))
    import polars as pl

    columns = _columns(names, target, ROW_ID if row_ids_column else None)
    frame = pl.from_numpy(_dense(X, out_dtype), schema=columns, orient="row")
    if row_ids_column:
        frame = frame.insert_column(0, pl.Series(ROW_ID, np.asarray(row_ids)))
    if target is not None:
        frame = frame.with_columns(pl.Series(target, _target(y, target)))
    return frame


def _columns(names: Sequence[str], *extra: str | None) -> list[str]:
    columns = list(names)
    for name in extra:
        if name is not None and name in columns:
            raise ValueError(f"{name!r} is already a feature name; pass another column name")
    return columns


def _target(y: np.ndarray | None, target: str) -> np.ndarray:
    if y is None:
        raise ValueError(
            f"target={target!r}: this output has no y (the pipeline has no target, or the "
            "source had no target column); leave target=None"
        )
    return y


def _dense(X: np.ndarray, out_dtype: str) -> np.ndarray:
    """X's values; bfloat16 bit patterns (uint16) become the float32 values they stand
    for (exactly: a bfloat16 is the top half of a float32)."""
    if out_dtype == "bfloat16":
        return (X.astype(np.uint32) << 16).view(np.float32)
    return X


def sparse_blocks(names: Sequence[str]) -> list[tuple[str, int]]:
    """The feature blocks that make X sparse, as ``(block, columns)``: hashed blocks
    (``hash:a,b``), fitted dict vocabularies (``col:``) and one-hot blocks above the
    automatic CSR threshold; when none of those is present (a one-hot declared
    ``sparse=True``), every one-hot block."""
    widths: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for name in names:
        block, kind = _block_of(name)
        widths[block] = widths.get(block, 0) + 1
        kinds[block] = kind
    wide = [
        (b, w)
        for b, w in widths.items()
        if kinds[b] in ("hash", "vocab")
        or (kinds[b] == "onehot" and w > SPARSE_ONEHOT_MIN_CATEGORIES)
    ]
    return wide or [(b, w) for b, w in widths.items() if kinds[b] == "onehot"]


def _block_of(name: str) -> tuple[str, str]:
    if name.startswith("hash:") and name.endswith("]"):
        return name[: name.rindex("[")], "hash"
    if "=" in name:
        return name[: name.index("=")] + "=…", "onehot"
    if ":" in name:
        return name[: name.index(":") + 1] + "…", "vocab"
    return name, "numeric"


def _sparse_message(X: sp.csr_matrix, names: Sequence[str], sparse_option: str | None) -> str:
    rows, width = X.shape
    blocks = sparse_blocks(names)
    shown = ", ".join(f"{b} ({w:,} columns)" for b, w in blocks[:5])
    more = f" and {len(blocks) - 5} more" if len(blocks) > 5 else ""
    dense_bytes = rows * width * X.dtype.itemsize
    fixes = [f"use {sparse_option} for a pandas sparse frame"] if sparse_option else []
    fixes += [
        "keep out.X (a SciPy CSR matrix, which scikit-learn estimators take as it is)",
        "or make the pipeline dense (OneHot(sparse=False), no Hash/Vectorize block)",
    ]
    return (
        f"X is a CSR matrix ({rows:,} × {width:,}, {X.nnz:,} stored values; "
        f"{_size(dense_bytes)} dense) because of its sparse block(s): {shown}{more}. "
        "Options: " + "; ".join(fixes) + "."
    )


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:,.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:,.1f} TiB"
