"""Mistakes in a pipeline definition fail at definition time with a message naming the thing."""

from __future__ import annotations

import pandas as pd
import pytest

import fastprep as fp

SCHEMA = fp.Schema(
    {
        "dep_delay": fp.Float(nullable=True),
        "arr_delay": fp.Float(nullable=True),
        "air_time": fp.Float(nullable=True),
        "distance": fp.Float(),
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
        "carrier": fp.Category(),
        "dest": fp.String(),
    }
)


def make(features, target=None):
    return fp.Pipeline(schema=SCHEMA, features=features, target=target)


@pytest.mark.parametrize(
    ("build", "unknown", "suggestion"),
    [
        (lambda: [fp.cols("dep_dealy")], "dep_dealy", "dep_delay"),
        (lambda: [fp.cols("distance", "air_tme") >> fp.Standardize()], "air_tme", "air_time"),
        (lambda: [fp.col("orign") >> fp.OneHot()], "orign", "origin"),
        (lambda: [fp.expr("speed = distnce / air_time * 60")], "distnce", "distance"),
        (
            lambda: [fp.expr("late_dep = where(dep_delay > 15, 1, arr_dlay)")],
            "arr_dlay",
            "arr_delay",
        ),
        (lambda: [fp.expr("jfk = orgin == 'JFK'")], "orgin", "origin"),
    ],
)
def test_unknown_column_in_features(build, unknown, suggestion):
    with pytest.raises(fp.PipelineDefinitionError) as info:
        make(build())
    message = str(info.value)
    assert repr(unknown) in message
    assert "did you mean" in message
    assert repr(suggestion) in message


@pytest.mark.parametrize(
    "target",
    [fp.expr("late = arr_dealy > 15"), "arr_dealy", fp.col("arr_dealy")],
)
def test_unknown_column_in_target(target):
    with pytest.raises(fp.PipelineDefinitionError) as info:
        make([fp.col("distance")], target=target)
    message = str(info.value)
    assert "'arr_dealy'" in message
    assert "'arr_delay'" in message


def test_unknown_column_without_close_match_lists_the_schema():
    with pytest.raises(fp.PipelineDefinitionError) as info:
        make([fp.col("zzzzzz")])
    message = str(info.value)
    assert "'zzzzzz'" in message
    assert "dep_delay" in message and "carrier" in message


@pytest.mark.parametrize(
    "step", [fp.Standardize(), fp.MinMax(), fp.Log1p(), fp.Clip(0, 1), fp.FillMissing(0)]
)
def test_numeric_step_on_a_category_column(step):
    with pytest.raises(fp.PipelineDefinitionError) as info:
        make([fp.col("origin") >> step])
    message = str(info.value)
    assert "'origin'" in message
    assert "category" in message
    assert type(step).__name__ in message


def test_numeric_step_on_a_string_column():
    with pytest.raises(fp.PipelineDefinitionError, match=r"'dest'.*string"):
        make([fp.col("dest") >> fp.Standardize()])


@pytest.mark.parametrize(
    "text",
    [
        "x = origin * 2",
        "x = log(carrier)",
        "x = distance + dest",
        "x = where(origin, 1, 0)",
        "x = origin > 'JFK'",
    ],
)
def test_numeric_operator_on_a_text_column_names_the_column(text):
    column = next(c for c in ("origin", "carrier", "dest") if c in text)
    with pytest.raises(fp.PipelineDefinitionError) as info:
        make([fp.expr(text)])
    assert repr(column) in str(info.value)


def test_text_column_compared_with_a_column_or_number():
    with pytest.raises(fp.PipelineDefinitionError, match="quoted string"):
        make([fp.expr("same = origin == dest")])
    with pytest.raises(fp.PipelineDefinitionError, match="quoted string"):
        make([fp.expr("x = origin == 3")])


def test_text_column_emitted_without_an_encoder():
    with pytest.raises(fp.PipelineDefinitionError) as info:
        make([fp.col("carrier")])
    message = str(info.value)
    assert "'carrier'" in message and "OneHot" in message


def test_malformed_expression():
    with pytest.raises(fp.ExprSyntaxError) as info:
        make([fp.expr("speed = distance / ")])
    assert "distance /" in str(info.value)


@pytest.mark.parametrize(
    ("encoder", "after"),
    [
        (fp.OneHot(), fp.Standardize()),
        (fp.Hash(n_features=16), fp.MinMax()),
        (fp.OneHot(), fp.Hash(n_features=16)),
    ],
)
def test_steps_after_an_encoder(encoder, after):
    with pytest.raises(fp.PipelineDefinitionError) as info:
        make([fp.cols("origin", "carrier") >> encoder >> after])
    message = str(info.value)
    assert type(encoder).__name__ in message
    assert "last" in message


def test_step_class_without_parentheses():
    with pytest.raises(fp.PipelineDefinitionError) as info:
        fp.col("distance") >> fp.Standardize
    assert "fp.Standardize()" in str(info.value)
    assert "parentheses" in str(info.value)
    with pytest.raises(fp.PipelineDefinitionError, match=r"fp\.MinMax\(\)"):
        fp.col("distance") >> fp.FillMissing(0) >> fp.MinMax


