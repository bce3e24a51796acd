"""Smoke run of benchmarks/bench_groupstats.py on the bundled sample: the three tools'
outputs pass the equality gate (pandas groupby.transform, Polars over(), fastprep
GroupStats) and every figure is reported. Benchmarks are not tests; this keeps the
instrument working."""

from __future__ import annotations

import sys

from support import REPO


def test_groupstats_benchmark_gates_and_reports() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_groupstats
    finally:
        sys.path.pop(0)
    path = str(REPO / "data_samples" / "flights.parquet")
    for keys in bench_groupstats.KEY_SETS:
        row = bench_groupstats.measure(path, list(keys), repeat=2, backend="pandas")
        assert row["rows"] == 20_000 and row["groups"] > 1
        for tool in ("pandas", "polars", "fastprep", "fastprep_fit_transform", "fastprep_fit"):
            assert 0 < row[tool]["min"] <= row[tool]["median"] <= row[tool]["max"]
        for part in ("fit_cpu", "transform_cpu", "fit_faults", "transform_faults"):
            assert 0 <= row[f"fastprep_{part}"]["min"] <= row[f"fastprep_{part}"]["max"]
