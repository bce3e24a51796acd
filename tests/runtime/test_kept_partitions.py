"""A fit's first pass keeps the whole validated partition; the transform of that partition
takes it (no read, no validation) and gives what a transform that reads it gives: the same
X, y, row ids, quarantine and report (findings as a transform's validation finds them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from support import assert_same_matrix

from fastprep.cli import load_pipeline_file
from fastprep.data.partitions import plan_partitions
from fastprep.runtime import kept_values
from fastprep.runtime.levels import fit_levels, later_chains
from fastprep.runtime.partition_tasks import Job, fit_partials, transform_partition

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data_samples" / "flights.parquet"


@pytest.fixture
def source(tmp_path) -> Path:
    """The sample with a constant column (a fit-only warning) and rows without a target
    (quarantined at validation), in 5,000-row row groups."""
    frame = pd.read_parquet(SAMPLE)
    frame["minute"] = 5
    path = tmp_path / "flights.parquet"
    frame.to_parquet(path, row_group_size=5_000)
    return path


@pytest.fixture(autouse=True)
def _empty_store():
    # before too: an in-process cluster test run earlier in this process may have left a
    # fit's partitions (kept until a next fit or transform lets them go)
    kept_values.clear()
    yield
    kept_values.clear()


def _fit(job: Job, spec, key: str | None):
    """The fit's passes over one partition, the first keeping it whole under ``key``."""
    first = []

    def run_pass(learned, targets, stage):
        reuse = key if first else None
        result = fit_partials(job, spec, learned, targets, keep_as=key, reuse=reuse,
                              inputs=later_chains(job.plan), whole=key and "fit")  # fmt: skip
        first.append(result)
        return [result]

    params, _ = fit_levels(job.plan, str(spec.path), run_pass, spec.n_rows)
    return params, first


def _without_times(report: dict) -> dict:
    """A report without what says how the rows were processed (stage times, the helper
    paths taken: validation's ran at fit time for kept rows)."""
    return {k: v for k, v in report.items() if k not in ("stages_seconds", "plan", "backend")}


@pytest.mark.parametrize("folder", [False, True])
def test_transform_from_the_kept_partition_equals_a_reading_one(source, tmp_path, folder):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(source, 5_000)[1]  # not the first: row ids from its offset
    params, passes = _fit(job, spec, "k")
    assert passes[0]["whole"] is True and kept_values.partition_bytes() > 0
    assert passes[1].get("reused")  # the median pass took it too
    assert any(f.rule == "constant" for f in passes[0]["findings"])  # a fit-only warning
    out = [tmp_path / "a", tmp_path / "b"] if folder else [None, None]
    kept = transform_partition(job, spec, params, "fp", out[0] and str(out[0]), reuse="k")
    assert kept.get("reused") and kept_values.partition_bytes() == 0  # taken, once
    read = transform_partition(job, spec, params, "fp", out[1] and str(out[1]), reuse="k")
    assert not read.get("reused")
    a, b = kept["entry"], read["entry"]
    assert _without_times(a["report"]) == _without_times(b["report"])
    assert a["report"]["findings"] and "constant" not in str(a["report"]["findings"])
    assert {
        k: v for k, v in a.items() if k not in ("report", "arrays", "quarantine", "record")
    } == {k: v for k, v in b.items() if k not in ("report", "arrays", "quarantine", "record")}
    if folder:  # the shard's files hold the same values
        assert a["arrays"].keys() == b["arrays"].keys() and a["quarantine"]["rows"] > 0
        for name, written in a["arrays"].items():
            np.testing.assert_array_equal(np.load(out[0] / written["file"]),
                                          np.load(out[1] / b["arrays"][name]["file"]))  # fmt: skip
        assert pq.read_table(out[0] / a["quarantine"]["file"]).equals(
            pq.read_table(out[1] / b["quarantine"]["file"]))  # fmt: skip
    else:
        x, y = kept["output"], read["output"]
        assert_same_matrix(x.X, y.X)
        np.testing.assert_array_equal(x.y, y.y)
        np.testing.assert_array_equal(x.row_ids, y.row_ids)
        assert x.row_ids[0] >= spec.row_offset
        pd.testing.assert_frame_equal(x.quarantine, y.quarantine)
        assert len(x.quarantine) > 0


