"""``fp.TargetEncode`` and ``fp.CountEncode`` on the real flights sample, against their peers.

TargetEncode: scikit-learn's ``TargetEncoder`` given the fitted rows (validated, not
quarantined, in input order) with missing values as ``np.nan``: ``fit_transform`` with
``cv=KFold/StratifiedKFold(cv, shuffle=True, random_state=seed)`` for the fit's own rows,
``fit(...).transform`` for every later source. CountEncode: pandas
``value_counts(dropna=False)`` mapped onto the rows. Both backends; save/load; the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.preprocessing import TargetEncoder
from support import REPO

import fastprep as fp
from fastprep.backends.reference.target_encoding import kfold_folds, stratified_folds
from fastprep.backends.registry import available

SCHEMA = fp.Schema(
    {
        "arr_delay": fp.Float(nullable=True),
        "dep_delay": fp.Float(nullable=True),
        "carrier": fp.Category(),
        "origin": fp.Category(),
        "tailnum": fp.String(nullable=True),
        "dest": fp.String(),
        "hour": fp.Int(),
        "flight": fp.Int(),
    }
)
LATE = fp.expr("late = arr_delay > 15")
INPUTS = ("carrier", "tailnum", "hour", "dest")
BACKENDS = tuple(available())  # pandas (the reference), numba, numexpr


def as_peer_input(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """The input columns as the peer takes them: objects, missing as ``np.nan``."""
    part = frame[list(columns)].astype(object)
    return part.where(part.notna(), np.nan)


def peer_target(frame: pd.DataFrame, binary: bool) -> np.ndarray:
    return (frame.arr_delay > 15).to_numpy() if binary else frame.arr_delay.to_numpy()


def peer(binary: bool, smooth, cv: int, seed: int) -> TargetEncoder:
    splitter = (StratifiedKFold if binary else KFold)(cv, shuffle=True, random_state=seed)
    return TargetEncoder(
        smooth=smooth, target_type="binary" if binary else "continuous", cv=splitter
    )


def assert_peer(got: np.ndarray, expected: np.ndarray) -> None:
    """Within 1e-6 relative of the peer's float64 values cast to float32 (here: equal)."""
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("binary", "smooth", "cv", "seed"),
    [(True, "auto", 5, 0), (False, "auto", 5, 0), (True, 10.0, 3, 7), (False, 0.0, 4, 42)],
)
def test_fit_transform_and_transform_equal_target_encoder(
    flights_sample, backend, binary, smooth, cv, seed
) -> None:
    pipeline = fp.Pipeline(
        SCHEMA,
        [fp.cols(*INPUTS) >> fp.TargetEncode(smooth=smooth, cv=cv, seed=seed)],
        target=LATE if binary else "arr_delay",
    )
    fitted, out = pipeline.fit_and_transform(flights_sample, backend=backend)
    assert list(out.feature_names) == [f"{c}:target" for c in INPUTS]
    train = flights_sample.iloc[np.asarray(out.row_ids)]
    assert len(train) < len(flights_sample)  # rows without arr_delay are not fitted
    encoder = peer(binary, smooth, cv, seed)
    assert_peer(
        out.X, encoder.fit_transform(as_peer_input(train, INPUTS), peer_target(train, binary))
    )
    # every later transform: the encodings learned on all fitted rows
    again = fitted.transform(flights_sample, backend=backend)
    expected = encoder.transform(as_peer_input(flights_sample, INPUTS))
    assert_peer(again.X, expected[np.asarray(again.row_ids)])
    params = fitted.params[0]["carrier"][-1]
    assert params["target_mean"] == pytest.approx(float(encoder.target_mean_), rel=1e-15)


def test_unseen_values_and_unseen_missing_get_the_target_mean(flights_sample) -> None:
    """Fit on one origin's flights, transform all: other carriers/destinations are unseen;
    a missing tailnum in new rows when none was missing at fit is unseen too."""
    fit_rows = flights_sample[(flights_sample.origin == "EWR") & flights_sample.tailnum.notna()]
    pipeline = fp.Pipeline(SCHEMA, [fp.cols(*INPUTS) >> fp.TargetEncode()], target="arr_delay")
    fitted = pipeline.fit(fit_rows)
    out = fitted.transform(flights_sample)
    train = fit_rows[fit_rows.arr_delay.notna()]
    encoder = peer(False, "auto", 5, 0).fit(as_peer_input(train, INPUTS), train.arr_delay)
    expected = encoder.transform(as_peer_input(flights_sample, INPUTS))
    assert_peer(out.X, expected[np.asarray(out.row_ids)])
    assert fitted.params[0]["tailnum"][-1]["missing"] is None


