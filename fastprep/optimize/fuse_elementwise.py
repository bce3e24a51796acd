"""Group element-wise features into one fused stage (one kernel, one pass over the rows).

Before: stages None (one per feature):  f0 numeric, f1 numeric, f2 OneHot, f3 numeric
After:  ``Stage("fused", (0, 1, 3))``, ``Stage("single", (2,))``

A feature is fusable when it has no encoder: its output columns are numbers computed row
by row (after fitting). All fusable features share one stage, so every input column is
read once and every output column written once; the fused stage runs first, then the
encoders in declared order. Output column order is untouched: it is set by the features.
Features pinned to a backend (``.backend("pandas")``) fuse only with features pinned to the
same backend: one fused stage per pin, after the unpinned one.
"""

from __future__ import annotations

from dataclasses import replace

from fastprep.plan.nodes import Feature, LogicalPlan, Stage


def is_fusable(feature: Feature) -> bool:
    return feature.encoder is None and all(getattr(s, "fusable", True) for s in feature.steps)


def fuse_elementwise(plan: LogicalPlan) -> LogicalPlan:
    groups: dict[str | None, list[int]] = {None: []}
    for i, f in enumerate(plan.features):
        if is_fusable(f):
            groups.setdefault(f.backend, []).append(i)
    stages = [Stage("fused", tuple(members)) for members in groups.values() if members]
    stages += [Stage("single", (i,)) for i, f in enumerate(plan.features) if not is_fusable(f)]
    return replace(plan, stages=tuple(stages))
