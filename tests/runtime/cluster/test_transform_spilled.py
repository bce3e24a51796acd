"""On a real cluster the partitions a worker keeps beyond its memory cap go to spill
files in its local directory, and the transform reads them back instead of reading and
validating the partition again: the output is the single machine's whatever happens to
the files (deleted, truncated, a worker lost, the disk cap reached: those partitions are
read), and the files go when the transform (or the next fit) lets the partitions go."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_transform_kept import _same, _taken, transform_after_a_kill

from fastprep.cli import load_pipeline_file
from fastprep.runtime import kept_values

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000  # 4 partitions of the 8 row groups


def _spill_files(client) -> list[str]:
    """The workers' spill files (their folders are on this machine)."""
    folders = [d for found in client.run(kept_values.spill_directories).values() for d in found]
    return sorted(str(p) for d in folders if Path(d).exists() for p in Path(d).iterdir())


def _damage(paths: list[str], how: str) -> None:
    for path in paths:
        if how == "deleted":
            os.unlink(path)
        else:
            os.truncate(path, os.path.getsize(path) // 2)


def _spilled(client) -> int:
    """Spill files written on the workers (after the queued writes)."""
    return sum(client.run(kept_values.flush).values())


def _on_disk(report) -> int:
    note = next(n for n in report.notes if "transformed from the rows" in n)
    return int(note.split(" on disk")[0].split()[-1])


@pytest.fixture
def caps(client):
    """Every partition to disk (memory cap of one byte); set back after the test."""
    before = client.run(kept_values.set_caps, 1, None)
    yield
    memory, disk = next(iter(before.values()))
    client.run(kept_values.set_caps, memory, disk)
    client.run(kept_values.clear)


@pytest.fixture(scope="module")
def single(flights_row_groups):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    return pipeline.fit(flights_row_groups).transform(flights_row_groups)


def test_spilled_partitions_are_transformed_from_disk(flights_row_groups, client, caps, single,
                                                      tmp_path):  # fmt: skip
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert _spilled(client) == 4 and len(_spill_files(client)) == 4
    manifest = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                                output_dir=tmp_path / "out")  # fmt: skip
    taken, tasks = _taken(manifest.report)
    assert tasks == 4 and taken >= 3 and _on_disk(manifest.report) == taken
    assert _spill_files(client) == [] and set(client.run(kept_values.partition_bytes).values()) == {
        0
    }
    _same(manifest.load(), single)


@pytest.mark.parametrize("how", ["deleted", "truncated"])
def test_damaged_spill_files_are_read_again(flights_row_groups, client, caps, single, how):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert _spilled(client) == 4
    files = _spill_files(client)
    _damage(files[:2], how)
    out = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    taken, tasks = _taken(out.report)
    assert tasks == 4 and taken <= 2
    assert _spill_files(client) == []
    _same(out, single)


def test_a_fit_never_transformed_lets_its_files_go(flights_row_groups, client, caps, single):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert _spilled(client) == 4
    first = set(_spill_files(client))
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert _spilled(client) == 4 and not first & set(_spill_files(client))  # the first's gone
    out = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert _taken(out.report)[1] == 4 and _spill_files(client) == []
    _same(out, single)


def test_disk_cap_reached_reads_the_rest(flights_row_groups, client, caps, single):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    size = max(os.path.getsize(f) for f in _spill_files(client))
    client.run(kept_values.clear)
    client.run(kept_values.set_caps, None, size)  # one partition's file per worker
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert _spilled(client) == 2  # one per worker; the others beyond the disk cap
    out = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    taken, tasks = _taken(out.report)
    assert tasks == 4 and taken <= 2
    _same(out, single)


def test_worker_killed_after_spilling(flights_row_groups, cluster, client, caps, single):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    spilled = client.run(kept_values.flush)
    transform_after_a_kill(cluster, client, fitted, flights_row_groups, spilled, single)


def test_a_closing_worker_removes_its_spill_files(flights_row_groups, cluster, client, caps):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert _spilled(client) == 4
    folders = client.run(kept_values.spill_directories)
    names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
    victim = next(a for a, found in folders.items() if found)
    worker = cluster.workers[int(str(names[victim])[1:])]
    worker.terminate()  # SIGTERM: the worker closes as it would when its cluster ends
    worker.wait(30)
    assert folders[victim] and not any(Path(f).exists() for f in folders[victim])