def test_transform_without_the_target_column(flights_sample) -> None:
    pipeline = fp.Pipeline(SCHEMA, [fp.cols("carrier") >> fp.TargetEncode()], target=LATE)
    fitted = pipeline.fit(flights_sample)
    new = flights_sample.drop(columns=["arr_delay"])
    out = fitted.transform(new)
    assert out.y is None and out.X.shape == (len(new), 1)
    train = flights_sample[flights_sample.arr_delay.notna()]
    encoder = peer(True, "auto", 5, 0).fit(as_peer_input(train, ["carrier"]), train.arr_delay > 15)
    assert_peer(out.X, encoder.transform(as_peer_input(new, ["carrier"])))


def test_steps_before_the_encoder_apply_at_fit_and_transform(flights_sample) -> None:
    """A text fill first: missing tailnum becomes a category of its own name."""
    pipeline = fp.Pipeline(
        SCHEMA, [fp.col("tailnum") >> fp.FillMissing("UNK") >> fp.TargetEncode()], target=LATE
    )
    _, out = pipeline.fit_and_transform(flights_sample)
    train = flights_sample.iloc[np.asarray(out.row_ids)]
    X = train[["tailnum"]].fillna("UNK")
    assert_peer(out.X, peer(True, "auto", 5, 0).fit_transform(X, train.arr_delay > 15))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("normalize", [False, True])
def test_count_encode_equals_value_counts(flights_sample, backend, normalize) -> None:
    columns = ("tailnum", "carrier", "hour")
    pipeline = fp.Pipeline(SCHEMA, [fp.cols(*columns) >> fp.CountEncode(normalize=normalize)])
    fit_rows = flights_sample.iloc[:12_000]
    fitted = pipeline.fit(fit_rows, backend=backend)
    out = fitted.transform(flights_sample, backend=backend)
    assert list(out.feature_names) == [f"{c}:count" for c in columns]
    for j, column in enumerate(columns):
        counts = fit_rows[column].value_counts(dropna=False, normalize=normalize)
        missing = counts[counts.index.isna()].sum()
        mapped = flights_sample[column].map(counts[counts.index.notna()])
        expected = np.where(flights_sample[column].isna(), missing, mapped.fillna(0.0))
        np.testing.assert_allclose(out.X[:, j], expected.astype(np.float32), rtol=1e-6, atol=0)


def test_bool_and_int_inputs(flights_sample) -> None:
    schema = fp.Schema({"arr_delay": fp.Float(nullable=True), "hour": fp.Int(),
                        "night": fp.Bool(nullable=True)})  # fmt: skip
    frame = flights_sample[["arr_delay", "hour"]].copy()
    night = (flights_sample.hour >= 20).astype(object)
    night[flights_sample.index % 7 == 0] = None
    frame["night"] = night
    pipeline = fp.Pipeline(
        schema, [fp.cols("hour", "night") >> fp.TargetEncode(), fp.col("night") >> fp.CountEncode()],
        target="arr_delay",
    )  # fmt: skip
    _, out = pipeline.fit_and_transform(frame)
    train = frame.iloc[np.asarray(out.row_ids)]
    X = as_peer_input(train, ["hour", "night"])
    assert_peer(out.X[:, :2], peer(False, "auto", 5, 0).fit_transform(X, train.arr_delay))
    counts = train.night.astype(object).map(train.night.value_counts(dropna=False))
    counts[train.night.isna()] = train.night.isna().sum()
    np.testing.assert_array_equal(out.X[:, 2], counts.to_numpy(dtype=np.float32))


def test_save_load_keeps_the_full_data_encodings(flights_sample, tmp_path) -> None:
    pipeline = fp.Pipeline(
        SCHEMA,
        [fp.cols("carrier", "tailnum") >> fp.TargetEncode(smooth=2.5, cv=3, seed=1),
         fp.cols("dest", "flight") >> fp.CountEncode(normalize=True)],
        target=LATE,
    )  # fmt: skip
    fitted = pipeline.fit(flights_sample)
    fitted.save(tmp_path / "te.fastprep")
    loaded = fp.load(tmp_path / "te.fastprep")
    a, b = fitted.transform(flights_sample), loaded.transform(flights_sample)
    np.testing.assert_array_equal(a.X, b.X)
    assert list(b.feature_names) == ["carrier:target", "tailnum:target", "dest:count",
                                     "flight:count"]  # fmt: skip
    assert loaded.plan.features[0].steps[-1] == fp.TargetEncode(smooth=2.5, cv=3, seed=1)


