"""CI smoke run of the benchmark suite: smallest size, one round, every implementation.

Samples run inline (in the test process) to stay under a minute with a fresh process per
fastprep backend; one real fresh-process worker sample checks that path too.

Benchmarks are not tests; this only keeps the scripts working: the correctness gate must
pass for every implementation and the Markdown, JSON and PNG outputs must be written.
polars and matplotlib are in the dev extra, so their absence FAILS here (never skips).
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import pytest

from fastprep.bench import cli, harness, impls

ROOT = Path(__file__).resolve().parents[2]
FLIGHTS = str(ROOT / "pipelines" / "flights.py")


@pytest.mark.parametrize("package", ["polars", "matplotlib", "tqdm", "psutil"])
def test_bench_dependencies_are_installed(package: str) -> None:
    try:
        importlib.import_module(package)
    except ImportError as exc:  # a failure, not a skip: they are in the [dev] extra
        pytest.fail(f"the benchmark needs {package!r} (pip install -e '.[dev]'): {exc}")


def test_smoke_run_gates_every_implementation(tmp_path: Path) -> None:
    output = tmp_path / "results"
    argv = [
        FLIGHTS,
        "--rows",
        "2000",
        "--repeat",
        "1",
        "--naive-sample",
        "2000",
        "--output",
        str(output),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--no-progress",
        "--isolation",
        "inline",
    ]  # fmt: skip  (inline keeps CI < 60 s; see the next test)
    assert cli.main(argv) == 0

    for name in ("results.md", "results.json", "results.png"):
        assert (output / name).stat().st_size > 0, name
    results = json.loads((output / "results.json").read_text())
    machine = results["machine"]
    for key in ("cpu", "cores", "memory_gib", "python", "date"):
        assert machine[key], key
    for package in ("numpy", "pandas", "pyarrow", "polars", "scikit-learn", "scipy", "fastprep"):
        assert machine["versions"][package], package
    (size,) = results["sizes"]
    assert size["rows"] == 2000 and size["roofline_s"] > 0
    assert set(size["impls"]) == set(impls.all_names())
    for name, entry in size["impls"].items():
        assert entry["gate"]["ok"], f"{name}: {entry['gate']['detail']}"
        assert entry["rows_measured"] <= 2000
        assert len(entry["warm_s"]) == len(entry["cold_s"]) == 1, name
        assert entry["peak_rss_mib"][0] > 0, name
    table = (output / "results.md").read_text()
    assert "| implementation |" in table and "fastprep, backend=auto" in table
    fresh = harness.sample_in_worker(FLIGHTS, "pandas", size["clean_path"], 500, timeout=60)
    # one cold run, then warm runs while they add up to under WARM_BUDGET_S (short calls
    # are timed several times), never more than MAX_RUNS in all
    assert 2 <= len(fresh["seconds"]) <= harness.MAX_RUNS
    assert len(fresh["seconds"]) == 2 or sum(fresh["seconds"][1:-1]) < harness.WARM_BUDGET_S
    assert len(fresh["peak_rss_mib"]) == len(fresh["seconds"])
    assert fresh["peak_rss_mib"][0] > fresh["rows"] / 2**20


def test_bench_subcommand_registers_with_a_handler() -> None:
    parser = argparse.ArgumentParser(prog="fastprep")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "--rows", "20000,336776", "--impl", "pandas", "polars"])
    assert args.pipeline == cli.DEFAULT_PIPELINE
    assert args.rows == [20_000, 336_776] and args.impl == ["pandas", "polars"]
    assert callable(args.handler)


def test_planned_dask_ml_is_named_not_silently_missing() -> None:
    with pytest.raises(NotImplementedError, match="Dask issue"):
        impls.get("dask-ml")
