"""Which backend module runs each execution stage: the one asked for, or the planner's.

Which backends may run at all is :mod:`fastprep.backends.registry`'s answer (``forced``,
``candidates``); among the candidates, ``backend="auto"`` asks
:mod:`fastprep.planning.planner` per stage (predictions from the cost model and the
kernels' readiness). The choices and the measured stage times go into the run report
(``report.plan``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np

from fastprep.backends.reference import backend as reference
from fastprep.backends.registry import candidates, forced, load_backend, resolve
from fastprep.data.columns import Table
from fastprep.data.tag_column import TagColumn
from fastprep.native.kernel_files import numba_cached, numba_loaded
from fastprep.plan.nodes import LogicalPlan, Stage
from fastprep.planning import planner


def choose_stage_backends(
    plan: LogicalPlan, table: Table, backend: str
) -> list[planner.StageChoice]:
    """One choice per stage of ``plan`` for ``table``'s rows (forced unless ``auto``)."""
    pinned = forced(backend)  # unknown names: an error
    plan = with_source_tags(plan, table)
    for feature in plan.features:  # a pinned feature names a real backend (or fails here)
        if feature.backend is not None:
            resolve(feature.backend)
    if planner.numba_imported() or planner.job_imports_numba(table.n_rows):
        readiness = lambda _number, stage: _readiness(plan, stage, table)  # noqa: E731
    else:  # a job too small to repay importing numba need not look at its kernels
        readiness = lambda _number, _stage: planner.COLD  # noqa: E731
    return planner.choose(
        plan,
        table.n_rows,
        readiness=readiness,
        forced=pinned,
        available=candidates(),
        numba_imported=planner.numba_imported(),
    )


def with_source_tags(plan: LogicalPlan, table: Table) -> LogicalPlan:
    """``plan`` with every feature whose input the table holds as tags (a ``String`` column
    whose source holds lists) marked a tags feature, as a ``ListOf`` column's is: it runs
    on the tag kernels, so it is costed as they are (the definition could not know)."""
    marked = [
        replace(f, tags="")
        if f.tags is None and any(isinstance(table.columns.get(i.name), TagColumn)
                                  for i in f.inputs)
        else f
        for f in plan.features
    ]  # fmt: skip
    if all(a is b for a, b in zip(marked, plan.features)):
        return plan
    return replace(plan, features=tuple(marked))


def _readiness(plan: LogicalPlan, stage: Stage, table: Table) -> str:
    """Loaded, in Numba's disk cache, or to be compiled — found without importing Numba
    (whether Numba is imported is the planner's separate question)."""
    if planner.stage_work(plan, stage)[0] == "hash":
        return hash_readiness()
    if stage.kind != "fused":
        if any(plan.features[i].key_columns for i in stage.features):  # GroupStats' kernels
            from fastprep.backends.numba import group_stats

            return group_stats.readiness()
        return planner.READY  # the numba backend runs encoders by the reference code
    return load_backend("numba").kernel_readiness(plan, stage, table)


def target_values(
    plan: LogicalPlan, table: Table, backend: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """The target over ``table``'s rows as float32, and the mask of rows where it is
    missing, undefined or beyond float32's range (None when there is none) — the rows the
    caller quarantines. Numba's kernel where the planner's cost model (an element-wise
    stage of one unit) prefers it, else the reference: the same values either way (the
    cast to float32 is one rounding)."""
    assert plan.target is not None
    if _target_backend(plan, table, backend) == "numba":
        y, any_bad = load_backend("numba").target_values(plan.target, table)
        return y, (~np.isfinite(y) if any_bad else None)
    values = reference.input_values(plan.target, table, reference.Repairs())
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.asarray(values, dtype=np.float64).astype(np.float32)
    bad = ~np.isfinite(y)
    return y, (bad if bad.any() else None)


def _target_backend(plan: LogicalPlan, table: Table, backend: str) -> str:
    assert plan.target is not None
    pinned = forced(backend)
    if pinned is not None or "numba" not in candidates():
        return "numba" if pinned == "numba" else "pandas"
    if not planner.job_imports_numba(table.n_rows):
        return "pandas"  # importing numba for the target alone never pays
    readiness = load_backend("numba").target_readiness(plan.target, table)
    predicted = planner.predict(planner.load_profile(), "elementwise", 1, table.n_rows, readiness)
    return min(predicted, key=lambda b: (predicted[b], b != "pandas"))


def hash_readiness() -> str:
    """The hashing kernels (MurmurHash3 over row bytes, then CSR by sorting or by
    counting): loaded by an earlier call in this process, in Numba's disk cache, or not."""
    from fastprep.backends.numba import hash_csr
    from fastprep.backends.numba import murmur as _murmur

    pairs = ((hash_csr.sort_rows, hash_csr.fill_sorted), (hash_csr.count_rows, hash_csr.fill_rows))
    if numba_loaded(_murmur.hash_rows) and any(all(map(numba_loaded, p)) for p in pairs):
        return planner.READY
    if numba_cached(_murmur.hash_rows) and any(all(map(numba_cached, p)) for p in pairs):
        return planner.CACHED
    return planner.COMPILE


def describe(choices: list[planner.StageChoice], asked: str) -> str:
    """``report.backend``: the name asked for, or ``auto`` with what it picked."""
    if asked != "auto":
        return asked
    picked: dict[str, list[str]] = {}
    for choice in choices:
        picked.setdefault(choice.backend, []).append(str(choice.stage))
    helpers: dict[str, list[str]] = {}
    for what, reason in dict(planner.PATHS).items():  # a copy: worker threads add to it
        helpers.setdefault(reason.split(":")[0], []).append(what)
    parts = [f"{b}: stage {', '.join(s)}" for b, s in picked.items()]
    parts += [f"{path}: {', '.join(names)}" for path, names in helpers.items()]
    return "auto (" + "; ".join(parts) + ")"


def describe_paths() -> list[str]:
    """Per helper kernel family run in this process (validation scan, text encoding, drift
    sums, CSR assembly ...): the path it took and why (``explain``)."""
    return [f"{what}: {reason}" for what, reason in dict(planner.PATHS).items()]


@contextmanager
def timed(choices: list[planner.StageChoice], number: int, phase: str) -> Iterator[Any]:
    """Run stage ``number`` on its chosen backend module; record the measured seconds."""
    module = load_backend(choices[number].backend)
    started = time.perf_counter()
    try:
        yield module
    finally:
        choices[number] = planner.with_measured(
            choices[number], phase, time.perf_counter() - started
        )
