"""``fp.Lookup`` and ``Pipeline(lookups=...)`` at definition time: qualified names resolve
to the declared lookups' columns (typed as declared, but nullable), and every mistake is
refused when the pipeline is built, naming the lookup, the column and the fix."""

from __future__ import annotations

import pytest

import fastprep as fp
from fastprep.api.lookup import JoinedSchema
from fastprep.plan.steps import FillMissing

SCHEMA = fp.Schema({
    "tailnum": fp.String(nullable=True), "origin": fp.Category(),
    "time_hour": fp.Datetime(tz="UTC"), "distance": fp.Float(), "flight": fp.Int(),
})  # fmt: skip
PLANES = fp.Schema({"tailnum": fp.String(), "year": fp.Int(nullable=True), "seats": fp.Int(),
                    "manufacturer": fp.Category()})  # fmt: skip
WEATHER = fp.Schema({"origin": fp.Category(), "time_hour": fp.Datetime(tz="UTC"),
                     "temp": fp.Float(nullable=True, impute=50.0)})  # fmt: skip


def lookups(**changes):
    out = {
        "planes": fp.Lookup("planes.parquet", key={"tailnum": "tailnum"}, schema=PLANES),
        "weather": fp.Lookup("weather.parquet", key={"origin": "origin",
                             "time_hour": "time_hour"}, schema=WEATHER),
    }  # fmt: skip
    out.update(changes)
    return out


def build(*features, **changes):
    return fp.Pipeline(SCHEMA, list(features), lookups=lookups(**changes))


def test_qualified_columns_in_expressions_and_columns():
    p = build(
        fp.expr("plane_age = 2013 - planes.year") >> fp.FillMissing(0),
        fp.col("planes.seats") >> fp.FillMissing(0) >> fp.Standardize(),
        fp.col("planes.manufacturer") >> fp.OneHot(),
        fp.expr("hot = weather.temp > 80") >> fp.FillMissing(0),
    )
    assert isinstance(p.schema, JoinedSchema)
    assert p.plan.columns == ("planes.year", "planes.seats", "planes.manufacturer",
                              "weather.temp")  # fmt: skip
    # only the source's own columns are read: the lookups' keys, never a lookup column
    assert p.schema.read_columns(p.plan.columns) == ["tailnum", "origin", "time_hour"]


def test_lookup_columns_are_nullable_so_fills_are_kept():
    """A side column declared non-null is still missing where no side row matches: the
    optimizer must not drop the FillMissing (as it does on a non-null source column)."""
    p = build(fp.col("planes.seats") >> fp.FillMissing(0), fp.col("distance") >> fp.FillMissing(0))
    assert p.schema["planes.seats"].nullable and p.schema["weather.temp"].impute is None
    seats, distance = p.optimized.features
    assert any(isinstance(s, FillMissing) for s in seats.steps)
    assert not any(isinstance(s, FillMissing) for s in distance.steps)


@pytest.mark.parametrize(
    ("feature", "fragment"),
    [
        (lambda: fp.col("planes.yaer"), "did you mean 'year'"),
        (lambda: fp.expr("a = planes.yaer + 1"), "did you mean 'year'"),
        (lambda: fp.expr("a = plane.year + 1"), "'plane' is not a declared lookup"),
        (lambda: fp.col("planes.manufacturer") >> fp.Standardize(), "needs a numeric input"),
        (lambda: fp.col("planes.seats"), "missing or not finite|FillMissing|nullable"),
    ],
)
def test_bad_references_are_refused_when_built(feature, fragment):
    if "FillMissing" in fragment:  # a nullable number without a fill is allowed (quarantined)
        build(feature())
        return
    with pytest.raises(fp.PipelineDefinitionError, match=fragment):
        build(feature())


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: fp.Lookup("p.parquet", key={"tail": "tailnum"}, schema=PLANES),
         "'tail' .*is not in the schema"),
        (lambda: fp.Lookup("p.parquet", key={"tailnum": "tail"}, schema=PLANES),
         "'tail' .*is not in the schema"),
        (lambda: fp.Lookup("p.parquet", key={"flight": "tailnum"}, schema=PLANES),
         "key 'flight' \\(number\\) cannot match 'tailnum' \\(text\\)"),
        (lambda: fp.Lookup("p.parquet", key={"tailnum": "year"}, schema=PLANES),
         "declared nullable"),
        (lambda: fp.Lookup("w.parquet", key={"origin": "origin", "time_hour": "time_hour"},
                           schema=fp.Schema({"origin": fp.Category(),
                                             "time_hour": fp.Datetime()})),
         "zoned timestamp\\) cannot match 'time_hour' \\(naive timestamp"),
        (lambda: fp.Lookup("p.parquet", key={"flight": "tags"},
                           schema=fp.Schema({"tags": fp.ListOf()})),
         "key 'flight' \\(number\\) cannot match 'tags' \\(list\\)"),
        (lambda: fp.Lookup("p.parquet", key={}, schema=PLANES), "needs a dict"),
        (lambda: fp.Lookup("p.parquet", key={"tailnum": "tailnum"}, schema={"a": 1}),
         "needs an fp.Schema"),
    ],
)  # fmt: skip
def test_bad_lookups_are_refused(make, fragment):
    with pytest.raises(fp.PipelineDefinitionError, match=fragment):
        build(fp.col("distance"), planes=make())


@pytest.mark.parametrize("name", ["log", "1planes", "__x", "my planes"])
def test_lookup_names_are_plain_identifiers(name):
    with pytest.raises(fp.PipelineDefinitionError, match="lookup name"):
        fp.Pipeline(SCHEMA, [fp.col("distance")], lookups={name: lookups()["planes"]})


def test_a_lookup_column_may_not_shadow_a_source_column():
    schema = fp.Schema({**dict(SCHEMA.items()), "planes.seats": fp.Float()})
    with pytest.raises(fp.PipelineDefinitionError, match="clashes"):
        fp.Pipeline(schema, [fp.col("distance")], lookups=lookups())


def test_attribute_syntax_stays_restricted():
    """Only ``lookup.column``; chains, dunders and attributes of calls are never parsed."""
    for text in ("planes.year.real", "planes.__class__", "log(planes).year", "planes.year()"):
        with pytest.raises(fp.ExprSyntaxError):
            fp.expr(text)


def test_an_unfitted_run_and_the_explained_plan():
    p = build(fp.col("planes.seats") >> fp.FillMissing(0))
    assert "planes.seats" in p.explain("logical")
    with pytest.raises(fp.PipelineDefinitionError, match="not fitted"):
        p.transform("x.parquet")


def test_a_key_named_alike_on_both_sides():
    one = fp.Lookup("p.parquet", key="tailnum", schema=PLANES)
    two = fp.Lookup("w.parquet", key=["origin", "time_hour"], schema=WEATHER)
    assert one.key == (("tailnum", "tailnum"),)
    assert two.key == (("origin", "origin"), ("time_hour", "time_hour"))
