"""What the optimizer's passes changed, in words: the lines ``explain`` prints under the
optimized plan (columns read, expressions folded, steps simplified, stages fused)."""

from __future__ import annotations

from collections.abc import Sequence

from fastprep.plan.expr import to_source
from fastprep.plan.nodes import LogicalPlan


def describe_rewrites(
    before: LogicalPlan, after: LogicalPlan, read: Sequence[str] | None = None
) -> list[str]:
    """One line per thing the optimizer changed from ``before`` to ``after`` (``read``: the
    source's columns read, when they are not the plan's own, e.g. lookup keys)."""
    read = after.columns if read is None else read
    lines = [f"passes: read {len(read)} column(s): {', '.join(read)}"]
    for old, new in zip(before.features, after.features, strict=True):
        for a, b in zip(old.inputs, new.inputs, strict=True):
            if a.expr != b.expr:
                lines.append(f"  folded {a.name}: {to_source(a.expr)}  ->  {to_source(b.expr)}")
        if old.steps != new.steps:
            was = " >> ".join(s.describe() for s in old.steps) or "(none)"
            now = " >> ".join(s.describe() for s in new.steps) or "(none)"
            lines.append(
                f"  simplified [{', '.join(i.name for i in new.inputs)}]: {was}  ->  {now}"
            )
    for stage in after.execution_stages():
        if stage.kind == "fused" and len(stage.features) > 1:
            names = [i.name for f in stage.features for i in after.features[f].inputs]
            lines.append(
                f"  fused {len(names)} element-wise output(s) into one kernel: {', '.join(names)}"
            )
    return lines


def explain_plan(
    before: LogicalPlan, after: LogicalPlan, *, read: Sequence[str] | None = None,
    notes: str = "",
) -> str:  # fmt: skip
    """The optimized plan as a tree (then ``notes``, e.g. the lookups it joins), followed
    by what the passes changed."""
    return after.tree() + notes + "\n" + "\n".join(describe_rewrites(before, after, read))
