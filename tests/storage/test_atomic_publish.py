"""A writer SIGKILLed at a random instant while it overwrites an output: the folder opens as
the complete earlier output or the complete new one, bit for bit, every time.

The writer is a real subprocess that saves two different outputs (a CSR one and a smaller,
compressed dense one, each with its fitted pipeline) into the same folder in a loop, so a
kill lands in the middle of writing arrays, the report, the pipeline, the manifest or the
removal of the previous files.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import fastprep as fp
from fastprep.emit import csr_stream
from fastprep.storage import output_format as fmt
from fastprep.storage.shards import ShardWriter

REPO = Path(__file__).resolve().parents[2]
KILLS = 5

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import pandas as pd

    import fastprep as fp
    from fastprep.cli import load_pipeline_file

    repo, folder, refs = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    sample = pd.read_parquet(repo / "data_samples" / "flights.parquet")
    big = load_pipeline_file(repo / "pipelines" / "flights.py")
    fitted_a, a = big.fit_and_transform(pd.concat([sample] * 3, ignore_index=True))
    small = fp.Pipeline(
        fp.Schema({"distance": fp.Float(), "origin": fp.Category(),
                   "arr_delay": fp.Float(nullable=True)}),
        [fp.col("distance") >> fp.Standardize(), fp.col("origin") >> fp.OneHot()],
        target="arr_delay",
    )
    fitted_b, b = small.fit_and_transform(sample.head(7000))
    writes = [(a, fitted_a, None), (b, fitted_b, "lz4")]
    for name, (out, fitted, codec) in zip("ab", writes):  # this process's two outputs
        out.save(refs / name, compress=codec, pipeline=fitted)
    if not (folder / "manifest.json").exists():
        a.save(folder, pipeline=fitted_a)
    print("writing", flush=True)
    while True:
        for out, fitted, codec in writes[::-1]:
            out.save(folder, compress=codec, pipeline=fitted)
    """
)


def digest(folder: Path) -> str:
    """Everything an opened output holds (arrays bit for bit, names, report, quarantine,
    the fitted pipeline), hashed."""
    opened = fp.open_output(folder)
    h = hashlib.sha256()
    X = opened.X
    arrays = [X.data, X.indices, X.indptr] if hasattr(X, "indptr") else [X]
    for array in [*arrays, opened.y, opened.row_ids]:
        h.update(str((array.dtype, array.shape)).encode())
        h.update(np.ascontiguousarray(array).tobytes())
    h.update(json.dumps(list(opened.feature_names)).encode())
    report = dict(opened.report)
    h.update(json.dumps(report, sort_keys=True).encode())
    h.update(opened.quarantine.to_json().encode())
    with zipfile.ZipFile(opened.pipeline_path) as state:  # its zip stamps the time of saving
        h.update(json.loads(state.read("state.json"))["body_sha256"].encode())
    return h.hexdigest()


def start_writer(folder: Path, refs: Path) -> subprocess.Popen:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(REPO), str(folder), str(refs)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


@pytest.mark.slow  # five fresh interpreters at once: ~35 s on a shared 2-core machine
def test_sigkill_of_fresh_writer_processes_leaves_old_or_new(tmp_path):
    """Five writers (run at once, each on its own folder), each killed at a random instant."""
    rng = random.Random(2026)
    writers = []
    for attempt in range(KILLS):
        folder, refs = tmp_path / f"out{attempt}", tmp_path / f"refs{attempt}"
        writers.append((folder, refs, start_writer(folder, refs)))
    seen, interrupted = [], 0
    for attempt, (folder, refs, writer) in enumerate(writers):
        try:
            line = writer.stdout.readline()
            assert line.strip() == "writing", writer.stderr.read()
            time.sleep(rng.uniform(0.05, 1.0))
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
        assert writer.returncode == -signal.SIGKILL, f"writer {attempt}: {writer.stderr.read()}"
        expected = {digest(refs / n): n for n in "ab"}
        assert len(expected) == 2
        state = digest(folder)  # it opens: never a mix, never a raw traceback
        assert state in expected, f"writer {attempt}: the folder is neither output"
        seen.append(expected[state])
        doc = json.loads((folder / "manifest.json").read_text())
        named = fmt.named_files(doc) | {"manifest.json", "pipeline.fastprep", *fmt.LOCK_FILES}
        interrupted += bool({p.name for p in folder.iterdir()} - named)  # files of a write
    assert interrupted >= 1, "no kill landed inside a write: the test tested nothing"
    print(f"after each kill the folder held: {seen}; {interrupted} kills interrupted a write")


