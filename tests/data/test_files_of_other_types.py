"""The files of one source whose column types do not promote into one (numbers in one
file, their text in another) are read as each file alone would be: the column as text,
which validation converts to the declared type, not an Arrow merge error."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO, assert_same_matrix

import fastprep as fp
from fastprep.data.arrow_compute import cast
from fastprep.data.sources import read_source


def _files(folder, as_text: bool) -> str:
    weather = pq.read_table(REPO / "data_samples" / "weather.parquet").slice(0, 8_000)
    rest = weather.slice(5_000)
    if as_text:  # the second file holds the numbers as text (and hour as text)
        for name in ("temp", "hour"):
            i = rest.schema.get_field_index(name)
            rest = rest.set_column(i, name, cast(rest.column(i), pa.string()))
    pq.write_table(weather.slice(0, 5_000), folder / "a.parquet")
    pq.write_table(rest, folder / "b.parquet")
    return str(folder / "*.parquet")


def test_a_column_numbers_in_one_file_text_in_another(tmp_path) -> None:
    (tmp_path / "numbers").mkdir()
    (tmp_path / "mixed").mkdir()
    numbers = _files(tmp_path / "numbers", as_text=False)
    mixed = _files(tmp_path / "mixed", as_text=True)
    table, _ = read_source(mixed, ["temp", "hour", "origin"], ["origin"])
    assert table.num_rows == 8_000 and pa.types.is_large_string(table.schema.field("temp").type)

    schema = fp.Schema({"temp": fp.Float(nullable=True), "hour": fp.Int(), "origin": fp.Category()})
    pipeline = fp.Pipeline(schema, [
        fp.col("temp") >> fp.FillMissing("median") >> fp.Standardize(),
        fp.col("hour") >> fp.MinMax(), fp.cols("origin") >> fp.OneHot(),
    ])  # fmt: skip
    fitted = pipeline.fit(mixed)
    assert fitted.params == pipeline.fit(numbers).params
    out = fitted.transform(mixed)
    assert_same_matrix(out.X, fitted.transform(numbers).X)
    assert np.array_equal(out.row_ids, np.arange(8_000))


def test_only_the_columns_that_do_not_promote_are_read_as_text(tmp_path) -> None:
    """The broken sample (text in ``arr_delay``, a fraction in ``minute``) beside the clean
    one (float and int): ``minute`` promotes to float, ``arr_delay`` is read as text."""
    for name in ("flights_broken.csv", "flights.csv"):
        (tmp_path / name).write_bytes((REPO / "data_samples" / name).read_bytes())
    table, _ = read_source(str(tmp_path / "*.csv"), ["minute", "arr_delay", "dest"], ["dest"])
    assert table.num_rows == 20_040
    assert pa.types.is_floating(table.schema.field("minute").type)
    assert pa.types.is_large_string(table.schema.field("arr_delay").type)


def test_timestamps_with_and_without_a_zone_are_a_schema_error(tmp_path) -> None:
    """Text would let a naive value through where its own file is refused: not combined."""
    stamps = np.array(["2013-01-01T06:00", "2013-01-01T07:00"], dtype="datetime64[us]")
    pq.write_table(pa.table({"t": pa.array(stamps, pa.timestamp("us", tz="UTC"))}),
                   tmp_path / "a.parquet")  # fmt: skip
    pq.write_table(pa.table({"t": pa.array(stamps)}), tmp_path / "b.parquet")
    with pytest.raises(
        fp.SchemaError, match=r"column 't' has types that do not combine.*b\.parquet"
    ):
        read_source(str(tmp_path / "*.parquet"), ["t"])
