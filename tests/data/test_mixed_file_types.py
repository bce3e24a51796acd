"""A folder of Parquet files whose columns were written with different types (a chunk written
by pandas as a categorical, narrower numbers in another chunk) is read as one source: the
same X as the rows in one file. Types that cannot be one column (text in one file,
timestamps in another; ints beyond 2**53 beside floats) are a SchemaError naming the
column and the files' types, never Arrow's merge or cast error."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO, assert_same_matrix

import fastprep as fp
from fastprep.errors import SchemaError

WEATHER = REPO / "data_samples" / "weather.parquet"


def pipeline() -> fp.Pipeline:
    schema = fp.Schema({
        "origin": fp.Category(), "temp": fp.Float(nullable=True),
        "month": fp.Int(min=1, max=12), "time_hour": fp.Datetime(tz="UTC"),
    })  # fmt: skip
    return fp.Pipeline(schema, [
        fp.cols("origin", "month") >> fp.OneHot(),
        fp.col("temp") >> fp.FillMissing("median") >> fp.Standardize(),
        fp.expr("h = hour(time_hour)") >> fp.MinMax(),
    ])  # fmt: skip


def write_chunks(folder, second) -> None:
    """The weather sample in three files; the second one's columns changed by ``second``."""
    table = pq.read_table(WEATHER, columns=["origin", "temp", "month", "time_hour"])
    folder.mkdir()
    for i, start in enumerate((0, 9000, 18000)):
        chunk = table.slice(start, 9000)
        pq.write_table(second(chunk) if i == 1 else chunk, folder / f"part-{i}.parquet")


def held_dictionary_and_wider_ints(chunk: pa.Table) -> pa.Table:
    frame = chunk.to_pandas()
    frame["origin"] = frame["origin"].astype("category")  # the file holds a dictionary
    frame["month"] = frame["month"].astype("int32")
    frame["temp"] = frame["temp"].astype("float32").astype("float64")
    return pa.Table.from_pandas(frame, preserve_index=False)


def test_files_of_compatible_types_read_as_one_source(tmp_path):
    folder = tmp_path / "parts"
    write_chunks(folder, held_dictionary_and_wider_ints)
    together = tmp_path / "one.parquet"
    pq.write_table(pa.Table.from_pandas(
        pd.concat([pd.read_parquet(p) for p in sorted(folder.iterdir())], ignore_index=True)
            .astype({"origin": str}), preserve_index=False), together)  # fmt: skip
    expected = pipeline().fit_transform(str(together))
    got = pipeline().fit_transform(str(folder))
    assert_same_matrix(got.X, expected.X)
    assert got.feature_names == expected.feature_names


@pytest.mark.parametrize("change", ["timestamps", "huge ints"])
def test_files_of_incompatible_types_name_the_column_and_files(tmp_path, change):
    def second(chunk: pa.Table) -> pa.Table:
        frame = chunk.to_pandas()
        if change == "timestamps":
            frame["time_hour"] = pd.to_datetime(frame["time_hour"], utc=True)
        else:  # numbers that float64 cannot hold exactly beside the other files' floats
            frame["temp"] = 2**60 + frame.index
        return pa.Table.from_pandas(frame, preserve_index=False)

    folder = tmp_path / "parts"
    write_chunks(folder, second)
    column = "time_hour" if change == "timestamps" else "temp"
    with pytest.raises(SchemaError, match=f"'{column}'") as caught:
        pipeline().fit_transform(str(folder))
    message = str(caught.value)
    assert "part-1.parquet" in message
    assert ("timestamp" in message) if change == "timestamps" else ("int64" in message)
