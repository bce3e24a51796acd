"""Target and count encoding: fastprep against idiomatic pandas and Polars doing the same work.

    nice -n 10 python benchmarks/bench_encoders.py --input /work/data/flights_336776_seed13.parquet

The work (each implementation, from the flights table in memory — an Arrow table for
fastprep and Polars, the pandas DataFrame for pandas — to a float32 matrix):

- drop the rows without ``arr_delay`` (the target ``late = arr_delay > 15``'s missing rows);
- ``TargetEncode()`` of ``carrier``, ``tailnum``, ``origin``, ``dest``: the fitted rows
  cross-fitted (5 stratified folds, ``StratifiedKFold(5, shuffle=True, random_state=0)``,
  smoothing "auto" per fold: each fold's category means, variances and counts from the
  other folds), plus the full-data encodings (the fitted state);
- ``CountEncode()`` of the same columns (``value_counts(dropna=False)`` mapped on).

pandas: ``groupby(col, dropna=False)`` + ``map`` per fold and column; Polars: ``group_by`` +
``join(nulls_equal=True)`` per fold and column, ``pl.len().over(col)`` for the counts. The
folds come from scikit-learn's splitter there (what such code would use). The outputs are
compared (within 1e-6 relative) before anything is timed; then ``--repeat`` alternating runs
in this process, reported as median and min–max seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
from sklearn.model_selection import StratifiedKFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fastprep as fp

COLUMNS = ("carrier", "tailnum", "origin", "dest")
CV, SEED = 5, 0
SCHEMA = fp.Schema(
    {
        "arr_delay": fp.Float(nullable=True),
        "carrier": fp.String(),
        "tailnum": fp.String(nullable=True),
        "origin": fp.String(),
        "dest": fp.String(),
    }
)
PIPELINE = fp.Pipeline(
    SCHEMA,
    [fp.cols(*COLUMNS) >> fp.TargetEncode(cv=CV, seed=SEED), fp.cols(*COLUMNS) >> fp.CountEncode()],
    target=fp.expr("late = arr_delay > 15"),
)


def run_fastprep(table, backend: str, helpers: str | None = None) -> np.ndarray:
    """``helpers="numpy"``: every helper kernel on its numpy twin (the cross-fit's per-fold
    loop instead of its one Numba pass); None: the planner's choice."""
    if helpers is not None:
        os.environ["FASTPREP_KERNEL_PATH"] = helpers
    try:
        _, out = PIPELINE.fit_and_transform(table, backend=backend)
    finally:
        os.environ.pop("FASTPREP_KERNEL_PATH", None)
    return out.X


