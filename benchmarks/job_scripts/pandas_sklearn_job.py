"""The flights job as a pandas + scikit-learn user writes it: Parquet in, X and y on disk.

    python benchmarks/job_scripts/pandas_sklearn_job.py --input flights.parquet --output out/

Same job as ``fastprep run pipelines/flights.py``: rows without the target (``arr_delay``)
are dropped, the two derived columns are computed with pandas, then one
``ColumnTransformer`` fits and transforms: ``SimpleImputer`` / ``np.clip`` /
``np.log1p`` / ``StandardScaler`` / ``MinMaxScaler`` on the numeric columns,
``OneHotEncoder`` on ``origin``/``carrier`` and ``FeatureHasher(2**18)`` on
``tailnum``/``dest`` tokens. Writes ``X.data.npy``, ``X.indices.npy``, ``X.indptr.npy``,
``X.shape.npy`` (uncompressed CSR, float32) and ``y.npy`` (float32).

Standalone on purpose (pandas, numpy, scikit-learn only): it is timed as a fresh process.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction import FeatureHasher
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, OneHotEncoder, StandardScaler

COLUMNS = ["dep_delay", "arr_delay", "air_time", "distance", "hour", "minute",
           "origin", "carrier", "dest", "tailnum"]  # fmt: skip


def tokens(frame: pd.DataFrame) -> list[list[str]]:
    """Per row, ``column=value`` for each present value (what ``FeatureHasher`` hashes)."""
    columns = [(name + "=" + frame[name]).tolist() for name in frame.columns]
    return [[t for t in row if isinstance(t, str)] for row in zip(*columns)]


def preprocessor() -> ColumnTransformer:
    return ColumnTransformer(
        [
            ("dep_delay", make_pipeline(
                SimpleImputer(strategy="constant", fill_value=0),
                FunctionTransformer(np.clip, kw_args={"a_min": -60, "a_max": 600}),
                StandardScaler(),
            ), ["dep_delay"]),
            ("distance", make_pipeline(FunctionTransformer(np.log1p), StandardScaler()),
             ["distance"]),
            ("speed", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()),
             ["speed"]),
            ("dep_hour", MinMaxScaler(), ["dep_hour"]),
            ("onehot", OneHotEncoder(handle_unknown="ignore", dtype=np.float32),
             ["origin", "carrier"]),
            ("hashed", make_pipeline(
                FunctionTransformer(tokens),
                FeatureHasher(n_features=2**18, input_type="string", dtype=np.float32),
            ), ["tailnum", "dest"]),
        ],
        sparse_threshold=1.0,  # the hashed block makes X sparse: keep all of it CSR
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)

    df = pd.read_parquet(args.input, columns=COLUMNS)
    df = df[df["arr_delay"].notna()].reset_index(drop=True)  # no target: not a training row
    df["speed"] = (df["distance"] / df["air_time"] * 60).replace([np.inf, -np.inf], np.nan)
    df["dep_hour"] = df["hour"] + df["minute"] / 60
    y = (df["arr_delay"] > 15).to_numpy(dtype=np.float32)

    X = sp.csr_matrix(preprocessor().fit_transform(df), dtype=np.float32)
    X.sort_indices()

    os.makedirs(args.output, exist_ok=True)
    for part in ("data", "indices", "indptr"):
        np.save(os.path.join(args.output, f"X.{part}.npy"), getattr(X, part))
    np.save(os.path.join(args.output, "X.shape.npy"), np.array(X.shape, dtype=np.int64))
    np.save(os.path.join(args.output, "y.npy"), y)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
