"""Where a run executes: in this process, or on Dask partitions the planner set up.

Before a fit / transform without ``client=``, :func:`route` runs the memory pre-flight
(:mod:`fastprep.runtime.preflight`). The budget covers every process of the job; when the in-memory
run would not fit it, the run is streamed partition by partition in this process
(:mod:`fastprep.runtime.streamed`) or goes to a Dask cluster, whichever is predicted faster within
the budget: the one at ``scheduler=`` / ``$DASK_SCHEDULER_ADDRESS``, else a
``LocalCluster`` (:mod:`fastprep.runtime.cluster.local`: one single-threaded worker per core;
its scheduler, nannies and workers counted against the budget), closed afterwards.

Opt out with ``scheduler="off"`` (or ``$FASTPREP_SCHEDULER=off``): a run that would not fit
is then refused with a :class:`~fastprep.errors.MemoryBudgetError` before anything is
loaded — never an out-of-memory crash halfway.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from fastprep.api.schema import Schema
from fastprep.data.sources import Source
from fastprep.errors import FastprepError, PipelineDefinitionError
from fastprep.plan.nodes import LogicalPlan
from fastprep.runtime.preflight import Preflight, format_bytes, run_preflight

log = logging.getLogger("fastprep")
OFF = ("off", "none", "false", "0")
#: the cheap pre-flight (sketches only where a cardinality could break the budget) is
#: followed by every sketch when its predicted peak is above this fraction of the budget
SKETCH_FRACTION = 0.25


def scheduler_setting(scheduler: str | None) -> str | None:
    """``scheduler=`` > ``$FASTPREP_SCHEDULER`` > ``$DASK_SCHEDULER_ADDRESS`` > None (a
    LocalCluster when needed); ``"off"`` disables Dask partitions."""
    for value in (scheduler, os.environ.get("FASTPREP_SCHEDULER"),
                  os.environ.get("DASK_SCHEDULER_ADDRESS")):  # fmt: skip
        if value:
            return "off" if str(value).lower() in OFF else str(value)
    return None


@functools.lru_cache(maxsize=1)
def _dask_findable() -> bool:
    """Whether Dask's distributed is installed (looked up once: a search of the import
    path on every run cost ~0.2 ms)."""
    return importlib.util.find_spec("distributed") is not None


def check(
    plan: LogicalPlan,
    schema: Schema,
    source: Source,
    *,
    budget: int | float | str | None = None,
    scheduler: str | None = None,
    whole_output: bool = True,
    fit_only: bool = False,
    transform_only: bool = False,
    value_bytes: int = 4,
) -> Preflight | None:
    """The pre-flight for this run (refusals raised); sketches only when memory is tight.
    None when the source's facts cannot be read (the run itself then says why).
    ``transform_only``: a fitted pipeline's transform (no fit's memory is counted);
    ``value_bytes``: a value of X as it is made (8 for float64 output)."""
    setting = scheduler_setting(scheduler)
    distributable = setting != "off" and _dask_findable()
    from fastprep.runtime.levels import count_order_targets, count_passes  # (on use)

    cluster = None if setting in (None, "off") else "local" if setting == "local" else "external"
    # a fitted pipeline's transform: no fit pass, no median values kept between passes
    options = dict(budget=budget, whole_output=whole_output, distributable=distributable,
                   fit_only=fit_only, cluster=cluster,
                   passes=0 if transform_only else count_passes(plan),
                   order_statistics=0 if transform_only else count_order_targets(plan),
                   transform_only=transform_only, value_bytes=value_bytes)  # fmt: skip
    try:
        result = run_preflight(plan, schema, source, sketch="needed", **options)
        if result.peak_bytes > SKETCH_FRACTION * result.budget:
            result = run_preflight(plan, schema, source, sketch=True, **options)
    except PipelineDefinitionError:
        raise  # a bad memory_budget= is the caller's to fix
    except (FastprepError, OSError, ValueError, LookupError, TypeError, AttributeError,
            pa.ArrowException) as exc:  # fmt: skip
        # an unreadable or odd source: the reader and validation report it properly
        log.debug("memory pre-flight skipped: %s", exc)
        return None
    result.refuse_if_needed()
    return result


@contextmanager
def route(
    plan: LogicalPlan,
    schema: Schema,
    source: Source,
    *,
    budget: int | float | str | None = None,
    scheduler: str | None = None,
    whole_output: bool = True,
    fit_only: bool = False,
    transform_only: bool = False,
    value_bytes: int = 4,
) -> Iterator[tuple[Preflight | None, Any]]:
    """``(preflight, client)``: ``client`` is None for a run in this process (in memory, or
    streamed partition by partition: ``preflight.execution`` says which)."""
    result = check(plan, schema, source, budget=budget, scheduler=scheduler,
                   whole_output=whole_output, fit_only=fit_only,
                   transform_only=transform_only, value_bytes=value_bytes)  # fmt: skip
    if result is None or result.execution != "dask":
        yield result, None
        return
    from fastprep.runtime.cluster.local import connect

    setting = scheduler_setting(scheduler)
    with connect(setting or "local") as (client, where):
        result.decisions[-1] = _where(result, where)
        yield result, client


def _where(result: Preflight, where: str) -> Any:
    from dataclasses import replace

    last = result.decisions[-1]
    return replace(last, choice=f"{last.choice} on {where}")


def note(result: Preflight | None) -> str:
    """One line for ``report.notes``."""
    if result is None:
        return "pre-flight: skipped"
    last = next((d for d in reversed(result.decisions) if d.subject == "execution"), None)
    where = last.describe() if last is not None else result.execution
    return f"pre-flight ({format_bytes(result.budget)} budget): {where}"
