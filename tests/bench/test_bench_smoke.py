"""CI smoke run of the benchmark suite: smallest size, one round, every implementation.

Samples run inline (in the test process) to stay under a minute with a fresh process per
fastprep backend; real fresh-process worker samples (a timing one and a working-memory one)
check that path too.

Benchmarks are not tests; this only keeps the scripts working: the correctness gate must
pass for every implementation and the Markdown, JSON and PNG outputs must be written.
polars and matplotlib are in the dev extra, so their absence FAILS here (never skips).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
from pathlib import Path

import pytest

from fastprep.bench import cli, harness, impls

ROOT = Path(__file__).resolve().parents[2]
FLIGHTS = str(ROOT / "pipelines" / "flights.py")
#: VmRSS / VmHWM are kept in per-CPU batches: a few hundred KiB either way were seen
RSS_SLACK_MIB = 4.0


@pytest.mark.parametrize("package", ["polars", "matplotlib", "tqdm", "psutil"])
def test_bench_dependencies_are_installed(package: str) -> None:
    try:
        importlib.import_module(package)
    except ImportError as exc:  # a failure, not a skip: they are in the [dev] extra
        pytest.fail(f"the benchmark needs {package!r} (pip install -e '.[dev]'): {exc}")


@pytest.fixture
def frozen_heap():
    """The objects the earlier tests left in this process, frozen (``gc.freeze``) for the
    test: each inline sample starts with a ``gc.collect()`` (~90 of them here), which would
    otherwise walk the whole suite's heap every time (4x this test's time in a full run)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.mark.usefixtures("frozen_heap")
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
        # working memory: one sample per round for every implementation timed on all rows
        # (none here is extrapolated: --naive-sample 2000 covers all the rows)
        assert not entry["extrapolated"], name
        assert len(entry["working_mib"]) == len(entry["working_peak_rss_mib"]) == 1, name
        (working,) = entry["working_mib"]
        assert working == entry["working_peak_rss_mib"][0] - entry["working_baseline_rss_mib"][0]
        assert entry["working_peak_rss_mib"][0] > 0 and entry["working_baseline_rss_mib"][0] > 0
        # inline, after the gate and timing runs of the same 2,000 rows, the run may need no
        # new pages: ~0, give or take the kernel's RSS counter slack (per-CPU batches)
        assert working > -RSS_SLACK_MIB, name
        assert entry["warmup_s"][0] > 0, name
        assert entry["warmup_rows"] == size["rows_emitted"]  # warm-up on the same rows
    table = (output / "results.md").read_text()
    assert "| implementation |" in table and "fastprep, backend=auto" in table
    assert "| working MiB (kernels loaded) |" in table and "cold peak RSS MiB" in table
    (target,) = [line for line in table.splitlines() if line.startswith("Memory target")]
    assert "allowed working memory" in target and "fastprep, backend=auto: " in target
    assert "within" in target or "over by" in target
    fresh = harness.sample_in_worker(FLIGHTS, "pandas", size["clean_path"], 500, timeout=60)
    # one cold run, then warm runs while they add up to under WARM_BUDGET_S (short calls
    # are timed several times), never more than MAX_RUNS in all
    assert 2 <= len(fresh["seconds"]) <= harness.MAX_RUNS
    assert len(fresh["seconds"]) == 2 or sum(fresh["seconds"][1:-1]) < harness.WARM_BUDGET_S
    assert len(fresh["peak_rss_mib"]) == len(fresh["seconds"])
    assert fresh["peak_rss_mib"][0] > fresh["rows"] / 2**20

    # working memory, fresh processes: an untimed warm-up on a head, then exactly one run,
    # which no longer pays for loading the Numba kernels that the cold run's peak includes
    # (~50 MiB here against < 1 MiB: the factor 2 only guards against noise)
    args = (FLIGHTS, "fastprep[numba]", size["clean_path"], 1500)
    memory = harness.working_memory_in_worker(*args, timeout=60, warmup_rows=100)
    assert len(memory["seconds"]) == len(memory["peak_rss_mib"]) == 1
    assert memory["warmup_rows"] == 100 and memory["warmup_s"] > 0 and memory["rows"] == 1500
    working = memory["peak_rss_mib"][0] - memory["baseline_rss_mib"][0]
    assert memory["baseline_rss_mib"][0] > 0 and working > -RSS_SLACK_MIB
    cold = harness.sample_in_worker(*args, timeout=60)
    assert cold["warmup_rows"] == 0 and cold["warmup_s"] is None  # no warm-up by default
    assert working < (cold["peak_rss_mib"][0] - cold["baseline_rss_mib"][0]) / 2


def test_bench_subcommand_registers_with_a_handler() -> None:
    parser = argparse.ArgumentParser(prog="fastprep")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "--rows", "20000,336776", "--impl", "pandas", "polars"])
    assert args.pipeline == cli.DEFAULT_PIPELINE
    assert args.rows == [20_000, 336_776] and args.impl == ["pandas", "polars"]
    assert callable(args.handler)


def test_dask_ml_is_named_not_silently_missing() -> None:
    with pytest.raises(NotImplementedError, match=r"bench_cluster\.py"):
        impls.get("dask-ml")
