"""The Python API end to end on real data: X, y, names, layout, report, output files."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler
from support import REPO, assert_same_matrix

import fastprep as fp
from fastprep.storage.output_format import LOCK_FILES

DENSE_SCHEMA = fp.Schema(
    {
        "dep_delay": fp.Float(nullable=True),
        "arr_delay": fp.Float(nullable=True),
        "distance": fp.Float(),
        "hour": fp.Int(),
        "minute": fp.Int(),
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
        "carrier": fp.Category(),
    }
)


def reference_flights(frame: pd.DataFrame, fit_frame: pd.DataFrame | None = None):
    """The flights pipeline rebuilt from numpy + scikit-learn: (X csr float32, y, names)."""
    fit_frame = frame if fit_frame is None else fit_frame
    frame = frame[frame["arr_delay"].notna()]
    fit_frame = fit_frame[fit_frame["arr_delay"].notna()]

    def num(f, name):
        return f[name].to_numpy(dtype=np.float64).reshape(-1, 1)

    def dep(f):
        return np.clip(np.nan_to_num(num(f, "dep_delay"), nan=0.0), -60, 600)

    def speed(f):
        with np.errstate(divide="ignore", invalid="ignore"):
            s = num(f, "distance") / num(f, "air_time") * 60
        return np.where(np.isfinite(s), s, np.nan)

    def dep_hour(f):
        return num(f, "hour") + num(f, "minute") / 60

    median = np.nanmedian(speed(fit_frame))
    parts = [
        StandardScaler().fit(dep(fit_frame)).transform(dep(frame)),
        StandardScaler()
        .fit(np.log1p(num(fit_frame, "distance")))
        .transform(np.log1p(num(frame, "distance"))),
        StandardScaler()
        .fit(np.nan_to_num(speed(fit_frame), nan=median))
        .transform(np.nan_to_num(speed(frame), nan=median)),
        MinMaxScaler().fit(dep_hour(fit_frame)).transform(dep_hour(frame)),
    ]
    encoder = OneHotEncoder(handle_unknown="ignore").fit(fit_frame[["origin", "carrier"]])
    onehot = encoder.transform(frame[["origin", "carrier"]])
    rows = [
        {k: v for k, v in r.items() if isinstance(v, str)}
        for r in frame[["tailnum", "dest"]].to_dict("records")
    ]
    hashed = FeatureHasher(
        n_features=2**18, input_type="dict", alternate_sign=True, dtype=np.float32
    ).transform(rows)
    X = sp.hstack(
        [sp.csr_matrix(np.hstack(parts).astype(np.float32)), onehot.astype(np.float32), hashed],
        format="csr",
    )
    X.eliminate_zeros()
    X.sort_indices()
    y = (frame["arr_delay"].to_numpy() > 15).astype(np.float32)
    names = (
        ["dep_delay", "distance", "speed", "dep_hour"]
        + [f"origin={c}" for c in encoder.categories_[0]]
        + [f"carrier={c}" for c in encoder.categories_[1]]
        + [f"hash:tailnum,dest[{i}]" for i in range(2**18)]
    )
    return X, y, names, frame.index.to_numpy()


def canonical(X):
    X = sp.csr_matrix(X, copy=True)
    X.eliminate_zeros()
    X.sort_indices()
    return X


def test_flights_pipeline_equals_the_sklearn_reference(flights_pipeline, flights_sample):
    out = flights_pipeline.fit_transform(flights_sample)
    X, y, names, rows = reference_flights(flights_sample)
    assert sp.issparse(out.X) and out.X.format == "csr" and out.X.dtype == np.float32
    assert_same_matrix(canonical(out.X), X)
    assert np.array_equal(out.y, y)
    assert out.feature_names == names
    assert np.array_equal(out.row_ids, rows)


def test_fit_on_one_half_transform_the_other(flights_pipeline, flights_sample):
    half = len(flights_sample) // 2
    first = flights_sample.iloc[:half]
    second = flights_sample.iloc[half:].reset_index(drop=True)
    out = flights_pipeline.fit(first).transform(second)
    X, y, _, rows = reference_flights(second, fit_frame=first)
    assert_same_matrix(canonical(out.X), X)
    assert np.array_equal(out.y, y)
    assert np.array_equal(out.row_ids, rows)


def test_fit_then_transform_equals_fit_transform(flights_pipeline, flights_sample):
    a = flights_pipeline.fit_transform(flights_sample)
    b = flights_pipeline.fit(flights_sample).transform(flights_sample)
    assert_same_matrix(a.X, b.X)
    assert np.array_equal(a.y, b.y)
    assert a.feature_names == b.feature_names
    assert np.array_equal(a.row_ids, b.row_ids)


def test_output_layout_sparse(flights_pipeline, flights_sample):
    out = flights_pipeline.fit_transform(flights_sample)
    assert sp.isspmatrix_csr(out.X) or isinstance(out.X, sp.csr_array)
    assert out.X.dtype == np.float32
    assert len(out.feature_names) == out.X.shape[1]
    assert len(set(out.feature_names)) == len(out.feature_names)
    assert out.y.ndim == 1 and out.y.dtype == np.float32 and len(out.y) == out.X.shape[0]
    assert out.row_ids.ndim == 1 and len(out.row_ids) == out.X.shape[0]
    assert np.isfinite(out.X.data).all()


def dense_pipeline():
    return fp.Pipeline(
        schema=DENSE_SCHEMA,
        features=[
            fp.cols("dep_delay", "distance") >> fp.FillMissing(0) >> fp.Standardize(),
            fp.cols("origin", "carrier") >> fp.OneHot(),
            fp.expr("dep_hour = hour + minute / 60") >> fp.MinMax(),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )


def test_output_layout_dense(flights_sample):
    out = dense_pipeline().fit_transform(flights_sample)
    assert isinstance(out.X, np.ndarray)
    assert out.X.dtype == np.float32
    assert out.X.flags.c_contiguous
    assert out.X.ndim == 2 and out.X.shape[1] == len(out.feature_names)
    assert out.y.ndim == 1 and out.y.shape == (out.X.shape[0],)
    carriers = sorted(flights_sample["carrier"].unique())
    assert out.feature_names == (
        ["dep_delay", "distance", "origin=EWR", "origin=JFK", "origin=LGA"]
        + [f"carrier={c}" for c in carriers]
        + ["dep_hour"]
    )
    # each row has exactly one origin and one carrier
    onehot = out.X[:, 2 : 5 + len(carriers)]
    assert np.array_equal(onehot.sum(axis=1), np.full(out.X.shape[0], 2.0, dtype=np.float32))


def test_out_dtype_float64(flights_sample, flights_pipeline):
    out32 = dense_pipeline().fit_transform(flights_sample)
    out64 = dense_pipeline().fit_transform(flights_sample, out_dtype="float64")
    assert out64.X.dtype == np.float64 and out64.X.flags.c_contiguous
    assert np.array_equal(out64.X.astype(np.float32), out32.X)
    fitted = flights_pipeline.fit(flights_sample)
    sparse64 = fitted.transform(flights_sample, out_dtype="float64")
    assert sp.issparse(sparse64.X) and sparse64.X.dtype == np.float64


def test_column_order_follows_declaration_then_group_order(flights_sample):
    pipeline = fp.Pipeline(
        schema=DENSE_SCHEMA,
        features=[
            fp.col("hour"),
            fp.cols("carrier", "origin") >> fp.OneHot(),
            fp.cols("distance", "dep_delay") >> fp.FillMissing(0),
            fp.expr("a = minute * 2"),
        ],
    )
    out = pipeline.fit_transform(flights_sample)
    names = out.feature_names
    carriers = sorted(flights_sample["carrier"].unique())
    assert names == (
        ["hour"]
        + [f"carrier={c}" for c in carriers]
        + ["origin=EWR", "origin=JFK", "origin=LGA"]
        + ["distance", "dep_delay", "a"]
    )
    X = out.X
    assert np.array_equal(X[:, 0], flights_sample["hour"].to_numpy(dtype=np.float32))
    tail = len(names) - 3
    assert np.array_equal(X[:, tail], flights_sample["distance"].to_numpy(dtype=np.float32))
    dep = flights_sample["dep_delay"].fillna(0).to_numpy(dtype=np.float32)
    assert np.array_equal(X[:, tail + 1], dep)
    assert np.array_equal(X[:, tail + 2], (flights_sample["minute"] * 2).to_numpy(np.float32))
    jfk = names.index("origin=JFK")
    assert np.array_equal(X[:, jfk], (flights_sample["origin"] == "JFK").to_numpy(np.float32))


def test_pipeline_without_target_has_no_y(flights_sample):
    pipeline = fp.Pipeline(DENSE_SCHEMA, [fp.col("distance")])
    out = pipeline.fit_transform(flights_sample)
    assert out.y is None
    assert out.report.rows_out == len(flights_sample)


def test_string_target_column(flights_sample):
    pipeline = fp.Pipeline(DENSE_SCHEMA, [fp.col("distance")], target="arr_delay")
    out = pipeline.fit_transform(flights_sample)
    arr = flights_sample["arr_delay"].dropna().to_numpy(dtype=np.float32)
    assert np.array_equal(out.y, arr)


def test_report_contents(flights_pipeline, flights_sample):
    out = flights_pipeline.fit_transform(flights_sample)
    report = out.report
    assert (report.rows_in, report.rows_out) == (20_000, out.X.shape[0])
    assert report.rows_quarantined == len(out.quarantine)
    assert {"read", "validate", "fit", "transform", "emit"} <= set(report.stages)
    assert all(v >= 0 for v in report.stages.values())
    as_dict = json.loads(json.dumps(report.to_dict()))
    assert as_dict["rows_in"] == 20_000
    assert as_dict["rows_out"] + as_dict["rows_quarantined"] == 20_000
    assert as_dict["output"]["shape"] == list(out.X.shape)
    assert as_dict["output"]["nnz"] == out.X.nnz
    nulls = [f for f in as_dict["findings"] if (f["column"], f["rule"]) == ("arr_delay", "null")]
    assert len(nulls) == 1 and nulls[0]["count"] == report.rows_quarantined
    summary = report.summary()
    assert "20,000 in" in summary and f"{report.rows_quarantined:,} quarantined" in summary
    assert "arr_delay" in summary
    assert str(report) == summary


def test_summary_of_a_dense_output_claims_no_nnz(dense_pipeline, flights_sample):
    """A dense X's non-zeros are not counted (a pass over the output for nothing): the
    summary leaves the figure out rather than print "nnz 0" for a full matrix."""
    out = dense_pipeline.fit_transform(flights_sample)
    line = next(x for x in out.report.summary().splitlines() if x.startswith("X: "))
    assert line == f"X: {out.X.shape[0]:,} × {out.X.shape[1]:,} dense float32"


def test_output_save(flights_pipeline, flights_sample, tmp_path):
    out = flights_pipeline.fit_transform(flights_sample)
    written = out.save(tmp_path / "out")
    folder = tmp_path / "out"
    files = {os.path.basename(p) for p in written.values()}
    assert {p.name for p in folder.iterdir()} - set(LOCK_FILES) == files
    assert set(written) == {"manifest", "X.data", "X.indices", "X.indptr", "y", "row_ids",
                            "report", "quarantine"}  # fmt: skip
    opened = fp.open_output(folder)
    assert_same_matrix(opened.X, out.X)
    assert np.array_equal(opened.y, out.y)
    assert np.array_equal(opened.row_ids, out.row_ids)
    assert opened.feature_names == out.feature_names
    assert opened.report["rows_in"] == 20_000
    quarantine = opened.quarantine
    assert quarantine["row_id"].tolist() == out.quarantine["row_id"].tolist()
    assert quarantine["reason"].tolist() == out.quarantine["reason"].tolist()

    dense = dense_pipeline().fit_transform(flights_sample)
    dense.save(folder)  # same folder: the CSR files go once the dense output is published
    loaded = fp.open_output(folder).X
    assert loaded.dtype == np.float32 and np.array_equal(loaded, dense.X)
    assert not list(folder.glob("*.X.data.npy"))


def test_broken_quarantine_saves_to_parquet(flights_pipeline, broken_path, tmp_path):
    out = flights_pipeline.fit_transform(broken_path)
    out.save(tmp_path)
    quarantine = fp.open_output(tmp_path).quarantine
    assert quarantine["row_id"].tolist() == out.quarantine["row_id"].tolist()
    assert "about 5" in quarantine["arr_delay"].astype(str).tolist()


def test_transform_of_an_empty_frame(flights_pipeline, flights_sample):
    fitted = flights_pipeline.fit(flights_sample)
    width = len(fitted.transform(flights_sample.head(50)).feature_names)
    assert width == 4 + 3 + flights_sample["carrier"].nunique() + 2**18
    out = fitted.transform(flights_sample.iloc[:0])
    assert out.X.shape == (0, width)
    assert out.y.shape == (0,)
    assert out.report.rows_in == out.report.rows_out == 0
    dense = dense_pipeline().fit(flights_sample).transform(flights_sample.iloc[:0])
    assert isinstance(dense.X, np.ndarray) and dense.X.shape[0] == 0


def test_the_full_flights_table(flights_pipeline, flights_full):
    out = flights_pipeline.fit_transform(flights_full)
    report = out.report
    assert report.rows_in == len(flights_full) == 336_776
    assert report.rows_in == report.rows_out + report.rows_quarantined
    emitted = out.row_ids
    quarantined = out.quarantine["row_id"].to_numpy()
    assert np.array_equal(np.sort(np.concatenate([emitted, quarantined])), np.arange(336_776))
    assert np.all(np.diff(emitted) > 0)
    # the numeric block equals the scikit-learn scalers on the whole table
    kept = flights_full[flights_full["arr_delay"].notna()]
    dep = np.clip(kept["dep_delay"].fillna(0).to_numpy(np.float64), -60, 600).reshape(-1, 1)
    expected = StandardScaler().fit_transform(dep).ravel().astype(np.float32)
    assert np.array_equal(out.X[:, 0].toarray().ravel(), expected)
    dist = np.log1p(kept["distance"].to_numpy(np.float64)).reshape(-1, 1)
    expected = StandardScaler().fit_transform(dist).ravel().astype(np.float32)
    assert np.array_equal(out.X[:, 1].toarray().ravel(), expected)
    assert np.array_equal(out.y, (kept["arr_delay"].to_numpy() > 15).astype(np.float32))


@pytest.mark.slow
def test_the_full_flights_table_equals_the_sklearn_reference(flights_pipeline, flights_full):
    out = flights_pipeline.fit_transform(flights_full)
    X, y, names, rows = reference_flights(flights_full)
    assert_same_matrix(canonical(out.X), X)
    assert np.array_equal(out.y, y)
    assert out.feature_names == names
    assert np.array_equal(out.row_ids, rows)


def test_transform_of_new_data_without_the_target_column(
    flights_pipeline, flights_sample, tmp_path
):
    """Inference: the data to predict on has no arr_delay; X is the same, y is None."""
    fitted = flights_pipeline.fit(flights_sample)
    with_target = fitted.transform(flights_sample)
    new_data = flights_sample.drop(columns=["arr_delay"])
    out = fitted.transform(new_data)
    assert out.y is None
    assert "no target" in " ".join(out.report.notes)
    # rows that were quarantined only for their missing target are now emitted
    assert out.report.rows_out == len(new_data) - out.report.rows_quarantined
    kept = np.isin(out.row_ids, with_target.row_ids)
    assert (out.X[kept] != with_target.X).nnz == 0
    path = tmp_path / "no_target.parquet"
    new_data.to_parquet(path)
    from_file = fitted.transform(path)
    assert from_file.y is None and (from_file.X != out.X).nnz == 0
    # fitting still needs the target
    with pytest.raises(fp.SchemaError, match="arr_delay"):
        flights_pipeline.fit(new_data)


def test_quarantine_of_a_dataframe_is_gathered_later_from_the_rows_as_they_were(
    flights_pipeline, flights_sample
):
    out = flights_pipeline.fit_transform(flights_sample)
    assert callable(out.quarantine_rows)  # deferred for a caller's frame
    expected_rows = flights_sample.iloc[out.quarantine["row_id"].to_numpy()]
    out = flights_pipeline.fit_transform(flights_sample)
    flights_sample.loc[:, "dest"] = "CHANGED"  # the caller edits its frame afterwards
    quarantine = out.quarantine
    assert len(quarantine) == out.report.rows_quarantined > 0
    assert (quarantine["dest"].to_numpy() == expected_rows["dest"].to_numpy()).all()
    assert quarantine is out.quarantine  # built once


def test_loading_a_map_without_its_function_says_what_to_pass(tmp_path, monkeypatch):
    """A state never holds code: the missing function is named, not called a malformed
    state."""
    from fastprep.plan import steps

    def doubled(x):
        return x * 2.0

    weather = pd.read_parquet(REPO / "data_samples" / "weather.parquet").head(500)
    schema = fp.Schema({"temp": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(schema, [fp.col("temp") >> fp.Map(doubled) >> fp.FillMissing(0)])
    pipeline.fit(weather).save(tmp_path / "p.fastprep")
    monkeypatch.setattr(steps, "FUNCTIONS", {})  # as in a new process
    with pytest.raises(fp.StateFormatError) as info:
        fp.load(tmp_path / "p.fastprep")
    message = str(info.value)
    assert "fp.Map(" in message and "doubled" in message and "functions=" in message
    assert "malformed" not in message