@pytest.mark.parametrize("made", ["whole", "block by block"])
def test_sigkill_while_overwriting_leaves_old_or_new(tmp_path, flights_pipeline, flights_sample,
                                                     made, monkeypatch):  # fmt: skip
    """The same, with writers forked from this process (no interpreter start-up): each
    overwrites its folder with two alternating outputs until it is killed. "block by
    block": the CSR output of a run saved to a folder, whose X is made a block of rows
    at a time as it is written (small blocks: kills land between them)."""
    if made == "whole":
        fitted_a, a = flights_pipeline.fit_and_transform(flights_sample)
    else:
        monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")
        monkeypatch.setattr(csr_stream, "BLOCK_ENTRIES", 20_000)
        fitted_a, a = flights_pipeline.fit_and_transform(
            flights_sample, output_dir=tmp_path / "first"
        )
        assert isinstance(a.matrix, csr_stream.PendingCsr) and a.matrix.pending
    fitted_b, b = fp.Pipeline(
        fp.Schema({"distance": fp.Float(), "origin": fp.Category(),
                   "arr_delay": fp.Float(nullable=True)}),
        [fp.col("distance") >> fp.Standardize(), fp.col("origin") >> fp.OneHot()],
        target="arr_delay",
    ).fit_and_transform(flights_sample.head(7000))  # fmt: skip
    writes = [(b, fitted_b, "lz4"), (a, fitted_a, None)]
    a.save(tmp_path / "a", pipeline=fitted_a)
    b.save(tmp_path / "b", compress="lz4", pipeline=fitted_b)
    expected = {digest(tmp_path / n): n for n in "ab"}
    rng = random.Random(19)
    seen, interrupted = [], 0
    for attempt in range(KILLS):
        folder = tmp_path / f"out{attempt}"
        a.save(folder, pipeline=fitted_a)
        pid = os.fork()
        if pid == 0:  # the writer: never returns into pytest
            try:
                while True:
                    for out, fitted, codec in writes:
                        out.save(folder, compress=codec, pipeline=fitted)
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.02, 0.6))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        state = digest(folder)
        assert state in expected, f"writer {attempt}: the folder is neither output"
        seen.append(expected[state])
        doc = json.loads((folder / "manifest.json").read_text())
        named = fmt.named_files(doc) | {"manifest.json", "pipeline.fastprep", *fmt.LOCK_FILES}
        interrupted += bool({p.name for p in folder.iterdir()} - named)
    assert interrupted >= 1, "no kill landed inside a write: the test tested nothing"
    print(f"after each kill the folder held: {seen}; {interrupted} kills interrupted a write")


@pytest.mark.parametrize("layout", ["csr", "dense"])
def test_a_later_save_cleans_up_after_a_killed_writer(tmp_path, layout, flights_pipeline,
                                                      dense_pipeline, flights_sample):  # fmt: skip
    pipeline = flights_pipeline if layout == "csr" else dense_pipeline
    out = pipeline.fit_transform(flights_sample.head(2000))
    out.save(tmp_path)
    leftovers = ["part-00000.00000000beef.X.npy", ".manifest.json.1234abcd.tmp",
                 "report.00000000beef.json", ".pipeline.fastprep.99.tmp"]  # fmt: skip
    for name in leftovers:
        (tmp_path / name).write_bytes(b"half")
    assert fp.open_output(tmp_path).n_rows == out.X.shape[0]  # ignored when opening
    out.save(tmp_path)
    assert not [n for n in leftovers if (tmp_path / n).exists()]


