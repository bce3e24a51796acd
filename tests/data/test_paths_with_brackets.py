"""A source path that names an existing file (or folder) is read as that path, even when
its name holds a glob's special characters (``flights[2013].parquet``, a folder
``runs[a]``): only a path that does not exist is a pattern."""

from __future__ import annotations

import shutil

import pytest
from support import REPO

from fastprep.data.sources import resolve_files


@pytest.mark.parametrize("as_folder", [False, True])
def test_existing_path_with_brackets_is_read(tmp_path, as_folder) -> None:
    folder = tmp_path / "runs[a]"
    folder.mkdir()
    path = folder / "flights[2013].parquet"
    shutil.copy(REPO / "data_samples" / "flights.parquet", path)
    assert resolve_files(folder if as_folder else path) == [str(path)]