def test_a_changed_file_is_read_again(source):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(source, 5_000)[0]
    params, _ = _fit(job, spec, "k2")
    stat = os.stat(source)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert not transform_partition(job, spec, params, "fp", None, reuse="k2").get("reused")


def test_partition_store_keeps_its_fit_and_makes_room_from_others(monkeypatch):
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 3 * 800)
    for key in ("a1", "a2"):
        assert kept_values.keep_partition(key, {}, 800, "old-fit")
    for key in ("b1", "b2", "b3"):  # evicts the other fit's, oldest first
        assert kept_values.keep_partition(key, {}, 800, "fit")
    assert kept_values.peek_partition("a1") is None and kept_values.peek_partition("a2") is None
    assert not kept_values.keep_partition("b4", {}, 800, "fit")  # never its own fit's
    assert kept_values.take_partition("b1") == {} and kept_values.take_partition("b1") is None
    assert kept_values.drop_partitions(["b2", "b3", "absent"]) == 2
    assert kept_values.partition_bytes() == 0


def test_numba_fit_partials_equal_the_references(source):
    """A partition's moments by the fused Numba fit kernels (the in-process fit's) are
    the reference's, bit for bit: the merged state cannot depend on the backend."""
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    spec = plan_partitions(source, 5_000)[2]
    results = {}
    for backend in ("numba", "pandas"):
        job = Job(pipeline.optimized, pipeline._fit_schema(), backend)
        seen = []

        def run_pass(learned, targets, stage, job=job, seen=seen):
            seen.append(fit_partials(job, spec, learned, targets))
            return seen[-1:]

        fit_levels(job.plan, str(source), run_pass, spec.n_rows)
        results[backend] = seen
    for numba_pass, reference_pass in zip(results["numba"], results["pandas"]):
        assert numba_pass["partials"].keys() == reference_pass["partials"].keys()
        for key, part in reference_pass["partials"].items():
            assert repr(numba_pass["partials"][key]) == repr(part), key


class _Buffered:
    """A spillable entry value: its bytes, and what it was read back as."""

    def __init__(self, buffer: np.ndarray | None) -> None:
        self.buffer = buffer

    def without_buffer(self) -> _Buffered:
        return _Buffered(None)

    def with_buffer(self, buffer: np.ndarray) -> _Buffered:
        return _Buffered(buffer)


def _spill_files() -> list[Path]:
    return [p for d in kept_values.spill_directories() for p in Path(d).iterdir()]


def _entry(n: int, fill: int) -> dict:
    return {"rows": _Buffered(np.full(n, fill, np.uint8)), "spec": None}


def test_partitions_beyond_the_memory_cap_go_to_disk_and_come_back(monkeypatch):
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 3 * 800)
    monkeypatch.setattr(kept_values, "SPILL_BYTES", 3 * 1000)
    for i in range(3):  # in memory
        assert kept_values.keep_partition(f"m{i}", _entry(800, i), 800, "fit")
    for i in range(3):  # on disk: the memory holds the same fit's
        assert kept_values.keep_partition(f"d{i}", _entry(800, 10 + i), 800, "fit")
    assert not kept_values.keep_partition("full", _entry(800, 9), 800, "fit")  # disk cap
    assert kept_values.flush() == 3 and len(_spill_files()) == 3
    assert kept_values.partition_bytes() == 3 * 800  # a spilled entry's buffer is on disk
    assert kept_values.spilled_partitions()[1] <= 3 * 1000
    peeked = kept_values.peek_partition("d1")
    assert peeked["spec"] is None and (peeked["rows"].buffer == 11).all()
    assert len(_spill_files()) == 3  # a peek leaves it
    taken = kept_values.take_partition("d0")
    assert (taken["rows"].buffer == 10).all() and len(taken["rows"].buffer) == 800
    assert kept_values.take_partition("d0") is None and len(_spill_files()) == 2  # once
    assert kept_values.drop_partitions(["d1", "m0"]) == 2 and len(_spill_files()) == 1
    # another fit makes room on disk from this one's
    assert kept_values.keep_partition("n0", _entry(2900, 20), 2900, "next-fit")
    assert kept_values.flush() == 1 and kept_values.peek_partition("d2") is None
    assert (kept_values.take_partition("n0")["rows"].buffer == 20).all()
    kept_values.clear()
    assert _spill_files() == [] and kept_values.spilled_partitions() == (0, 0)


