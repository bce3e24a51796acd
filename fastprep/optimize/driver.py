"""Run the passes in order until a whole round changes nothing; fail loudly if it never settles."""

from __future__ import annotations

from collections.abc import Callable

from fastprep.optimize.fold_constants import fold_constants
from fastprep.optimize.fuse_elementwise import fuse_elementwise
from fastprep.optimize.prune_columns import prune_columns
from fastprep.optimize.simplify_steps import simplify_steps
from fastprep.plan.nodes import LogicalPlan

Pass = Callable[[LogicalPlan], LogicalPlan]
PASSES: tuple[Pass, ...] = (fold_constants, simplify_steps, fuse_elementwise, prune_columns)
MAX_ROUNDS = 25


class OptimizerDidNotConverge(RuntimeError):
    """A pass keeps rewriting the plan: a fastprep bug, never silently ignored."""


def optimize(plan: LogicalPlan, passes: tuple[Pass, ...] = PASSES) -> LogicalPlan:
    """Apply ``passes`` in order, repeatedly, until a round leaves the plan unchanged."""
    for _ in range(MAX_ROUNDS):
        before = plan
        for step in passes:
            plan = step(plan)
        if plan == before:
            return plan
    raise OptimizerDidNotConverge(f"optimizer did not settle after {MAX_ROUNDS} rounds")
