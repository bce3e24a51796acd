"""Each optimizer pass: golden before/after cases, tree equality, and same results on real data."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.api.expr_parser import parse_expr
from fastprep.optimize import PASSES, optimize
from fastprep.optimize.driver import OptimizerDidNotConverge
from fastprep.optimize.fold_constants import fold_constants, simplify
from fastprep.optimize.fuse_elementwise import fuse_elementwise
from fastprep.optimize.prune_columns import prune_columns
from fastprep.optimize.simplify_steps import simplify_chain
from fastprep.plan.facts import Facts
from fastprep.plan.nodes import Stage
from fastprep.plan.steps import (
    Clip,
    FillMissing,
    Log1p,
    Map,
    MaxAbsScale,
    PowerTransform,
    Standardize,
)

FIXTURES = Path(__file__).parent / "fixtures"
FACTS = {
    "x": Facts(0.0, 10.0, False, True),
    "z": Facts(0.0, 10.0, False, True),
    "w": Facts(missing=True, finite=True),
    "u": Facts(missing=False, finite=True),
}


def golden_cases() -> list[tuple[str, str]]:
    cases = []
    for line in (FIXTURES / "fold_constants.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            before, after = (part.strip() for part in line.split("==>"))
            cases.append((before, after))
    return cases


@pytest.mark.parametrize(("before", "after"), golden_cases())
def test_fold_constants_golden(before: str, after: str) -> None:
    tree = parse_expr(before)[1]
    for _ in range(5):  # the driver repeats to a fixed point; mimic it
        tree = simplify(tree, FACTS)
    assert tree == parse_expr(after)[1], f"{before} simplified to {tree}"


def test_fold_constants_keeps_semantics_on_edge_values() -> None:
    """Every golden rewrite gives the same values as the original on values its facts allow."""
    from fastprep.backends.reference.expressions import evaluate
    from fastprep.data.columns import Table

    rng = np.random.default_rng(0)
    n = 200
    table = Table(
        np.arange(n),
        {
            "x": rng.uniform(0, 10, n),
            "z": rng.uniform(0, 10, n),
            "w": np.where(rng.random(n) < 0.3, np.nan, rng.normal(size=n) * 1e300),
            "u": rng.normal(size=n) * 1e3,
        },
    )
    table.columns["w"][:4] = [np.inf, -np.inf, np.nan, 0.0]
    for before, _after in golden_cases():
        tree = parse_expr(before)[1]
        folded = tree
        for _ in range(5):
            folded = simplify(folded, FACTS)
        original = np.broadcast_to(evaluate(tree, table), (n,))
        rewritten = np.broadcast_to(evaluate(folded, table), (n,))
        np.testing.assert_allclose(rewritten, original, rtol=1e-12, err_msg=before)


def test_fold_constants_pass_rewrites_features_and_target() -> None:
    schema = fp.Schema({"x": fp.Float(min=0, max=1), "y": fp.Float()})
    pipeline = fp.Pipeline(
        schema=schema,
        features=[fp.expr("a = x * 1 + 0") >> fp.Standardize()],
        target=fp.expr("t = (y + 0) > 1 * 2"),
    )
    plan = pipeline.optimized
    assert plan.features[0].inputs[0].expr == parse_expr("x")[1]
    assert plan.target is not None and plan.target.expr == parse_expr("y > 2")[1]
    again = fold_constants(plan)
    assert again == plan  # a fixed point


def test_folding_away_a_column_stops_reading_it(flights_sample: pd.DataFrame) -> None:
    schema = fp.Schema({"distance": fp.Float(min=0), "hour": fp.Int(min=0, max=24)})
    pipeline = fp.Pipeline(schema=schema, features=[fp.expr("d = distance + hour * 0")])
    assert pipeline.plan.columns == ("distance", "hour")
    assert pipeline.optimized.columns == ("distance",)
    out = pipeline.fit_transform(flights_sample[["distance"]])  # hour is not even needed
    np.testing.assert_array_equal(out.X[:, 0], flights_sample["distance"].to_numpy(np.float32))


@pytest.mark.parametrize(
    ("steps", "facts", "expected"),
    [
        # adjacent clips merge; the composition of two clamps is a clamp
        ((Clip(-5, 100), Clip(0, 50)), [Facts()], (Clip(0, 50),)),
        ((Clip(0, 10), Clip(20, 30)), [Facts()], (Clip(20, 20),)),
        ((Clip(None, 10), Clip(-3, None)), [Facts()], (Clip(-3, 10),)),
        # a side the input never crosses goes; a clip with no side left goes
        ((Clip(0, 100),), [Facts(0, 10, False, True)], ()),
        ((Clip(0, 5),), [Facts(0, 10, False, True)], (Clip(None, 5),)),
        # filling a value that is never missing does nothing
        ((FillMissing(0), Standardize()), [Facts(missing=False, finite=True)], (Standardize(),)),
        (
            (FillMissing(0), Clip(-1, 1)),
            [Facts(missing=True, finite=True)],
            (FillMissing(0), Clip(-1, 1)),
        ),
        # after a fill the value is present: a second fill is dropped
        (
            (FillMissing(0), Log1p(), FillMissing(1)),
            [Facts(-0.5, 5, True, True)],
            (FillMissing(0), Log1p()),
        ),
        # log1p of values that may be <= -1 can become missing: the later fill stays
        (
            (FillMissing(0), Log1p(), FillMissing(1)),
            [Facts()],
            (FillMissing(0), Log1p(), FillMissing(1)),
        ),
        # a scaler fitted on other data may output beyond [-1, 1]: the clip stays
        ((MaxAbsScale(), Clip(-1, 1)), [Facts()], (MaxAbsScale(), Clip(-1, 1))),
        # a group: a rewrite must hold for every input
        ((Clip(0, 100),), [Facts(0, 10, False, True), Facts()], (Clip(0, 100),)),
        # Box-Cox makes a value <= 0 missing, a Map may return NaN: the later fill stays
        (
            (PowerTransform(method="box-cox"), FillMissing(0)),
            [Facts(missing=False, finite=True)],
            (PowerTransform(method="box-cox"), FillMissing(0)),
        ),
        (
            (Map(abs), FillMissing(0)),
            [Facts(missing=False, finite=True)],
            (Map(abs), FillMissing(0)),
        ),
    ],
)
def test_simplify_steps_cases(steps, facts, expected) -> None:
    assert simplify_chain(tuple(steps), facts) == tuple(expected)


def test_fuse_elementwise_groups_numeric_features(flights_pipeline) -> None:
    plan = fuse_elementwise(flights_pipeline.plan)
    assert plan.stages == (
        Stage("fused", (0, 1, 2, 3)),
        Stage("single", (4,)),
        Stage("single", (5,)),
    )


def test_prune_columns_releases_each_column_after_its_last_stage(flights_pipeline) -> None:
    plan = prune_columns(fuse_elementwise(flights_pipeline.plan))
    assert plan.release == (
        ("dep_delay", "distance", "air_time", "hour", "minute"),
        ("origin", "carrier"),
        ("tailnum", "dest"),
    )
    # the target's column is kept until y is computed
    assert all("arr_delay" not in released for released in plan.release)


def test_driver_fails_loudly_when_a_pass_never_settles(flights_pipeline) -> None:
    counter = iter(range(10**6))

    def restless(plan):
        return replace(plan, facts=(("tick", Facts(float(next(counter)))),))

    with pytest.raises(OptimizerDidNotConverge):
        optimize(flights_pipeline.plan, (restless,))


def test_passes_are_pure(flights_pipeline) -> None:
    plan = flights_pipeline.plan
    snapshot = repr(plan)
    for step in PASSES:
        step(plan)
    assert repr(plan) == snapshot


def _assert_same_output(a: fp.Output, b: fp.Output) -> None:
    assert a.feature_names == b.feature_names
    np.testing.assert_array_equal(a.row_ids, b.row_ids)
    if hasattr(a.X, "toarray"):
        assert (a.X != b.X).nnz == 0
    else:
        np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert a.report.rows_quarantined == b.report.rows_quarantined


def test_optimized_equals_unoptimized_on_flights(flights_pipeline, flights_sample) -> None:
    plain = fp.Pipeline(
        schema=flights_pipeline.schema,
        features=list(flights_pipeline.plan.features),
        target=fp.expr("late = arr_delay > 15"),
        optimize=False,
    )
    _assert_same_output(
        flights_pipeline.fit_transform(flights_sample), plain.fit_transform(flights_sample)
    )


EDGE_SCHEMA = fp.Schema(
    {
        "x": fp.Float(min=0, max=10),
        "w": fp.Float(nullable=True, allow_inf=True),
        "e": fp.Float(nullable=True),
    }
)
EDGE_FEATURES = [
    fp.expr("a = (x + 0) * 1 + w * 0") >> fp.FillMissing(-1) >> fp.Clip(-5, 100) >> fp.Clip(0, 50),
    fp.expr("b = log(exp(x)) + x - x") >> fp.FillMissing(0) >> fp.Standardize(),
    fp.col("w") >> fp.FillMissing(0) >> fp.Clip(-1e6, 1e6) >> fp.MinMax(),
    fp.expr("c = where(isnull(e), -1, e / x)") >> fp.FillMissing("median"),
]


@pytest.mark.parametrize("backend", ["pandas", "numba", "numexpr"])
def test_optimized_equals_unoptimized_with_nan_inf_and_empty(backend: str) -> None:
    rng = np.random.default_rng(7)
    n = 500
    frame = pd.DataFrame(
        {
            "x": rng.uniform(0, 10, n),
            "w": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n) * 100),
            "e": np.where(rng.random(n) < 0.5, np.nan, rng.normal(size=n)),
        }
    )
    frame.loc[:5, "w"] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e300]
    frame.loc[:3, "x"] = 0.0  # e / 0 -> inf -> missing
    optimized = fp.Pipeline(schema=EDGE_SCHEMA, features=EDGE_FEATURES)
    plain = fp.Pipeline(schema=EDGE_SCHEMA, features=EDGE_FEATURES, optimize=False)
    assert optimized.optimized != plain.optimized  # the passes did rewrite something
    fitted_o = optimized.fit(frame, backend=backend)
    fitted_p = plain.fit(frame, backend=backend)
    _assert_same_output(fitted_o.transform(frame), fitted_p.transform(frame))
    empty = frame.iloc[:0]
    a, b = fitted_o.transform(empty), fitted_p.transform(empty)
    assert a.X.shape == b.X.shape == (0, 4)
    all_null = frame.assign(e=np.nan)
    _assert_same_output(fitted_o.transform(all_null), fitted_p.transform(all_null))


def test_all_null_column_at_fit_is_a_clear_error() -> None:
    frame = pd.DataFrame({"x": [1.0, 2.0], "w": [np.nan, np.nan], "e": [np.nan, np.nan]})
    pipeline = fp.Pipeline(schema=EDGE_SCHEMA, features=[fp.col("e") >> fp.FillMissing("median")])
    with pytest.raises(fp.FitError, match="'e'"):
        pipeline.fit(frame)


def test_facts_respect_the_warn_policy() -> None:
    """Under on_invalid='warn' out-of-range values stay, so a clip must not be dropped."""
    schema = fp.Schema({"x": fp.Float(min=0, max=1, on_invalid="warn")})
    pipeline = fp.Pipeline(schema=schema, features=[fp.col("x") >> fp.Clip(0, 1)])
    assert pipeline.optimized.features[0].steps == (Clip(0, 1),)
    out = pipeline.fit_transform(pd.DataFrame({"x": [-5.0, 0.5, 7.0]}))
    np.testing.assert_array_equal(out.X[:, 0], [0.0, 0.5, 1.0])
    assert math.isclose(float(out.X[1, 0]), 0.5)


@pytest.mark.parametrize(
    "step",
    [fp.MaxAbsScale(), fp.QuantileTransform(n_quantiles=3), fp.Bin(n_bins=2, encode="ordinal")],
)
def test_a_clip_after_a_fitted_scaler_holds_on_values_outside_the_fit(step) -> None:
    """Only steps bounded whatever they see may drop a later clip: a value beyond the
    fitted data must come out clipped the same with and without the optimizer."""
    schema = fp.Schema({"x": fp.Float()})
    features = [fp.col("x") >> step >> fp.Clip(-1, 1)]
    fit_on = pd.DataFrame({"x": [1.0, 2.0, -4.0]})
    new = pd.DataFrame({"x": [8.0, -2.0, -9.0]})
    optimized = fp.Pipeline(schema=schema, features=features).fit(fit_on)
    plain = fp.Pipeline(schema=schema, features=features, optimize=False).fit(fit_on)
    np.testing.assert_array_equal(optimized.transform(new).X, plain.transform(new).X)


def test_a_fill_after_a_step_that_makes_values_missing_is_kept() -> None:
    """Box-Cox of a value <= 0, a Map returning NaN, a date part of an instant outside the
    years 1..9999: missing though the column is not nullable. The fill after them must
    fill (as without the optimizer), not vanish and leave the rows to quarantine."""
    import pyarrow as pa

    seconds = [0, 10**12, -7 * 10**11, 86400]
    table = pa.table({"x": [2.0, 0.0, -1.0, 5.0],
                      "t": pa.array(seconds, pa.timestamp("s", tz="UTC"))})  # fmt: skip
    schema = fp.Schema({"x": fp.Float(), "t": fp.Datetime(tz="UTC")})
    features = [
        fp.col("x") >> fp.PowerTransform(method="box-cox") >> fp.FillMissing(0),
        fp.expr("m = x") >> fp.Map(lambda v: v if v > 0 else math.nan) >> fp.FillMissing(-1),
        fp.expr("y = year(t)") >> fp.FillMissing(-1),
    ]
    optimized = fp.Pipeline(schema=schema, features=features).fit_transform(table)
    plain = fp.Pipeline(schema=schema, features=features, optimize=False).fit_transform(table)
    assert optimized.report.rows_quarantined == plain.report.rows_quarantined == 0
    np.testing.assert_array_equal(optimized.X, plain.X)
    assert optimized.X[:, 1].tolist() == [2, -1, -1, 5]
    assert optimized.X[:, 2].tolist() == [1970, -1, -1, 1970]