def test_a_damaged_spill_file_is_a_miss(monkeypatch):
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 0)
    assert kept_values.keep_partition("a", _entry(5000, 1), 5000, "fit")
    assert kept_values.keep_partition("b", _entry(5000, 2), 5000, "fit")
    kept_values.flush()
    first, second = sorted(_spill_files())
    os.truncate(first, first.stat().st_size - 1)
    second.unlink()
    assert kept_values.peek_partition("a") is None and kept_values.take_partition("b") is None
    assert kept_values.spilled_partitions() == (0, 0) and _spill_files() == []


def test_a_partition_taken_while_its_file_is_written_stays_in_memory(monkeypatch):
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 0)
    for i in range(20):  # taken at once: some before the writer got to them
        assert kept_values.keep_partition(f"k{i}", _entry(1 << 16, i), 1 << 16, "fit")
        assert (kept_values.take_partition(f"k{i}")["rows"].buffer == i).all()
    kept_values.flush()
    assert _spill_files() == [] and kept_values.partition_bytes() == 0


@pytest.mark.parametrize("damage", [None, "deleted", "truncated"])
def test_transform_from_a_spilled_partition_equals_a_reading_one(source, monkeypatch, damage):
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 1)  # every partition to disk
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(source, 5_000)[1]
    params, passes = _fit(job, spec, "s")
    assert passes[0]["whole"] is True and kept_values.flush() == 1
    (path,) = _spill_files()
    size = kept_values.spilled_partitions()[1]
    assert path.stat().st_size == size
    if damage == "deleted":
        path.unlink()
    elif damage == "truncated":
        os.truncate(path, size // 2)
    kept = transform_partition(job, spec, params, "fp", None, reuse="s")
    assert bool(kept.get("reused")) is bool(kept.get("spilled")) is (damage is None)
    assert _spill_files() == [] and kept_values.spilled_partitions() == (0, 0)
    read = transform_partition(job, spec, params, "fp", None)
    assert _without_times(kept["entry"]["report"]) == _without_times(read["entry"]["report"])
    x, y = kept["output"], read["output"]
    assert_same_matrix(x.X, y.X)
    np.testing.assert_array_equal(x.y, y.y)
    np.testing.assert_array_equal(x.row_ids, y.row_ids)
    pd.testing.assert_frame_equal(x.quarantine, y.quarantine)


def test_a_changed_file_is_read_again_after_a_spill(source, monkeypatch):
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 1)
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(source, 5_000)[0]
    params, _ = _fit(job, spec, "c")
    assert kept_values.flush() == 1
    stat = os.stat(source)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert not transform_partition(job, spec, params, "fp", None, reuse="c").get("reused")
    assert _spill_files() == []


def test_kept_input_values_send_partitions_to_disk(monkeypatch):
    """The input values a fit keeps for its later passes share the memory cap: as they
    grow, the fit's partitions held in memory go to disk, least recently used first."""
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 3 * 800)
    for i in range(3):
        assert kept_values.keep_partition(f"m{i}", _entry(800, i), 800, "fit")
    assert kept_values.keep("inputs", {"values": np.zeros(200)}, 1600)
    assert kept_values.memory_budget() == 800
    assert kept_values.keep_partition("m3", _entry(800, 3), 800, "fit")  # to disk
    assert kept_values.flush() == 3  # and the two oldest
    assert kept_values.partition_bytes() == 800 and kept_values.peek_partition("m2")
    assert {p.read_bytes()[-1] for p in _spill_files()} == {0, 1, 3}
    for i in range(4):
        assert (kept_values.take_partition(f"m{i}")["rows"].buffer == i).all()
    assert _spill_files() == []


