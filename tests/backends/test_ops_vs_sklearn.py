"""Each step against its scikit-learn / numpy peer on the real flights sample.

Steps compute in float64 and cast once to float32, so the output must be bit-identical to
the peer's float64 result cast to float32 (``np.array_equal``), not merely close.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler
from support import to_dense

import fastprep as fp

NUMBERS = fp.Schema(
    {
        "dep_delay": fp.Float(nullable=True),
        "arr_delay": fp.Float(nullable=True),
        "air_time": fp.Float(nullable=True),
        "distance": fp.Float(),
        "hour": fp.Int(),
        "minute": fp.Int(),
    }
)


def column(frame: pd.DataFrame, name: str) -> np.ndarray:
    return frame[name].to_numpy(dtype=np.float64).reshape(-1, 1)


def run(features, frame, schema=NUMBERS):
    # the reference path, which replicates sklearn's order of summation bit for bit; the
    # Numba fit is within one float32 ulp of it (test_conformance), and "auto" may pick
    # either depending on what this process has loaded
    out = fp.Pipeline(schema=schema, features=features).fit_transform(frame, backend="pandas")
    assert out.report.rows_quarantined == 0
    return out


def test_standardize_equals_standard_scaler(flights_sample):
    out = run(
        [
            fp.col("dep_delay") >> fp.FillMissing(0) >> fp.Clip(-60, 600) >> fp.Standardize(),
            fp.col("distance") >> fp.Standardize(),
            fp.col("hour") >> fp.Standardize(),
        ],
        flights_sample,
    )
    assert isinstance(out.X, np.ndarray) and out.X.dtype == np.float32
    dep = np.clip(np.nan_to_num(column(flights_sample, "dep_delay"), nan=0.0), -60, 600)
    expected = np.hstack(
        [
            StandardScaler().fit_transform(dep),
            StandardScaler().fit_transform(column(flights_sample, "distance")),
            StandardScaler().fit_transform(column(flights_sample, "hour")),
        ]
    ).astype(np.float32)
    assert np.array_equal(out.X, expected)


def test_standardize_statistics_are_reused_on_other_data(flights_sample):
    half = len(flights_sample) // 2
    first, second = flights_sample.iloc[:half], flights_sample.iloc[half:]
    pipeline = fp.Pipeline(
        schema=NUMBERS,
        features=[
            fp.col("dep_delay") >> fp.FillMissing("median") >> fp.Standardize(),
            fp.col("distance") >> fp.Log1p() >> fp.Standardize(),
            fp.col("air_time") >> fp.FillMissing("mean") >> fp.MinMax(),
        ],
    )
    fitted = pipeline.fit(first)
    out = fitted.transform(second)
    assert out.report.rows_in == len(second) == out.X.shape[0]

    imputer = SimpleImputer(strategy="median").fit(column(first, "dep_delay"))
    scaler = StandardScaler().fit(imputer.transform(column(first, "dep_delay")))
    dep = scaler.transform(imputer.transform(column(second, "dep_delay")))
    log_scaler = StandardScaler().fit(np.log1p(column(first, "distance")))
    dist = log_scaler.transform(np.log1p(column(second, "distance")))
    mean_imputer = SimpleImputer(strategy="mean").fit(column(first, "air_time"))
    minmax = MinMaxScaler().fit(mean_imputer.transform(column(first, "air_time")))
    air = minmax.transform(mean_imputer.transform(column(second, "air_time")))
    expected = np.hstack([dep, dist, air]).astype(np.float32)
    assert np.array_equal(out.X, expected)
    # the statistics really are the first half's: refitting on the second half differs
    refit = pipeline.fit(second).transform(second)
    assert not np.array_equal(refit.X, out.X)


@pytest.mark.parametrize("value", [0.1, 3.3, 1e10 + 0.1, -7.0, 0.0])
def test_standardize_constant_column_has_scale_one(value):
    """The fitted mean is the exact sum rounded once: copies of ``value`` have mean
    ``value`` and give exactly 0, where sklearn's float64 sum of 0.1's is off by an ulp
    and gives -1.4e-17 (float32 keeps it): equal to sklearn within that rounding."""
    frame = pd.DataFrame({"c": np.full(1001, value)})
    out = run([fp.col("c") >> fp.Standardize()], frame, fp.Schema({"c": fp.Float()}))
    expected = StandardScaler().fit_transform(column(frame, "c")).astype(np.float32)
    assert not out.X.any()
    assert np.allclose(out.X, expected, rtol=0, atol=abs(value) * 1e-15)
    assert np.all(np.abs(out.X) <= abs(value) * 1e-6 + 1e-12)


def test_standardize_without_mean_or_std(flights_sample):
    out = run(
        [
            fp.col("distance") >> fp.Standardize(with_mean=False),
            fp.col("hour") >> fp.Standardize(with_std=False),
        ],
        flights_sample,
    )
    expected = np.hstack(
        [
            StandardScaler(with_mean=False).fit_transform(column(flights_sample, "distance")),
            StandardScaler(with_std=False).fit_transform(column(flights_sample, "hour")),
        ]
    ).astype(np.float32)
    assert np.array_equal(out.X, expected)


@pytest.mark.parametrize("feature_range", [(0.0, 1.0), (-1.0, 2.0)])
def test_minmax_equals_minmax_scaler(flights_sample, feature_range):
    out = run(
        [
            fp.expr("dep_hour = hour + minute / 60") >> fp.MinMax(feature_range=feature_range),
            fp.col("distance") >> fp.MinMax(feature_range=feature_range),
        ],
        flights_sample,
    )
    dep_hour = column(flights_sample, "hour") + column(flights_sample, "minute") / 60
    expected = np.hstack(
        [
            MinMaxScaler(feature_range=feature_range).fit_transform(dep_hour),
            MinMaxScaler(feature_range=feature_range).fit_transform(
                column(flights_sample, "distance")
            ),
        ]
    ).astype(np.float32)
    assert np.array_equal(out.X, expected)


def test_minmax_on_other_data_and_constant_column(flights_sample):
    half = len(flights_sample) // 2
    first, second = flights_sample.iloc[:half], flights_sample.iloc[half:]
    fitted = fp.Pipeline(NUMBERS, [fp.col("distance") >> fp.MinMax()]).fit(first)
    out = fitted.transform(second)
    scaler = MinMaxScaler().fit(column(first, "distance"))
    assert np.array_equal(out.X, scaler.transform(column(second, "distance")).astype(np.float32))

    frame = pd.DataFrame({"c": np.full(10, 4.5)})
    out = run([fp.col("c") >> fp.MinMax()], frame, fp.Schema({"c": fp.Float()}))
    expected = MinMaxScaler().fit_transform(column(frame, "c")).astype(np.float32)
    assert np.array_equal(out.X, expected)


@pytest.mark.parametrize("strategy", ["mean", "median"])
def test_fill_missing_equals_simple_imputer(flights_sample, strategy):
    out = run(
        [fp.cols("dep_delay", "arr_delay", "air_time") >> fp.FillMissing(strategy)],
        flights_sample,
    )
    raw = flights_sample[["dep_delay", "arr_delay", "air_time"]].to_numpy(dtype=np.float64)
    assert np.isnan(raw).any(axis=0).all()  # every column really has missing values
    imputer = SimpleImputer(strategy=strategy).fit(raw)
    assert np.array_equal(out.X, imputer.transform(raw).astype(np.float32))


def test_fill_missing_constant_clip_log1p_equal_numpy(flights_sample):
    out = run(
        [
            fp.col("dep_delay") >> fp.FillMissing(-1.5),
            fp.col("arr_delay") >> fp.FillMissing(0) >> fp.Clip(-30, 120),
            fp.col("air_time") >> fp.FillMissing(0) >> fp.Clip(lower=60),
            fp.col("distance") >> fp.Clip(upper=1000) >> fp.Log1p(),
            fp.col("hour") >> fp.Log1p(),
        ],
        flights_sample,
    )
    dep = column(flights_sample, "dep_delay")
    arr = column(flights_sample, "arr_delay")
    air = column(flights_sample, "air_time")
    expected = np.hstack(
        [
            np.where(np.isnan(dep), -1.5, dep),
            np.clip(np.where(np.isnan(arr), 0, arr), -30, 120),
            np.maximum(np.where(np.isnan(air), 0, air), 60),
            np.log1p(np.minimum(column(flights_sample, "distance"), 1000)),
            np.log1p(column(flights_sample, "hour")),
        ]
    ).astype(np.float32)
    assert np.array_equal(out.X, expected)


def test_clip_and_log1p_keep_missing_missing():
    frame = pd.DataFrame({"x": [np.nan, -5.0, 2.0, 1e9]})
    schema = fp.Schema({"x": fp.Float(nullable=True)})
    out = fp.Pipeline(schema, [fp.col("x") >> fp.Clip(0, 10) >> fp.Log1p()]).fit_transform(frame)
    # row 0 stays missing through both steps, so it is quarantined, never emitted as a number
    assert out.row_ids.tolist() == [1, 2, 3]
    assert np.array_equal(out.X[:, 0], np.log1p(np.array([0.0, 2.0, 10.0])).astype(np.float32))
    assert out.quarantine["row_id"].tolist() == [0]


def test_log1p_below_minus_one_is_repaired_not_emitted():
    frame = pd.DataFrame({"x": [-2.0, -1.0, 0.0, 3.0, -0.5]})
    schema = fp.Schema({"x": fp.Float()})
    out = fp.Pipeline(schema, [fp.col("x") >> fp.Log1p() >> fp.FillMissing(7)]).fit_transform(frame)
    expected = np.array([7.0, 7.0, 0.0, np.log1p(3.0), np.log1p(-0.5)]).astype(np.float32)
    assert np.array_equal(out.X[:, 0], expected)
    repairs = {(r["output"], r["rule"]): r["count"] for r in out.report.repairs}
    assert repairs == {("x", "log1p_domain"): 2}
    assert np.isfinite(out.X).all()


# --------------------------------------------------------------------------- OneHot


def onehot_frame(flights_sample: pd.DataFrame) -> pd.DataFrame:
    frame = flights_sample[["origin", "carrier", "dest"]].astype(object).copy()
    frame.loc[frame.index[::97], "carrier"] = None  # missing values seen at fit
    return frame


TEXT = fp.Schema(
    {
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
        "carrier": fp.Category(nullable=True),
        "dest": fp.String(),
    }
)


def sklearn_onehot(fit_frame, frame, columns):
    def prepare(f):
        return f[columns].astype(object).where(f[columns].notna(), np.nan).to_numpy()

    encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False)
    encoder.fit(prepare(fit_frame))
    return encoder, encoder.transform(prepare(frame))


def test_onehot_equals_onehot_encoder(flights_sample):
    frame = onehot_frame(flights_sample)
    out = fp.Pipeline(TEXT, [fp.cols("origin", "carrier") >> fp.OneHot()]).fit_transform(frame)
    encoder, expected = sklearn_onehot(frame, frame, ["origin", "carrier"])
    assert isinstance(out.X, np.ndarray) and out.X.flags.c_contiguous
    assert np.array_equal(out.X, expected.astype(np.float32))
    origin = [f"origin={c}" for c in encoder.categories_[0]]
    carriers = [c for c in encoder.categories_[1] if isinstance(c, str)]
    assert origin == ["origin=EWR", "origin=JFK", "origin=LGA"]
    assert out.feature_names[:3] == origin
    assert out.feature_names[3:-1] == [f"carrier={c}" for c in sorted(carriers)]
    # the missing value seen at fit is its own, last category (sklearn puts nan last)
    assert out.feature_names[-1] == "carrier=<missing>"
    missing_rows = frame["carrier"].isna().to_numpy()
    assert np.array_equal(out.X[:, -1], missing_rows.astype(np.float32))


def test_onehot_unseen_values_are_all_zeros(flights_sample):
    frame = flights_sample[["origin", "carrier", "dest"]].copy()
    fit_rows = ~frame["carrier"].isin(["UA", "HA"]) & (frame["origin"] != "LGA")
    fitted = fp.Pipeline(TEXT, [fp.cols("carrier", "origin") >> fp.OneHot()]).fit(frame[fit_rows])
    transform = frame.astype(object).copy()
    transform.loc[transform.index[::50], "carrier"] = None  # missing never seen at fit
    out = fitted.transform(transform)
    encoder, expected = sklearn_onehot(frame[fit_rows], transform, ["carrier", "origin"])
    assert np.array_equal(out.X, expected.astype(np.float32))
    unseen = transform["carrier"].isin(["UA", "HA"]).to_numpy() | transform["carrier"].isna()
    carrier_width = len(encoder.categories_[0])
    assert not out.X[unseen.to_numpy(), :carrier_width].any()
    assert "carrier=UA" not in out.feature_names and "origin=LGA" not in out.feature_names
    assert out.feature_names[carrier_width:] == ["origin=EWR", "origin=JFK"]


def test_onehot_many_categories_is_sparse_and_equal(flights_sample):
    frame = flights_sample[["origin", "carrier", "dest"]]
    out = fp.Pipeline(TEXT, [fp.col("dest") >> fp.OneHot()]).fit_transform(frame)
    _, expected = sklearn_onehot(frame, frame, ["dest"])
    assert expected.shape[1] > 64
    assert sp.issparse(out.X) and out.X.format == "csr" and out.X.dtype == np.float32
    assert np.array_equal(out.X.toarray(), expected.astype(np.float32))
    dense = fp.Pipeline(TEXT, [fp.col("dest") >> fp.OneHot(sparse=False)]).fit_transform(frame)
    assert isinstance(dense.X, np.ndarray)
    assert np.array_equal(dense.X, expected.astype(np.float32))


def test_onehot_numeric_column(flights_sample):
    frame = flights_sample[["hour"]].astype(np.float64)
    frame.loc[frame.index[::40], "hour"] = np.nan
    schema = fp.Schema({"hour": fp.Float(nullable=True)})
    out = fp.Pipeline(schema, [fp.col("hour") >> fp.OneHot()]).fit_transform(frame)
    encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(frame.to_numpy())
    assert np.array_equal(out.X, encoder.transform(frame.to_numpy()).astype(np.float32))
    present = [c for c in encoder.categories_[0] if not np.isnan(c)]
    assert out.feature_names[:-1] == [f"hour={int(c)}" for c in present]


# --------------------------------------------------------------------------- Hash


def sklearn_hash(frame: pd.DataFrame, columns, n_features: int) -> sp.csr_matrix:
    rows = []
    for record in frame[columns].to_dict("records"):
        row = {}
        for name, value in record.items():
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            row[name] = value
        rows.append(row)
    hasher = FeatureHasher(
        n_features=n_features, input_type="dict", alternate_sign=True, dtype=np.float32
    )
    return hasher.transform(rows)


def assert_csr_bits_equal(a, b) -> None:
    a, b = sp.csr_matrix(a), sp.csr_matrix(b)
    for m in (a, b):
        m.eliminate_zeros()
        m.sort_indices()
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    assert np.array_equal(a.indptr, b.indptr)
    assert np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.data, b.data)


def test_hash_equals_feature_hasher_on_text(flights_sample):
    frame = flights_sample[["tailnum", "dest"]]
    assert frame["tailnum"].isna().any()
    schema = fp.Schema({"tailnum": fp.String(nullable=True), "dest": fp.String()})
    out = fp.Pipeline(
        schema, [fp.cols("tailnum", "dest") >> fp.Hash(n_features=2**18)]
    ).fit_transform(frame)
    assert sp.issparse(out.X) and out.X.format == "csr" and out.X.dtype == np.float32
    assert out.X.shape == (len(frame), 2**18)
    assert_csr_bits_equal(out.X, sklearn_hash(frame, ["tailnum", "dest"], 2**18))
    # rows without a tailnum hash only their dest
    nnz = np.diff(out.X.indptr)
    assert (nnz[frame["tailnum"].isna().to_numpy()] == 1).all()
    assert len(out.feature_names) == 2**18


def test_hash_with_a_numeric_column(flights_sample):
    frame = flights_sample[["dest", "dep_delay", "origin"]]
    schema = fp.Schema(
        {"dest": fp.String(), "dep_delay": fp.Float(nullable=True), "origin": fp.Category()}
    )
    columns = ["dest", "dep_delay", "origin"]
    out = fp.Pipeline(schema, [fp.cols(*columns) >> fp.Hash(n_features=2**10)]).fit_transform(frame)
    assert_csr_bits_equal(out.X, sklearn_hash(frame, columns, 2**10))


def test_hash_without_alternate_sign(flights_sample):
    frame = flights_sample[["tailnum", "dest"]]
    schema = fp.Schema({"tailnum": fp.String(nullable=True), "dest": fp.String()})
    out = fp.Pipeline(
        schema, [fp.cols("tailnum", "dest") >> fp.Hash(n_features=64, alternate_sign=False)]
    ).fit_transform(frame)
    hasher = FeatureHasher(n_features=64, input_type="dict", alternate_sign=False, dtype=np.float32)
    rows = [{k: v for k, v in r.items() if isinstance(v, str)} for r in frame.to_dict("records")]
    assert_csr_bits_equal(out.X, hasher.transform(rows))
    assert (to_dense(out.X) >= 0).all()
