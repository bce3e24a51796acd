"""``fastprep run`` on a pipeline file with lookup tables: their relative paths resolve
against the file (run from any folder), the output equals the in-process run, and
``fastprep transform`` of the saved pipeline needs no side file (the tables are in the
fitted state)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
from support import REPO, assert_same_matrix

import fastprep as fp
from fastprep.cli import load_pipeline_file


def _run(args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "fastprep", *map(str, args)], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result


def test_run_then_transform_without_the_side_files(tmp_path):
    folder = tmp_path / "project"
    (folder / "pipelines").mkdir(parents=True)
    (folder / "data_samples").mkdir()
    shutil.copy(REPO / "pipelines" / "flights_lookups.py", folder / "pipelines")
    for name in ("flights.parquet", "planes.parquet", "weather.parquet"):
        shutil.copy(REPO / "data_samples" / name, folder / "data_samples")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _run(["run", folder / "pipelines" / "flights_lookups.py", "--output", "out"], elsewhere)
    opened = fp.open_output(elsewhere / "out")
    expected = load_pipeline_file(REPO / "pipelines" / "flights_lookups.py").fit_transform(
        REPO / "data_samples" / "flights.parquet"
    )
    assert_same_matrix(np.asarray(opened.X), expected.X)
    assert list(opened.feature_names) == list(expected.feature_names)
    (folder / "data_samples" / "planes.parquet").unlink()
    (folder / "data_samples" / "weather.parquet").unlink()
    _run(["transform", elsewhere / "out" / "pipeline.fastprep", "--input",
          REPO / "data_samples" / "flights.parquet", "--output", "again"], elsewhere)  # fmt: skip
    assert_same_matrix(np.asarray(fp.open_output(elsewhere / "again").X), expected.X)