def folds_of(y: np.ndarray) -> np.ndarray:
    folds = np.empty(len(y), dtype=np.int64)
    splitter = StratifiedKFold(CV, shuffle=True, random_state=SEED)
    for k, (_, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        folds[test] = k
    return folds


def _shrunk(mean, var, count, prior: float, prior_var: float):
    """scikit-learn's "auto" smoothing of per-category (mean, population var, count)."""
    lam = prior_var * count / (prior_var * count + var)
    out = lam * mean + (1 - lam) * prior
    return out.where(lam.notna(), prior) if isinstance(out, pd.Series) else out


def run_pandas(frame: pd.DataFrame) -> np.ndarray:
    rows = frame[frame["arr_delay"].notna()].reset_index(drop=True)
    y = (rows["arr_delay"] > 15).astype(np.float64)
    folds = folds_of(y.to_numpy())
    out = np.empty((len(rows), 2 * len(COLUMNS)), dtype=np.float32)
    work = rows[list(COLUMNS)].assign(y=y, fold=folds)
    for j, col in enumerate(COLUMNS):
        encoded = np.empty(len(rows))
        for k in range(CV):
            train = work[work["fold"] != k]
            prior, prior_var = train["y"].mean(), train["y"].var(ddof=0)
            stats = train.groupby(col, dropna=False)["y"].agg(["mean", "count"])
            stats["var"] = train.groupby(col, dropna=False)["y"].var(ddof=0)
            table = _shrunk(stats["mean"], stats["var"], stats["count"], prior, prior_var)
            test = (work["fold"] == k).to_numpy()
            encoded[test] = work.loc[test, col].map(table).fillna(prior).to_numpy()
        prior, prior_var = work["y"].mean(), work["y"].var(ddof=0)
        full = work.groupby(col, dropna=False)["y"].agg(["mean", "count"])
        full["var"] = work.groupby(col, dropna=False)["y"].var(ddof=0)
        _ = _shrunk(full["mean"], full["var"], full["count"], prior, prior_var)  # the state
        out[:, j] = encoded
        out[:, len(COLUMNS) + j] = work[col].map(work[col].value_counts(dropna=False))
    return out


def run_polars(frame: pl.DataFrame) -> np.ndarray:
    rows = frame.filter(pl.col("arr_delay").is_not_null())
    y = (rows["arr_delay"] > 15).cast(pl.Float64)
    work = rows.select(COLUMNS).with_columns(
        y=y, fold=pl.Series(folds_of(y.to_numpy())), row=pl.int_range(pl.len())
    )
    encoded = []
    for col in COLUMNS:
        parts = []
        for k in range(CV):
            train = work.filter(pl.col("fold") != k)
            prior, prior_var = train["y"].mean(), train["y"].var(ddof=0)
            stats = train.group_by(col).agg(
                m=pl.col("y").mean(), v=pl.col("y").var(ddof=0), n=pl.len()
            )
            lam = prior_var * pl.col("n") / (prior_var * pl.col("n") + pl.col("v"))
            table = stats.select(col, enc=(lam * pl.col("m") + (1 - lam) * prior).fill_nan(prior))
            test = work.filter(pl.col("fold") == k).select(col, "row")
            joined = test.join(table, on=col, how="left", nulls_equal=True)
            parts.append(joined.select("row", pl.col("enc").fill_null(prior)))
        full = work.group_by(col).agg(m=pl.col("y").mean(), v=pl.col("y").var(ddof=0), n=pl.len())
        _ = full  # the fitted state (its shrinkage is the same expression)
        encoded.append(pl.concat(parts).sort("row")["enc"].alias(f"{col}:target"))
    counts = work.select([pl.len().over(c).alias(c) for c in COLUMNS])
    X = pl.DataFrame(encoded).hstack(counts).cast(pl.Float32)
    return X.to_numpy()


def timed(run, *args) -> float:
    started = time.perf_counter()
    run(*args)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", default="/work/data/flights_336776_seed13.parquet")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    columns = ["arr_delay", *COLUMNS]
    table = pq.read_table(args.input, columns=columns)
    frame = table.to_pandas()
    polars_frame = pl.from_arrow(table)
    runs = {
        "fastprep (numba)": (run_fastprep, table, "numba"),
        "fastprep (pandas backend)": (run_fastprep, table, "pandas"),
        "fastprep (numpy helpers)": (run_fastprep, table, "pandas", "numpy"),
        "pandas": (run_pandas, frame),
        "polars": (run_polars, polars_frame),
    }
    reference = run_fastprep(table, "numba")
    for name, (run, *rest) in runs.items():
        X = run(*rest)
        np.testing.assert_allclose(X, reference, rtol=1e-6, atol=0, err_msg=name)
    print(f"{table.num_rows:,} rows; outputs equal (rtol 1e-6): {X.shape[0]:,} x {X.shape[1]}")
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeat):
        for name, (run, *rest) in runs.items():
            times[name].append(timed(run, *rest))
    base = statistics.median(times["fastprep (numba)"])
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{name:28s} median {median:.3f} s  (min {min(seconds):.3f}, max "
              f"{max(seconds):.3f})  {median / base:.2f}x fastprep")  # fmt: skip


if __name__ == "__main__":
    main()