def test_placement_predicts_memory_and_disk(monkeypatch):
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 64 * 2**20)
    monkeypatch.setattr(kept_values, "SPILL_BYTES", None)
    mb = 2**20
    assert kept_values.placement(15 * mb, 4) == (4, 0)
    assert kept_values.placement(15 * mb, 15, inputs=40 * mb) == (1, 14)
    assert kept_values.placement(15 * mb, 15, inputs=80 * mb) == (0, 15)
    monkeypatch.setattr(kept_values, "SPILL_BYTES", 30 * mb)
    assert kept_values.placement(15 * mb, 15) == (4, 2)  # the rest read again
    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 0)
    assert kept_values.placement(15 * mb, 15) == (0, 0)


def test_kept_split_counts_the_partitions_spilled_to_disk(monkeypatch) -> None:
    """explain and the cost model predict the transform's kept partitions as the workers
    place them: memory up to the budget, the rest in spill files (not read again)."""
    from fastprep.runtime.partition_tasks import kept_row_bytes, kept_split

    monkeypatch.setattr(kept_values, "PARTITION_BYTES", 64 * 2**20)
    monkeypatch.setattr(kept_values, "SPILL_BYTES", None)  # the default disk cap
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    plan, schema = pipeline.optimized, pipeline._fit_schema()
    rows, tasks, workers = 10_000_000, 30, 2  # the 10M-row benchmark's job
    per_worker = tasks // workers
    memory, disk = kept_values.placement(kept_row_bytes(plan, schema) * rows / tasks, per_worker)
    assert 0 < memory < per_worker and memory + disk == per_worker  # the rest on disk
    in_memory, on_disk = kept_split(plan, schema, rows, tasks, workers)
    assert (in_memory, on_disk) == pytest.approx((memory / per_worker, disk / per_worker))


def test_one_task_transforms_several_kept_partitions(source, tmp_path):
    """``transform_partitions``: each partition taken from what was kept, or read when it
    is not here (here: the second was never kept), each shard as its own task writes it."""
    from fastprep.runtime.partition_tasks import transform_partitions

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    first, second = plan_partitions(source, 5_000)[1:3]
    params, _ = _fit(job, first, "k1")
    several = transform_partitions(job, [first, second], params, "fp", str(tmp_path / "a"),
                                   "float32", None, ["k1", "k2"])  # fmt: skip
    assert [bool(r.get("reused")) for r in several] == [True, False]
    alone = [
        transform_partition(job, s, params, "fp", str(tmp_path / "b")) for s in (first, second)
    ]
    for a, b in zip(several, alone):
        a, b = a["entry"], b["entry"]
        assert a["index"] == b["index"] and a["rows_out"] == b["rows_out"]
        for name, written in a["arrays"].items():
            np.testing.assert_array_equal(np.load(tmp_path / "a" / written["file"]),
                                          np.load(tmp_path / "b" / b["arrays"][name]["file"]))  # fmt: skip


def test_a_failing_partition_of_a_task_of_several_is_named(source, tmp_path, monkeypatch):
    """One task transforms several partitions: an error that does not name its partition
    (a library's, not fastprep's) reaches the client naming the partition, and survives
    the trip from the worker (pickled as Dask sends it)."""
    import pickle

    from fastprep.errors import JobError
    from fastprep.runtime import partition_tasks
    from fastprep.runtime.partition_tasks import PartitionFailed, transform_partitions

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    first, second = plan_partitions(source, 5_000)[1:3]
    params, _ = _fit(job, first, "k1")
    real = partition_tasks.transform_partition

    def second_fails(job, spec, *args, **kwargs):
        if spec.index == second.index:
            raise ValueError("bad bytes")
        return real(job, spec, *args, **kwargs)

    monkeypatch.setattr(partition_tasks, "transform_partition", second_fails)
    with pytest.raises(PartitionFailed) as caught:
        transform_partitions(job, [first, second], params, "fp", str(tmp_path), "float32",
                             None, ["k1", "k2"])  # fmt: skip
    travelled = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(travelled, JobError)
    assert str(travelled) == f"{second.describe()} failed: ValueError: bad bytes"


