"""An output written into the folder the input is read from (or a folder under it) is not
read back as input: its quarantine file is Parquet, and a folder source is read with every
CSV/Parquet file under it, so each run read the last run's rejected rows again (20,000 rows
in, then 20,570, then 21,140). A folder holding only an output is no input at all."""

from __future__ import annotations

import shutil

import pytest
from support import REPO

import fastprep as fp
from fastprep.errors import SourceError

SAMPLE = REPO / "data_samples" / "flights.parquet"


def pipeline() -> fp.Pipeline:
    schema = fp.Schema({"distance": fp.Float(), "origin": fp.Category(),
                        "arr_delay": fp.Float()})  # fmt: skip
    features = [fp.col("distance") >> fp.Standardize(), fp.col("origin") >> fp.OneHot()]
    return fp.Pipeline(schema, features, target=fp.expr("late = arr_delay > 15"))


@pytest.mark.parametrize("where", ["same folder", "under it", "glob"])
def test_an_output_beside_the_input_is_not_read_back(tmp_path, where):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(SAMPLE, data / "flights.parquet")
    output = data if where == "same folder" else data / "out"
    source = str(data / "*.parquet") if where == "glob" else str(data)
    if where == "glob":
        output = data
    first = pipeline().fit_transform(source, output_dir=output)
    assert (first.report.rows_in, first.report.rows_quarantined) == (20_000, 570)
    assert list(output.glob("*.quarantine.parquet"))  # the file that was read back
    for _ in range(2):
        again = pipeline().fit_transform(source, output_dir=output)
        assert again.report.rows_in == 20_000 and again.report.rows_quarantined == 570
    assert fp.open_output(output).n_rows == first.X.shape[0]


def test_a_folder_holding_only_an_output_is_not_input(tmp_path):
    pipeline().fit_transform(str(SAMPLE), output_dir=tmp_path / "out")
    with pytest.raises(SourceError, match="fastprep output"):
        pipeline().fit_transform(str(tmp_path / "out"))
