"""The cost profile is read once while its file is unchanged, and again when it changes
(a calibration in another process); a missing or broken file gives the defaults."""

from __future__ import annotations

import json
import os

from fastprep.planning import planner


def test_reread_when_the_file_changes(tmp_path) -> None:
    path = tmp_path / "cost_profile.json"
    assert planner.load_profile(path) == planner.CostProfile()  # no file: the defaults
    first = planner.CostProfile().to_dict() | {"numba_compile_seconds": 1.5}
    path.write_text(json.dumps(first))
    loaded = planner.load_profile(path)
    assert loaded.numba_compile_seconds == 1.5
    assert planner.load_profile(path) is loaded  # unchanged: not read again
    path.write_text(json.dumps(first | {"numba_compile_seconds": 2.25}))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a later write
    assert planner.load_profile(path).numba_compile_seconds == 2.25
    path.write_text("{not json")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000))
    assert planner.load_profile(path) == planner.CostProfile()
