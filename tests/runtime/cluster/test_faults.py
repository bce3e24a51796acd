"""Faults on a real cluster: a worker killed mid-transform, a crash then a re-run, a read
that fails transiently, a read that keeps failing."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support import assert_same_matrix

from fastprep.cli import load_pipeline_file
from fastprep.data.partitions import plan_partitions
from fastprep.errors import JobError, SourceError
from fastprep.runtime import cluster as fd
from fastprep.runtime.cluster import RetryPolicy

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def fitted(flights_row_groups, cluster):
    cluster.ensure_two_workers()
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    return pipeline.fit(flights_row_groups, client=cluster.client, rows_per_partition=5_000)


@pytest.fixture(scope="module")
def expected(fitted, flights_row_groups):
    return fitted.transform(flights_row_groups)


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.glob("part-*")}


def test_worker_killed_mid_transform_loses_nothing(
    cluster, fitted, expected, flights_row_groups, tmp_path
) -> None:
    cluster.ensure_two_workers()
    victim = cluster.alive()[0]
    result: dict[str, object] = {}

    def run() -> None:
        try:  # 2,500-row partitions: 8 tasks, a few seconds of work in all
            result["manifest"] = fitted.transform(
                flights_row_groups, client=cluster.client, output_dir=tmp_path,
                rows_per_partition=2_500,
            )  # fmt: skip
        except BaseException as exc:  # surfaced below
            result["error"] = exc

    job = threading.Thread(target=run)
    job.start()
    deadline = time.time() + 60
    while not list(tmp_path.glob("part-*.json")) and time.time() < deadline:
        time.sleep(0.005)
    cluster.kill(victim)  # SIGKILL: the worker's running task and held results are lost
    job.join(120)
    assert "error" not in result, result.get("error")
    manifest = result["manifest"]
    written = sorted(tmp_path.glob("part-*.json"))
    assert len(written) == 8 == len(manifest.partitions)
    loaded = fd.load_shards(tmp_path)
    assert_same_matrix(loaded.X, expected.X)
    assert np.array_equal(loaded.row_ids, expected.row_ids)
    assert np.array_equal(loaded.y, expected.y)
    assert loaded.report.rows_in == 20_000
    assert any("re-run after a worker was lost" in n for n in manifest.report.notes)


def test_rerun_after_crash_resumes_without_duplicates(
    client, fitted, expected, flights_row_groups, tmp_path
) -> None:
    fitted.transform(flights_row_groups, client=client, output_dir=tmp_path,
                     rows_per_partition=2_500)  # fmt: skip
    # a crash before partitions 2 and 5 finished: their records (written last) are gone,
    # partition 5 left a half-written file, and the job manifest was never written
    for index in (2, 5):
        next(tmp_path.glob(f"part-{index:05d}.*.json")).unlink()
    half = next(tmp_path.glob("part-00005.*.X.data.npy"))
    half.write_bytes(half.read_bytes()[:100])
    (tmp_path / "manifest.json").unlink()
    with pytest.raises(Exception, match="did not finish"):
        fd.load_shards(tmp_path)
    before = _files(tmp_path)
    manifest = fitted.transform(flights_row_groups, client=client, output_dir=tmp_path,
                                rows_per_partition=2_500)  # fmt: skip
    after = _files(tmp_path)
    assert "resumed: 6 partition(s) already written were skipped" in manifest.report.notes
    untouched = [n for n in before if not n.startswith(("part-00002", "part-00005"))]
    assert all(before[n] == after[n] for n in untouched)  # not rewritten
    assert sorted(n[:10] for n in after if n.endswith(".X.data.npy")) == [
        f"part-{i:05d}" for i in range(8)
    ]  # one set of files per partition: the crashed run's leftovers were removed
    assert half.name not in after
    loaded = fd.load_shards(tmp_path)
    assert_same_matrix(loaded.X, expected.X)
    assert np.array_equal(loaded.row_ids, expected.row_ids)
    doc = json.loads((tmp_path / "manifest.json").read_text())
    assert [p["index"] for p in doc["shards"]] == list(range(8))


def test_transient_read_error_is_retried(client, fitted, expected, flights_row_groups,
                                         tmp_path) -> None:  # fmt: skip
    """The file vanishes for a moment (a flaky mount / object store) and comes back."""
    source = tmp_path / "flights.parquet"
    source.write_bytes(flights_row_groups.read_bytes())
    specs = plan_partitions(source, 5_000)
    hidden = tmp_path / "elsewhere.parquet"
    os.replace(source, hidden)
    threading.Timer(0.6, os.replace, (hidden, source)).start()
    out = fitted.transform(source, client=client, partitions=specs,
                           retry=RetryPolicy(tries=6, base_delay=0.1))  # fmt: skip
    assert_same_matrix(out.X, expected.X)
    assert any("transient read error(s) retried" in n for n in out.report.notes)


def test_read_that_keeps_failing_names_path_and_cause(client, fitted, flights_row_groups,
                                                      tmp_path) -> None:  # fmt: skip
    source = tmp_path / "flights.parquet"
    source.write_bytes(flights_row_groups.read_bytes())
    specs = plan_partitions(source, 5_000)
    source.unlink()
    with pytest.raises(SourceError) as info:
        fitted.transform(source, client=client, partitions=specs,
                         retry=RetryPolicy(tries=3, base_delay=0.01))  # fmt: skip
    message = str(info.value)
    assert str(source) in message and "failed 3 times" in message
    assert "FileNotFoundError" in message or "No such file" in message


@pytest.mark.slow  # restarts a worker twice (~10 s on a shared 2-core machine)
def test_partition_that_kills_its_workers_names_partition_and_source(
    cluster, fitted, flights_row_groups, tmp_path
) -> None:
    """With no failures allowed, a worker dying while it runs a task is that task's
    ``KilledWorker``: the job stops naming the partition and its source; shards already
    written stay and a re-run resumes from them."""
    cluster.ensure_two_workers()
    client = cluster.client

    def _set_allowed_failures(dask_scheduler, n: int) -> int:  # sent by value
        before = dask_scheduler.allowed_failures
        dask_scheduler.allowed_failures = n
        return before

    allowed = client.run_on_scheduler(_set_allowed_failures, n=0)
    result: dict[str, object] = {}

    def run() -> None:
        try:
            fitted.transform(flights_row_groups, client=client, output_dir=tmp_path,
                             rows_per_partition=1_000)  # fmt: skip
        except BaseException as exc:
            result["error"] = exc

    try:
        job = threading.Thread(target=run)
        job.start()
        deadline = time.time() + 60
        while not list(tmp_path.glob("part-*.json")) and time.time() < deadline:
            time.sleep(0.005)
        cluster.kill(cluster.alive()[0])
        job.join(120)
    finally:
        client.run_on_scheduler(_set_allowed_failures, n=allowed)
    error = result.get("error")
    assert isinstance(error, JobError), error
    assert "killed every worker that ran it" in str(error)
    assert str(flights_row_groups) in str(error) and "partition " in str(error)
    cluster.ensure_two_workers()
    manifest = fitted.transform(flights_row_groups, client=client, output_dir=tmp_path,
                                rows_per_partition=1_000)  # fmt: skip
    assert any(n.startswith("resumed:") for n in manifest.report.notes)
    assert fd.load_shards(tmp_path).report.rows_in == 20_000
