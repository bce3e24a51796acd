"""On a real cluster the transform takes each partition its worker kept from the fit's
first read (no second read or validation): the output is the single machine's, the kept
rows are let go when the transform ends, and a worker lost between fit and transform
only makes its partitions be read again."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from support import assert_same_matrix

from fastprep.cli import load_pipeline_file
from fastprep.runtime import kept_values

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000  # 4 partitions of the 8 row groups


def eventually(check, timeout: float = 10.0) -> bool:
    """``check()`` holds within ``timeout`` seconds: a job lets go of what its workers kept
    by a message it does not wait for (its result does not depend on it)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _taken(report) -> tuple[int, int]:
    note = next(n for n in report.notes if "transformed from the rows" in n)
    words = note.split()
    return int(words[0]), int(words[2])


def _same(a, b, findings: bool = False) -> None:
    assert_same_matrix(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.row_ids, b.row_ids)
    assert sorted(a.quarantine["row_id"]) == sorted(b.quarantine["row_id"])
    assert (a.report.rows_in, a.report.rows_out, a.report.rows_quarantined) == (
        b.report.rows_in, b.report.rows_out, b.report.rows_quarantined)  # fmt: skip
    if findings:  # (the single process also names the columns no partition reads)
        assert [f.to_dict() for f in a.report.findings] == [f.to_dict() for f in b.report.findings]


def test_transform_takes_the_fits_kept_partitions(flights_row_groups, client, tmp_path):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups).transform(flights_row_groups)
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    held = client.run(kept_values.partition_bytes)
    assert sum(held.values()) > 0
    assert eventually(lambda: set(client.run(kept_values.held_bytes).values()) == {0})
    manifest = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                                output_dir=tmp_path / "out")  # fmt: skip
    taken, tasks = _taken(manifest.report)
    assert tasks == 4 and taken >= 3  # Dask may move one to an idle worker (it then reads)
    assert eventually(lambda: set(client.run(kept_values.partition_bytes).values()) == {0})
    kept = manifest.load()
    _same(kept, single)
    again = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert not any("transformed from the rows" in n for n in again.report.notes)  # read
    _same(again, single)
    _same(kept, again, findings=True)


def test_kept_partitions_of_a_fit_never_transformed_are_let_go(flights_row_groups, client):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    first = sum(client.run(kept_values.partition_bytes).values())
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    # not twice: the first fit's are let go
    assert eventually(lambda: sum(client.run(kept_values.partition_bytes).values()) == first)
    out = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert _taken(out.report)[1] == 4


def transform_after_a_kill(cluster, client, fitted, source, held: dict, single) -> None:
    """Kill the worker holding most (``held``: bytes per worker address), transform: the
    same output as one process, the lost worker's partitions read again."""
    victim = max(held, key=held.get)
    name = client.scheduler_info()["workers"][victim]["name"]
    cluster.kill(cluster.workers[int(str(name)[1:])])
    out = fitted.transform(source, client=client, rows_per_partition=ROWS)
    _same(out, single)
    taken, tasks = _taken(out.report)
    assert tasks == 4 and taken <= 3


def test_worker_killed_between_fit_and_transform(flights_row_groups, cluster, client):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups).transform(flights_row_groups)
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    held = client.run(kept_values.partition_bytes)
    transform_after_a_kill(cluster, client, fitted, flights_row_groups, held, single)


def test_numba_job_on_the_cluster_equals_one_process(flights_row_groups, client):
    """Tasks of a Numba job take their moments from the fused fit kernels: the fitted
    state and the output are one process's."""
    from test_cluster_runs import assert_same_params

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups, backend="numba")
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS,
                          backend="numba")  # fmt: skip
    assert_same_params(single.params, fitted.params)
    out = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    _same(out, single.transform(flights_row_groups))


def test_a_workers_kept_partitions_are_one_transform_task(flights_row_groups, client, tmp_path):
    """Writing shards, the partitions a worker kept are transformed by one task sent to
    it (not one task each: the scheduler's and the client's cost per task), each shard
    as one process writes it."""
    from distributed import get_task_stream

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups).transform(flights_row_groups)
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    holders = {w for w, n in client.run(kept_values.partition_bytes).items() if n}
    with get_task_stream(client) as stream:
        manifest = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                                    output_dir=tmp_path / "out")  # fmt: skip
    keys = [str(t["key"]) for t in stream.data if "fastprep-transform" in str(t["key"])]
    batched = [k for k in keys if k.startswith("fastprep-transform-kept-")]
    taken, tasks = _taken(manifest.report)
    assert tasks == 4 and taken >= 3
    assert 1 <= len(batched) <= len(holders)
    assert len(keys) - len(batched) <= 4 - taken  # a single task only for one read again
    assert len(manifest.partitions) == 4
    _same(manifest.load(), single)


def test_a_lost_workers_batch_reads_its_partitions(flights_row_groups, cluster, client, tmp_path):
    """The worker that kept partitions is gone: their one task runs on another worker,
    which reads and validates each of them; the shards are one process's."""
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups).transform(flights_row_groups)
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    held = client.run(kept_values.partition_bytes)
    victim = max(held, key=held.get)
    name = client.scheduler_info()["workers"][victim]["name"]
    cluster.kill(cluster.workers[int(str(name)[1:])])
    manifest = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                                output_dir=tmp_path / "out")  # fmt: skip
    taken, tasks = _taken(manifest.report)
    assert tasks == 4 and taken <= 3
    _same(manifest.load(), single)
