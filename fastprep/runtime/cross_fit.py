"""Cross-fitting over partitions: a partitioned ``fit_transform`` gives the fit's own rows
the out-of-fold target encodings an in-memory one gives them.

The folds are defined over all the rows the fit sees, in input order (scikit-learn's
``KFold`` / ``StratifiedKFold``), so no partition can draw its own. The partitioned fit
already gathers every row's category and target on the client (a target encoding is
fitted as one process on the gathered rows); while they are there,
:class:`CrossFit` also computes each row's fold and, per encoded input, the encoding of
every (fold, category) — the in-memory cross-fit's very sums, so its very bits — and
keeps only those (a byte or two a row for the folds, a small table per input). The
transform pass then hands each partition its slice of the folds with the tables
(:meth:`CrossFit.for_partition`); its rows are encoded by their fold's encodings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fastprep.data.columns import FitTarget, FoldedRows, TextColumn
from fastprep.errors import PipelineDefinitionError
from fastprep.plan.nodes import LogicalPlan


def needed(plan: LogicalPlan) -> bool:
    """Some step gives the fit's own rows other values than its transform does."""
    return any(
        getattr(step, "fit_transform_differs", False)
        for feature in plan.features
        for step in feature.steps
    )


def check_collected(plan: LogicalPlan, how: str) -> None:
    """A partitioned fit_transform (``how``: streamed, on Dask) of a step whose fit rows
    get other values is refused up front unless its fit gathers the rows on the client
    (target encoding), which is where :class:`CrossFit` computes their folds."""
    from fastprep.backends.reference.backend import REFERENCE

    for feature in plan.features:
        for step in feature.steps:
            gathered = REFERENCE.has(step, "fit_target")  # fitted on the gathered target rows
            if getattr(step, "fit_transform_differs", False) and not gathered:
                names = ", ".join(repr(i.name) for i in feature.inputs)
                raise PipelineDefinitionError(
                    f"{step.describe()} on {names}: fit_transform gives the fitted rows "
                    f"other values, which a partitioned run ({how}) does not compute for "
                    "this step: not supported with it yet. Fit, then transform; or run in "
                    "memory (raise memory_budget=)"
                )


class CrossFit:
    """Collected during a partitioned fit, read by its transform pass."""

    def __init__(self) -> None:
        #: validated (fitted) rows per partition, in partition order
        self.rows: list[int] | None = None
        #: each fitted row's fold, per ``(cv, seed)``, in input order
        self.of_row: dict[tuple[int, int], np.ndarray] = {}
        #: per encoded input (``"<step> on '<input>'"``): the per-fold encodings
        self.tables: dict[str, dict[str, Any]] = {}
        self._target: FitTarget | None = None

    def target(self, y: np.ndarray, binary: bool) -> FitTarget:
        """The gathered target, one object for every input (its folds made once)."""
        if self._target is None or len(self._target.values) != len(y):
            self._target = FitTarget(y, binary)
        return self._target

    def add(self, step: Any, values: np.ndarray | TextColumn, target: FitTarget, what: str) -> None:
        """The cross-fit of one input over the gathered rows (in partition order)."""
        from fastprep.backends.reference.target_encoding import fold_table, folds_for

        self.tables[what] = fold_table(step, values, target, what)
        key = (step.cv, step.seed)
        if key not in self.of_row:
            of_row = folds_for(step, target, what).of_row
            self.of_row[key] = of_row.astype(np.min_scalar_type(max(step.cv - 1, 0)))

    def finish(self, rows: list[int]) -> None:
        """The fit is done: its partitions' row counts; the gathered target let go."""
        self.rows = list(rows)
        self._target = None

    def folds_of(self, position: int) -> dict[tuple[int, int], np.ndarray]:
        """The folds of the rows of the partition at ``position`` (in the fit's order)."""
        assert self.rows is not None, "the partitioned fit has not run"
        start = sum(self.rows[:position])
        stop = start + self.rows[position]
        return {k: v[start:stop] for k, v in self.of_row.items()}

    def for_partition(self, position: int) -> FoldedRows:
        """What the partition at ``position`` needs: its rows' folds and the tables."""
        return FoldedRows(self.folds_of(position), self.tables)
