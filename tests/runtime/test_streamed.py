"""A memory budget that holds from read to output: the bundled flights sample, rewritten with
2,500-row row groups (8 partitions), under a budget the in-memory run does not fit, is
streamed partition by partition in one process — as ``fastprep run --memory-budget`` and as
``fit_transform(output_dir=)`` — with exactly the in-memory run's output, and the process's
measured peak resident memory stays under the budget. Below the smallest budget that would
work, the run is refused before reading, naming that budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from support import REPO, assert_same_matrix, assert_same_output, streaming_budget

import fastprep as fp
from fastprep.errors import MemoryBudgetError
from fastprep.runtime import preflight
from fastprep.storage.shards import OpenedOutput
from fastprep.storage.state import encode_floats

ROW_GROUP = 2_500
GNU_TIME = "/usr/bin/time"


@pytest.fixture(scope="module")
def grouped(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("streamed") / "flights.parquet"
    pq.write_table(pq.read_table(REPO / "data_samples" / "flights.parquet"), path,
                   row_group_size=ROW_GROUP)  # fmt: skip
    return str(path)


@pytest.fixture(scope="module")
def reference(grouped):
    """The unconstrained in-memory run (also compiles the kernels into the disk cache
    before a subprocess measures its memory)."""
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    return pipeline, pipeline.fit_transform(grouped, memory_budget="100GB")


def test_fit_transform_over_budget_streams_into_output_dir(grouped, reference, tmp_path):
    pipeline, out = reference
    budget = streaming_budget(pipeline, grouped)
    with pytest.raises(MemoryBudgetError, match="pass output_dir="):
        pipeline.fit_transform(grouped, memory_budget=budget)  # never gathered
    opened = pipeline.fit_transform(grouped, memory_budget=budget, output_dir=tmp_path / "o")
    assert isinstance(opened, OpenedOutput)
    assert len(opened) >= 2 and "streamed in this process" in opened.notes[-1]
    assert_same_output(opened, out)
    # the fitted pipeline published with the shards transforms like the in-memory fit
    loaded = fp.load(opened.pipeline_path)
    again = loaded.transform(grouped, memory_budget=budget, output_dir=tmp_path / "t")
    assert_same_matrix(again.whole().X, out.X)
    # the lazily stacked X: rows gathered from the shards that hold them, in order asked
    X = opened.stacked_X
    assert X.shape == out.X.shape and X.nnz == out.X.nnz
    rows = np.random.default_rng(0).choice(X.shape[0], 300, replace=False)
    assert_same_matrix(X[rows], out.X[rows])
    assert_same_matrix(X[2_000:7_500], out.X[2_000:7_500])
    assert_same_matrix(X[-1], out.X[[out.X.shape[0] - 1]])
    # training batches read from the mapped shards: in order, and shuffled by seed
    import scipy.sparse as sp

    ordered = list(opened.batches(5_000))
    assert_same_matrix(sp.vstack([b for b, _ in ordered], format="csr"), out.X)
    assert np.array_equal(np.concatenate([y for _, y in ordered]), out.y)
    shuffled = list(opened.batches(4_096, shuffle=True, seed=3, drop_last=True))
    assert all(b.shape[0] == 4_096 for b, _ in shuffled) and len(shuffled) == 19_430 // 4_096
    again = list(opened.batches(4_096, shuffle=True, seed=3, drop_last=True))
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(shuffled, again))
    rows = np.random.default_rng([3, 0]).permutation(out.X.shape[0])[:4_096]
    assert_same_matrix(shuffled[0][0], out.X[rows])
    assert np.array_equal(shuffled[0][1], out.y[rows])


def test_run_with_a_budget_streams_and_stays_under_it(grouped, reference, tmp_path):
    """``fastprep run --memory-budget``, measured from outside: the process's peak resident
    memory (GNU time's maximum RSS) is under the budget, the output the in-memory run's."""
    if not os.access(GNU_TIME, os.X_OK):
        pytest.skip("needs GNU time to measure a child's own peak memory")
    pipeline, out = reference
    budget = streaming_budget(pipeline, grouped)
    folder, rss = tmp_path / "out", tmp_path / "rss"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))  # fmt: skip
    done = subprocess.run(
        [GNU_TIME, "-f", "%M", "-o", str(rss), sys.executable, "-m", "fastprep", "run",
         str(REPO / "pipelines" / "flights.py"), "--input", grouped, "--output", str(folder),
         "--memory-budget", str(budget)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "streamed in this process" in done.stdout
    peak = int(rss.read_text().split()[-1]) * 1024
    print(f"peak {peak / 1e6:.0f} MB, budget {budget / 1e6:.0f} MB")
    assert peak < budget, f"peak {peak / 1e6:.0f} MB > budget {budget / 1e6:.0f} MB"
    opened = fp.open_output(folder)
    assert len(opened) >= 2
    assert_same_output(opened, out)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["rows"] == out.X.shape[0]


def test_below_the_smallest_budget_the_run_is_refused_naming_it(grouped, reference, tmp_path):
    pipeline, _ = reference
    with pytest.raises(MemoryBudgetError, match=r"smallest budget that would work is "
                       r"memory_budget='(\d+)MB'") as exc:  # fmt: skip
        pipeline.fit_transform(grouped, memory_budget="200MB", output_dir=tmp_path / "no")
    assert not (tmp_path / "no").exists()  # nothing read, nothing written
    minimum = int(exc.value.args[0].split("memory_budget='")[1].split("MB")[0]) * 10**6
    pre = preflight.run_preflight(pipeline.optimized, pipeline.schema, grouped, budget=minimum,
                                  whole_output=False)  # fmt: skip
    assert not any(d.refuse for d in pre.decisions)  # that budget works
    assert pre.execution in ("in-memory", "streamed")


def test_explain_shows_the_choice_with_its_numbers(grouped, reference):
    pipeline, _ = reference
    text = pipeline.explain(grouped, memory_budget=streaming_budget(pipeline, grouped))
    line = next(ln for ln in text.splitlines() if "execution:" in ln)
    assert "→ streamed in this process" in line
    assert "2 fit pass(es) + transform" in line and "predicted peak ~" in line
    assert "partition(s) of ≤" in line and "local Dask cluster of" in line


@pytest.mark.slow
def test_ten_million_rows_under_one_and_a_half_gigabytes(tmp_path):
    """The benchmark's job (benchmarks/bench_budget.py) at 10M rows, 250k-row row groups."""
    from benchmarks.bench_budget import grouped_dataset

    grouped = grouped_dataset(10_000_000, 250_000, str(tmp_path))
    rss = tmp_path / "rss"
    done = subprocess.run(
        [GNU_TIME, "-f", "%M", "-o", str(rss), sys.executable, "-m", "fastprep", "run",
         str(REPO / "pipelines" / "flights.py"), "--input", str(grouped), "--output",
         str(tmp_path / "out"), "--memory-budget", "1.5GB"],
        capture_output=True, text=True, cwd=tmp_path, timeout=1800,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(rss.read_text().split()[-1]) * 1024 < 1.5e9


def test_cli_transform_with_a_budget_streams_the_saved_pipeline(grouped, reference, tmp_path):
    from fastprep.cli import main

    pipeline, _ = reference
    budget = str(streaming_budget(pipeline, grouped))
    fitted = pipeline.fit(grouped, memory_budget="100GB")
    fitted.save(tmp_path / "state.fastprep")
    code = main(["transform", str(tmp_path / "state.fastprep"), "--input", grouped,
                 "--output", str(tmp_path / "t"), "--memory-budget", budget])  # fmt: skip
    assert code == 0
    opened = fp.open_output(tmp_path / "t")
    assert len(opened) >= 2 and opened.pipeline_path is not None
    assert_same_matrix(opened.whole().X, fitted.transform(grouped).X)


def test_order_statistics_from_kept_values_fit_the_same_state(grouped, reference):
    """With memory to spare, the median's second pass reads the values the first kept (one
    read of the source fewer) and learns exactly the same state."""
    from fastprep.runtime import streamed

    pipeline, _ = reference
    plan, schema = pipeline.optimized, pipeline.schema
    reread, report = streamed.fit(plan, schema, grouped, rows_per_partition=ROW_GROUP)
    kept, kept_report = streamed.fit(plan, schema, grouped, rows_per_partition=ROW_GROUP,
                                     spare_bytes=10**9)  # fmt: skip
    assert "kept in memory" in kept_report.notes[-1] and "kept" not in report.notes[-1]
    assert json.dumps(encode_floats(kept)) == json.dumps(encode_floats(reread))


def test_the_partitions_predicted_are_the_partitions_read(reference, tmp_path):
    """Row groups are packed whole: a partition of 5,000-row row groups holds one of them
    below 10,000 rows; the pre-flight counts (and sizes the peak by) the partitions the run
    really reads, for every budget that streams."""
    from fastprep.runtime import streamed

    pipeline, _ = reference
    path = tmp_path / "flights_5k.parquet"
    pq.write_table(pq.read_table(REPO / "data_samples" / "flights.parquet"), path,
                   row_group_size=5_000)  # fmt: skip
    job = streamed.job_for(pipeline.optimized, pipeline.schema)
    seen = set()
    for mb in range(281, 300):
        pre = preflight.run_preflight(pipeline.optimized, pipeline.schema, str(path),
                                      budget=mb * 10**6, whole_output=False)  # fmt: skip
        chosen = pre.chosen
        if chosen is None or not chosen.name.startswith("streamed"):
            continue
        parts = streamed.Partitions(str(path), chosen.rows_per_partition, job)
        assert chosen.partitions == len(parts.specs), mb
        seen.add((chosen.rows_per_partition // 5_000, len(parts.specs)))
    assert (1, 4) in seen  # 5,000..9,999 rows a partition: four partitions, not 20,000 / rows


def test_a_streamed_job_imports_numba_by_its_own_rows():
    """A partition is below the planner's Numba threshold on its own: the streamed job
    imports Numba when the whole job's rows repay it, as an in-memory run would (a fresh
    process: this one may have imported it already)."""
    code = ("import sys\n"
            "from fastprep.runtime.streamed import numba_for_the_job\n"
            "numba_for_the_job(100_000)\n"
            "small = 'numba' in sys.modules\n"
            "numba_for_the_job(10_000_000)\n"
            "print(small, 'numba' in sys.modules)\n")  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    assert done.stdout.split() == ["False", "True"], done.stderr
