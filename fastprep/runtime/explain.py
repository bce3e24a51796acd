"""``explain`` with a source: the memory pre-flight, then the backend per stage and why.

As ``fastprep run`` would run it (the output written to a folder, not gathered): the
pre-flight's lines come first; a run it would refuse, or would not run in memory, stops
there. Otherwise the source is read and validated and the planner's choice per stage is
listed; ``analyze=True`` runs fit + transform too and adds the measured seconds per stage
next to the predictions (like EXPLAIN ANALYZE).
"""

from __future__ import annotations

import numpy as np

from fastprep.api.schema import Schema
from fastprep.backends import stages as stage_backends
from fastprep.data.sources import Source, collect_once
from fastprep.plan.nodes import LogicalPlan
from fastprep.planning.planner import load_profile
from fastprep.runtime import execute, preflight


def explain_source(
    plan: LogicalPlan, schema: Schema, source: Source, *, analyze: bool = False,
    backend: str = "auto", memory_budget: int | str | None = None,
) -> str:  # fmt: skip
    """The pre-flight's lines, then (for a run in memory) the backends per stage."""
    from fastprep.runtime.levels import count_order_targets, count_passes

    source = collect_once(source, schema.read_columns(plan.columns))
    pre = preflight.run_preflight(plan, schema, source, budget=memory_budget,
                                  whole_output=False, passes=count_passes(plan),
                                  order_statistics=count_order_targets(plan))  # fmt: skip
    text = "\n".join(pre.lines())
    if any(d.refuse for d in pre.decisions) or pre.execution != "in-memory":
        return text + "\n(backends per stage: not planned in memory; see the pre-flight)"
    return text + "\n" + _backends(plan, schema, source, analyze, backend)


def _backends(
    plan: LogicalPlan, schema: Schema, source: Source, analyze: bool, backend: str
) -> str:
    prepared = execute.prepare(plan, schema, source, phase="fit", backend=backend)
    if analyze:
        params = execute.fit_prepared(plan, prepared, backend)
        execute.transform_prepared(plan, params, prepared, np.float32, backend)
        choices = prepared.report.plan
    else:
        choices = [
            c.to_dict() for c in stage_backends.choose_stage_backends(plan, prepared.table, backend)
        ]
    rows = prepared.table.n_rows
    lines = [f"backends for {rows:,} validated rows ({load_profile().source} cost profile):"]
    for choice in choices:
        lines.append(f"├─ stage {choice['stage']}: {choice['reason']}")
        if choice.get("measured_seconds"):
            measured = ", ".join(
                f"{phase} {seconds:.3g} s" for phase, seconds in choice["measured_seconds"].items()
            )
            lines.append(f"│    measured: {measured}")
    lines += [f"├─ {line}" for line in stage_backends.describe_paths()]
    if analyze:
        stages = ", ".join(f"{k} {v:.3g} s" for k, v in prepared.report.stages.items())
        lines.append(f"└─ run: {stages}")
    return "\n".join(lines)
