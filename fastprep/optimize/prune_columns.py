"""Column pruning and lifetimes: read only used columns, free each after its last consumer.

Before: the schema declares 19 columns; features use 10; stages (fused 0-3), (4), (5)
After:  ``plan.columns`` lists the 10 read at the reader (pyarrow column selection), and
        ``release = (("dep_delay", "distance", "air_time", "hour", "minute", "arr_delay"),
        ("origin", "carrier"), ("tailnum", "dest"))`` — each stage frees the columns no
        later stage (nor the target) reads, so peak memory does not grow with the steps.

Columns only an eliminated sub-expression used (``x * 0`` folded away) are not read at all,
since ``plan.columns`` is derived from the rewritten expressions.
"""

from __future__ import annotations

from dataclasses import replace

from fastprep.plan.nodes import LogicalPlan


def prune_columns(plan: LogicalPlan) -> LogicalPlan:
    stages = plan.execution_stages()
    target_columns = set(plan.target.columns) if plan.target is not None else set()
    last_stage: dict[str, int] = {}
    for number, stage in enumerate(stages):
        for index in stage.features:
            for column in plan.features[index].columns:
                last_stage[column] = number
    release = tuple(
        tuple(c for c, last in last_stage.items() if last == number and c not in target_columns)
        for number in range(len(stages))
    )
    return replace(plan, release=release)
