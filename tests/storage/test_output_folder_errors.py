"""An output folder that cannot be written is a clear error, never a library's traceback:
a path that is a file (or under one) is refused before anything is read, and a disk that
fills up while the arrays are written (a real file-size limit on a real ``fastprep run``
subprocess) ends the run with an error naming the folder, while the folder keeps opening as
its earlier output and a later run writes it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import numpy as np
import pytest
from support import REPO

import fastprep as fp
from fastprep.errors import FastprepError, OutputError

PIPELINE = str(REPO / "pipelines" / "flights.py")
SAMPLE = str(REPO / "data_samples" / "flights.parquet")


def small_pipeline() -> fp.Pipeline:
    schema = fp.Schema({"distance": fp.Float(), "origin": fp.Category(),
                        "arr_delay": fp.Float(nullable=True)})  # fmt: skip
    features = [fp.col("distance") >> fp.Standardize(), fp.col("origin") >> fp.OneHot()]
    return fp.Pipeline(schema, features, target="arr_delay")


def run_cli(output: str, *extra: str, limit: int | None = None) -> subprocess.CompletedProcess:
    def limited() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "fastprep", "run", PIPELINE, "--input", SAMPLE, "--output",
         output, *extra],
        capture_output=True, text=True, env=env, preexec_fn=limited, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("under", [False, True])
def test_an_output_path_that_is_a_file_is_refused_before_the_run(tmp_path, under):
    blocker = tmp_path / "taken"
    blocker.write_text("a user's file")
    folder = blocker / "out" if under else blocker
    with pytest.raises(OutputError, match="not a folder") as caught:
        small_pipeline().fit_transform(SAMPLE, output_dir=folder)
    assert str(blocker) in str(caught.value)
    assert isinstance(caught.value, OSError)  # ``except OSError`` keeps working
    assert blocker.read_text() == "a user's file"


def test_cli_output_onto_a_file_is_an_error_line(tmp_path):
    blocker = tmp_path / "taken"
    blocker.write_text("x")
    result = run_cli(str(blocker))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("fastprep: error:") and str(blocker) in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_refused_before_the_run(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="not writable"):
            small_pipeline().fit_transform(SAMPLE, output_dir=folder / "out")
    finally:
        folder.chmod(0o755)


def test_a_full_disk_keeps_the_earlier_output_and_says_so(tmp_path):
    folder = tmp_path / "out"
    first = run_cli(str(folder))
    assert first.returncode == 0, first.stderr
    before = fp.open_output(folder).whole()
    # the CSR X of the sample is ~0.8 MB: a 200 kB file-size limit stops its first array
    full = run_cli(str(folder), "--out-dtype", "float64", limit=200_000)
    assert full.returncode == 2, full.stderr
    assert "Traceback" not in full.stderr
    assert full.stderr.startswith("fastprep: error:")
    assert str(folder) in full.stderr and "earlier output" in full.stderr
    after = fp.open_output(folder).whole()
    assert np.array_equal(after.X.data, before.X.data) and after.X.dtype == np.float32
    again = run_cli(str(folder), "--out-dtype", "float64")
    assert again.returncode == 0, again.stderr
    assert fp.open_output(folder).whole().X.dtype == np.float64


def test_a_write_error_is_a_fastprep_error_in_python(tmp_path):
    """The same in the API, through ``Output.save``: the file-size limit set in this
    process for the one call (and the signal it raises ignored, as Python does)."""
    out = small_pipeline().fit_transform(SAMPLE)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, hard))
    try:
        with pytest.raises(FastprepError, match="could not be written"):
            out.save(tmp_path / "o")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    out.save(tmp_path / "o")
    assert fp.open_output(tmp_path / "o").whole().X.shape == out.X.shape


def test_a_fitted_state_that_cannot_be_written_keeps_the_earlier_file(tmp_path):
    fitted = small_pipeline().fit(SAMPLE)
    with pytest.raises(OutputError, match="no-such-folder"):
        fitted.save(tmp_path / "no-such-folder" / "state.fastprep")
    path = tmp_path / "state.fastprep"
    fitted.save(path)
    before = path.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) // 2, hard))
    try:
        with pytest.raises(OutputError, match="could not be written"):
            fitted.save(path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.fastprep"]  # no temp left