def test_step_class_without_parentheses_in_a_reusable_chain():
    # ``fp.FillMissing(0) >> fp.MinMax`` (a chain built before it meets a column)
    with pytest.raises(fp.PipelineDefinitionError) as info:
        fp.FillMissing(0) >> fp.MinMax
    assert "MinMax" in str(info.value)
    assert "parentheses" in str(info.value)


def test_reusable_step_chains_work():
    scale = fp.FillMissing(0) >> fp.Clip(-60, 600) >> fp.Standardize()
    pipeline = make([fp.cols("dep_delay", "air_time") >> scale])
    assert [s.describe() for s in pipeline.plan.features[0].steps] == [
        s.describe() for s in scale.steps
    ]


def test_rshift_with_something_that_is_not_a_step():
    with pytest.raises(fp.PipelineDefinitionError, match="'>>'"):
        fp.col("distance") >> "standardize"


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: fp.FillMissing(""), "non-empty"),
        (lambda: fp.FillMissing(float("nan")), "finite"),
        (lambda: fp.FillMissing(True), "True"),
        (lambda: fp.Clip(5, 1), "lower is above upper"),
        (lambda: fp.Clip("a", 1), "'a'"),
        (lambda: fp.MinMax(feature_range=(1, 0)), "low < high"),
        (lambda: fp.Hash(n_features=0), "n_features"),
        (lambda: fp.Hash(n_features=2.5), "n_features"),
        (lambda: fp.Float(on_invalid="drop"), "drop"),
        (lambda: fp.Float(min=5, max=1), "min is above max"),
        (lambda: fp.Int(min="0"), "min"),
        (lambda: fp.Category("EWR"), "list of strings"),
        (lambda: fp.Category([1, 2]), "list of strings"),
        (lambda: fp.Schema({"x": fp.Float}), "fp.Float()"),
        (lambda: fp.Schema(["x"]), "dict"),
        (lambda: fp.cols(), "at least one"),
        (lambda: fp.cols("a", "a"), "twice"),
        (lambda: fp.cols("a", 3), "3"),
    ],
)
def test_bad_arguments(call, fragment):
    with pytest.raises(fp.PipelineDefinitionError) as info:
        call()
    assert fragment in str(info.value)


def test_a_text_fill_on_a_number_names_the_fill():
    # any text other than "mean"/"median" fills text inputs: a typo is caught at the check
    with pytest.raises(fp.PipelineDefinitionError) as info:
        make([fp.col("distance") >> fp.FillMissing("mode")])
    assert "'mode'" in str(info.value) and "'mean' or 'median'" in str(info.value)


def test_bad_pipeline_arguments():
    with pytest.raises(fp.PipelineDefinitionError, match=r"fp\.Schema"):
        fp.Pipeline(schema={"distance": fp.Float()}, features=[fp.col("distance")])
    with pytest.raises(fp.PipelineDefinitionError, match="list"):
        fp.Pipeline(schema=SCHEMA, features=fp.col("distance"))
    with pytest.raises(fp.PipelineDefinitionError, match="at least one"):
        fp.Pipeline(schema=SCHEMA, features=[])
    with pytest.raises(fp.PipelineDefinitionError, match="feature 2"):
        fp.Pipeline(schema=SCHEMA, features=[fp.col("distance"), "air_time"])


def test_duplicate_output_names():
    with pytest.raises(fp.PipelineDefinitionError, match=r"'speed'.*twice"):
        make([fp.expr("speed = distance / air_time"), fp.expr("speed = distance * 2")])
    with pytest.raises(fp.PipelineDefinitionError, match="'distance'"):
        make([fp.col("distance"), fp.col("distance") >> fp.Log1p()])


@pytest.mark.parametrize(
    "target",
    ["origin", fp.col("dest"), fp.expr("o = origin")],
)
def test_text_target_is_rejected(target):
    with pytest.raises(fp.PipelineDefinitionError, match="numeric"):
        make([fp.col("distance")], target=target)


def test_target_with_steps_or_several_columns():
    with pytest.raises(fp.PipelineDefinitionError, match="target"):
        make([fp.col("distance")], target=fp.col("arr_delay") >> fp.Standardize())
    with pytest.raises(fp.PipelineDefinitionError, match="target"):
        make([fp.col("distance")], target=fp.cols("arr_delay", "dep_delay"))
    with pytest.raises(fp.PipelineDefinitionError, match="target"):
        make([fp.col("distance")], target=42)


def test_unfitted_pipeline_cannot_transform():
    pipeline = make([fp.col("distance")])
    frame = pd.DataFrame({"distance": [1.0, 2.0]})
    with pytest.raises(fp.PipelineDefinitionError, match="fit"):
        pipeline.transform(frame)


def test_bad_out_dtype_and_backend():
    pipeline = make([fp.col("distance")])
    frame = pd.DataFrame({"distance": [1.0, 2.0]})
    with pytest.raises(fp.PipelineDefinitionError, match="int4"):
        pipeline.fit_transform(frame, out_dtype="int4")
    with pytest.raises(fp.BackendError, match="'nope'"):
        pipeline.fit(frame, backend="nope")


def test_errors_are_value_errors_and_fastprep_errors():
    for error in (
        fp.PipelineDefinitionError,
        fp.ExprSyntaxError,
        fp.SchemaError,
        fp.DataValidationError,
        fp.FitError,
        fp.StateFormatError,
    ):
        assert issubclass(error, fp.FastprepError)
        assert issubclass(error, ValueError)
    assert issubclass(fp.SourceError, FileNotFoundError)
