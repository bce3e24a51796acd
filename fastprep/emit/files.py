"""Write an output to a folder: X.npz (CSR) or X.npy (dense), y.npy, names, report, quarantine."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp


def write_output(
    folder: str | os.PathLike[str],
    X: np.ndarray | sp.csr_matrix,
    y: np.ndarray | None,
    feature_names: Sequence[str],
    report: dict[str, Any],
    quarantine: pd.DataFrame,
    row_ids: np.ndarray,
) -> dict[str, str]:
    """Write every file; returns name → path. Stale X.npy/X.npz from another layout are removed."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for stale in ("X.npz", "X.npy"):
        (out / stale).unlink(missing_ok=True)
    if sp.issparse(X):
        sp.save_npz(out / "X.npz", sp.csr_matrix(X), compressed=True)
        written["X"] = str(out / "X.npz")
    else:
        np.save(out / "X.npy", np.ascontiguousarray(X), allow_pickle=False)
        written["X"] = str(out / "X.npy")
    if y is not None:
        np.save(out / "y.npy", y, allow_pickle=False)
        written["y"] = str(out / "y.npy")
    np.save(out / "row_ids.npy", row_ids, allow_pickle=False)
    written["row_ids"] = str(out / "row_ids.npy")
    (out / "feature_names.json").write_text(json.dumps(list(feature_names)))
    written["feature_names"] = str(out / "feature_names.json")
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    written["report"] = str(out / "report.json")
    quarantine.to_parquet(out / "quarantine.parquet", index=False)
    written["quarantine"] = str(out / "quarantine.parquet")
    return written
