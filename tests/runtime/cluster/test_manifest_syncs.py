"""A cluster transform's publish: the report's fsync runs beside the manifest's, and the
manifest replaces the old one only once both are on disk; a failed fsync publishes
nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import fastprep as fp
from fastprep.cli import load_pipeline_file
from fastprep.storage import output_format

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000


def _fitted(flights_row_groups, client):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    return pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)


def test_the_manifest_is_replaced_after_the_files_it_names_are_synced(
    flights_row_groups, client, tmp_path, monkeypatch
):
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to name a synced descriptor")
    fitted = _fitted(flights_row_groups, client)
    synced: list[str] = []
    at_replace: list[list[str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        real_fsync(fd)
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))

    def replace(src, dst, *args, **kwargs):
        if os.path.basename(str(dst)) == output_format.MANIFEST:
            at_replace.append([os.path.basename(str(src)), *synced])
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    out = tmp_path / "out"
    manifest = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                                output_dir=out)  # fmt: skip
    [[temp, *before]] = at_replace
    assert temp in before  # the new manifest itself
    report = next(out.glob("report.*.json")).name
    assert report in before
    assert manifest.report.rows_in == fp.open_output(out).report["rows_in"]


def test_a_failed_fsync_of_the_report_publishes_nothing(
    flights_row_groups, client, tmp_path, monkeypatch
):
    fitted = _fitted(flights_row_groups, client)
    real_sync = output_format._sync_path

    def failing(path):
        if path.name.startswith("report."):
            raise OSError(5, "Input/output error")
        real_sync(path)

    monkeypatch.setattr(output_format, "_sync_path", failing)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="Input/output"):
        fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                         output_dir=out)  # fmt: skip
    assert not (out / output_format.MANIFEST).exists()
    monkeypatch.setattr(output_format, "_sync_path", real_sync)
    # re-run: resumes from the partitions' records and publishes
    manifest = fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                                output_dir=out)  # fmt: skip
    assert (out / output_format.MANIFEST).exists()
    assert any("resumed" in n for n in manifest.report.notes)
