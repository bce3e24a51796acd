"""Unexpected columns, declared keys, datetimes, declared storage dtypes and imputation.

Each policy of each check is run end to end on the ``pandas`` and ``numba`` backends with
its outcome asserted (error naming column and rule / findings with counts and rows /
quarantined rows with reasons / repaired values), and row accounting checked.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.data.sources import raw_columns
from fastprep.runtime import execute

BACKENDS = ["pandas", "numba"]


def run(schema: fp.Schema, features: list, source, backend: str = "pandas") -> fp.Output:
    pipeline = fp.Pipeline(schema=schema, features=features)
    out = pipeline.fit_transform(source, backend=backend)
    report = out.report
    assert report.rows_in == report.rows_out + report.rows_quarantined
    assert sorted(out.row_ids.tolist() + out.quarantine["row_id"].tolist()) == list(
        range(report.rows_in)
    )
    return out


def dense(out: fp.Output) -> np.ndarray:
    return out.X.toarray() if hasattr(out.X, "toarray") else np.asarray(out.X)


def found(out: fp.Output, rule: str) -> list[fp.validate.Finding]:
    return [f for f in out.report.findings if f.rule == rule]


def reasons(out: fp.Output) -> dict[int, str]:
    return dict(zip(out.quarantine["row_id"], out.quarantine["reason"], strict=True))


# --- unexpected columns -----------------------------------------------------------------


@pytest.fixture
def extra_parquet(flights_sample: pd.DataFrame, tmp_path: Path) -> Path:
    path = tmp_path / "extra.parquet"
    flights_sample.head(200).assign(surprise=1.5).to_parquet(path)
    return path


@pytest.mark.parametrize("backend", BACKENDS)
def test_unexpected_columns_default_ignored_reported_not_read(
    extra_parquet: Path, flights_pipeline: fp.Pipeline, backend: str, caplog
) -> None:
    schema = flights_pipeline.schema
    assert schema.unexpected == "ignore"
    with caplog.at_level(logging.WARNING, logger="fastprep"):
        out = flights_pipeline.fit_transform(str(extra_parquet), backend=backend)
    names = {f.column for f in found(out, "unexpected_column")}
    source = set(pd.read_parquet(extra_parquet).columns)
    assert names == source - set(schema) and "surprise" in names and "year" in names
    assert all(f.action == "ignore" for f in found(out, "unexpected_column"))
    assert not [r for r in caplog.records if "not declare" in r.getMessage()]  # not logged
    assert not [a for a in out.report.alerts if a["rule"].endswith(":unexpected_column")]
    assert "not in the schema (not read): " in out.report.summary()
    # detected from the file's schema; the read itself stays column-pruned
    plan = flights_pipeline.plan
    prepared = execute.prepare(plan, schema, str(extra_parquet), phase="fit", backend=backend)
    assert sorted(raw_columns(prepared.raw)) == sorted(plan.columns)


def test_unexpected_columns_warn_logs_and_alerts(flights_sample: pd.DataFrame, caplog) -> None:
    schema = fp.Schema({"distance": fp.Float(min=0)}, unexpected="warn")
    frame = flights_sample.head(50)[["distance", "origin", "dest"]]
    alerts: list = []
    pipeline = fp.Pipeline(schema=schema, features=[fp.col("distance")])
    with caplog.at_level(logging.WARNING, logger="fastprep.alerts"):
        out = pipeline.fit_transform(frame, on_alert=alerts.append)
    assert {(f.column, f.action) for f in found(out, "unexpected_column")} == {
        ("origin", "warn"),
        ("dest", "warn"),
    }
    logged = [r.getMessage() for r in caplog.records]  # logged once per run, as alerts
    assert sum("'origin': not declared in the schema" in m for m in logged) == 1
    assert {a.rule for a in alerts} >= {"origin:unexpected_column", "dest:unexpected_column"}


@pytest.mark.parametrize("source", ["csv", "frame"])
def test_unexpected_columns_raise_names_them(flights_csv: Path, source: str) -> None:
    schema = fp.Schema({"distance": fp.Float(min=0)}, unexpected="raise")
    data = str(flights_csv) if source == "csv" else pd.read_csv(flights_csv, nrows=5)
    with pytest.raises(fp.SchemaError, match=r"does not declare: \['year', 'month'"):
        run(schema, [fp.col("distance")], data)


def test_unexpected_policy_survives_save_and_load(tmp_path: Path) -> None:
    schema = fp.Schema({"x": fp.Float()}, unexpected="raise")
    schema.save(tmp_path / "s.json")
    again = fp.Schema.load(tmp_path / "s.json")
    assert again.unexpected == "raise" and again.keys_ == ()
    with pytest.raises(fp.PipelineDefinitionError, match=r"unexpected=.drop.*ignore, warn"):
        fp.Schema({"x": fp.Float()}, unexpected="drop")


# --- uniqueness of declared keys -----------------------------------------------------------


def key_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [10, 11, 10, 12, 11, 10, 13],
            "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        }
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_duplicate_key_raises_by_default(backend: str) -> None:
    schema = fp.Schema({"id": fp.Int(), "x": fp.Float()}, keys=["id"])
    assert schema.on_duplicate == "raise"
    with pytest.raises(
        fp.DataValidationError,
        match=r"column 'id': 3 value\(s\) broke rule 'duplicate_key'.*first rows 2, 4, 5",
    ):
        run(schema, [fp.col("x")], key_frame(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_duplicate_key_quarantines_every_repeat_after_the_first(backend: str) -> None:
    schema = fp.Schema({"id": fp.Int(), "x": fp.Float()}, keys=["id"], on_duplicate="quarantine")
    out = run(schema, [fp.col("x")], key_frame(), backend)  # the key column is not a feature
    assert reasons(out) == {2: "id: duplicate_key", 4: "id: duplicate_key", 5: "id: duplicate_key"}
    assert dense(out)[:, 0].tolist() == [1, 2, 4, 7]
    (finding,) = found(out, "duplicate_key")
    assert (finding.count, finding.first_rows, finding.action) == (3, (2, 4, 5), "quarantine")


def test_duplicate_key_warn_keeps_rows(caplog) -> None:
    schema = fp.Schema({"id": fp.Int(), "x": fp.Float()}, keys=["id"], on_duplicate="warn")
    with caplog.at_level(logging.WARNING, logger="fastprep.alerts"):
        out = run(schema, [fp.col("x")], key_frame())
    assert out.report.rows_out == 7 and found(out, "duplicate_key")[0].count == 3
    assert any("duplicate_key" in r.getMessage() for r in caplog.records)


def test_composite_text_key_missing_is_never_a_duplicate() -> None:
    frame = pd.DataFrame(
        {
            "carrier": ["UA", "UA", "AA", "UA", None, None, "AA"],
            "flight": [1.0, 2.0, 1.0, 1.0, 5.0, 5.0, -0.0],
            "x": np.arange(7.0),
        }
    )
    frame.loc[6, "flight"] = 0.0
    frame = pd.concat([frame, frame.iloc[[6]].assign(flight=-0.0)], ignore_index=True)
    schema = fp.Schema(
        {"carrier": fp.Category(nullable=True), "flight": fp.Float(), "x": fp.Float()},
        keys=["carrier", "flight"],
        on_duplicate="quarantine",
    )
    out = run(schema, [fp.col("x")], frame)
    # row 3 repeats (UA, 1); rows 4-5 have a missing carrier; row 7's -0.0 is row 6's 0.0
    assert reasons(out) == {3: "carrier+flight: duplicate_key", 7: "carrier+flight: duplicate_key"}


def test_duplicate_keys_on_the_flights_sample(flights_sample: pd.DataFrame) -> None:
    """Real data: (year, month, day, carrier, flight) repeats nowhere in the sample except
    where we copy rows in; the copies (and only they) are quarantined."""
    frame = pd.concat([flights_sample, flights_sample.iloc[[3, 17, 3]]], ignore_index=True)
    key = ["year", "month", "day", "carrier", "flight", "origin"]
    base = flights_sample.duplicated(subset=key, keep="first")
    schema = fp.Schema(
        {
            "year": fp.Int(),
            "month": fp.Int(),
            "day": fp.Int(),
            "carrier": fp.Category(),
            "flight": fp.Int(),
            "origin": fp.Category(),
            "distance": fp.Float(),
        },
        keys=key,
        on_duplicate="quarantine",
    )
    out = run(schema, [fp.col("distance")], frame, "numba")
    n = len(flights_sample)
    expected = set(np.flatnonzero(base.to_numpy())) | {n, n + 1, n + 2}
    assert set(out.quarantine["row_id"]) == expected


def test_keys_must_be_declared_and_survive_save(tmp_path: Path) -> None:
    with pytest.raises(fp.PipelineDefinitionError, match=r"'idd'.*keys.*did you mean 'id'"):
        fp.Schema({"id": fp.Int()}, keys=["idd"])
    with pytest.raises(fp.PipelineDefinitionError, match="on_duplicate='drop'"):
        fp.Schema({"id": fp.Int()}, keys=["id"], on_duplicate="drop")
    schema = fp.Schema({"id": fp.Int(), "x": fp.Float()}, keys=["id"], on_duplicate="quarantine")
    schema.save(tmp_path / "s.json")
    again = fp.Schema.load(tmp_path / "s.json")
    assert (again.keys_, again.on_duplicate) == (("id",), "quarantine")
    fitted = fp.Pipeline(schema=schema, features=[fp.col("x")]).fit(key_frame())
    fitted.save(tmp_path / "fitted")
    reloaded = fp.load(tmp_path / "fitted")
    assert reasons(reloaded.transform(key_frame()))[2] == "id: duplicate_key"


# --- datetimes --------------------------------------------------------------------------


def stamps(tz: str | None = None) -> pd.Series:
    return pd.Series(pd.to_datetime(["2013-01-01 05:00", None, "2013-01-01 06:30"]), name="t")


@pytest.mark.parametrize("backend", BACKENDS)
def test_naive_datetime_is_epoch_seconds_in_expr(backend: str) -> None:
    frame = pd.DataFrame({"t": stamps()})
    schema = fp.Schema({"t": fp.Datetime(nullable=True)})
    out = run(schema, [fp.expr("h = t / 3600") >> fp.FillMissing(0)], frame, backend)
    start = pd.Timestamp("2013-01-01 05:00").timestamp() / 3600
    np.testing.assert_allclose(dense(out)[:, 0], [start, 0, start + 1.5], rtol=1e-7)


def test_aware_datetime_is_converted_to_utc() -> None:
    t = pd.Series(pd.to_datetime(["2013-01-01 05:00", "2013-06-01 05:00"]))
    frame = pd.DataFrame({"t": t.dt.tz_localize("America/New_York")})
    out = run(fp.Schema({"t": fp.Datetime(tz="UTC")}), [fp.col("t")], frame)
    expected = [
        pd.Timestamp("2013-01-01 10:00", tz="UTC"),
        pd.Timestamp("2013-06-01 09:00", tz="UTC"),
    ]
    assert dense(out)[:, 0].tolist() == [np.float32(e.timestamp()) for e in expected]


@pytest.mark.parametrize(
    ("frame", "spec", "pattern"),
    [
        (
            lambda: pd.DataFrame({"t": stamps().dt.tz_localize("UTC")}),
            fp.Datetime(nullable=True),
            r"'t' is declared naive \(tz=None\) but its timestamps carry the time zone UTC",
        ),
        (
            lambda: pd.DataFrame({"t": stamps()}),
            fp.Datetime(tz="UTC", nullable=True),
            r"'t' is declared time-zone-aware \(tz='UTC'\) but its timestamps are naive",
        ),
        (
            lambda: pd.DataFrame({"t": [1357016400, 1357020000]}),
            fp.Datetime(),
            r"'t' is declared Datetime but holds numbers.*does not guess their unit",
        ),
        (
            lambda: pd.DataFrame({"t": stamps()}),
            fp.Float(nullable=True),
            r"'t' is declared Float but none of its values.*datetime64",
        ),
        (
            lambda: pd.DataFrame({"t": ["2013-01-01T05:00Z", "2013-01-02T05:00+01:00"]}),
            fp.Datetime(),
            r"'t' is declared naive.*name a time zone offset",
        ),
    ],
    ids=["aware_declared_naive", "naive_declared_aware", "numbers", "datetime_as_float", "text"],
)
def test_datetime_type_mismatch_is_a_schema_error(frame, spec, pattern) -> None:
    with pytest.raises(fp.SchemaError, match=pattern):
        run(fp.Schema({"t": spec}), [fp.col("t") >> fp.FillMissing(0)], frame())


@pytest.mark.parametrize("backend", BACKENDS)
def test_datetime_text_per_value_rules(backend: str) -> None:
    frame = pd.DataFrame(
        {"t": ["2013-01-01 05:00", "junk", "2013-01-01T05:00+01:00", None, "2013-01-02"]}
    )
    out = run(fp.Schema({"t": fp.Datetime()}), [fp.col("t")], frame, backend)
    assert reasons(out) == {1: "t: type", 2: "t: timezone", 3: "t: null"}
    first = pd.Timestamp("2013-01-01 05:00", tz="UTC").timestamp()
    assert dense(out)[:, 0].tolist() == [np.float32(first), np.float32(first + 19 * 3600)]


@pytest.mark.parametrize("unit", ["s", "ms", "us"])
def test_datetimes_outside_the_nanosecond_range_keep_their_date(unit: str) -> None:
    """Arrow, Parquet, Polars and pandas keep dates before 1677 or after 2262 in s/ms/us
    units: read in their own unit, never wrapped through nanoseconds into another century."""
    import datetime as dt

    import pyarrow as pa

    stamps = [dt.datetime(1600, 2, 29, 12, 34, 56), None, dt.datetime(2013, 3, 10, 7),
              dt.datetime(2500, 1, 1)]  # fmt: skip
    table = pa.table({"t": pa.array(stamps, pa.timestamp(unit, tz="UTC"))})
    text = pd.DataFrame({"t": [None if s is None else f"{s.isoformat()}Z" for s in stamps]})
    schema = fp.Schema({"t": fp.Datetime(tz="UTC", nullable=True)})
    features = [fp.expr(f"{p}_ = {p}(t)") >> fp.FillMissing(-1) for p in ("year", "day", "second")]
    want = [[1600, 29, 56], [-1, -1, -1], [2013, 10, 0], [2500, 1, 0]]
    for source in (table, table.to_pandas(), text):
        assert dense(run(schema, features, source)).tolist() == want


@pytest.mark.parametrize("tz", ["Mars/Base", "America/new_york", "UTC+5", "", 5])
def test_an_unknown_zone_is_refused_where_it_is_declared(tz) -> None:
    with pytest.raises(fp.PipelineDefinitionError, match=r"Datetime\(tz=.*zone"):
        fp.Datetime(tz=tz)


def test_a_zone_object_is_kept_by_its_name(tmp_path) -> None:
    """``ZoneInfo("America/New_York")`` or ``datetime.timezone.utc`` work as their names
    (a saved pipeline stores the zone as text)."""
    import datetime as dt
    import zoneinfo

    frame = pd.DataFrame({"t": ["2013-07-01T12:00:00Z", "2013-01-01T12:00:00Z"]})
    for zone, name, hours in [
        (zoneinfo.ZoneInfo("America/New_York"), "America/New_York", [8, 7]),
        (dt.timezone.utc, "UTC", [12, 12]),
        (dt.timezone(dt.timedelta(hours=5, minutes=30)), "+05:30", [17, 17]),
    ]:
        spec = fp.Datetime(tz=zone)
        assert spec.tz == name
        pipeline = fp.Pipeline(fp.Schema({"t": spec}), [fp.expr("h = hour(t)")])
        fitted = pipeline.fit(frame)
        fitted.save(tmp_path / "zone.fastprep")
        again = fp.load(tmp_path / "zone.fastprep").transform(frame)
        assert dense(again)[:, 0].tolist() == hours, name


# --- declared storage dtypes --------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_overflow_quarantined_with_counts(backend: str) -> None:
    frame = pd.DataFrame({"i": [1, 127, 128, -129, 300, -128]})
    out = run(fp.Schema({"i": fp.Int(dtype="int8")}), [fp.col("i")], frame, backend)
    assert reasons(out) == {2: "i: overflow", 3: "i: overflow", 4: "i: overflow"}
    (finding,) = found(out, "overflow")
    assert finding.count == 3 and "int8" in finding.detail
    assert dense(out)[:, 0].tolist() == [1, 127, -128]


def test_overflow_raise_repair_and_bounds() -> None:
    frame = pd.DataFrame({"i": [1.0, 70000.0, -1e6, 50.0]})
    with pytest.raises(fp.DataValidationError, match=r"'i': 2 value\(s\) broke rule 'overflow'"):
        run(fp.Schema({"i": fp.Float(dtype="float16", on_invalid="raise")}), [fp.col("i")], frame)
    out = run(fp.Schema({"i": fp.Int(dtype="uint8", on_invalid="repair")}), [fp.col("i")], frame)
    assert dense(out)[:, 0].tolist() == [1, 255, 0, 50]
    assert found(out, "overflow")[0].action == "clip"
    # a value beyond max is rule above_max only, not overflow too
    out = run(fp.Schema({"i": fp.Int(max=100, dtype="int8")}), [fp.col("i")], frame)
    assert reasons(out) == {1: "i: above_max", 2: "i: overflow"}
    with pytest.raises(fp.PipelineDefinitionError, match="dtype='int7'"):
        fp.Int(dtype="int7")


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_never_cast_to_an_int8_column(backend: str) -> None:
    """NaN/±inf arriving in a declared int8 column: counted findings, never a cast value."""
    frame = pd.DataFrame({"i": [1.0, np.nan, np.inf, -np.inf, 5.0]})
    out = run(fp.Schema({"i": fp.Int(dtype="int8")}), [fp.col("i")], frame, backend)
    assert reasons(out) == {1: "i: null", 2: "i: not_integer", 3: "i: not_integer"}
    assert found(out, "not_integer")[0].count == 2
    assert dense(out)[:, 0].tolist() == [1, 5]


# --- imputation --------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_declared_impute_fills_missing_and_counts(backend: str) -> None:
    frame = pd.DataFrame(
        {"x": [1.0, None, 3.0, np.nan], "n": pd.array([4, None, 6, 7], dtype="Int64")}
    )
    schema = fp.Schema({"x": fp.Float(impute=-1.5), "n": fp.Int(impute=0, min=0)})
    out = run(schema, [fp.cols("x", "n")], frame, backend)
    assert dense(out).tolist() == [[1, 4], [-1.5, 0], [3, 6], [-1.5, 7]]
    imputed = {
        (f.column, f.count, f.first_rows) for f in out.report.findings if f.action == "impute"
    }
    assert imputed == {("x", 2, (1, 3)), ("n", 1, (1,))}
    assert not out.report.alerts  # a declared repair is not an alert


def test_impute_does_not_hide_wrong_types() -> None:
    frame = pd.DataFrame({"x": pd.Series(["1.5", "", "abc"], dtype=object)})
    out = run(fp.Schema({"x": fp.Float(impute=0.0)}), [fp.col("x")], frame)
    assert reasons(out) == {2: "x: type"}
    assert dense(out)[:, 0].tolist() == [1.5, 0.0]


def test_impute_declaration_checked() -> None:
    with pytest.raises(fp.PipelineDefinitionError, match=r"impute='median'.*FillMissing"):
        fp.Float(impute="median")
    with pytest.raises(fp.PipelineDefinitionError, match="whole number"):
        fp.Int(impute=0.5)


def test_infer_drafts_datetime_columns_that_validate_their_sample() -> None:
    naive = pd.Series(pd.to_datetime(["2013-01-01 05:00", None, "2013-01-02 06:00"]))
    frame = pd.DataFrame({"naive": naive, "aware": naive.dt.tz_localize("Europe/Paris")})
    schema = fp.Schema.infer(frame)
    assert schema["naive"] == fp.Datetime(nullable=True)
    assert schema["aware"] == fp.Datetime(tz="UTC", nullable=True)
    # in float64 inside the expression: float32 X holds epoch seconds only to ~128 s
    out = run(schema, [fp.expr("d = naive - aware") >> fp.FillMissing(0)], frame)
    assert dense(out)[:, 0].tolist() == [3600, 0, 3600]  # Paris is UTC+1 in January
