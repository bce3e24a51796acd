"""Smoke run of the whole-job benchmark (benchmarks/bench_job.py): tiny rows, one round.

Benchmarks are not tests; this keeps the instrument working: the three competitors (fastprep's
CLI, the Polars script, the pandas + scikit-learn script) run as real fresh processes, their
X and y must pass the equality gate, and the table and files must be written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fastprep.bench import job, job_cli, job_report

ROOT = Path(__file__).resolve().parents[2]


def test_job_scripts_hash_like_sklearn() -> None:
    """The Polars script's own MurmurHash3 is scikit-learn's (it must not import sklearn)."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "job_scripts"))
    try:
        import polars_job
    finally:
        sys.path.pop(0)
    from sklearn.utils import murmurhash3_32

    for key in ["", "a", "ab", "abc", "abcd", "tailnum=N14228", "dest=IAH", "é=ü", "x" * 37]:
        assert polars_job.murmurhash3_32(key.encode()) == murmurhash3_32(key, seed=0), key


def test_smoke_job_bench_gates_and_reports(tmp_path: Path) -> None:
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("# Results\n\n## Earlier section\n\nkept\n")
    argv = ["--rows", "3000", "--repeat", "1", "--no-sample", "--no-progress",
            "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / "out"),
            "--results-md", str(results_md)]  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_job.py"), *argv],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "job_results.json").read_text())
    (size,) = results["sizes"]
    assert size["rows"] == "3,000"
    for name in (job.FASTPREP, job.POLARS, job.PANDAS):
        entry = size["competitors"][name]
        assert entry["gate"]["ok"], entry["gate"]
        assert entry["summary"]["n"] == 1 and entry["summary"]["median_s"] > 0
        assert entry["summary"]["peak_rss_mib"] > 10
    assert size["competitors"][job.POLARS]["gate"]["max_abs_diff"] <= 1e-6
    # every kernel compiled by an untimed forced-Numba run; fastprep's bytecode compiled
    assert size["competitors"][job.FASTPREP]["kernel_warmup"]["seconds"] > 0
    assert results["bytecode"]["ok"]
    parts = size["competitors"][job.FASTPREP]["summary"]["breakdown_s"]
    for part in ("start-up", "read", "validate", "fit", "transform", "write", "exit"):
        assert part in parts
    sample = size["competitors"][job.FASTPREP]["samples"][0]
    assert sum(sample["breakdown"].values()) == pytest.approx(sample["seconds"], abs=1e-6)
    assert job_report.HEADING in done.stdout and "| 3,000 |" in done.stdout
    text = results_md.read_text()
    assert "kept" in text and text.count(job_report.HEADING) == 1


def test_gate_rejects_a_wrong_answer(tmp_path: Path) -> None:
    """A competitor whose X differs from fastprep's is an error, not a time."""
    import scipy.sparse as sp

    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32))
    y = np.array([0.0, 1.0], dtype=np.float32)
    wrong = X.copy()
    wrong.data[1] = 2.5
    assert job.same_output(X, y, X, y)["ok"]
    verdict = job.same_output(wrong, y, X, y)
    assert not verdict["ok"] and "X values differ" in verdict["detail"]
    assert not job.same_output(X, y[::-1].copy(), X, y)["ok"]


def test_results_md_section_is_replaced_not_duplicated(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text(
        "# R\n\n## Before\n\na\n\n## Whole job (fresh processes)\n\nold\n\n## After\n\nb\n"
    )
    job_report.update_results_md(path, "## Whole job (fresh processes)\n\nnew\n")
    text = path.read_text()
    assert "old" not in text and "new" in text and "## After\n\nb" in text and "## Before" in text
    fresh = tmp_path / "FRESH.md"
    fresh.write_text("# R\n\nintro\n\n## Older run\n\nx\n")
    job_report.update_results_md(fresh, "## Whole job (fresh processes)\n\nnew\n")
    assert (
        fresh.read_text()
        == "# R\n\nintro\n\n## Whole job (fresh processes)\n\nnew\n\n## Older run\n\nx\n"
    )


def test_rows_option_accepts_sample_and_sizes() -> None:
    args = job_cli.parser().parse_args(["--rows", "336_776,sample", "--only", "polars"])
    config = job_cli.config_from(args)
    assert config.rows == [job.SAMPLE, 336_776]
    assert config.competitors == [job.FASTPREP, job.POLARS]


def _summary(median: float, peak: float = 100.0) -> dict:
    return {"n": 3, "median_s": median, "min_s": median, "max_s": median,
            "peak_rss_mib": peak, "peak_rss_max_mib": peak}  # fmt: skip


def test_targets_are_judged_from_medians() -> None:
    def size(rows: str, fastprep: float, polars: float, pandas: float, peak: float) -> dict:
        return {"rows": rows, "competitors": {
            job.FASTPREP: {"gate": {"ok": True}, "summary": _summary(fastprep, peak)},
            job.POLARS: {"gate": {"ok": True}, "summary": _summary(polars)},
            job.PANDAS: {"gate": {"ok": True}, "summary": _summary(pandas)},
        }}  # fmt: skip

    sample = size("20,000 (bundled sample)", 0.8, 1.0, 3.0, 300)
    sample["cold"] = {"first": _summary(3.5), "second": _summary(0.9)}
    results = {
        "sizes": [sample, size("336,776", 1.0, 1.6, 3.0, 400),
                  size("3,367,760", 2.0, 3.0, 20.0, 1500)],
        "startup": {name: _summary(s) for name, s in zip(job.STARTUP_PROBES, (0.4, 0.6))},
    }  # fmt: skip
    lines = "\n".join(job_report.targets(results))
    assert "≥ 2× faster than the Polars script: 1.50×: NOT met" in lines
    assert "≥ 8× faster than the pandas + sklearn script: 10.00×: met" in lines
    assert "336,776 rows, ≥ 1.5× faster than the Polars script: 1.60×: met" in lines
    assert "peak RSS ≤ 1382 MiB: 1500 MiB (largest of the rounds): NOT met" in lines
    assert "+0.20 s: met" in lines
    assert "cold first run ≤ 3 s: 3.50 s: NOT met" in lines
    assert "warm run ≤ 1 s: 0.80 s: met" in lines


def test_startup_probes_run_as_fresh_processes() -> None:
    probes = job.startup_probes(job.JobConfig(repeat=1), lambda what: None)
    assert set(probes) == set(job.STARTUP_PROBES)
    assert all(p["n"] == 1 and p["median_s"] > 0 for p in probes.values())


def test_fastprep_bench_has_the_job_option() -> None:
    import argparse

    from fastprep.bench import cli

    args = cli.configure(argparse.ArgumentParser()).parse_args(["--job", "--rows", "3000"])
    assert args.job and args.rows == [3000]
