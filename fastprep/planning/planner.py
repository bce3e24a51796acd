"""The cost-based planner: for ``backend="auto"``, which backend runs each stage, and why.

Each stage's time on each backend is predicted from a linear cost model with named
constants — a fixed overhead per stage, a cost per row and *work unit* (one unit per output
column of a fused chain step, per hashed column, per encoded column), and, for Numba, the
one-time cost of making the stage's kernel ready (importing Numba, loading the kernel from
the disk cache, or compiling it). The cheapest prediction wins; ties go to the reference
path. Defaults were measured on the 2-core VM this project is developed on
(``benchmarks/RESULTS.md``); ``fastprep calibrate`` measures them on the current machine and
stores a profile (JSON) that later runs read. Every run records the predictions next to the
measured stage times (``report.plan``), so ``explain`` can show prediction against reality.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import heapq
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from fastprep.errors import PipelineDefinitionError
from fastprep.plan.nodes import LogicalPlan, Stage
from fastprep.plan.steps import Hash, Map, Vectorize

#: kernel readiness states, from cheapest to dearest
READY, CACHED, COLD, COMPILE = "loaded", "cached", "cold", "compile"
#: 2: a stored profile holds only the constants that differ from the shipped ones
PROFILE_VERSION = 2
#: the constants ``fastprep calibrate`` measures: a version-1 profile held every constant,
#: the others copies of that release's shipped values, which later releases re-fit (the
#: Dask job's model): only these are taken from it
CALIBRATED = (
    "pandas_stage_seconds", "pandas_row_unit_seconds", "pandas_hash_row_unit_seconds",
    "numba_stage_seconds", "numba_row_unit_seconds", "numba_hash_row_unit_seconds",
    "numba_cache_load_seconds", "numba_compile_seconds", "numba_hash_load_seconds", "source",
)  # fmt: skip
#: per stage (see :func:`_amortization_key`): seconds this process has already given up by
#: running it on pandas while its Numba kernel was predicted faster but not ready
_FORGONE: dict[Any, float] = {}


@dataclass(frozen=True)
class CostProfile:
    """Seconds per stage, per row × work unit, and one-time JIT costs, per backend."""

    pandas_stage_seconds: float = 2.0e-4
    pandas_row_unit_seconds: float = 2.5e-8
    #: the reference path hashes each distinct token once by numpy and gathers by code
    #: (0.0042 s for 19,430 rows × 2 columns, flights sample, 2026-12-04)
    pandas_hash_row_unit_seconds: float = 1.1e-7
    numba_stage_seconds: float = 1.0e-4
    numba_row_unit_seconds: float = 1.0e-8
    numba_hash_row_unit_seconds: float = 4.0e-8
    #: importing numba + fastprep's kernels module in a fresh process
    numba_import_seconds: float = 0.6
    #: loading a fused stage's compiled kernels (fit round, transform, and a gather per
    #: median) from Numba's on-disk cache (measured 0.009-0.010 s for a fit + transform
    #: pair, 0.013-0.014 s with a median's gather, in a fresh process on the 2-core VM,
    #: report.kernels, 2026-12-04); amortized across runs, see ``note_run``
    numba_cache_load_seconds: float = 0.012
    #: compiling one fused kernel (fit rounds + transform) the first time
    numba_compile_seconds: float = 3.0
    #: loading the hashing kernels (murmur, CSR fill; shipped compiled in the disk cache)
    #: on their first call in a process: the whole hash stage's first call took 0.025 s at
    #: 20k rows in a fresh process once the kernels took plain arrays (was 0.44-0.58 s with
    #: numba typed Lists, which recompiled per process)
    numba_hash_load_seconds: float = 0.03
    #: compiling the hashing kernels (MurmurHash3 over row bytes, CSR by sorting) with an
    #: empty Numba cache: 4-5 s on the 2-core VM (fresh install, 2026-12-04)
    numba_hash_compile_seconds: float = 4.0
    #: memory pre-flight (:mod:`fastprep.runtime.preflight`): the budget is the available memory
    #: less this fraction (unless ``memory_budget=`` / ``FASTPREP_MEMORY_BUDGET`` says)
    memory_headroom: float = 0.25
    #: peak working memory of an in-memory fit + transform, in multiples of the used
    #: columns' in-memory bytes (read frame + validated table + one step's temporaries;
    #: measured 4.7 on numpy paths, flights at 336k-1M rows, 2026-12-05; the pre-flight
    #: takes ``NUMBA_WORKING_COPIES_SAVED`` off when the job's kernels are Numba's)
    memory_working_copies: float = 4.7
    #: a whole in-process fit + transform per row (read, validate, every stage, emit:
    #: 1.1-1.3 s of CPU at 1M flights rows on numpy paths, 3.0 s at 3.4M on Numba's, 2-core
    #: VM, 2026-12-05)
    run_row_seconds: float = 1.0e-6
    #: the Dask job's cost model (:func:`dask_job_seconds`, ``docs/distributed.md`` "Cost
    #: model"): the client's fixed work (partition planning, merges, manifest); per pass a
    #: fixed latency (its submission, the results' gather and merge on the client) plus
    #: the busiest worker's rounds of a partition task's fixed cost and its rows, plus the
    #: scheduler's (serial) cost per task; a fit pass run from the values kept on the
    #: workers is a task per worker and only scans those values (``dask_light_row_seconds``
    #: a row); the transform's rows kept by the fit cost ``dask_transform_row_seconds``
    #: (unpacked, transformed, its shard written; no read or validation), a row it did not
    #: keep ``dask_row_seconds`` more (read and validated again). The block below is
    #: written by ``python benchmarks/fit_cluster_model.py --from RUN.json --write`` (its
    #: provenance and errors in its first comment; ``dask_fit_error``: the largest relative
    #: error of a fitted configuration's median whole job, shown by ``explain`` with its
    #: predictions). The cluster's start, not fitted: a 2-worker LocalCluster plus its
    #: first job (20,000 rows: the workers' imports and kernel loads) took 1.3-1.8 s on the
    #: five quiet runs of ``benchmarks/cluster_runs`` (1.58 s on the fitted one), a 1-worker
    #: one 6.1 s once; kept at 4.0 s, as a fresh install's workers compile their kernels
    dask_cluster_start_seconds: float = 4.0
    # fitted dask constants: begin
    #: fitted by ``benchmarks/fit_cluster_model.py`` to
    #: ``benchmarks/cluster_runs/vm-2026-12-05-quiet-final-3.4m-10m.json`` (18 equations: each
    #: configuration's median per pass, its time outside the passes and its warm 20,000-row job): 6
    #: whole jobs: median relative error 4%, max 21%; 12 passes: median relative error 10%, max 28%
    dask_job_seconds: float = 0.0196
    dask_task_seconds: float = 0.00702
    dask_row_seconds: float = 1.77e-07
    dask_scheduler_task_seconds: float = 0.00653
    dask_transform_row_seconds: float = 1.37e-07
    dask_pass_latency_seconds: float = 0.0
    dask_light_row_seconds: float = 2.3e-09
    dask_fit_error: float = 0.21
    # fitted dask constants: end
    #: where the numbers came from ("defaults" or the calibration's machine and date)
    source: str = "defaults"

    def to_dict(self) -> dict[str, Any]:
        """The constants that differ from the shipped defaults (and the source): a stored
        profile then follows the defaults for what it did not measure (the Dask constants,
        re-fitted with each release's quiet runs, are not measured by ``calibrate``)."""
        shipped = asdict(CostProfile())
        mine = {k: v for k, v in asdict(self).items() if k == "source" or v != shipped[k]}
        return {"format_version": PROFILE_VERSION, **mine}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CostProfile:
        known = {f.name for f in fields(cls)}
        if data.get("format_version") == 1:
            known &= set(CALIBRATED)
        values = {k: v for k, v in data.items() if k in known}
        for key, value in values.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if key != "source" and not (number and math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"cost profile: {key} must be a non-negative number, got {value!r}"
                )
        return cls(**values)


def busiest_worker_rows(sizes: Sequence[int], workers: int) -> int:
    """The rows of the busiest of ``workers`` workers when tasks over partitions of
    ``sizes`` rows go, largest first (the job's task priority), each to the first worker
    free: partitions of unequal rows (a file's row groups) can load one worker more than
    ``ceil(tasks / workers)`` equal shares would."""
    loads = [0] * max(1, min(workers, len(sizes)))
    for size in sorted(sizes, reverse=True):
        heapq.heapreplace(loads, loads[0] + size)
    return max(loads)


def _busiest(rows: int, tasks: int, workers: int, busiest: float | None) -> float:
    """The busiest worker's rows of a pass: as given, else ``ceil(tasks / workers)``
    partitions of equal rows."""
    return -(-tasks // max(1, workers)) * rows / tasks if busiest is None else busiest


def dask_pass_seconds(
    profile: CostProfile, rows: int, tasks: int, workers: int, row_seconds: float | None = None,
    *, busiest: float | None = None,
) -> float:  # fmt: skip
    """One pass of a Dask job over ``rows`` rows in ``tasks`` partition tasks on
    ``workers`` single-threaded workers: the busiest worker runs ``ceil(tasks /
    workers)`` of them, each its fixed cost, and its rows (7 tasks on 2 workers take 4
    rounds, the last with one worker idle; ``busiest``: its rows when the partitions are
    not of equal rows, :func:`busiest_worker_rows`), the scheduler's per-task cost is not
    shared (it is one process), and the pass's own latency is paid once.
    ``row_seconds``: a row's cost in this pass (default ``dask_row_seconds``, a pass that
    reads and validates its partitions)."""
    if tasks <= 0:
        return 0.0
    rate = profile.dask_row_seconds if row_seconds is None else row_seconds
    return _pass_cost(profile, rows, tasks, workers, busiest, rate, tasks)


def _pass_cost(
    profile: CostProfile, rows: int, tasks: int, workers: int, busiest: float | None,
    rate: float, submitted: float,
) -> float:  # fmt: skip
    """A pass's latency, the busiest worker's rounds of a task's fixed cost and its rows at
    ``rate``, and the scheduler's cost of the ``submitted`` tasks."""
    rounds = -(-tasks // max(1, workers))
    return (
        profile.dask_pass_latency_seconds
        + rounds * profile.dask_task_seconds
        + _busiest(rows, tasks, workers, busiest) * rate
        + submitted * profile.dask_scheduler_task_seconds
    )


def dask_light_pass_seconds(
    profile: CostProfile, tasks: int, workers: int, rows: int = 0, *, busiest: float | None = None
) -> float:  # fmt: skip
    """A fit pass after the first that runs from the input values the first pass kept on
    the workers over ``tasks`` partitions of ``rows`` rows in all: one task per worker
    holding some, which scans the values of its partitions (``dask_light_row_seconds`` a
    row; ``busiest`` as in :func:`dask_pass_seconds`), and the scheduler's cost of those
    tasks."""
    if tasks <= 0:
        return 0.0
    held = min(tasks, max(1, workers))
    scanned = _busiest(rows, tasks, workers, busiest) * profile.dask_light_row_seconds
    return dask_pass_seconds(profile, 0, held, workers) + scanned


def dask_transform_seconds(
    profile: CostProfile, rows: int, tasks: int, workers: int, kept: float = 0.0,
    *, busiest: float | None = None,
) -> float:  # fmt: skip
    """The transform's pass over ``tasks`` partitions; ``kept``: the share of them the fit
    kept on their workers (those are not read or validated again:
    ``dask_transform_row_seconds`` a row, the others ``dask_row_seconds`` more). A
    worker's kept partitions are one task of the shard-writing transform (one per worker
    holding some), so the scheduler sees ``min(tasks, workers)`` tasks for them and one
    per partition for the others; the busiest worker still works through ``ceil(tasks /
    workers)`` partitions, each its fixed cost (``busiest`` as in
    :func:`dask_pass_seconds`)."""
    if tasks <= 0:
        return 0.0
    kept = min(max(kept, 0.0), 1.0)
    rate = kept * profile.dask_transform_row_seconds + (1 - kept) * (
        profile.dask_transform_row_seconds + profile.dask_row_seconds
    )
    submitted = (1 - kept) * tasks + (min(tasks, max(1, workers)) if kept > 0 else 0)
    return _pass_cost(profile, rows, tasks, workers, busiest, rate, submitted)


def dask_job_seconds(
    profile: CostProfile, rows: int, tasks: int, workers: int, passes: int, start: bool = False,
    *, light: int = 0, kept: float | None = None, busiest: float | None = None,
) -> float:  # fmt: skip
    """A Dask job on a running cluster, plus the LocalCluster's start when ``start``.
    ``passes``: the passes that read and validate their partitions (the fit's first, and
    the transform's unless ``kept`` is given); ``light``: the fit's passes from the values
    its first pass kept on the workers; ``kept``: the transform is its own pass, with that
    share of its partitions kept by the fit (:func:`dask_transform_seconds`); ``busiest``:
    the busiest worker's rows of a pass (default: partitions of equal rows)."""
    started = profile.dask_cluster_start_seconds if start else 0.0
    transform = (
        0.0
        if kept is None
        else dask_transform_seconds(profile, rows, tasks, workers, kept, busiest=busiest)
    )
    return (
        started
        + profile.dask_job_seconds
        + passes * dask_pass_seconds(profile, rows, tasks, workers, busiest=busiest)
        + light * dask_light_pass_seconds(profile, tasks, workers, rows, busiest=busiest)
        + transform
    )


def profile_path() -> Path:
    """``$FASTPREP_COST_PROFILE``, else ``~/.cache/fastprep/cost_profile.json``."""
    explicit = os.environ.get("FASTPREP_COST_PROFILE")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return Path(cache) / "fastprep" / "cost_profile.json"


def load_profile(path: Path | None = None) -> CostProfile:
    """The calibrated profile if one was stored (and is readable), else the defaults."""
    path = path or profile_path()
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        known = _PROFILES.get(path)
        if known is None or known[0] != stamp:
            known = _PROFILES[path] = (stamp, CostProfile.from_dict(json.loads(path.read_text())))
        return known[1]
    except (OSError, ValueError, TypeError):
        return CostProfile()


#: profiles read, by path, while the file is unchanged: every kernel-path choice of a run
#: (dozens) asks for it (the profile is frozen: shared as it is)
_PROFILES: dict[Path, tuple[tuple[int, int], CostProfile]] = {}


def save_profile(profile: CostProfile, path: Path | None = None) -> Path:
    path = path or profile_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(profile.to_dict(), indent=2))
    os.replace(temporary, path)
    return path


@dataclass(frozen=True)
class StageChoice:
    """The backend chosen for one stage, the predictions per backend and the reason."""

    stage: int
    kind: str
    units: int
    backend: str
    predicted: dict[str, float]
    reason: str
    forced: bool = False
    measured: dict[str, float] | None = None
    #: the one-time seconds (kernel load or compile) inside ``predicted["numba"]``, and the
    #: stage's key in the amortization ledger (see :func:`note_run`)
    one_time: float = 0.0
    key: Any = None
    #: the one-time cost is a compile (its ledger persists across processes)
    compiles: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "kind": self.kind,
            "units": self.units,
            "backend": self.backend,
            "predicted_seconds": {k: round(v, 6) for k, v in self.predicted.items()},
            "measured_seconds": self.measured,
            "reason": self.reason,
            "forced": self.forced,
        }


def stage_work(plan: LogicalPlan, stage: Stage) -> tuple[str, int]:
    """What a stage does (``"elementwise"``, ``"hash"`` or ``"encode"``) and its work units."""
    features = [plan.features[i] for i in stage.features]
    # costed as hashing: hashes, and tags (the dict kernels on the Numba backend)
    hashed = [f for f in features if isinstance(f.encoder, (Hash, Vectorize)) or f.tags is not None]
    if hashed:
        return "hash", sum(len(f.inputs) for f in hashed)
    if stage.kind == "fused" or all(f.encoder is None for f in features):
        return "elementwise", sum(max(1, len(f.steps)) * len(f.inputs) for f in features)
    return "encode", sum(len(f.inputs) for f in features)


def predict(
    profile: CostProfile, kind: str, units: int, n_rows: int, readiness: str, forgone: float = 0.0
) -> dict[str, float]:
    """Predicted seconds on each backend for one stage of ``kind`` over ``n_rows``;
    ``forgone``: seconds already given up by not paying the one-time cost (subtracted)."""
    work = n_rows * units
    pandas_rate = (
        profile.pandas_hash_row_unit_seconds if kind == "hash" else profile.pandas_row_unit_seconds
    )
    predicted = {"pandas": profile.pandas_stage_seconds + work * pandas_rate}
    if kind == "encode":  # the numba backend runs encoders by the reference code
        return predicted
    numba_rate = (
        profile.numba_hash_row_unit_seconds if kind == "hash" else profile.numba_row_unit_seconds
    )
    if kind == "hash":  # the hashing kernels: fixed, shared by every hash stage
        load, compile_ = profile.numba_hash_load_seconds, profile.numba_hash_compile_seconds
    else:
        load, compile_ = profile.numba_cache_load_seconds, profile.numba_compile_seconds
    one_time = {
        READY: 0.0,
        CACHED: load,
        COLD: profile.numba_import_seconds + load,
        COMPILE: compile_,
    }[readiness]
    predicted["numba"] = (
        profile.numba_stage_seconds + work * numba_rate + max(0.0, one_time - forgone)
    )
    return predicted


def one_time_seconds(profile: CostProfile, kind: str, readiness: str, forgone: float) -> float:
    """The one-time part of :func:`predict`'s Numba figure."""
    base = predict(profile, kind, 1, 0, readiness, forgone)
    ready = predict(profile, kind, 1, 0, READY)
    return base.get("numba", 0.0) - ready.get("numba", 0.0)


def choose(
    plan: LogicalPlan,
    n_rows: int,
    *,
    profile: CostProfile | None = None,
    readiness: Callable[[int, Stage], str] | None = None,
    forced: str | None = None,
    available: Sequence[str] = ("pandas", "numba"),
    numba_imported: bool | None = None,
) -> list[StageChoice]:
    """One choice per execution stage. ``readiness(number, stage)`` says how ready the
    stage's Numba kernel is (see :func:`numba_readiness`); ``forced`` overrides every stage.

    Importing Numba is paid once per process, not per stage: stages are compared as if it
    were imported, then the mix is kept only if it beats all-pandas with the import added
    — unless the job is big enough to repay the import anyway (:func:`job_imports_numba`:
    validation, hashing and CSR assembly use Numba too). ``numba_imported`` False: Numba
    is not imported yet whatever the readiness says (a stage can be cached on disk)."""
    profile = profile or load_profile()
    readiness = readiness or (lambda _n, _s: numba_readiness())
    stages = plan.execution_stages()
    rows = []
    compiles: list[bool] = []
    measured_notes: list[str] = []
    cold = False
    for number, stage in enumerate(stages):
        kind, units = stage_work(plan, stage)
        state = readiness(number, stage)
        cold = cold or state == COLD
        warm_state = CACHED if state == COLD else state
        key = _amortization_key(plan, stage, kind)
        forgone = _disk_forgone(_disk_key(key)) if warm_state == COMPILE else _FORGONE.get(key, 0.0)
        predicted = {
            b: t
            for b, t in predict(profile, kind, units, n_rows, warm_state, forgone).items()
            if b in available
        }
        learned = _learned(_rate_key(key)) if key is not None else None
        if learned is not None and "pandas" in predicted:
            predicted["pandas"] = n_rows * units * learned
        measured_notes.append("; pandas figure measured by earlier runs" if learned else "")
        if _has_map(plan, stage):  # fp.Map compiles per function: no reliable prediction
            predicted = {"pandas": predicted["pandas"]}
        one_time = one_time_seconds(profile, kind, warm_state, forgone)
        rows.append((number, kind, units, state, predicted, key, one_time, forgone))
        compiles.append(warm_state == COMPILE)
    pins = [stage_pin(plan, stage) for stage in stages]
    if forced is not None:
        return [
            _pinned(n, k, u, pin, p, plan, stages[n]) if pin else
            StageChoice(n, k, u, forced, p, f"{forced}: forced", True)
            for (n, k, u, _, p, *_), pin in zip(rows, pins)
        ]  # fmt: skip
    best = [
        pin or min(p, key=lambda b: (p[b], b != "pandas"))
        for (_, _, _, _, p, *_), pin in zip(rows, pins)
    ]
    cold = (cold or numba_imported is False) and "numba" not in pins  # (a pin pays it anyway)
    free = [not pin for pin in pins]
    import_note = ""
    if cold and "numba" in best and job_imports_numba(n_rows, profile):
        import_note = f"; numba's import ({profile.numba_import_seconds:.3g} s) repaid by the job"
    elif cold and "numba" in best:
        mixed = sum(row[4][b] for row, b, f in zip(rows, best, free) if f)
        mixed += profile.numba_import_seconds
        pandas_only = sum(row[4]["pandas"] for row, f in zip(rows, free) if f)
        if pandas_only <= mixed:
            best = [b if not f else "pandas" for b, f in zip(best, free)]
            import_note = (
                f"; all stages on pandas: predicted {pandas_only:.3g} s vs {mixed:.3g} s "
                f"with numba's import ({profile.numba_import_seconds:.3g} s)"
            )
        else:
            import_note = f"; + numba import {profile.numba_import_seconds:.3g} s once"
    return [
        _pinned(n, k, u, pin, p, plan, stages[n]) if pin else
        StageChoice(n, k, u, b, p,
                    _reason(b, p, n_rows, u, k, state, forgone, one_time) + note + import_note,
                    one_time=one_time, key=key, compiles=c)
        for (n, k, u, state, p, key, one_time, forgone), b, pin, c, note
        in zip(rows, best, pins, compiles, measured_notes)
    ]  # fmt: skip


def _amortization_key(plan: LogicalPlan, stage: Stage, kind: str) -> Any:
    """What one kernel load serves: every hash stage (the hashing kernels are shared), or
    a fused stage's features (its generated kernel); None for the rest."""
    if kind == "hash":
        return ("hash",)
    if kind != "elementwise":
        return None
    key = ("stage", tuple(plan.features[i] for i in stage.features))
    try:
        hash(key)
    except TypeError:  # a feature holding something unhashable: no ledger
        return None
    return key


def note_run(choices: Sequence[StageChoice]) -> None:
    """Record a run of ``choices``: a stage left on pandas although its Numba kernel,
    once ready, was predicted faster, adds the difference to that stage's ledger. Later
    choices subtract the ledger from the kernel's one-time cost, so a process that keeps
    running a small pipeline loads the kernel once the time lost to waiting has reached
    the load cost (rent-or-buy: never more than twice the better of the two in
    hindsight), instead of never — one run alone would never pay for it.

    A compile is paid once per install, not per process, so its ledger is kept on disk
    (``$FASTPREP_CACHE_DIR/kernels/forgone.json``): repeated runs of a job big enough to
    repay a kernel's compile over a few runs (not in one) compile it eventually."""
    for choice in choices:
        if choice.forced or choice.key is None:
            continue
        if choice.backend == "numba" and choice.compiles:
            _add_forgone(_disk_key(choice.key), None)  # compiled now: the debt is paid
            continue
        if choice.backend != "pandas" or "numba" not in choice.predicted:
            continue
        if choice.one_time <= 0.0:
            continue
        saving = choice.predicted["pandas"] - (choice.predicted["numba"] - choice.one_time)
        if saving > 0.0 and choice.compiles:
            _add_forgone(_disk_key(choice.key), saving)
        elif saving > 0.0:
            _FORGONE[choice.key] = _FORGONE.get(choice.key, 0.0) + saving
    _save_forgone()


#: runs and calls below this many rows (values) teach no rates: their fixed costs would
#: dominate a per-row figure and inflate it at scale
LEARN_MIN_ROWS = 100_000


def note_measured(choices: Sequence[StageChoice], n_rows: int) -> None:
    """Learn from a run whose stages were measured: a stage run on pandas through both its
    fit and its transform leaves its measured seconds per row × unit, which later choices
    use instead of the profile's generic pandas rate (kept on disk with the compile ledger,
    averaged with the previous figure). A stage's real pandas cost varies far more than
    the generic rate says (a median's sort, an expression's temporaries: 3× the prediction
    at 3.4M rows on the flights pipeline), so a job that keeps paying it compiles its kernel
    after one or two runs instead of after many."""
    if n_rows < LEARN_MIN_ROWS:
        return
    for choice in choices:
        measured = choice.measured or {}
        if (
            choice.backend != "pandas" or choice.key is None or choice.units <= 0
            or "numba" not in choice.predicted or not {"fit", "transform"} <= set(measured)
        ):  # fmt: skip
            continue
        _learn(
            _rate_key(choice.key),
            (measured["fit"] + measured["transform"]) / (n_rows * choice.units),
        )
    _save_forgone()


def note_helper(what: str, n_values: int, seconds: float) -> None:
    """Learn helper family ``what``'s numpy seconds per value from one measured call (see
    :func:`note_measured`); :func:`kernel_path` predicts with it."""
    if n_values >= LEARN_MIN_ROWS and seconds > 0.0:
        _learn("rate:helper:" + what, seconds / n_values)
        _save_at_exit()


def _rate_key(key: Any) -> str:
    return "rate:" + _disk_key(key)


def _learned(name: str) -> float | None:
    rate = _disk_ledger().get(name)
    return rate if rate is not None and rate > 0.0 else None


def _learn(name: str, rate: float) -> None:
    if not (math.isfinite(rate) and rate > 0.0):
        return
    with _LEDGER_LOCK:  # worker threads learn while another thread may be saving the ledger
        ledger = _disk_ledger()
        previous = ledger.get(name)
        ledger[name] = rate if previous is None else (previous + rate) / 2
        _UNSAVED[0] += _SAVE_EVERY


def reset_amortization() -> None:
    """Forget the ledgers of :func:`note_run` (tests; a new calibration); the one on disk
    is not read again in this process (nor removed)."""
    global _DISK
    _FORGONE.clear()
    _DISK = {}


#: the compile ledger as on disk (loaded on first use), and seconds added since the last save
_DISK: dict[str, float] | None = None
_UNSAVED = [0.0]
#: helper savings are written once at least this many seconds have accumulated
_SAVE_EVERY = 1e-3
#: and an unforced save (a helper's call on numpy adding to its debt) at most this often:
#: a partitioned job's every task makes dozens of such calls, each rewrite ~1-2 ms, and
#: another process reads the ledger once, when it starts (the rest is saved at exit)
_SAVE_INTERVAL = 1.0
_LAST_SAVE = [-math.inf]
#: Dask worker threads choose kernel paths at once: one of them changes the ledger at a time
_LEDGER_LOCK = threading.RLock()


def _ledger_path() -> Path:
    from fastprep.native.kernel_files import cache_dir

    return cache_dir() / "forgone.json"


def _disk_ledger() -> dict[str, float]:
    global _DISK
    with _LEDGER_LOCK:
        if _DISK is None:
            try:
                raw = json.loads(_ledger_path().read_text())
                _DISK = {
                    str(k): float(v)
                    for k, v in raw.items()
                    if isinstance(v, (int, float)) and math.isfinite(v) and v >= 0
                }
            except (OSError, ValueError, TypeError, AttributeError):
                _DISK = {}
        return _DISK


def _disk_key(key: Any) -> str:
    """A stable name for an amortization key (plan nodes have deterministic reprs)."""
    return "stage:" + hashlib.sha256(repr(key).encode()).hexdigest()[:20]


def _disk_forgone(name: str) -> float:
    return _disk_ledger().get(name, 0.0)


def _add_forgone(name: str, seconds: float | None) -> None:
    """Add ``seconds`` to ``name``'s compile ledger (None: clear it)."""
    with _LEDGER_LOCK:
        ledger = _disk_ledger()
        if seconds is None:
            if ledger.pop(name, None) is not None:
                _UNSAVED[0] += _SAVE_EVERY
            return
        ledger[name] = ledger.get(name, 0.0) + seconds
        _UNSAVED[0] += seconds


def _save_at_exit() -> None:
    """Save the ledger when the process ends (or earlier, at a run's :func:`note_measured`):
    a run notes several helpers, and rewriting the file after each cost ~1-5 ms apiece."""
    if not _SAVE_REGISTERED:
        _SAVE_REGISTERED.append(True)
        atexit.register(_save_forgone)


#: whether :func:`_save_forgone` is registered to run at exit
_SAVE_REGISTERED: list[bool] = []


def _save_forgone(force: bool = True) -> None:
    with _LEDGER_LOCK:
        if _DISK is None or _UNSAVED[0] <= 0.0 or (not force and _UNSAVED[0] < _SAVE_EVERY):
            return
        if not force and time.monotonic() - _LAST_SAVE[0] < _SAVE_INTERVAL:
            _save_at_exit()
            return
        _UNSAVED[0] = 0.0
        _LAST_SAVE[0] = time.monotonic()
        text = json.dumps(_DISK, sort_keys=True)
        try:
            path = _ledger_path()
            # one temporary per process and thread: another thread never truncates it
            temporary = path.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
            temporary.write_text(text)
            os.replace(temporary, path)
        except OSError:  # a read-only cache: the ledger lives in this process only
            pass


def stage_pin(plan: LogicalPlan, stage: Stage) -> str | None:
    """The backend a stage's features are pinned to (``.backend(name)``), if any."""
    pins = {plan.features[i].backend for i in stage.features} - {None}
    if len(pins) > 1:
        raise PipelineDefinitionError(
            f"one stage's features are pinned to different backends {sorted(pins)}: "  # type: ignore[type-var]
            "pin them to the same backend"
        )
    return pins.pop() if pins else None


def _pinned(
    n: int, kind: str, units: int, pin: str, predicted: dict[str, float], plan: LogicalPlan,
    stage: Stage,
) -> StageChoice:  # fmt: skip
    names = ", ".join(i.name for f in stage.features for i in plan.features[f].inputs)
    reason = f"{pin}: forced on {names} (.backend({pin!r}))"
    if predicted:
        reason += "; predicted " + ", ".join(f"{b} {t:.3g} s" for b, t in predicted.items())
    return StageChoice(n, kind, units, pin, predicted, reason, True)


def _has_map(plan: LogicalPlan, stage: Stage) -> bool:
    return any(isinstance(s, Map) for i in stage.features for s in plan.features[i].steps)


def _reason(
    best: str,
    predicted: dict[str, float],
    n_rows: int,
    units: int,
    kind: str,
    state: str,
    forgone: float = 0.0,
    one_time: float = 0.0,
) -> str:
    others = ", ".join(f"{b} {t:.3g} s" for b, t in predicted.items() if b != best)
    jit = {
        READY: "kernel loaded",
        CACHED: "kernel in the disk cache",
        COLD: "numba not imported yet",
        COMPILE: f"kernel not cached, compile ~{one_time:.2g} s",
    }[state]
    text = f"{best}: {n_rows:,} rows × {units} {kind} unit(s), predicted {predicted[best]:.3g} s"
    if others:
        text += f" vs {others}"
    if "numba" in predicted and kind != "encode":
        text += f"; {jit}"
        if forgone > 0.0 and state != READY:
            text += f" ({forgone:.3g} s of its one-time cost repaid by earlier runs on pandas)"
    return text


def numba_readiness(key: str | None = None, cached: Callable[[str], bool] | None = None) -> str:
    """How ready a Numba kernel is, without importing Numba: not imported yet (``cold``),
    loaded in this process, in the disk cache, or to be compiled."""
    if sys.modules.get("fastprep.backends.numba.backend") is None:
        return COLD
    files = sys.modules["fastprep.native.kernel_files"]  # numba_ imports it
    if key is None:
        return READY if files.any_loaded() else CACHED
    if files.is_loaded(key):
        return READY
    return CACHED if cached is not None and cached(key) else COMPILE


def with_measured(choice: StageChoice, phase: str, seconds: float) -> StageChoice:
    measured = dict(choice.measured or {})
    measured[phase] = round(measured.get(phase, 0.0) + seconds, 6)
    return replace(choice, measured=measured)


# ------------------------------------------------ helper kernels: Numba or numpy, per call


@dataclass(frozen=True)
class HelperCost:
    """One helper kernel family (validation scan, drift sums, CSR assembly ...): seconds
    per value on numpy and on Numba's loaded kernel, and seconds to compile it once."""

    numpy_value_seconds: float
    numba_value_seconds: float
    compile_seconds: float


#: measured on the 2-core VM (2026-12-04, a busy machine: best of 5) at 20k, 320k and
#: 3.2M values (validation scan: numpy 9.7-16, Numba 3.4-3.5 ns per value; drift sums over
#: half the rows: numpy 7.5-17, Numba 0.8-1.4 ns; CSR assembly per row and block, 20k and
#: 320k rows: numpy 44-61, Numba 9.5-11 ns); compile seconds are a first call's extra time
#: with an empty Numba cache. The scan was measured again (2026-12-05, busy VM, CPU time
#: at 3.4M values) after it came to read four chunks side by side: Numba 1.9-2.9 ns per
#: value on one thread (before: 4.8), its first compile 1.75x the old one's
HELPERS: dict[str, HelperCost] = {
    "scan": HelperCost(1.0e-8, 2.0e-9, 2.3),
    "drift": HelperCost(1.5e-8, 1.5e-9, 0.3),
    "csr": HelperCost(5.0e-8, 1.0e-8, 0.9),
    "rows": HelperCost(4.0e-9, 2.0e-9, 0.1),
    # text dictionary-encoding: Arrow's dictionary_encode (the no-compile twin) 15-28 ns,
    # the Numba encoder 5-6.5 ns per value (flights columns at 336k and 3.4M rows); its
    # first call with an empty cache took 3.7 s
    "text": HelperCost(2.0e-8, 6.0e-9, 3.5),
    # a repeated tag in a list<string> row: numpy's unique of (row, tag) pairs ~55 ns per
    # tag, the Numba pass ~3 ns (336k flights rows, 1M tags)
    "tags": HelperCost(5.5e-8, 3.0e-9, 0.3),
    # cross-fitted target encoding, per row and fold: numpy's pass per fold (masks,
    # bincounts; ~400 ns a row at 5 folds) against one Numba pass adding each row to its
    # training folds (~40 ns); tailnum at 327k rows on a busy machine; first compile 2.1 s
    "target": HelperCost(8.0e-8, 8.0e-9, 2.0),
    # exact sums of a column's values and squares (fitted means and variances): numpy's
    # cascade of exact float64 sums 19.5-21 ns, the Numba kernel 5.5-6.2 ns per value
    # (CPU time at 336k and 3.4M values on the busy VM); its first call compiled in 2.3 s
    "moments": HelperCost(2.0e-8, 6.0e-9, 2.0),
}
#: a whole job's seconds saved per input row when its kernels run on Numba instead of
#: numpy, summed from the rates above and the stages' (the flights pipeline at 336k rows:
#: ~0.15 s of scans, fused fit + transform, hashing and CSR assembly); a job imports Numba
#: only when this, times its rows, repays the import (``numba_import_seconds``): from
#: ~1.5M rows on the defaults
NUMBA_JOB_ROW_SAVING = 4.0e-7
#: per helper family: the path the current run took and why (``report``, ``explain``);
#: emptied when a run prepares its source
PATHS: dict[str, str] = {}


def numba_imported() -> bool:
    return "numba" in sys.modules


def job_imports_numba(n_rows: int, profile: CostProfile | None = None) -> bool:
    """Whether a job over ``n_rows`` rows repays importing Numba (already imported: yes)."""
    return numba_imported() or repays_numba(n_rows, profile)


def repays_numba(n_rows: int, profile: CostProfile | None = None) -> bool:
    """Whether a job over ``n_rows`` rows saves more on Numba's kernels than importing
    Numba costs (whether or not this process has imported it already)."""
    profile = profile or load_profile()
    return n_rows * NUMBA_JOB_ROW_SAVING > profile.numba_import_seconds


#: inside :func:`part_of_job`: how many times the calls of this thread's run are made in the
#: whole job it is a part of (the job's rows / the part's rows); 1.0 outside
_JOB_SCALE: ContextVar[float] = ContextVar("fastprep_job_scale", default=1.0)


@contextmanager
def part_of_job(job_rows: int, part_rows: int) -> Iterator[None]:
    """Choose the kernel paths of the calls made inside as the whole job would: this run
    is one part (a partition of ``part_rows`` rows) of a job of ``job_rows`` rows whose
    parts run one after another in this process (a Dask worker's partition tasks).

    A kernel's one-time cost (loading it from Numba's disk cache, compiling it) is paid
    once per process and serves every later part; compared with one part's saving alone
    it never pays (a 500,000-row partition's validation scan saves ~5 ms on Numba against
    a 12 ms load), so every part would run numpy's twin while one process over the whole
    job runs the kernel. :func:`kernel_path` weighs it against the job's saving instead:
    the call's saving times ``job_rows / part_rows``."""
    scale = job_rows / part_rows if job_rows > 0 and part_rows > 0 else 1.0
    token = _JOB_SCALE.set(max(scale, 1.0))
    try:
        yield
    finally:
        _JOB_SCALE.reset(token)


def job_scale() -> float:
    """How many times larger the job is than the part this thread runs now (1.0 outside
    :func:`part_of_job`)."""
    return _JOB_SCALE.get()


def kernel_path(
    what: str, n_values: int, *, cached: bool, loaded: bool = False, n_rows: int | None = None
) -> str:
    """``"numba"`` or ``"numpy"`` for one call of helper kernel family ``what`` over
    ``n_values`` values (``n_rows``: the job's rows, default ``n_values``, or as many
    times more as the job is larger than the part run now: :func:`part_of_job`).

    Numba's side pays what is not done yet: importing Numba (unless the job's size repays
    it, see :func:`job_imports_numba`), loading the kernel from the disk cache, or
    compiling it (``cached`` False), once for the whole job (:func:`part_of_job`). The
    cheaper prediction wins; ties go to numpy, which is also taken when Numba is not
    installed. ``FASTPREP_KERNEL_PATH=numba|numpy`` forces one path (tests compare the
    two)."""
    cost = HELPERS[what]
    profile = load_profile()
    # numpy's rate as measured by earlier calls on this install (``note_helper``), if any
    numpy_s = n_values * (_learned("rate:helper:" + what) or cost.numpy_value_seconds)
    forced = os.environ.get("FASTPREP_KERNEL_PATH")
    if forced in ("numba", "numpy"):
        PATHS[what] = f"{forced}: forced (FASTPREP_KERNEL_PATH)"
        return forced
    if not _numba_installed():
        PATHS[what] = "numpy: numba not installed"
        return "numpy"
    ledger = "helper:" + what
    if loaded:
        state, one_time = "loaded", 0.0
    elif cached:
        state, one_time = "cached", profile.numba_cache_load_seconds
    else:  # less what earlier runs lost by not compiling it (rent-or-buy, on disk)
        state, one_time = "not cached", max(0.0, cost.compile_seconds - _disk_forgone(ledger))
    scale = job_scale()
    rows = round(n_values * scale) if n_rows is None else n_rows
    importing = not numba_imported()
    if importing and not job_imports_numba(rows, profile):
        PATHS[what] = (
            f"numpy: numba not imported, {rows:,} rows would not repay its import "
            f"({profile.numba_import_seconds:.2g} s)"
        )
        return "numpy"
    run_s = n_values * cost.numba_value_seconds
    # the one-time cost is paid once for the whole job: this call's share of it
    numba_s = run_s + one_time / scale
    if numba_s < numpy_s:
        PATHS[what] = f"numba: {state} (predicted {numba_s:.2g} s vs numpy {numpy_s:.2g} s)"
        if state == "not cached":
            _add_forgone(ledger, None)
            _save_forgone()
        return "numba"
    if state == "not cached" and numpy_s > run_s:
        _add_forgone(ledger, numpy_s - run_s)
        _save_forgone(force=False)
    job = f" (a {scale:.3g}x larger job's share)" if scale > 1.0 else ""
    if state == "not cached":
        why = f"kernel not cached, compile ~{one_time:.2g} s{job} > run {numpy_s:.2g} s"
    else:
        why = f"{state}, predicted {numpy_s:.2g} s vs numba {numba_s:.2g} s{job}"
    PATHS[what] = f"numpy: {why}"
    return "numpy"


def _numba_installed() -> bool:
    return numba_imported() or _numba_findable()


@functools.lru_cache(maxsize=1)
def _numba_findable() -> bool:
    import importlib.util

    return importlib.util.find_spec("numba") is not None
