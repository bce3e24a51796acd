"""Random bad values in every column the flights pipeline reads: only fastprep's own errors,
row accounting always holds, and X never holds NaN or ±inf — on every backend."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastprep as fp

BAD_VALUES = [
    None, np.nan, np.inf, -np.inf, "", "abc", "1e400", "12", 1, 0, -1, 2**60, 1.5, True,
    "nan", "None", "<NA>", "ü", "\x00", pd.NA, [1], {"a": 1}, b"x", -0.0, 1e308, "  7 ",
]  # fmt: skip


@pytest.fixture(scope="module")
def base(repo_root) -> pd.DataFrame:
    return pd.read_parquet(repo_root / "data_samples" / "flights.parquet").head(200)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_random_bad_values_never_escape(flights_pipeline, base, backend, data) -> None:
    frame = base.astype(object)
    columns = data.draw(
        st.lists(st.sampled_from(list(flights_pipeline.plan.columns)), min_size=1, max_size=3)
    )
    for column in columns:
        rows = data.draw(st.lists(st.integers(0, len(frame) - 1), min_size=1, max_size=40))
        for row in rows:
            frame.at[row, column] = data.draw(st.sampled_from(BAD_VALUES))
    keep = data.draw(st.sampled_from([len(frame), 1, 0]))
    frame = frame.iloc[:keep]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = flights_pipeline.fit_transform(frame, backend=backend)
        except fp.FastprepError:
            return  # a clear error (wrong type for a whole column, nothing left to fit...)
    report = out.report
    assert report.rows_in == report.rows_out + report.rows_quarantined == len(frame)
    emitted, quarantined = set(out.row_ids.tolist()), set(out.quarantine["row_id"].tolist())
    assert not emitted & quarantined and emitted | quarantined == set(range(len(frame)))
    assert np.isfinite(out.X.data).all() and np.isfinite(out.y).all()
    assert out.quarantine["reason"].str.len().gt(0).all()


@pytest.mark.parametrize("backend", ["pandas", "numba", "numexpr"])
def test_a_value_beyond_float32_is_quarantined_not_emitted_as_inf(backend) -> None:
    schema = fp.Schema({"x": fp.Float()})
    pipeline = fp.Pipeline(schema=schema, features=[fp.col("x")])
    frame = pd.DataFrame({"x": [1.0, 1e300, -1e39, 3.0]})
    out = pipeline.fit_transform(frame, backend=backend)
    np.testing.assert_array_equal(out.row_ids, [0, 3])
    assert list(out.quarantine["reason"]) == ["feature x: missing or not finite"] * 2
    assert np.isfinite(out.X).all()


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_standardize_of_values_near_float64_limit_is_a_clear_error(backend) -> None:
    schema = fp.Schema({"x": fp.Float()})
    pipeline = fp.Pipeline(schema=schema, features=[fp.col("x") >> fp.Standardize()])
    frame = pd.DataFrame({"x": [1e308, -1e308, 1e308, 5.0]})
    with pytest.raises(fp.FitError, match=r"'x'.*not finite"):
        pipeline.fit(frame, backend=backend)


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_a_hashed_number_that_is_infinite_quarantines_its_row(backend) -> None:
    schema = fp.Schema({"x": fp.Float(allow_inf=True), "c": fp.Category()})
    pipeline = fp.Pipeline(schema=schema, features=[fp.cols("c", "x") >> fp.Hash(32)])
    frame = pd.DataFrame({"x": [1.0, np.inf, 1e300, 2.0], "c": ["a", "b", "c", "d"]})
    out = pipeline.fit_transform(frame, backend=backend)
    np.testing.assert_array_equal(out.row_ids, [0, 3])
    assert set(out.quarantine["reason"]) == {"feature hash:c,x: not finite"}
    assert np.isfinite(out.X.data).all()
