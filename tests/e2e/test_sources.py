"""Every kind of source gives the same X: DataFrame, Parquet, CSV, a glob, a directory."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from support import assert_same_matrix

import fastprep as fp


@pytest.fixture
def reference(flights_pipeline, flights_sample):
    return flights_pipeline.fit_transform(flights_sample)


def assert_same_output(a, b) -> None:
    assert_same_matrix(a.X, b.X)
    assert np.array_equal(a.y, b.y)
    assert a.feature_names == b.feature_names
    assert np.array_equal(a.row_ids, b.row_ids)
    assert a.report.rows_in == b.report.rows_in
    assert a.quarantine["row_id"].tolist() == b.quarantine["row_id"].tolist()


def test_parquet_file(flights_pipeline, flights_parquet, reference):
    assert_same_output(flights_pipeline.fit_transform(flights_parquet), reference)
    assert_same_output(flights_pipeline.fit_transform(str(flights_parquet)), reference)


def test_csv_file(flights_pipeline, flights_csv, reference):
    assert_same_output(flights_pipeline.fit_transform(flights_csv), reference)


def halves(frame: pd.DataFrame):
    half = len(frame) // 2
    return frame.iloc[:half], frame.iloc[half:]


def test_glob_of_two_csv_halves(flights_pipeline, flights_sample, reference, tmp_path):
    first, second = halves(flights_sample)
    first.to_csv(tmp_path / "part-0.csv", index=False)
    second.to_csv(tmp_path / "part-1.csv", index=False)
    (tmp_path / "notes.txt").write_text("not data")
    out = flights_pipeline.fit_transform(str(tmp_path / "part-*.csv"))
    assert_same_output(out, reference)
    assert "2 file(s)" in out.report.source


def test_directory_of_halves(flights_pipeline, flights_sample, reference, tmp_path):
    first, second = halves(flights_sample)
    folder = tmp_path / "data"
    folder.mkdir()
    first.to_parquet(folder / "a.parquet", index=False)
    second.to_csv(folder / "b.csv", index=False)
    assert_same_output(flights_pipeline.fit_transform(folder), reference)


def test_directory_of_csv_files(flights_pipeline, flights_sample, reference, tmp_path):
    first, second = halves(flights_sample)
    first.to_csv(tmp_path / "2013-a.csv", index=False)
    second.to_csv(tmp_path / "2013-b.csv", index=False)
    assert_same_output(flights_pipeline.fit_transform(tmp_path), reference)


def test_gzipped_csv(flights_pipeline, flights_sample, reference, tmp_path):
    path = tmp_path / "flights.csv.gz"
    flights_sample.to_csv(path, index=False)
    assert_same_output(flights_pipeline.fit_transform(path), reference)


def test_fit_on_one_source_transform_another(flights_pipeline, flights_parquet, flights_csv):
    a = flights_pipeline.fit(flights_parquet).transform(flights_csv)
    b = flights_pipeline.fit(flights_csv).transform(flights_parquet)
    assert_same_output(a, b)


def test_dataframe_index_and_extra_columns_do_not_matter(
    flights_pipeline, flights_sample, reference
):
    frame = flights_sample.copy()
    frame.index = np.arange(len(frame))[::-1] + 1000
    frame["unused"] = "x"
    frame = frame[frame.columns[::-1]]
    out = flights_pipeline.fit_transform(frame)
    assert_same_output(out, reference)
    assert out.quarantine["row_id"].tolist() == reference.quarantine["row_id"].tolist()


def test_dataframe_with_pandas_dtypes(flights_pipeline, flights_sample, reference):
    frame = flights_sample.copy()
    for name in ("origin", "carrier", "tailnum", "dest"):
        frame[name] = frame[name].astype("category")
    frame["hour"] = frame["hour"].astype("Int64")
    frame["dep_delay"] = frame["dep_delay"].astype("Float64")
    assert_same_output(flights_pipeline.fit_transform(frame), reference)


def test_text_codes_that_look_like_numbers_stay_text(tmp_path):
    path = tmp_path / "codes.csv"
    path.write_text("code,x\n007,1\n7,2\n7.0,3\n")
    schema = fp.Schema({"code": fp.Category(), "x": fp.Float()})
    out = fp.Pipeline(schema, [fp.col("code") >> fp.OneHot(), fp.col("x")]).fit_transform(path)
    assert out.feature_names == ["code=007", "code=7", "code=7.0", "x"]


@pytest.mark.parametrize(
    "source",
    ["does/not/exist.parquet", "nothing-*.csv", 42],
)
def test_bad_sources(flights_pipeline, tmp_path, source):
    if isinstance(source, str):
        source = str(tmp_path / source)
    with pytest.raises(fp.SourceError):
        flights_pipeline.fit(source)


def test_unknown_file_format(flights_pipeline, tmp_path):
    path = tmp_path / "flights.xlsx"
    path.write_bytes(b"PK")
    with pytest.raises(fp.SourceError, match="format"):
        flights_pipeline.fit(path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(fp.SourceError):
        flights_pipeline.fit(empty)


def test_duplicated_column_names(flights_pipeline, flights_sample):
    frame = pd.concat([flights_sample.head(20), flights_sample.head(20)[["distance"]]], axis=1)
    with pytest.raises(fp.SchemaError, match="distance"):
        flights_pipeline.fit(frame)


def test_glob_where_one_file_has_an_all_missing_column(tmp_path):
    pd.DataFrame({"x": [1.0, 2.0], "s": ["a", None], "y": [1.5, None]}).to_csv(
        tmp_path / "p1.csv", index=False
    )
    pd.DataFrame({"x": [3.0, 4.0], "s": [None, None], "y": [None, None]}).to_csv(
        tmp_path / "p2.csv", index=False
    )
    schema = fp.Schema(
        {"x": fp.Float(), "s": fp.Category(nullable=True), "y": fp.Float(nullable=True)}
    )
    pipeline = fp.Pipeline(
        schema, [fp.cols("x", "y") >> fp.FillMissing(0), fp.col("s") >> fp.OneHot()]
    )
    out = pipeline.fit_transform(str(tmp_path / "p*.csv"))
    assert out.feature_names == ["x", "y", "s=a", "s=<missing>"]
    assert out.X.tolist() == [
        [1.0, 1.5, 1.0, 0.0],
        [2.0, 0.0, 0.0, 1.0],
        [3.0, 0.0, 0.0, 1.0],
        [4.0, 0.0, 0.0, 1.0],
    ]


@pytest.mark.parametrize("backend", ["auto", "pandas"])
def test_backends_agree(flights_pipeline, flights_parquet, reference, backend):
    fitted = flights_pipeline.fit(flights_parquet, backend=backend)
    assert_same_output(fitted.transform(flights_parquet, backend=backend), reference)
