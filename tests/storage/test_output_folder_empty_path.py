"""An output path given as an empty string (an unset ``--output "$OUT"`` in a script) is
refused before the run, not taken as the current folder: Path("") is ".", so the output's
manifest, shards and lock files were written among whatever the process's folder holds."""

from __future__ import annotations

import pytest

from fastprep.errors import FastprepError
from fastprep.storage.output_format import check_folder


def test_empty_output_path_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FastprepError, match="output"):
        check_folder("")


def test_saving_an_output_to_an_empty_path_is_refused(tmp_path, monkeypatch) -> None:
    import pandas as pd

    import fastprep as fp

    monkeypatch.chdir(tmp_path)
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    out = fp.Pipeline(fp.Schema({"x": fp.Float()}), [fp.col("x")]).fit_transform(frame)
    with pytest.raises(fp.OutputError, match="empty path"):
        out.save("")
    assert list(tmp_path.iterdir()) == []