def test_cli_run_cross_fits_the_fitted_rows(flights_sample, tmp_path) -> None:
    """``fastprep run`` is a fit_transform: out-of-fold values, equal to the peer's."""
    pipeline_file = tmp_path / "te.py"
    pipeline_file.write_text(
        "import fastprep as fp\n"
        f"sample = {str(REPO / 'data_samples' / 'flights.parquet')!r}\n"
        "pipeline = fp.Pipeline(fp.Schema({'arr_delay': fp.Float(nullable=True), "
        "'carrier': fp.Category(), 'dest': fp.String()}),\n"
        "    [fp.cols('carrier', 'dest') >> fp.TargetEncode(cv=4, seed=3)],\n"
        "    target=fp.expr('late = arr_delay > 15'), sample=sample)\n"
    )
    out_dir = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "fastprep", "run", str(pipeline_file), "--output",
                    str(out_dir)], check=True, capture_output=True, cwd=REPO)  # fmt: skip
    opened = fp.open_output(out_dir)
    train = flights_sample.iloc[np.asarray(opened.row_ids)]
    expected = peer(True, "auto", 4, 3).fit_transform(
        as_peer_input(train, ["carrier", "dest"]), train.arr_delay > 15
    )
    assert_peer(np.asarray(opened.X), expected)
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["feature_names"] == ["carrier:target", "dest:target"]


@pytest.mark.parametrize("seed", [0, 1, 13])
@pytest.mark.parametrize("n", [50, 1_001, 20_000])
def test_folds_are_scikit_learns(seed, n) -> None:
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    for cv in (2, 5):
        folds = kfold_folds(n, cv, seed)
        for k, (_, test) in enumerate(KFold(cv, shuffle=True, random_state=seed).split(y)):
            np.testing.assert_array_equal(np.flatnonzero(folds == k), test)
        folds = stratified_folds(y.astype(np.float64), cv, seed, "t")
        splitter = StratifiedKFold(cv, shuffle=True, random_state=seed)
        for k, (_, test) in enumerate(splitter.split(y, y)):
            np.testing.assert_array_equal(np.flatnonzero(folds == k), test)


# ---------------------------------------------------------------- bad inputs


def test_definition_errors() -> None:
    def build(feature, target="arr_delay", schema=SCHEMA):
        return fp.Pipeline(schema, [feature], target=target)

    with pytest.raises(fp.PipelineDefinitionError, match=r"TargetEncode\(\).*has none.*target="):
        build(fp.col("carrier") >> fp.TargetEncode(), target=None)
    with pytest.raises(fp.PipelineDefinitionError, match=r"'carrier'.*multiclass"):
        build(fp.col("dest") >> fp.TargetEncode(), target="carrier")
    with pytest.raises(fp.PipelineDefinitionError, match=r"'dep_delay' is float"):
        build(fp.col("dep_delay") >> fp.TargetEncode())
    with pytest.raises(fp.PipelineDefinitionError, match=r"'dep_delay' is float"):
        build(fp.col("dep_delay") >> fp.CountEncode())
    # an expression's arithmetic is float: the fix is round(...), not a declaration
    with pytest.raises(fp.PipelineDefinitionError, match=r"'h2' is float; wrap .* round"):
        build(fp.expr("h2 = hour * 2") >> fp.CountEncode())
    build(fp.expr("h2 = round(hour * 2)") >> fp.CountEncode())
    with pytest.raises(fp.PipelineDefinitionError, match="must be the last step"):
        build(fp.col("carrier") >> fp.TargetEncode() >> fp.Standardize())
    for bad, rule in [
        ({"smooth": -1}, "smooth"), ({"smooth": "x"}, "smooth"), ({"cv": 1}, "cv"),
        ({"cv": 2.5}, "cv"), ({"seed": -1}, "seed"), ({"seed": None}, "seed"),
    ]:  # fmt: skip
        with pytest.raises(fp.PipelineDefinitionError, match=rf"TargetEncode\({rule}="):
            fp.TargetEncode(**bad)
    with pytest.raises(fp.PipelineDefinitionError, match=r"normalize=1\): must be True or False"):
        fp.CountEncode(normalize=1)


