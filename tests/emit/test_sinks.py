"""``out.to_pandas()`` / ``out.to_polars()``: dense X as a DataFrame named by the features;
a CSR X is refused naming its sparse blocks (or, for pandas, given as a sparse frame)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from support import REPO

import fastprep as fp
from fastprep.cli import load_pipeline_file


@pytest.fixture(scope="module")
def dense_out() -> fp.Output:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights_numeric.py")
    return pipeline.fit_transform(REPO / "data_samples" / "flights.parquet")


@pytest.fixture(scope="module")
def csr_out() -> fp.Output:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    return pipeline.fit_transform(REPO / "data_samples" / "flights.parquet")


def test_to_pandas_names_columns_and_indexes_by_row_id(dense_out) -> None:
    frame = dense_out.to_pandas()
    assert list(frame.columns) == list(dense_out.feature_names)
    assert (frame.dtypes == np.float32).all()
    assert frame.index.name == "row_id"
    np.testing.assert_array_equal(frame.index.to_numpy(), dense_out.row_ids)
    np.testing.assert_array_equal(frame.to_numpy(), dense_out.X)
    assert len(frame) == dense_out.report.rows_out == 19_430
    frame.iloc[0, 0] = 123.0  # a copy by default: X is not touched
    assert dense_out.X[0, 0] != 123.0


def test_to_pandas_with_target(dense_out) -> None:
    frame = dense_out.to_pandas(target="late")
    assert list(frame.columns) == [*dense_out.feature_names, "late"]
    np.testing.assert_array_equal(frame["late"].to_numpy(), dense_out.y)
    assert frame["late"].dtype == np.float32
    with pytest.raises(ValueError, match="'speed' is already a feature name"):
        dense_out.to_pandas(target="speed")


def test_to_polars_names_columns_and_can_carry_row_ids(dense_out) -> None:
    pl = pytest.importorskip("polars")
    frame = dense_out.to_polars()
    assert isinstance(frame, pl.DataFrame)
    assert frame.columns == list(dense_out.feature_names)
    assert all(dtype == pl.Float32 for dtype in frame.dtypes)
    np.testing.assert_array_equal(frame.to_numpy(), dense_out.X)
    full = dense_out.to_polars(target="late", row_ids=True)
    assert full.columns == ["row_id", *dense_out.feature_names, "late"]
    np.testing.assert_array_equal(full["row_id"].to_numpy(), dense_out.row_ids)
    np.testing.assert_array_equal(full["late"].to_numpy(), dense_out.y)


def test_without_a_target_asking_for_y_is_a_clear_error(flights_sample) -> None:
    pipeline = fp.Pipeline(
        schema=fp.Schema({"distance": fp.Float(min=0)}),
        features=[fp.col("distance") >> fp.Standardize()],
    )
    out = pipeline.fit_transform(flights_sample)
    assert out.to_pandas().shape == (20_000, 1)
    with pytest.raises(ValueError, match="has no y"):
        out.to_pandas(target="late")


def test_bfloat16_is_widened_to_its_float32_values(flights_sample) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights_numeric.py")
    fitted = pipeline.fit(flights_sample)
    wide = fitted.transform(flights_sample).to_pandas()
    narrow = fitted.transform(flights_sample, out_dtype="bfloat16").to_pandas()
    assert (narrow.dtypes == np.float32).all()
    np.testing.assert_allclose(narrow.to_numpy(), wide.to_numpy(), rtol=2**-7, atol=1e-6)


def test_csr_output_is_refused_naming_the_sparse_block(csr_out) -> None:
    with pytest.raises(fp.SparseOutputError, match=r"hash:tailnum,dest \(262,144 columns\)") as e:
        csr_out.to_pandas()
    assert "to_pandas(sparse=True)" in str(e.value) and "19.0 GiB dense" in str(e.value)
    assert isinstance(e.value, ValueError)  # as scikit-learn refuses sparse pandas output
    with pytest.raises(fp.SparseOutputError, match="hash:tailnum,dest") as e:
        csr_out.to_polars()
    assert "sparse=True" not in str(e.value)  # Polars has no sparse frame to offer


def test_sparse_pandas_frame_holds_the_same_values(flights_sample) -> None:
    base = load_pipeline_file(REPO / "pipelines" / "flights.py")
    pipeline = fp.Pipeline(
        schema=base.schema,
        features=[
            fp.col("distance") >> fp.Standardize(),
            fp.cols("tailnum", "dest") >> fp.Hash(n_features=2**8),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )
    out = pipeline.fit_transform(flights_sample)
    frame = out.to_pandas(sparse=True, target="late")
    assert isinstance(frame.dtypes.iloc[0], pd.SparseDtype)
    assert list(frame.columns) == [*out.feature_names, "late"]
    np.testing.assert_array_equal(frame.index.to_numpy(), out.row_ids)
    np.testing.assert_array_equal(
        frame.drop(columns="late").sparse.to_dense().to_numpy(), out.X.toarray()
    )


def test_an_opened_output_gives_the_same_frames(dense_out, csr_out, tmp_path) -> None:
    dense_out.save(tmp_path / "dense")
    opened = fp.open_output(tmp_path / "dense")
    pd.testing.assert_frame_equal(
        opened.to_pandas(target="late"), dense_out.to_pandas(target="late")
    )
    assert opened.to_polars(row_ids=True).equals(dense_out.to_polars(row_ids=True))
    csr_out.save(tmp_path / "csr")
    with pytest.raises(fp.SparseOutputError, match="hash:tailnum,dest"):
        fp.open_output(tmp_path / "csr").to_pandas()
