"""CSV readers close their file even when reading fails (the error keeps the reading
frame alive, e.g. while it is reported or stored, so an open reader would hold the file)."""

from __future__ import annotations

import os

import pytest

import fastprep as fp
from fastprep.runtime import preflight

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


def open_files(path) -> list[str]:
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return [n for n in names if n == str(path)]


@pytest.mark.parametrize("bad_row", [1_500, 15_000])  # in the first block read; a later one
def test_preflight_csv_head_closes_the_file_on_a_parse_error(flights_csv, tmp_path, bad_row):
    lines = flights_csv.read_text().splitlines()
    lines.insert(bad_row, lines[bad_row] + ",extra,extra")  # a row with too many fields
    path = tmp_path / "broken.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(fp.SourceError, match="columns") as caught:
        preflight._csv_head(str(path), ["dep_delay", "origin"], {"origin"})
    assert caught.value.__traceback__ is not None  # the frames are still referenced
    assert open_files(path) == []


def test_reading_a_csv_header_closes_the_file_and_reads_gzip(flights_csv, tmp_path):
    import gzip

    from fastprep.data.sources import _csv_header

    path = tmp_path / "flights.csv.gz"
    head_bytes = flights_csv.read_bytes()[:200_000]
    path.write_bytes(gzip.compress(head_bytes[: head_bytes.rindex(b"\n") + 1]))
    assert _csv_header(str(path)) == _csv_header(str(flights_csv))
    assert "dep_delay" in _csv_header(str(path))
    assert open_files(path) == [] and open_files(flights_csv) == []
    head = preflight._csv_head(str(path), ["dep_delay", "origin"], {"origin"})
    assert head.num_rows > 100 and open_files(path) == []