@pytest.mark.parametrize("kept, pieces", [(True, "one"), (False, "one"), (True, "many")])
def test_a_partitions_csr_is_streamed_to_its_shard(source, tmp_path, kept, pieces, monkeypatch):
    """A partition task writing its shard leaves X as the run made it: the CSR arrays
    are made block by block as the writer streams them (the ``.npy`` header padded to a
    block: past the page cache where the file system allows), never a scipy matrix made
    whole and written buffered; the files hold the same values as the gathered output.
    (The CSR is made block by block by the Numba fill kernel: on numpy it is made whole.)
    ``many``: pieces of 4,096 entries (a 5,000-row partition has ~40,000), as a
    500,000-row partition is streamed."""
    from fastprep.storage import output_format

    if pieces == "many":
        monkeypatch.setattr(output_format, "STREAM_ENTRIES", 4096)
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema(), "numba")
    spec = plan_partitions(source, 5_000)[1]
    params, _ = _fit(job, spec, "k" if kept else None)
    written = transform_partition(job, spec, params, "fp", str(tmp_path), reuse="k")
    assert bool(written.get("reused")) is kept
    entry = written["entry"]
    gathered = transform_partition(job, spec, params, "fp", None)["output"]
    assert entry["layout"] == "csr" and entry["nnz"] == gathered.X.nnz
    assert entry["shape"] == list(gathered.X.shape)
    for part in ("data", "indices"):
        path = tmp_path / entry["arrays"][f"X.{part}"]["file"]
        with open(path, "rb") as file:
            np.lib.format.read_magic(file)
            np.lib.format.read_array_header_1_0(file)
            assert file.tell() == 4096  # the streamed writer's padded header
        np.testing.assert_array_equal(np.load(path), getattr(gathered.X, part))


def _watch_syncs_and_records(monkeypatch, folder: Path) -> tuple[set[str], list[str]]:
    """Every path fsynced (named through ``/proc/self/fd``) and, at each partition record's
    rename, what it names that was not synced before it (collected, checked by the test)."""
    synced: set[str] = set()
    unsynced: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        real_fsync(fd)
        synced.add(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))

    def replace(src, dst, *args, **kwargs):
        name = os.path.basename(str(dst))
        if name.startswith("part-") and name.endswith(".json"):
            entry = json.loads(Path(src).read_bytes())
            named = [a["file"] for a in entry["arrays"].values()]
            named += [entry["quarantine"]["file"]] if entry.get("quarantine") else []
            assert os.path.basename(str(src)) in synced  # the record itself
            unsynced.extend(n for n in named if n not in synced)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return synced, unsynced


def test_a_task_of_several_records_a_partition_only_after_its_files_are_synced(
    source, tmp_path, monkeypatch
):
    """The shards of a task of several partitions: a partition's syncs run while the next
    is transformed, and its record is written only once every file it names is synced;
    each record is the one its entry says, and a resume finds every partition done."""
    from fastprep.runtime import shards
    from fastprep.runtime.partition_tasks import transform_partitions

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to name a synced descriptor")
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    specs = plan_partitions(source, 5_000)[:3]
    params, _ = _fit(job, specs[0], "k0")
    _, unsynced = _watch_syncs_and_records(monkeypatch, tmp_path)
    done = transform_partitions(job, specs, params, "fp", str(tmp_path), "float32", None,
                                ["k0", "k1", "k2"])  # fmt: skip
    assert unsynced == []
    records = sorted(p.name for p in tmp_path.glob("part-*.json"))
    assert records == sorted(r["entry"]["record"]["file"] for r in done)
    resumed = shards.completed(tmp_path, specs, "fp")
    assert sorted(resumed) == [s.index for s in specs]
    for result in done:
        entry = result["entry"]
        assert {k: v for k, v in resumed[entry["index"]].items() if k != "report"} == {
            k: v for k, v in entry.items() if k != "report"
        }


