"""``fastprep.sklearn.FastprepTransformer`` inside scikit-learn: params, clone, search,
cross-validation, set_output, feature names, quarantine as an error, estimator checks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import polars as pl
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks
from support import REPO, assert_same_matrix

import fastprep as fp
from fastprep.cli import load_pipeline_file
from fastprep.integrations.sklearn import EXPECTED_FAILED_CHECKS, FastprepTransformer

FLIGHTS = load_pipeline_file(REPO / "pipelines" / "flights.py")
NUMERIC = load_pipeline_file(REPO / "pipelines" / "flights_numeric.py")
#: the flights Hash is 2**18 wide; a logistic regression over that many columns is slow
SMALL_HASH = {"features__5__0__n_features": 2**10}


@pytest.fixture
def flights_xy(flights_sample: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """3,000 rows with a known arrival delay: X without the target column, y as sklearn's."""
    rows = flights_sample[flights_sample["arr_delay"].notna()].head(3000)
    return rows.drop(columns=["arr_delay"]), (rows["arr_delay"] > 15).to_numpy()


def test_import_fastprep_does_not_import_the_integration():
    code = (
        "import sys, fastprep\n"
        "assert 'fastprep.sklearn' not in sys.modules\n"
        "assert 'fastprep.integrations.sklearn' not in sys.modules\n"
        "import fastprep.sklearn\n"
        "import fastprep.integrations.sklearn as m\n"
        "assert m.BaseEstimator.__module__ == 'sklearn.base', m.BaseEstimator.__module__\n"
        "assert sys.modules['sklearn'].__file__.endswith('sklearn/__init__.py')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_params_name_every_step_argument_and_round_trip():
    t = FastprepTransformer(FLIGHTS)
    params = t.get_params()
    assert params["pipeline"] is FLIGHTS
    assert params["features__5__0__n_features"] == 2**18
    assert params["features__0__1__lower"] == -60.0
    assert params["features__4__0__min_frequency"] == 1
    assert "features__1__0__value" not in params  # Log1p has no argument
    assert set(t.get_params(deep=False)) == {"pipeline", "backend", "out_dtype"}

    t.set_params(features__5__0__n_features=2**10, features__0__1__upper=300.0)
    assert FLIGHTS.plan.features[5].steps[0].n_features == 2**18  # never changed in place
    assert t.pipeline is not FLIGHTS
    assert t.get_params()["features__5__0__n_features"] == 2**10
    assert t.pipeline.plan.features[0].steps[1] == fp.Clip(-60, 300)
    assert t.pipeline.plan.target == FLIGHTS.plan.target
    assert t.pipeline.name == FLIGHTS.name

    again = FastprepTransformer(FLIGHTS).set_params(**t.get_params())
    assert again.get_params() == t.get_params()
    assert again.pipeline is t.pipeline  # nothing changed: no rebuild


def test_set_params_rejects_unknown_keys_and_bad_values():
    t = FastprepTransformer(FLIGHTS)
    with pytest.raises(ValueError, match=r"no step 3 in feature 5.*features__5__0__n_features"):
        t.set_params(features__5__3__n_features=8)
    with pytest.raises(ValueError, match="Hash has no argument 'width'"):
        t.set_params(features__5__0__width=8)
    with pytest.raises(fp.PipelineDefinitionError, match="n_features"):
        t.set_params(features__5__0__n_features=0)
    assert t.pipeline is FLIGHTS
    t.set_params(features__5__0__n_features=np.int64(16))  # grids are often NumPy values
    assert t.pipeline.plan.features[5].steps[0] == fp.Hash(n_features=16)


def test_clone_keeps_the_params_and_not_the_fit(flights_xy):
    X, y = flights_xy
    t = FastprepTransformer(NUMERIC, out_dtype="float64").fit(X, y)
    copy = clone(t)
    assert copy.get_params().keys() == t.get_params().keys()
    assert copy.pipeline.plan == NUMERIC.plan
    assert copy.out_dtype == "float64"
    assert not hasattr(copy, "fitted_")
    assert_same_matrix(copy.fit(X).transform(X), t.transform(X))


def test_fit_without_the_target_and_names_equal_fastprep(flights_xy, flights_sample):
    X, _ = flights_xy
    rows = flights_sample.loc[X.index]  # the same rows, with the target column
    out = FLIGHTS.fit_transform(rows)
    assert out.report.rows_quarantined == 0
    t = FastprepTransformer(FLIGHTS)
    Z = t.fit_transform(X)
    assert list(t.get_feature_names_out()) == list(out.feature_names)
    assert_same_matrix(Z, out.X)
    assert_same_matrix(t.transform(X), out.X)
    assert t.n_features_in_ == X.shape[1]
    assert list(t.feature_names_in_) == list(X.columns)
    assert list(t.get_feature_names_out(list(X.columns))) == list(out.feature_names)
    with pytest.raises(ValueError, match="differ from the columns seen at fit"):
        t.get_feature_names_out(["a", "b"])


def test_backend_and_out_dtype_are_passed_on(flights_xy):
    X, _ = flights_xy
    auto = FastprepTransformer(NUMERIC).fit_transform(X)
    reference = FastprepTransformer(NUMERIC, backend="pandas")
    assert_same_matrix(reference.fit_transform(X), auto)  # every backend gives the same bits
    assert reference.fitted_.fit_report.backend == "pandas"
    wide = FastprepTransformer(NUMERIC, out_dtype="float64").fit_transform(X)
    assert wide.dtype == np.float64
    assert np.allclose(wide, auto, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("out_dtype", ["bfloat16", "uint8", "int8"])
def test_an_out_dtype_of_codes_is_refused(flights_xy, out_dtype):
    """bfloat16 is stored as uint16 bit patterns and int8/uint8 as quantized codes: an
    estimator after the transformer would read them as numbers. float16 is a number."""
    X, _ = flights_xy
    for call in ("fit", "fit_transform"):
        with pytest.raises(fp.PipelineDefinitionError, match=f"out_dtype={out_dtype!r}.*float16"):
            getattr(FastprepTransformer(NUMERIC, out_dtype=out_dtype), call)(X)
    half = FastprepTransformer(NUMERIC, out_dtype="float16").fit_transform(X)
    assert half.dtype == np.float16
    expected = FastprepTransformer(NUMERIC).fit_transform(X).astype(np.float16)
    assert np.array_equal(half, expected)


def test_rows_whose_only_fault_is_the_target_are_kept(flights_sample):
    X = flights_sample.head(2000)  # arr_delay present, missing on some rows
    assert X["arr_delay"].isna().any()
    Z = FastprepTransformer(FLIGHTS).fit_transform(X)
    assert Z.shape[0] == len(X)


def test_cross_val_score_on_the_sample(flights_xy):
    X, y = flights_xy
    model = make_pipeline(
        FastprepTransformer(FLIGHTS).set_params(**SMALL_HASH), LogisticRegression(max_iter=1000)
    )
    scores = cross_val_score(model, X, y, cv=3)
    majority = max(y.mean(), 1 - y.mean())
    assert len(scores) == 3
    assert scores.min() > majority  # departure delay predicts a late arrival


def test_grid_search_over_a_step_argument(flights_xy):
    X, y = flights_xy
    X, y = X.head(1500), y[:1500]
    model = make_pipeline(FastprepTransformer(FLIGHTS), LogisticRegression(max_iter=1000))
    grid = {"fastpreptransformer__features__5__0__n_features": [2**4, 2**8]}
    search = GridSearchCV(model, grid, cv=2).fit(X, y)
    assert len(search.cv_results_["params"]) == 2
    best = search.best_params_["fastpreptransformer__features__5__0__n_features"]
    names = search.best_estimator_[0].get_feature_names_out()
    assert sum(n.startswith("hash:") for n in names) == best
    assert FLIGHTS.plan.features[5].steps[0].n_features == 2**18


@pytest.mark.parametrize("container", ["pandas", "polars"])
def test_set_output_dense(flights_xy, container):
    X, _ = flights_xy
    plain = FastprepTransformer(NUMERIC).fit(X)
    t = FastprepTransformer(NUMERIC).set_output(transform=container)
    frame = t.fit_transform(X)
    names = list(t.get_feature_names_out())
    assert names == ["dep_delay", "distance", "speed", "dep_hour"]
    assert list(frame.columns) == names
    if container == "pandas":
        assert isinstance(frame, pd.DataFrame)
        assert frame.index.equals(X.index)
        values = frame.to_numpy()
    else:
        assert isinstance(frame, pl.DataFrame)
        values = frame.to_numpy()
    assert np.array_equal(values, plain.transform(X))
    assert np.array_equal(np.asarray(t.transform(X)), values)


def test_set_output_refuses_csr_naming_the_sparse_block(flights_xy):
    X, _ = flights_xy
    t = FastprepTransformer(FLIGHTS).set_params(**SMALL_HASH).set_output(transform="pandas")
    with pytest.raises(ValueError, match=r"CSR from: feature 5 \[tailnum, dest\] >> Hash"):
        t.fit_transform(X)
    default = t.set_output(transform="default").fit_transform(X)
    assert sp.issparse(default) and default.shape[0] == len(X)


def test_polars_input_gives_the_pandas_result(flights_xy):
    X, _ = flights_xy
    t = FastprepTransformer(NUMERIC)
    expected = t.fit_transform(X)
    assert np.array_equal(FastprepTransformer(NUMERIC).fit_transform(pl.from_pandas(X)), expected)


def test_a_row_fastprep_would_quarantine_raises(flights_xy):
    X, _ = flights_xy
    t = FastprepTransformer(FLIGHTS).set_params(**SMALL_HASH).fit(X)
    bad = X.copy()
    bad.iloc[7, bad.columns.get_loc("dep_delay")] = 5000.0  # schema: max=2000
    bad.iloc[11, bad.columns.get_loc("distance")] = np.nan  # not nullable
    with pytest.raises(fp.DataValidationError) as info:
        t.transform(bad)
    message = str(info.value)
    assert "2 row(s) of X" in message
    assert "column 'dep_delay': 1 value(s) broke rule 'above_max'" in message
    assert "first rows 7 " in message
    assert "column 'distance': 1 value(s) broke rule 'null'" in message
    with pytest.raises(fp.DataValidationError, match="at fit"):
        FastprepTransformer(FLIGHTS).fit(bad)
    with pytest.raises(fp.DataValidationError, match="at fit"):
        FastprepTransformer(FLIGHTS).fit_transform(bad)


def test_repair_policy_repairs_instead_of_raising(flights_xy):
    X, _ = flights_xy
    schema = fp.Schema(
        {"dep_delay": fp.Float(nullable=True, min=-120, max=2000, on_invalid="repair")}
    )
    pipeline = fp.Pipeline(schema, [fp.col("dep_delay") >> fp.FillMissing(0)])
    bad = X.copy()
    bad.iloc[7, bad.columns.get_loc("dep_delay")] = 5000.0
    Z = FastprepTransformer(pipeline).fit_transform(bad)
    assert Z.shape == (len(X), 1)
    assert Z[7, 0] == 2000.0


def test_unnamed_columns_are_x0_x1(flights_xy):
    schema = fp.Schema({"x0": fp.Float(), "x1": fp.Float()})
    pipeline = fp.Pipeline(schema, [fp.cols("x0", "x1") >> fp.Standardize()])
    X = np.random.default_rng(0).normal(size=(50, 3))
    t = FastprepTransformer(pipeline)
    Z = t.fit_transform(X)
    assert list(t.get_feature_names_out()) == ["x0", "x1"]
    assert np.allclose(Z, (X[:, :2] - X[:, :2].mean(0)) / X[:, :2].std(0), atol=1e-5)
    with pytest.raises(ValueError, match=r"1 feature\(s\).*missing: x1"):
        FastprepTransformer(pipeline).fit(X[:, :1])


def _generic(*columns: str, encoder: fp.OneHot | fp.Hash | None = None, **options):
    """A pipeline over sklearn's names for unnamed columns, which the checks' arrays get:
    numeric steps, or one encoder (a dense OneHot, a CSR Hash) over ``x0``."""
    schema = fp.Schema({c: fp.Float(nullable=True) for c in columns})
    if encoder is not None:
        features = [fp.col(columns[0]) >> encoder]
    else:
        features = [fp.cols(*columns) >> fp.FillMissing("median") >> fp.Standardize()]
    if len(columns) > 1:
        expression = f"s = {columns[0]} + 2 * {columns[1]}"
        features.append(fp.expr(expression) >> fp.FillMissing(0) >> fp.MinMax())
    return FastprepTransformer(fp.Pipeline(schema, features), **options)


@parametrize_with_checks(
    [
        _generic("x0"),
        _generic("x0", "x1", out_dtype="float64"),
        _generic("x0", encoder=fp.OneHot(max_categories=5, sparse=False)),
        _generic("x0", encoder=fp.Hash(n_features=16)),  # CSR output
    ],
    expected_failed_checks=lambda estimator: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


WEATHER = fp.Pipeline(
    fp.Schema(
        {
            "origin": fp.Category(),
            "temp": fp.Float(nullable=True),
            "wind_gust": fp.Float(nullable=True),  # 80% missing
            "time_hour": fp.Datetime(tz="America/New_York"),
        }
    ),
    [
        fp.cols("temp", "wind_gust") >> fp.FillMissing("median") >> fp.Standardize(),
        fp.col("origin") >> fp.OneHot(),
        fp.expr("local_hour = hour(time_hour)") >> fp.MinMax(),
    ],
)


def test_every_source_kind_is_an_x(tmp_path, monkeypatch):
    """X may be any table fastprep takes as a source — Polars DataFrame or LazyFrame,
    pyarrow Table or Dataset (filtered too) — with the pandas result; Polars is not
    converted through pandas."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    weather = pd.read_parquet(REPO / "data_samples" / "weather.parquet").iloc[::9]
    weather = weather.reset_index(drop=True)  # 2,902 rows of the three airports
    expected = FastprepTransformer(WEATHER).fit_transform(weather)
    table = pa.Table.from_pandas(weather, preserve_index=False)
    pq.write_table(table, tmp_path / "w.parquet", row_group_size=1000)
    dataset = ds.dataset(tmp_path / "w.parquet")
    frame = pl.from_pandas(weather)
    monkeypatch.setattr(pl.DataFrame, "to_pandas", None)  # a detour through pandas fails
    kinds = {
        "polars": frame,
        "lazy": frame.lazy(),
        "arrow": table,
        "dataset": dataset,
        "filtered dataset": dataset.filter(ds.field("temp") > -1000),  # keeps every row
    }
    for kind, X in kinds.items():
        t = FastprepTransformer(WEATHER)
        assert np.array_equal(t.fit_transform(X), expected), kind
        assert list(t.feature_names_in_) == list(weather.columns), kind
        assert np.array_equal(t.transform(X), expected), kind
        assert np.array_equal(FastprepTransformer(WEATHER).fit(X).transform(X), expected), kind
    with pytest.raises(ValueError, match="0 sample"):
        FastprepTransformer(WEATHER).fit(frame.lazy().head(0))
