"""Benchmark lookup tables: flights ⋈ planes ⋈ weather + a few features.

Usage: python benchmarks/bench_lookup.py [--input flights.parquet] [--repeat 5]

Each method reads the flights file (the columns it needs), left-joins ``planes`` by
``tailnum`` and ``weather`` by ``origin`` + ``time_hour`` (ISO text in both files, parsed to
UTC instants on both sides by every method: fastprep validates them as ``fp.Datetime``),
computes the same features with statistics fitted on
the rows, and returns a float32 matrix:

- ``pandas``: ``pd.read_parquet`` → ``pd.to_datetime`` → two ``DataFrame.merge(how="left")``
  → column arithmetic / ``fillna`` → ``np.column_stack``;
- ``polars``: ``pl.read_parquet`` → ``str.to_datetime`` → two ``join(how="left")`` →
  expressions → ``to_numpy``;
- ``fastprep``: ``Pipeline(lookups=...).fit_transform(path)`` (reads and validates the side
  tables and the source, fits, transforms).

The outputs are checked equal (float32, 1e-6 relative) before anything is timed; runs are
interleaved (one of each method per round) and reported as median and min–max seconds.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import fastprep as fp  # noqa: E402

PLANES = REPO / "data_samples" / "planes.parquet"
WEATHER = REPO / "data_samples" / "weather.parquet"
FLIGHT_COLUMNS = ["tailnum", "origin", "time_hour", "distance", "dep_delay"]


def pipeline() -> fp.Pipeline:
    planes = fp.Lookup(PLANES, key={"tailnum": "tailnum"}, schema=fp.Schema({
        "tailnum": fp.String(), "year": fp.Int(nullable=True), "seats": fp.Int(),
        "engines": fp.Int()}))  # fmt: skip
    weather = fp.Lookup(WEATHER, key={"origin": "origin", "time_hour": "time_hour"},
                        schema=fp.Schema({
                            "origin": fp.Category(), "time_hour": fp.Datetime(tz="UTC"),
                            "temp": fp.Float(nullable=True), "wind_speed": fp.Float(nullable=True),
                            "precip": fp.Float(), "visib": fp.Float()}))  # fmt: skip
    schema = fp.Schema({"tailnum": fp.String(nullable=True), "origin": fp.Category(),
                        "time_hour": fp.Datetime(tz="UTC"), "distance": fp.Float(),
                        "dep_delay": fp.Float(nullable=True)})  # fmt: skip
    return fp.Pipeline(schema, [
        fp.expr("plane_age = 2013 - planes.year") >> fp.FillMissing(-1),
        fp.col("planes.seats") >> fp.FillMissing(0),
        fp.expr("seats_per_engine = planes.seats / planes.engines") >> fp.FillMissing(0),
        fp.cols("weather.temp", "weather.wind_speed") >> fp.FillMissing("mean"),
        fp.expr("wet = weather.precip > 0") >> fp.FillMissing(0),
        fp.col("weather.visib") >> fp.FillMissing(10),
        fp.col("dep_delay") >> fp.FillMissing(0),
        fp.col("distance") >> fp.Standardize(),
    ], lookups={"planes": planes, "weather": weather})  # fmt: skip


def with_pandas(path: str) -> np.ndarray:
    flights = pd.read_parquet(path, columns=FLIGHT_COLUMNS)
    planes = pd.read_parquet(PLANES, columns=["tailnum", "year", "seats", "engines"])
    weather = pd.read_parquet(WEATHER, columns=["origin", "time_hour", "temp", "wind_speed",
                                                "precip", "visib"])  # fmt: skip
    flights["time_hour"] = pd.to_datetime(flights["time_hour"], utc=True)
    weather["time_hour"] = pd.to_datetime(weather["time_hour"], utc=True)
    m = flights.merge(planes, on="tailnum", how="left").merge(
        weather, on=["origin", "time_hour"], how="left"
    )
    distance = m["distance"]
    columns = [
        (2013 - m["year"]).fillna(-1),
        m["seats"].fillna(0),
        (m["seats"] / m["engines"]).fillna(0),
        m["temp"].fillna(m["temp"].mean()),
        m["wind_speed"].fillna(m["wind_speed"].mean()),
        (m["precip"] > 0).astype(np.float64).where(m["precip"].notna(), 0),
        m["visib"].fillna(10),
        m["dep_delay"].fillna(0),
        (distance - distance.mean()) / distance.std(ddof=0),
    ]
    return np.column_stack([c.to_numpy(np.float64) for c in columns]).astype(np.float32)


def with_polars(path: str) -> np.ndarray:
    import polars as pl

    flights = pl.read_parquet(path, columns=FLIGHT_COLUMNS).with_columns(
        pl.col("time_hour").str.to_datetime(time_zone="UTC", time_unit="us")
    )
    planes = pl.read_parquet(PLANES, columns=["tailnum", "year", "seats", "engines"])
    weather = pl.read_parquet(WEATHER, columns=["origin", "time_hour", "temp", "wind_speed",
                                                "precip", "visib"]).with_columns(
        pl.col("time_hour").str.to_datetime(time_zone="UTC", time_unit="us")
    )  # fmt: skip
    m = flights.join(planes, on="tailnum", how="left").join(
        weather, on=["origin", "time_hour"], how="left"
    )
    f64 = pl.Float64
    out = m.select(
        (2013 - pl.col("year")).cast(f64).fill_null(-1).alias("plane_age"),
        pl.col("seats").cast(f64).fill_null(0),
        (pl.col("seats") / pl.col("engines")).fill_nan(None).fill_null(0).alias("per_engine"),
        pl.col("temp").fill_null(pl.col("temp").mean()),
        pl.col("wind_speed").fill_null(pl.col("wind_speed").mean()),
        (pl.col("precip") > 0).cast(f64).fill_null(0).alias("wet"),
        pl.col("visib").fill_null(10),
        pl.col("dep_delay").fill_null(0),
        (pl.col("distance") - pl.col("distance").mean()) / pl.col("distance").std(ddof=0),
    )
    return out.to_numpy().astype(np.float32)


def with_fastprep(path: str, backend: str) -> np.ndarray:
    return pipeline().fit_transform(path, backend=backend).X


def timed(fn) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", default="/work/data/flights_336776_seed13.parquet")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    methods = {
        "fastprep (auto)": lambda: with_fastprep(args.input, "auto"),
        "fastprep (numba)": lambda: with_fastprep(args.input, "numba"),
        "pandas merge + features": lambda: with_pandas(args.input),
        "polars join + features": lambda: with_polars(args.input),
    }
    reference = with_pandas(args.input)
    for name, fn in methods.items():  # also warms every method (kernels compiled, caches)
        got = fn()
        if got.shape != reference.shape or not np.allclose(got, reference, rtol=1e-6, atol=1e-6):
            raise SystemExit(f"MISMATCH: {name} differs from pandas")
    rows = len(reference)
    print(f"{rows:,} rows x {reference.shape[1]} features; outputs equal (float32, 1e-6)")
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(args.repeat):
        for name, fn in methods.items():
            times[name].append(timed(fn))
    base = statistics.median(times["fastprep (auto)"])
    print(f"{'method':<28}{'median s':>10}{'min-max s':>18}{'vs fastprep':>13}")
    for name, ts in times.items():
        median = statistics.median(ts)
        span = f"{min(ts):.3f}-{max(ts):.3f}"
        print(f"{name:<28}{median:>10.3f}{span:>18}{median / base:>12.2f}x")


if __name__ == "__main__":
    main()
