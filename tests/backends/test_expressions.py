"""``fp.expr`` evaluation against an explicit numpy computation on the flights sample.

Missing propagates (SQL-like): an operator with a missing operand is missing, so such rows
are quarantined rather than emitted as 0; only ``isnull`` and ``where`` branches turn
missing into a value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fastprep as fp

SCHEMA = fp.Schema(
    {
        "dep_delay": fp.Float(nullable=True),
        "arr_delay": fp.Float(nullable=True),
        "air_time": fp.Float(nullable=True),
        "distance": fp.Float(),
        "hour": fp.Int(),
        "minute": fp.Int(),
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
        "carrier": fp.Category(nullable=True),
        "tailnum": fp.String(nullable=True),
    }
)


def numbers(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    return {
        c: frame[c].to_numpy(dtype=np.float64)
        for c in ("dep_delay", "arr_delay", "air_time", "distance", "hour", "minute")
    }


def nan_where(mask, values):
    return np.where(mask, np.nan, values)


def text_eq(series: pd.Series, value: str) -> np.ndarray:
    return nan_where(series.isna().to_numpy(), (series == value).to_numpy(dtype=np.float64))


def expected_values(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    v = numbers(frame)
    dep, arr, air, dist = v["dep_delay"], v["arr_delay"], v["air_time"], v["distance"]
    missing = np.isnan
    with np.errstate(all="ignore"):
        return {
            "speed = distance / air_time * 60": dist / air * 60,
            "gain = dep_delay - arr_delay": dep - arr,
            "mix = (dep_delay + 2 * arr_delay) / (1 + hour) - minute ** 0.5": (
                (dep + 2 * arr) / (1 + v["hour"]) - v["minute"] ** 0.5
            ),
            "late = arr_delay > 15": nan_where(missing(arr), (arr > 15).astype(float)),
            "early = dep_delay <= -5": nan_where(missing(dep), (dep <= -5).astype(float)),
            "same = dep_delay == arr_delay": nan_where(
                missing(dep) | missing(arr), (dep == arr).astype(float)
            ),
            "diff = dep_delay != 0": nan_where(missing(dep), (dep != 0).astype(float)),
            "both = (dep_delay > 0) & (arr_delay > 0)": nan_where(
                missing(dep) | missing(arr), ((dep > 0) & (arr > 0)).astype(float)
            ),
            "either = (dep_delay > 60) | (arr_delay < -30)": nan_where(
                missing(dep) | missing(arr), ((dep > 60) | (arr < -30)).astype(float)
            ),
            "kw = dep_delay > 0 and not arr_delay > 0": nan_where(
                missing(dep) | missing(arr), ((dep > 0) & ~(arr > 0)).astype(float)
            ),
            "ontime = ~(arr_delay > 0)": nan_where(missing(arr), (~(arr > 0)).astype(float)),
            "window = 0 < dep_delay < 60": nan_where(
                missing(dep), ((dep > 0) & (dep < 60)).astype(float)
            ),
            "w = where(dep_delay > 0, log1p(dep_delay), -sqrt(abs(dep_delay)))": nan_where(
                missing(dep), np.where(dep > 0, np.log1p(dep), -np.sqrt(np.abs(dep)))
            ),
            "safe = where(isnull(air_time), 0, distance / air_time)": np.where(
                missing(air), 0.0, dist / air
            ),
            "noair = isnull(air_time)": missing(air).astype(float),
            "notail = isnull(tailnum)": frame["tailnum"].isna().to_numpy(dtype=float),
            "ex = exp(distance / 5000)": np.exp(dist / 5000),
            "lg = log(distance)": np.log(dist),
            "lg1 = log1p(air_time)": np.log1p(air),
            "rt = sqrt(distance) + abs(dep_delay)": np.sqrt(dist) + np.abs(dep),
            "neg = -dep_delay": -dep,
            "p = 2 ** -hour + hour ** 2": 2.0 ** -v["hour"] + v["hour"] ** 2,
            "m = minute % 7": np.remainder(v["minute"], 7),
            "jfk = origin == 'JFK'": text_eq(frame["origin"], "JFK"),
            "notua = carrier != 'UA'": 1.0 - text_eq(frame["carrier"], "UA"),
            "combo = (origin == 'JFK') & (dep_delay > 0)": nan_where(
                missing(dep),
                ((frame["origin"] == "JFK").to_numpy() & (dep > 0)).astype(float),
            ),
            "consts = pi * e + True": np.full(len(dist), np.pi * np.e + 1),
        }


def test_expressions_match_numpy(flights_sample):
    frame = flights_sample.astype({"carrier": object})
    frame.loc[frame.index[::101], "carrier"] = None
    expected = expected_values(frame)
    texts = list(expected)
    for text in texts:
        name = text.split(" = ")[0]
        pipeline = fp.Pipeline(schema=SCHEMA, features=[fp.expr(text)])
        out = pipeline.fit_transform(frame)
        want = expected[text]
        finite = np.isfinite(want)
        assert out.row_ids.tolist() == np.flatnonzero(finite).tolist(), text
        assert out.feature_names == [name]
        assert np.array_equal(out.X[:, 0], want[finite].astype(np.float32)), text
        assert out.report.rows_quarantined == int((~finite).sum())
        if (~finite).any():
            reasons = set(out.quarantine["reason"])
            assert reasons == {f"feature {name}: missing or not finite"}, text


def test_python_modulo_semantics_for_negative_operands(flights_sample):
    # the grammar is Python's: ``%`` takes the sign of the divisor, as in Python and numpy
    frame = flights_sample.dropna(subset=["dep_delay"])
    dep = frame["dep_delay"].to_numpy(dtype=np.float64)
    assert (dep < 0).any()
    out = fp.Pipeline(SCHEMA, [fp.expr("r = dep_delay % 7")]).fit_transform(frame)
    assert np.array_equal(out.X[:, 0], np.remainder(dep, 7).astype(np.float32))
    assert (out.X >= 0).all()


@pytest.mark.parametrize("backend", ["pandas", "numba", "numexpr"])
def test_modulo_by_infinity_and_zero_is_numpys_remainder(backend):
    # found by the random-pipeline conformance test: numexpr's a - floor(a/b)*b gave NaN
    # for an infinite divisor where numpy keeps the dividend (0.5 % inf == 0.5)
    b = np.array([np.inf, -np.inf, 0.0, -0.0, 2.0, -3.0, 1e300])
    frame = pd.DataFrame({"b": b})
    schema = fp.Schema({"b": fp.Float(allow_inf=True)})
    pipeline = fp.Pipeline(schema, [fp.expr("r = 0.5 % b") >> fp.FillMissing(-9)])
    out = pipeline.fit_transform(frame, backend=backend)
    with np.errstate(all="ignore"):
        expected = np.remainder(0.5, b)
    expected = np.where(np.isfinite(expected), expected, -9).astype(np.float32)
    np.testing.assert_array_equal(out.X[:, 0], expected)


def test_missing_target_is_quarantined_not_zero(flights_sample):
    frame = flights_sample
    arr = frame["arr_delay"].to_numpy(dtype=np.float64)
    assert np.isnan(arr).sum() > 100
    pipeline = fp.Pipeline(
        schema=SCHEMA,
        features=[fp.col("distance")],
        target=fp.expr("late = arr_delay > 15"),
    )
    out = pipeline.fit_transform(frame)
    kept = ~np.isnan(arr)
    assert out.row_ids.tolist() == np.flatnonzero(kept).tolist()
    assert out.y.ndim == 1 and out.y.dtype == np.float32
    assert np.array_equal(out.y, (arr[kept] > 15).astype(np.float32))
    assert set(np.unique(out.y)) == {0.0, 1.0}
    quarantine = out.quarantine.set_index("row_id")
    assert quarantine.index.tolist() == np.flatnonzero(~kept).tolist()
    assert set(quarantine["reason"]) == {"target late: missing or not finite"}
    rules = {(f.column, f.rule): f.count for f in out.report.findings}
    assert rules[("late", "nonfinite_target")] == int((~kept).sum())


def test_text_comparison_with_the_string_on_the_left(flights_sample):
    # ``'EWR' == origin`` means the same as ``origin == 'EWR'``
    out = fp.Pipeline(SCHEMA, [fp.expr("rev = 'EWR' != origin")]).fit_transform(flights_sample)
    expected = (flights_sample["origin"] != "EWR").to_numpy(dtype=np.float32)
    assert np.array_equal(out.X[:, 0], expected)


def test_text_comparison_with_missing_is_missing():
    frame = pd.DataFrame({"carrier": ["UA", None, "AA", "UA"]}, dtype=object)
    schema = fp.Schema({"carrier": fp.Category(nullable=True)})
    out = fp.Pipeline(schema, [fp.expr("ua = carrier == 'UA'")]).fit_transform(frame)
    assert out.row_ids.tolist() == [0, 2, 3]
    assert out.X[:, 0].tolist() == [1.0, 0.0, 1.0]


def test_text_comparison_with_a_value_not_in_the_data():
    frame = pd.DataFrame({"origin": ["EWR", "JFK"]})
    schema = fp.Schema({"origin": fp.Category()})
    out = fp.Pipeline(schema, [fp.expr("bos = origin == 'BOS'")]).fit_transform(frame)
    assert out.X[:, 0].tolist() == [0.0, 0.0]


def test_backtick_column_names():
    frame = pd.DataFrame({"air time": [60.0, 120.0, np.nan], "dist (mi)": [500.0, 1000.0, 1.0]})
    schema = fp.Schema({"air time": fp.Float(nullable=True), "dist (mi)": fp.Float()})
    out = fp.Pipeline(
        schema,
        [
            fp.expr("`air speed` = `dist (mi)` / `air time` * 60"),
            fp.col("air time") >> fp.FillMissing(0),
        ],
    ).fit_transform(frame)
    assert out.feature_names == ["air speed", "air time"]
    assert out.row_ids.tolist() == [0, 1]
    assert out.X[:, 0].tolist() == [500.0, 500.0]


def test_infinite_result_becomes_missing_and_is_reported():
    frame = pd.DataFrame({"a": [1.0, 2.0, 0.0, -1.0, np.nan], "b": [1.0, 0.0, 0.0, 0.0, 1.0]})
    schema = fp.Schema({"a": fp.Float(nullable=True), "b": fp.Float()})
    out = fp.Pipeline(schema, [fp.expr("r = a / b") >> fp.FillMissing(-9)]).fit_transform(frame)
    # 2/0 = inf, 0/0 = nan, -1/0 = -inf: three new missing values, all filled and reported
    assert out.X[:, 0].tolist() == [1.0, -9.0, -9.0, -9.0, -9.0]
    repairs = {(r["output"], r["rule"]): r["count"] for r in out.report.repairs}
    assert repairs == {("r", "expr_not_finite"): 3}


def test_bare_expression_is_named_by_its_source():
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]})
    schema = fp.Schema({"a": fp.Float(), "b": fp.Float()})
    out = fp.Pipeline(schema, [fp.expr("a   +   b * 2")]).fit_transform(frame)
    assert out.feature_names == ["a + b * 2"]
    assert out.X[:, 0].tolist() == [7.0, 10.0]


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("where(a > 1, b, nan)", [np.nan, 4.0, -5.0]),
        ("where(a > 2, b, nan)", [np.nan, np.nan, -5.0]),
        ("where(a, b, -b)", [-3.0, 4.0, -5.0]),
        ("where(c > 0, a, b)", [np.nan, 2.0, np.nan]),
        ("where(isnull(c), 1, 2)", [1.0, 2.0, 1.0]),
        ("isnull(c) | (a > 2)", [1.0, 0.0, 1.0]),
        ("(a > 0) & (c > 0)", [np.nan, 1.0, np.nan]),
        ("~isnull(c)", [0.0, 1.0, 0.0]),
        ("c * 0", [np.nan, 0.0, np.nan]),
        ("c == c", [np.nan, 1.0, np.nan]),
        # IEEE pow says nan ** 0 == 1 ** nan == 1; a missing operand stays missing here
        ("c ** 0", [np.nan, 1.0, np.nan]),
        ("1 ** c", [np.nan, 1.0, np.nan]),
        ("(a / a) ** 0 + b", [np.nan, 5.0, -4.0]),  # 0 / 0 is undefined, so missing
    ],
)
@pytest.mark.parametrize("backend", ["pandas", "numba", "numexpr"])
def test_missing_propagation(text, values, backend):
    frame = pd.DataFrame({"a": [0.0, 2.0, 3.0], "b": [3.0, 4.0, -5.0], "c": [np.nan, 1.0, np.nan]})
    schema = fp.Schema({"a": fp.Float(), "b": fp.Float(), "c": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(schema, [fp.expr(f"v = {text}")])
    out = pipeline.fit_transform(frame, backend=backend)
    want = np.array(values)
    assert out.row_ids.tolist() == np.flatnonzero(np.isfinite(want)).tolist()
    assert np.array_equal(out.X[:, 0], want[np.isfinite(want)].astype(np.float32))


def test_expression_reused_in_two_features_and_target(flights_sample):
    pipeline = fp.Pipeline(
        SCHEMA,
        [
            fp.expr("speed = distance / air_time * 60") >> fp.FillMissing("median"),
            fp.expr("slow = distance / air_time * 60 < 300") >> fp.FillMissing(0),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )
    out = pipeline.fit_transform(flights_sample)
    v = numbers(flights_sample)
    kept = ~np.isnan(v["arr_delay"])
    speed = v["distance"][kept] / v["air_time"][kept] * 60
    filled = np.where(np.isnan(speed), np.nanmedian(speed), speed)
    assert np.array_equal(out.X[:, 0], filled.astype(np.float32))
    slow = np.where(np.isnan(speed), 0.0, (speed < 300).astype(float))
    assert np.array_equal(out.X[:, 1], slow.astype(np.float32))


@pytest.mark.parametrize(
    "text",
    [
        " & ".join(f"(x > {i})" for i in range(10)),  # numexpr: 3 copies of each operand
        "min(" * 10 + "x" + ", y)" * 10,
        "where(x > 1, " * 10 + "y" + ", 2)" * 10,
        " + ".join(["x"] * 26),  # typing a sum: each level typed its operands again
    ],
    ids=["and", "min", "where", "sum"],
)
def test_long_expressions_are_defined_and_run_in_linear_time(text):
    """Nested operators used to cost time exponential in their depth (typing, or the
    numexpr string that repeated each operand), seconds to hours within the documented
    limits (2,000 characters, 60 levels)."""
    import time

    frame = pd.DataFrame({"x": [0.5, 3.0, np.nan, 12.0], "y": [1.0, np.nan, 5.0, -2.0]})
    schema = fp.Schema({"x": fp.Float(nullable=True), "y": fp.Float(nullable=True)})
    started = time.perf_counter()
    pipeline = fp.Pipeline(schema, [fp.expr(f"v = {text}") >> fp.FillMissing(-1)])
    assert time.perf_counter() - started < 2
    want = pipeline.fit_transform(frame, backend="pandas").X
    started = time.perf_counter()
    got = pipeline.fit_transform(frame, backend="numexpr").X
    assert time.perf_counter() - started < 2
    np.testing.assert_array_equal(got, want)