def small_output(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(seed).standard_normal((rows, 3)).astype(np.float32)
    return X, np.arange(rows, dtype=np.int64)


def test_interleaved_writers_never_remove_each_others_files(tmp_path):
    """Writer A adds a shard; B writes and publishes; A publishes: A's files are still
    there (B's publish left them: A was writing), so the folder opens as A's output."""
    Xa, ids_a = small_output(100, 1)
    Xb, ids_b = small_output(70, 2)
    a = ShardWriter(tmp_path, ["p", "q", "r"], "float32")
    a.add(Xa, None, ids_a)
    b = ShardWriter(tmp_path, ["p", "q", "r"], "float32")
    b.add(Xb, None, ids_b)
    b.close({"writer": "b"})
    assert np.array_equal(fp.open_output(tmp_path).X, Xb)
    a.close({"writer": "a"})
    opened = fp.open_output(tmp_path)  # was: "incomplete output", A's array removed by B
    assert np.array_equal(opened.X, Xa) and opened.report == {"writer": "a"}
    # alone again, the next publish removes B's files (the previous manifest's) and A's
    ShardWriter(tmp_path, ["p", "q", "r"], "float32").close({"writer": "c"})
    doc = json.loads((tmp_path / "manifest.json").read_text())
    named = fmt.named_files(doc) | {"manifest.json", *fmt.LOCK_FILES}
    assert {p.name for p in tmp_path.iterdir()} == named


def test_a_live_writers_files_are_not_a_dead_writers_leftovers(tmp_path):
    """Unnamed files of ours are removed as a killed writer's only when no writer is
    writing into the folder."""
    Xa, ids_a = small_output(50, 3)
    fp_save = ShardWriter(tmp_path, ["p", "q", "r"], "float32")
    fp_save.add(Xa, None, ids_a)
    fp_save.close({})
    dead = tmp_path / "part-00000.00000000dead.X.npy"
    dead.write_bytes(b"a killed writer's")
    live = ShardWriter(tmp_path, ["p", "q", "r"], "float32")
    live.add(Xa, None, ids_a)
    ShardWriter(tmp_path, ["p", "q", "r"], "float32").close({})
    assert dead.exists()  # another writer is writing: not provably a dead one's
    live.close({})
    assert not dead.exists() and np.array_equal(fp.open_output(tmp_path).X, Xa)


OTHER_PROCESS = textwrap.dedent(
    """
    import sys

    import numpy as np

    from fastprep.storage.shards import ShardWriter

    writer = ShardWriter(sys.argv[1], ["p", "q", "r"], "float32")
    writer.add(np.full((40, 3), 7, np.float32), None, np.arange(40))
    print("added", flush=True)
    sys.stdin.readline()
    writer.close({"writer": "other process"})
    print("published", flush=True)
    """
)


def test_a_writer_in_another_process_keeps_its_files(tmp_path):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    other = subprocess.Popen([sys.executable, "-c", OTHER_PROCESS, str(tmp_path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert other.stdout.readline().strip() == "added", other.stderr.read()
        X, ids = small_output(30, 4)
        here = ShardWriter(tmp_path, ["p", "q", "r"], "float32")
        here.add(X, None, ids)
        here.close({"writer": "here"})
        assert np.array_equal(fp.open_output(tmp_path).X, X)
        out, err = other.communicate("go\n", timeout=60)
    finally:
        other.kill()
        other.wait()
    assert out.strip() == "published", err
    opened = fp.open_output(tmp_path)
    assert opened.report == {"writer": "other process"} and (opened.X == 7).all()


def test_a_manifest_naming_a_removed_file_is_never_published(tmp_path):
    """A file of the new output gone before its publish (another writer's publish removed
    a re-used file): the publish stops, the folder keeps its earlier output."""
    X, ids = small_output(20, 5)
    first = ShardWriter(tmp_path, ["p", "q", "r"], "float32")
    first.add(X, None, ids)
    first.close({"writer": "first"})
    second = ShardWriter(tmp_path, ["p", "q", "r"], "float32")
    second.add(X[:5], None, ids[:5])
    (tmp_path / second.entries[0]["arrays"]["row_ids"]["file"]).unlink()
    with pytest.raises(
        fp.StateFormatError, match=r"not published: .*row_ids\.npy, which is missing"
    ):
        second.close({"writer": "second"})
    second.discard()
    assert fp.open_output(tmp_path).report == {"writer": "first"}
    assert not list(tmp_path.glob(f"*.{second.token}.*"))