@pytest.mark.parametrize(
    "features",
    [
        lambda: [fp.col("carrier") >> fp.TargetEncode(), fp.col("carrier") >> fp.TargetEncode(smooth=1.0)],
        lambda: [fp.cols("hour", "carrier") >> fp.CountEncode(),
                 fp.col("carrier") >> fp.CountEncode(normalize=True)],
    ],
)  # fmt: skip
def test_an_output_name_produced_twice_is_refused(features) -> None:
    """Two encodings of one column would give two columns of one name (``carrier:target``)."""
    with pytest.raises(
        fp.PipelineDefinitionError, match=r"'carrier:(target|count)' is produced twice"
    ):
        fp.Pipeline(SCHEMA, features(), target="arr_delay")


def test_fit_errors_name_the_step_and_column(flights_sample) -> None:
    tiny = flights_sample[flights_sample.arr_delay.notna()].iloc[:3]
    pipeline = fp.Pipeline(SCHEMA, [fp.col("carrier") >> fp.TargetEncode()], target=LATE)
    with pytest.raises(fp.FitError, match=r"TargetEncode\(\) on 'carrier': cv=5 folds need"):
        pipeline.fit_transform(tiny)
    one_late = flights_sample[flights_sample.arr_delay.notna()].iloc[:40].copy()
    one_late["arr_delay"] = -5.0
    one_late.iloc[0, one_late.columns.get_loc("arr_delay")] = 99.0  # classes of 39 and 1 rows
    _, out = pipeline.fit_and_transform(one_late)  # a class smaller than cv: as the peer
    y = one_late.arr_delay > 15
    with pytest.warns(UserWarning, match="least populated class"):
        expected = peer(True, "auto", 5, 0).fit_transform(as_peer_input(one_late, ["carrier"]), y)
    assert_peer(out.X, expected)


def test_tampered_state_is_refused(flights_sample, tmp_path) -> None:
    from fastprep.plan.params import check_step_params

    step = fp.TargetEncode()
    pipeline = fp.Pipeline(SCHEMA, [fp.col("carrier") >> step], target=LATE)
    params = pipeline.fit(flights_sample).params[0]["carrier"][-1]
    check_step_params(step, params, "here")
    for key, value in [("encodings", params["encodings"][:-1]), ("categories", ["b", "a"]),
                       ("target_mean", float("nan"))]:  # fmt: skip
        with pytest.raises(ValueError, match="here"):
            check_step_params(step, {**params, key: value}, "here")
    counts = fp.Pipeline(SCHEMA, [fp.col("carrier") >> fp.CountEncode()]).fit(flights_sample)
    state = counts.params[0]["carrier"][-1]
    check_step_params(fp.CountEncode(), state, "here")
    with pytest.raises(ValueError, match="add up"):
        check_step_params(fp.CountEncode(), {**state, "total": state["total"] + 1}, "here")


def test_explain_shows_the_steps(flights_sample) -> None:
    pipeline = fp.Pipeline(
        SCHEMA,
        [fp.cols("carrier") >> fp.TargetEncode(cv=3), fp.col("dest") >> fp.CountEncode()],
        target=LATE,
    )
    text = pipeline.explain()
    assert "[carrier] >> TargetEncode(cv=3)" in text and "[dest] >> CountEncode()" in text


@pytest.mark.parametrize("smooth", ["auto", 3.0])
def test_numba_pass_over_all_folds_equals_numpy_bit_for_bit(flights_sample, monkeypatch, smooth):
    pipeline = fp.Pipeline(
        SCHEMA, [fp.cols(*INPUTS) >> fp.TargetEncode(smooth=smooth)], target="arr_delay"
    )
    outputs, fitted = [], []
    for path in ("numpy", "numba"):
        monkeypatch.setenv("FASTPREP_KERNEL_PATH", path)
        outputs.append(pipeline.fit_transform(flights_sample).X)
        fitted.append(pipeline.fit(flights_sample).transform(flights_sample).X)  # full-data
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_array_equal(fitted[0], fitted[1])


