"""The plan that runs: the declared plan with the schema's facts, through the optimizer."""

from __future__ import annotations

from dataclasses import replace

from fastprep.api.schema import Schema, column_facts
from fastprep.optimize import optimize
from fastprep.plan.nodes import LogicalPlan


def physical_plan(plan: LogicalPlan, schema: Schema, run_optimizer: bool = True) -> LogicalPlan:
    """Attach the schema's facts and run the optimizer (deterministic: same plan, same result)."""
    annotated = replace(plan, facts=column_facts(schema))
    return optimize(annotated) if run_optimizer else annotated


def annotated_plan(plan: LogicalPlan, schema: Schema) -> LogicalPlan:
    """The declared plan with the schema's facts, not optimized (``explain("logical")``)."""
    return physical_plan(plan, schema, run_optimizer=False)
