"""An output path given as an empty string (an unset ``--output "$OUT"`` in a script) is
refused before the run, not taken as the current folder: Path("") is ".", so the output's
manifest, shards and lock files were written among whatever the process's folder holds."""

from __future__ import annotations

import pytest

from fastprep.errors import FastprepError
from fastprep.storage.output_format import check_folder


@pytest.mark.xfail(strict=True, reason="check_folder('') accepts the current folder")
def test_empty_output_path_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FastprepError, match="output"):
        check_folder("")