def test_a_failure_mid_task_keeps_the_records_of_the_partitions_written(
    source, tmp_path, monkeypatch
):
    """A task of several partitions failing at its third: the two written before it get
    their records (synced first), so a resumed job skips them and runs only the rest."""
    from fastprep.runtime import partition_tasks, shards
    from fastprep.runtime.partition_tasks import PartitionFailed, transform_partitions

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    specs = plan_partitions(source, 5_000)[:3]
    params, _ = _fit(job, specs[0], "k0")
    real = partition_tasks.transform_partition

    def third_fails(job, spec, *args, **kwargs):
        if spec.index == specs[2].index:
            raise ValueError("bad bytes")
        return real(job, spec, *args, **kwargs)

    monkeypatch.setattr(partition_tasks, "transform_partition", third_fails)
    with pytest.raises(PartitionFailed):
        transform_partitions(job, specs, params, "fp", str(tmp_path), "float32", None,
                             ["k0", "k1", "k2"])  # fmt: skip
    assert sorted(shards.completed(tmp_path, specs, "fp")) == [specs[0].index, specs[1].index]


def test_a_failed_sync_names_its_own_partition_not_the_next(source, tmp_path, monkeypatch):
    """A partition's syncs fail while the next one is being written: the error names the
    partition whose files failed (a clear JobError, not a bare OSError), and the partitions
    whose records were written stay done for a resume."""
    from fastprep.errors import JobError
    from fastprep.runtime.partition_tasks import transform_partitions
    from fastprep.storage import output_format

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    specs = plan_partitions(source, 5_000)[:3]
    params, _ = _fit(job, specs[0], "k0")
    real_finish = output_format.FileWriter.finish
    calls = []

    def finish(self):
        calls.append(self.folder)
        if len(calls) == 2:  # the second partition's files
            raise OSError(5, "Input/output error")
        return real_finish(self)

    monkeypatch.setattr(output_format.FileWriter, "finish", finish)
    with pytest.raises(JobError) as raised:
        transform_partitions(job, specs, params, "fp", str(tmp_path), "float32", None,
                             ["k0", "k1", "k2"])  # fmt: skip
    message = str(raised.value)
    assert specs[1].describe() in message and "Input/output error" in message
    assert specs[2].describe() not in message


def _records_name_whole_files(folder: Path) -> list[int]:
    indexes = []
    for record in folder.glob("part-*.json"):
        entry = json.loads(record.read_text())
        for written in entry["arrays"].values():
            assert (folder / written["file"]).stat().st_size == written["bytes"]
        indexes.append(entry["index"])
    return sorted(indexes)


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_an_interrupt_inside_a_shards_writing(source, tmp_path, monkeypatch, error):
    """A task of several partitions interrupted inside a shard's own writing (an error or a
    KeyboardInterrupt in ``write_shard``, not before it): the partitions recorded before
    stay done, every record names files that are there with the bytes it says, and the
    interrupted partition has no record."""
    from fastprep.runtime import shards
    from fastprep.runtime.partition_tasks import transform_partitions
    from fastprep.storage import output_format

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    specs = plan_partitions(source, 5_000)[:3]
    params, _ = _fit(job, specs[0], "k0")
    real = output_format.FileWriter.array

    def array(self, name, values):
        if name.startswith(f"part-{specs[1].index:05d}.") and name.endswith(".row_ids"):
            raise error
        return real(self, name, values)

    monkeypatch.setattr(output_format.FileWriter, "array", array)
    with pytest.raises(BaseException) as raised:
        transform_partitions(job, specs, params, "fp", str(tmp_path / "out"), "float32", None,
                             ["k0", "k1", "k2"])  # fmt: skip
    assert isinstance(raised.value, type(error)) or specs[1].describe() in str(raised.value)
    folder = tmp_path / "out"
    assert _records_name_whole_files(folder) == [specs[0].index]
    assert sorted(shards.completed(folder, specs, "fp")) == [specs[0].index]