def test_mean_and_variance_are_numpys_bits(flights_sample) -> None:
    from fastprep.backends.reference.target_encoding import mean_and_variance

    y = flights_sample["arr_delay"].dropna().to_numpy(np.float64)
    assert mean_and_variance(y) == (np.mean(y), np.var(y))
    for k in range(5):
        rows = np.arange(len(y)) % 5 != k
        assert mean_and_variance(y, rows) == (np.mean(y[rows]), np.var(y[rows]))


def test_a_binary_target_with_one_class_is_encoded_as_the_peer(flights_sample) -> None:
    """scikit-learn's LabelEncoder numbers a lone class 0: every encoding is 0."""
    on_time = flights_sample[flights_sample.arr_delay <= 15]
    pipeline = fp.Pipeline(SCHEMA, [fp.cols("carrier", "dest") >> fp.TargetEncode()], target=LATE)
    fitted, out = pipeline.fit_and_transform(on_time)
    expected = peer(True, "auto", 5, 0).fit_transform(
        as_peer_input(on_time, ["carrier", "dest"]), on_time.arr_delay > 15
    )
    assert_peer(out.X, expected)
    assert fitted.params[0]["carrier"][-1]["target_mean"] == 0.0


def test_a_derived_text_input(flights_sample) -> None:
    """An expression's text (a route) is encoded like a column, named by the expression."""
    pipeline = fp.Pipeline(
        SCHEMA,
        [fp.expr("route = origin + '-' + dest") >> fp.TargetEncode(smooth=1.0),
         fp.expr("route2 = origin + '-' + dest") >> fp.CountEncode()],
        target="arr_delay",
    )  # fmt: skip
    _, out = pipeline.fit_and_transform(flights_sample)
    assert list(out.feature_names) == ["route:target", "route2:count"]
    train = flights_sample.iloc[np.asarray(out.row_ids)]
    route = (train.origin.astype(str) + "-" + train.dest.astype(str)).to_frame()
    assert_peer(out.X[:, :1], peer(False, 1.0, 5, 0).fit_transform(route, train.arr_delay))
    counts = route.iloc[:, 0].map(route.iloc[:, 0].value_counts())
    np.testing.assert_array_equal(out.X[:, 1], counts.to_numpy(dtype=np.float32))


def test_the_sklearn_adapter_refuses_a_step_fitted_against_the_target(flights_sample) -> None:
    from fastprep.sklearn import FastprepTransformer

    pipeline = fp.Pipeline(SCHEMA, [fp.col("carrier") >> fp.TargetEncode()], target=LATE)
    with pytest.raises(fp.PipelineDefinitionError, match=r"TargetEncode\(\) learns from"):
        FastprepTransformer(pipeline).fit(flights_sample[["carrier", "arr_delay"]])


@pytest.mark.parametrize("binary", [True, False])
def test_a_fold_table_read_partition_by_partition_is_the_cross_fit(flights_sample, binary):
    """The per-fold table learned over all the rows, read by slices of them (as a
    partitioned fit_transform's tasks read it), gives each row the cross-fit's own bits;
    a slice whose rows do not match the fit's is a FitError, never a shifted fold."""
    from fastprep.backends.reference.target_encoding import (
        cross_fit,
        encode_folded,
        fold_table,
        folds_for,
    )
    from fastprep.data.columns import FitTarget, FoldedRows

    frame = flights_sample[flights_sample.arr_delay.notna()]
    y = (frame.arr_delay > 15).to_numpy(np.float64) if binary else frame.arr_delay.to_numpy()
    step = fp.TargetEncode(cv=4, seed=7)
    values = frame.hour.to_numpy(np.float64).copy()
    values[::50] = np.nan  # missing is a category of its own
    expected = cross_fit(step, values, FitTarget(y, binary), "t")
    target = FitTarget(y, binary)
    table = fold_table(step, values, target, "t")
    of_row = folds_for(step, target, "t").of_row
    cuts = [0, 5_000, 5_001, 12_345, len(values)]
    got = np.concatenate([
        encode_folded(FoldedRows({(4, 7): of_row[a:b]}, {"t": table}), values[a:b], "t")
        for a, b in zip(cuts, cuts[1:])
    ])  # fmt: skip
    np.testing.assert_array_equal(got, expected)
    shifted = FoldedRows({(4, 7): of_row[1:101]}, {"t": table})
    with pytest.raises(fp.FitError, match="100 at fit"):
        encode_folded(shifted, values[:99], "t")
