"""Simplify step chains using what is known about their input.

Before: ``[distance] >> FillMissing(0) >> Clip(0, None) >> Clip(-5, 1e4) >> Standardize()``
        (distance: non-nullable, min=0)
After:  ``[distance] >> Clip(None, 1e4) >> Standardize()``

- adjacent ``Clip``s merge into one (the composition of two clamps is a clamp);
- a ``Clip`` side the input can never cross is dropped (a ``Clip`` with no side left goes);
- ``FillMissing`` of a value that can never be missing is dropped.
Each rewrite is exact: the output is the same for every input the facts allow.
"""

from __future__ import annotations

import math
from dataclasses import replace

from fastprep.plan.facts import UNKNOWN, Facts, input_facts
from fastprep.plan.nodes import LogicalPlan
from fastprep.plan.steps import (
    Bin,
    Clip,
    FillMissing,
    Log1p,
    Map,
    PowerTransform,
    QuantileTransform,
    Step,
)


def simplify_steps(plan: LogicalPlan) -> LogicalPlan:
    features = []
    for feature in plan.features:
        # a group shares one chain: a rewrite must hold for every input of the group
        facts = [input_facts(i.expr, plan.column_facts) for i in feature.inputs]
        features.append(replace(feature, steps=simplify_chain(feature.steps, facts)))
    return replace(plan, features=tuple(features))


def simplify_chain(steps: tuple[Step, ...], inputs: list[Facts]) -> tuple[Step, ...]:
    """Rewrite ``steps``, tracking the facts of the running value of every input."""
    out: list[Step] = []
    facts_before: list[list[Facts]] = []  # facts of the value entering out[k]
    current = list(inputs)
    for step in steps:
        if isinstance(step, Clip) and out and isinstance(out[-1], Clip):
            step = _compose_clips(out.pop(), step)  # type: ignore[arg-type]
            current = facts_before.pop()
        if isinstance(step, Clip):
            step = _drop_unneeded_sides(step, current)
            if step is None:
                continue
        if isinstance(step, FillMissing) and not any(f.missing for f in current):
            continue
        out.append(step)
        facts_before.append(current)
        current = [_after(step, f) for f in current]
    return tuple(out)


def _compose_clips(first: Clip, second: Clip) -> Clip:
    """clamp2(clamp1(x)) == clamp(x, g(-inf), g(+inf)) where g is the composition."""

    def g(x: float) -> float:
        for clip in (first, second):
            if clip.lower is not None:
                x = max(x, clip.lower)
            if clip.upper is not None:
                x = min(x, clip.upper)
        return x

    lo, hi = g(-math.inf), g(math.inf)
    return Clip(None if lo == -math.inf else lo, None if hi == math.inf else hi)


def _drop_unneeded_sides(step: Clip, facts: list[Facts]) -> Clip | None:
    """Keep a side only if some input value can lie beyond it."""
    lower = step.lower if step.lower is not None and any(f.lo < step.lower for f in facts) else None
    upper = step.upper if step.upper is not None and any(f.hi > step.upper for f in facts) else None
    if lower is None and upper is None:
        return None
    return Clip(lower, upper)


def _after(step: Step, facts: Facts) -> Facts:
    """Facts of the value after ``step`` (unknown after fitted scalers and encoders)."""
    if step.kind == "group":  # a group unseen at fit gives missing; count is not the value's
        return Facts()
    if isinstance(step, FillMissing):
        fill = step.value if isinstance(step.value, float) else None
        if fill is None:  # fitted mean/median lies within the value's own range
            return Facts(facts.lo, facts.hi, False, facts.finite)
        return Facts(min(facts.lo, fill), max(facts.hi, fill), False, facts.finite)
    if isinstance(step, Clip):
        lo = facts.lo if step.lower is None else max(facts.lo, step.lower)
        hi = facts.hi if step.upper is None else min(facts.hi, step.upper)
        finite = facts.finite or (step.lower is not None and step.upper is not None)
        return Facts(lo, hi, facts.missing, finite)
    if isinstance(step, Log1p):
        if facts.lo > -1:
            hi = math.log1p(facts.hi) if facts.hi < math.inf else math.inf
            return Facts(math.log1p(facts.lo), hi, facts.missing, facts.finite)
        return Facts(missing=True, finite=True)  # values <= -1 become missing
    if isinstance(step, PowerTransform) and step.method == "box-cox":
        return Facts(missing=True, finite=facts.finite)  # a value <= 0 becomes missing
    if isinstance(step, Map):  # any function may return NaN or ±inf
        return UNKNOWN
    bounded = _bounded_output(step)
    if bounded is not None:  # bounded by construction, whatever was fitted
        return Facts(bounded[0], bounded[1], facts.missing, True)
    return Facts(missing=facts.missing, finite=facts.finite)


def _bounded_output(step: Step) -> tuple[float, float] | None:
    """The range of steps whose output is bounded whatever they see at transform: a bin
    number, a uniform quantile. A value scaled by its fitted largest magnitude is not: new
    data may be larger."""
    if isinstance(step, Bin) and step.encode == "ordinal":
        bins = len(step.edges) - 1 if step.edges is not None else step.n_bins
        return 0.0, float(bins - 1)
    if isinstance(step, QuantileTransform) and step.output_distribution == "uniform":
        return 0.0, 1.0
    return None
