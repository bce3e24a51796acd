"""The flights pipeline hand-written with dask.dataframe + dask-ml, as a competent Dask user
would write it (the competitor of ``benchmarks/bench_cluster.py``).

- read the Parquet file lazily, one partition per row group, only the needed columns;
- drop the rows without a target (what fastprep's schema quarantines on this data);
- derive the columns with dask.dataframe arithmetic (fill, clip, log1p, ratios);
- fit: one ``dask.compute`` for the speed median (``Series.quantile(0.5)``, Dask's
  approximate quantile) and the carrier vocabulary; ``StandardScaler`` over the three
  standardized columns and ``MinMaxScaler`` on ``dep_hour`` (one pass each); a
  ``Categorizer`` with the known categories (sorted, so columns are reproducible) and a
  ``DummyEncoder``;
- transform: per partition (``to_delayed``), the fitted dask-ml transformers on the pandas
  partition, sklearn's ``FeatureHasher`` on ``tailnum=...``/``dest=...`` tokens, stacked
  into one float32 CSR and written as ``part-NNNNN.npz`` + ``.y.npy`` (like fastprep's
  shards), or returned to be gathered.

How it differs from fastprep: the median is approximate (Dask's quantile); on flights it
fills nothing (every row kept has an ``air_time``), so X is the same (checked by the
benchmark). No validation of ranges or types: rows outside the schema would pass silently.
Nothing is persisted: each fit pass re-reads the Parquet partitions, as fastprep's do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import scipy.sparse as sp
from dask_ml.preprocessing import Categorizer, DummyEncoder, MinMaxScaler, StandardScaler
from sklearn.feature_extraction import FeatureHasher

COLUMNS = ["dep_delay", "arr_delay", "air_time", "distance", "hour", "minute", "origin",
           "carrier", "dest", "tailnum"]  # fmt: skip
STANDARDIZED = ["dep_delay", "log_distance", "speed"]
ORIGINS = ["EWR", "JFK", "LGA"]
N_HASH = 2**18


def derived(path: str) -> dd.DataFrame:
    """The rows kept and the columns the features need, lazily."""
    df = dd.read_parquet(path, columns=COLUMNS, split_row_groups=True)
    df = df.dropna(subset=["arr_delay"])
    return df.assign(
        dep_delay=df.dep_delay.fillna(0).clip(-60, 600),
        log_distance=np.log1p(df.distance.astype("float64")),
        speed=df.distance / df.air_time * 60,
        dep_hour=df.hour + df.minute / 60,
        late=(df.arr_delay > 15).astype("float32"),
    )


def fit(df: dd.DataFrame) -> dict[str, Any]:
    """The fitted transformers (three passes over the data)."""
    median, carriers = dask.compute(df.speed.quantile(0.5), df.carrier.dropna().unique())
    filled = df.assign(speed=df.speed.fillna(float(median)))
    scaler = StandardScaler().fit(filled[STANDARDIZED])
    minmax = MinMaxScaler().fit(filled[["dep_hour"]])
    categories = {
        "origin": pd.CategoricalDtype(ORIGINS),
        "carrier": pd.CategoricalDtype(sorted(carriers)),
    }
    categorizer = Categorizer(categories=categories, columns=["origin", "carrier"])
    sample = categorizer.fit_transform(filled[["origin", "carrier"]]._meta)
    dummies = DummyEncoder(columns=["origin", "carrier"]).fit(sample)
    return {"median": float(median), "scaler": scaler, "minmax": minmax,
            "categorizer": categorizer, "dummies": dummies}  # fmt: skip


def featurize(part: pd.DataFrame, fitted: dict[str, Any]) -> tuple[sp.csr_matrix, np.ndarray]:
    """One pandas partition -> (CSR X, y) with the fitted transformers."""
    part = part.assign(speed=part.speed.fillna(fitted["median"]))
    scaled = fitted["scaler"].transform(part[STANDARDIZED]).to_numpy(np.float64)
    hour = fitted["minmax"].transform(part[["dep_hour"]]).to_numpy(np.float64)
    onehot = fitted["dummies"].transform(
        fitted["categorizer"].transform(part[["origin", "carrier"]])
    )
    tokens = [
        [t for t in row if t is not None]
        for row in zip(
            ("tailnum=" + part.tailnum).to_numpy(dtype=object, na_value=None),
            ("dest=" + part.dest).to_numpy(dtype=object, na_value=None),
        )
    ]
    hashed = FeatureHasher(n_features=N_HASH, input_type="string", dtype=np.float32)
    blocks = [
        sp.csr_matrix(np.column_stack([scaled, hour]).astype(np.float32)),
        sp.csr_matrix(onehot.to_numpy(np.float32)),
        hashed.transform(tokens),
    ]
    X = sp.hstack(blocks, format="csr", dtype=np.float32)
    return X, part.late.to_numpy(np.float32)


def write_shard(part: pd.DataFrame, fitted: dict[str, Any], folder: str, index: int) -> int:
    X, y = featurize(part, fitted)
    sp.save_npz(Path(folder) / f"part-{index:05d}.npz", X, compressed=False)
    np.save(Path(folder) / f"part-{index:05d}.y.npy", y)
    return X.shape[0]


def run(path: str, output_dir: str | None = None) -> Any:
    """Fit and transform ``path`` on the current Dask client; shards to ``output_dir`` (rows
    written), or the gathered ``(X, y)``."""
    df = derived(path)
    fitted = fit(df)
    parts = df.to_delayed()
    if output_dir is not None:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        write = dask.delayed(write_shard)
        return sum(dask.compute(*[write(p, fitted, output_dir, i) for i, p in enumerate(parts)]))
    outputs = dask.compute(*[dask.delayed(featurize)(p, fitted) for p in parts])
    return sp.vstack([X for X, _ in outputs], format="csr"), np.concatenate([y for _, y in outputs])
