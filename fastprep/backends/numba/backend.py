"""The Numba backend: element-wise chains fused into one JIT kernel per stage (a stage
too large for one compile into several, see :data:`KERNEL_BRANCHES`).

Fit runs one parallel pass per level of fitted steps (block statistics merged with Chan's
update; medians by selection); transform runs one parallel pass that reads each input
column once and writes each output column of X once. Encoders and ``Map`` stages use the
reference implementations (hashing gets its own kernel in the sparse-kernels work).
Kernels are generated from plan nodes, written to a cache folder and compiled with
``cache=True``: a second process loads them from disk instead of compiling.
"""

from __future__ import annotations

import functools
import os
import re
import time
from typing import Any

import numpy as np

from fastprep.backends import moments
from fastprep.backends.moments import require_values
from fastprep.backends.numba import kernels as nk
from fastprep.backends.numba.codegen import (
    Chain,
    Program,
    compose_affine,
    fit_program,
    median_gather_program,
    transform_program,
)
from fastprep.backends.numba.ops import NUMBA, NumbaOp
from fastprep.backends.reference import backend as reference
from fastprep.backends.reference.datetime_parts import zone_table
from fastprep.backends.reference.expressions import evaluate as evaluate_expr
from fastprep.backends.reference.expressions import per_code_table
from fastprep.data.columns import Table, TextColumn
from fastprep.emit.sink import OutputSink
from fastprep.native import kernel_files, threads
from fastprep.native.arena import ARENA
from fastprep.plan.nodes import Feature, Input, LogicalPlan, Stage
from fastprep.plan.steps import Step
from fastprep.validate.number_checks import moments_only

#: fixed chunk count for statistics: results do not depend on the number of threads
N_CHUNKS = 64
#: transform chunks: only balance matters (results are per row)
TRANSFORM_CHUNKS = 16
#: below this many rows the chunks run on the calling thread: waking the thread pool was
#: measured to cost more than it saves for a memory-bound pass (see docs/compiler.md)
PARALLEL_MIN_ROWS = int(os.environ.get("FASTPREP_PARALLEL_MIN_ROWS", 1_000_000))


def chains_of(plan: LogicalPlan, stage: Stage) -> list[Chain]:
    return [
        Chain(
            index, position, item.name, item.expr, item.is_plain_column, plan.features[index].steps
        )
        for index in stage.features
        for position, item in enumerate(plan.features[index].inputs)
    ]


#: the most branches (``if``, ``and``, ``or``) one generated kernel gets: Numba's SSA pass
#: recurses once per basic block, and kernels of ~500 branches (100 standardized columns,
#: 40 features of ``where``/``max``/``//``) exceeded Python's recursion limit; a fused
#: stage above it is compiled as several kernels of consecutive chains (same results:
#: every chain is computed on its own)
KERNEL_BRANCHES = 240
_BRANCH = re.compile(r"\b(?:if|elif|while|and|or)\b")


def kernel_parts(chains: list[Chain], table: Table) -> list[list[Chain]]:
    """``chains`` cut into consecutive runs whose transform kernel stays within
    :data:`KERNEL_BRANCHES` (a chain above it alone runs alone)."""
    if len(chains) < 2:
        return [chains]
    text, selected = frozenset(_text_columns(table)), table.selection is not None
    weights = [_branches(c, text, selected, _tabled(table, [c])) for c in chains]
    if sum(weights) <= KERNEL_BRANCHES:
        return [chains]
    parts: list[list[Chain]] = [[]]
    total = 0
    for chain, weight in zip(chains, weights, strict=True):
        if parts[-1] and total + weight > KERNEL_BRANCHES:
            parts.append([])
            total = 0
        parts[-1].append(chain)
        total += weight
    return parts


@functools.lru_cache(maxsize=4096)
def _branches(chain: Chain, text: frozenset[str], selected: bool, tabled: frozenset[str]) -> int:
    """Branches of ``chain``'s own transform kernel (asked again for every batch and
    partition of a run: generated once)."""
    return len(_BRANCH.findall(transform_program([chain], set(text), selected, tabled).source))


def _text_columns(table: Table) -> set[str]:
    return {name for name, column in table.columns.items() if isinstance(column, TextColumn)}


# ---------------------------------------------------------------------------- fit


def _owner(feature: Feature, ops: list[NumbaOp]) -> NumbaOp | None:
    """The entry that fits or encodes a whole feature outside fused stages: its encoder's,
    or that of a first step making the chain's values from the table (``GroupStats``)."""
    if feature.encoder is not None:
        return ops[-1]
    if feature.steps and feature.steps[0].kind == "group":
        return ops[0]
    return None


def fit_stage(
    plan: LogicalPlan, stage: Stage, table: Table, log: reference.Repairs | None = None
) -> dict[int, reference.FeatureParams]:
    """Fit a stage: fused stages by fit rounds, other stages feature by feature (an
    encoder's own fit, else the reference's)."""
    if stage.kind != "fused":
        fitted: dict[int, reference.FeatureParams] = {}
        for index in stage.features:
            feature = plan.features[index]
            owner = _owner(feature, [NUMBA.op(step, "fit") for step in feature.steps])
            own = owner.fit if owner is not None else None
            fitted[index] = (
                own(plan, index, table) if own else reference.fit_feature(feature, table)
            )
        return fitted
    out: dict[int, reference.FeatureParams] = {i: {} for i in stage.features}
    for part in kernel_parts(chains_of(plan, stage), table):
        for chain, params in zip(part, _fit_chains(plan, part, table, log)):
            out[chain.feature][chain.name] = params
    return out


def _fit_chains(
    plan: LogicalPlan, chains: list[Chain], table: Table, log: reference.Repairs | None
) -> list[list[dict[str, Any]]]:
    """The learned parameters of each chain's steps, by fit rounds of one kernel."""
    learned: list[list[dict[str, Any]]] = [[{} for _ in c.steps] for c in chains]
    _static_params(chains, learned)
    pending = [[s for s, step in enumerate(c.steps) if step.needs_fit] for c in chains]
    while any(pending):
        targets, folded, direct = [], [], []
        for k, positions in enumerate(pending):
            if not positions:
                continue
            s = positions.pop(0)
            if _stat_kind(chains[k].steps[s]) == "values":
                direct.append((k, s))
                continue
            targets.append((k, s, _stat_kind(chains[k].steps[s])))
            if _folds_into_fill(chains[k].steps, s, positions):
                positions.pop(0)  # learned in this pass from the values before the fill
                if targets[-1][2] != "moments":  # a mean fill has its moments already
                    targets.append((k, s, "moments"))
                folded.append((k, s))
        extremes = frozenset(  # a fill folded into a MinMax learns its range too
            (k, s) for k, s in folded if _stat_kind(chains[k].steps[s + 1]) == "range"
        )
        for k, s in direct:  # quantiles or a likelihood search: numpy on the values
            learned[k][s] = _fit_on_values(plan, chains[k], s, learned[k], table)
        if not targets:
            continue
        program = fit_program(
            chains, targets, _text_columns(table), table.selection is not None,
            _tabled(table, chains), extremes,
        )  # fmt: skip
        moments, medians = _run_fit(program, chains, learned, table, log)
        results = dict(zip(program.stats, [*moments, *medians], strict=True))
        for (k, s, kind), result in results.items():
            if kind == "moments" and (k, s) in folded and _stat_kind(chains[k].steps[s]) != kind:
                continue  # the extra pass statistics of a folded median fill
            step = chains[k].steps[s]
            learned[k][s] = _params_from(
                step, kind, result, f"{step.describe()} on {chains[k].name!r}", table.n_rows
            )
        for k, s in folded:
            step = chains[k].steps[s + 1]
            present = results[(k, s, "moments")]
            learned[k][s + 1] = _params_after_fill(
                step, present, learned[k][s]["fill"], table.n_rows,
                f"{step.describe()} on {chains[k].name!r}",
            )  # fmt: skip
    return learned


def chain_moments(
    plan: LogicalPlan,
    table: Table,
    learned: dict[tuple[int, str], list[dict[str, Any]]],
    targets: list[tuple[int, str, int]],
    log: reference.Repairs | None = None,
) -> dict[tuple[int, str, int], moments.Moments]:
    """The moments (count, exact sums, extremes) of each target's chain value before step
    ``position`` — target ``(feature, input name, position)`` — over ``table``'s selected
    rows, with the steps before it applied with the ``learned`` parameters: one fit round
    of each fused stage's kernel, as this backend's fit runs it. A partition's partial
    aggregates, equal to the reference's moments of the same values. Targets of a feature
    in no fused stage are left out (the caller computes them)."""
    out: dict[tuple[int, str, int], moments.Moments] = {}
    wanted = set(targets)
    for stage in plan.execution_stages():
        if stage.kind != "fused":
            continue
        for chains in kernel_parts(chains_of(plan, stage), table):
            index = {(c.feature, c.name): k for k, c in enumerate(chains)}
            stats = sorted({(index[(f, n)], p, "moments") for f, n, p in wanted
                            if (f, n) in index})  # fmt: skip
            if not stats:
                continue
            program = fit_program(
                chains, stats, _text_columns(table), table.selection is not None,
                _tabled(table, chains), frozenset((k, s) for k, s, _ in stats),
            )  # fmt: skip
            params = [list(learned[(c.feature, c.name)]) for c in chains]
            found, _ = _run_fit(program, chains, params, table, log)
            for (k, s, _), result in zip(program.stats, found, strict=True):
                out[(chains[k].feature, chains[k].name, s)] = result
    return out


def _fit_on_values(
    plan: LogicalPlan, chain: Chain, s: int, learned: list[dict[str, Any]], table: Table
) -> dict[str, Any]:
    """A step fitted on all its input values (quantiles, a likelihood search): the values
    by the reference code, the fit by the reference fit (the same parameters)."""
    item = plan.features[chain.feature].inputs[chain.position]
    repairs = reference.Repairs()
    values = reference.input_values(item, table, repairs)
    values = reference.apply_chain(chain.steps[:s], learned[:s], values, chain.name, repairs)
    step = chain.steps[s]
    return reference.fit_step(step, values, f"{step.describe()} on {chain.name!r}")


def _folds_into_fill(steps: tuple[Step, ...], s: int, pending: list[int]) -> bool:
    """A fitted ``Standardize``/``MinMax`` right after a fitted ``FillMissing`` is learned in
    the fill's pass: its statistics are those of the present values plus the copies of the
    fill value (one pass over the data instead of two)."""
    return (
        NUMBA.op(steps[s], "fit").fills
        and steps[s].needs_fit
        and bool(pending)
        and pending[0] == s + 1
        and NUMBA.op(steps[s + 1], "fit").folds_after_fill
    )


def _params_after_fill(
    step: Step, present: moments.Moments, fill: float, n_rows: int, what: str
) -> dict[str, Any]:
    """``step``'s parameters over the filled values: the present values' moments with
    ``n_rows - count`` copies of ``fill`` (exact: as if the pass had seen them)."""
    total = moments.with_fill(present, fill, n_rows)
    require_values(total.count, n_rows, what)
    return NUMBA.entry(step, "params")(step, total, what)


def _stat_kind(step: Step) -> str | None:
    """What a fit round computes for a fitted ``step``."""
    return NUMBA.entry(step, "stat")(step)


def _static_params(chains: list[Chain], learned: list[list[dict[str, Any]]]) -> None:
    """Parameters known without data (fill constants, fixed bin edges), by the reference's
    fit of a step that learns nothing from its values."""
    for chain, params in zip(chains, learned):
        for s, step in enumerate(chain.steps):
            if not step.needs_fit:
                params[s] = reference.fit_step(step, np.empty(0), step.describe())


def _params_from(step: Step, kind: str, result: Any, what: str, n_rows: int) -> dict[str, Any]:
    """``n_rows``: the rows the fit saw (the error of no values says whether there were none)."""
    if kind == "median":
        value, count = result
        require_values(count, n_rows, what)
        return {"fill": value}
    require_values(result.count, n_rows, what)
    return NUMBA.entry(step, "params")(step, result, what)


def _run_fit(
    program: Program,
    chains: list[Chain],
    learned: list[list[dict[str, Any]]],
    table: Table,
    log: reference.Repairs | None,
) -> tuple[list[moments.Moments], list[tuple[float, int]]]:
    import numba

    n_moments = sum(1 for t in program.stats if t[2] != "median")
    n_medians = len(program.stats) - n_moments
    acc = moments.new_accumulators(N_CHUNKS, max(n_moments, 1))
    parallel = table.n_rows >= PARALLEL_MIN_ROWS
    lanes = max(1, min(numba.get_num_threads(), N_CHUNKS)) if parallel else 1
    sums, squares = moments.new_bins(lanes, max(n_moments, 1))  # per lane: exact sums
    hists = [np.zeros((lanes, nk.BUCKETS), np.int64) for _ in range(n_medians)]  # per lane
    args = [*_arrays(program, table), _param_array(program, chains, learned), table.n_rows,
            _selection(table), acc, sums, squares, *hists, N_CHUNKS, lanes]  # fmt: skip
    module = _load(program, args, log)
    if parallel:
        module.kernel(*args)
    else:  # same chunks, same merge order, same results: only without threads
        size = (table.n_rows + N_CHUNKS - 1) // N_CHUNKS
        head = args[:-2]
        for c in range(N_CHUNKS):
            module.rows(*head, c, c * size, min(table.n_rows, c * size + size), 0)
    found = [moments.from_kernel(acc, sums, squares, k) for k in range(n_moments)]
    medians = [
        nk.median_by_buckets(
            hist.sum(axis=0), _bucket_gatherer(chains, k, s, learned, table, hist, log)
        )
        for hist, (k, s, _) in zip(hists, program.stats[n_moments:])
    ]
    return found, medians


def _bucket_gatherer(
    chains: list[Chain],
    k: int,
    s: int,
    learned: list[list[dict[str, Any]]],
    table: Table,
    hist: np.ndarray,
    log: reference.Repairs | None,
) -> Any:
    """``gather(bucket)`` for :func:`fastprep.backends.numba.kernels.median_by_buckets`: the median target's
    values in ``bucket``, computed again from the inputs in one pass whose lanes are the
    fit round's (lane ``t`` writes its ``hist[t, bucket]`` values from its offset), and
    the largest value in an earlier bucket."""
    program = median_gather_program(
        chains, k, s, _text_columns(table), table.selection is not None, _tabled(table, chains)
    )
    lanes = hist.shape[0]

    def gather(bucket: int) -> tuple[np.ndarray, float]:
        per_lane = hist[:, bucket]
        out = np.empty(int(per_lane.sum()))
        offsets = np.cumsum(per_lane) - per_lane
        belows = np.full(lanes, -np.inf)
        args = [*_arrays(program, table), _param_array(program, chains, learned), table.n_rows,
                _selection(table), out, np.uint64(bucket), N_CHUNKS, lanes, offsets, belows]  # fmt: skip
        module = _load(program, args, log)
        if lanes > 1:
            module.kernel(*args)
        else:  # the fit ran serially: one lane, all rows (the values' order does not matter)
            _, belows[0] = module.rows(*args[:-4], 0, table.n_rows, 0, -np.inf)
        return out, float(belows.max())

    return gather


# ---------------------------------------------------------------------------- transform


def run_stage(
    plan: LogicalPlan,
    stage: Stage,
    params: list[reference.FeatureParams],
    table: Table,
    sink: OutputSink,
    log: reference.Repairs,
) -> set[int]:
    """Run a stage into ``sink``; a fused stage reports its features checked finite."""
    if stage.kind != "fused":
        checked: set[int] = set()
        for index in stage.features:
            feature = plan.features[index]
            owner = _owner(feature, [NUMBA.op(step, "encode") for step in feature.steps])
            own = owner.encode if owner is not None else None
            if own is not None:
                if own(feature, params[index], table, sink, index, log):
                    checked.add(index)  # the feature's own encode checked it finite
            else:
                checked |= reference.run_stage(
                    plan, Stage(stage.kind, (index,)), params, table, sink, log
                )
        return checked
    bad_rows = 0
    for chains in kernel_parts(chains_of(plan, stage), table):
        bad_rows += _run_chains(chains, params, table, sink, log)
    return set(stage.features) if bad_rows == 0 else set()


def _run_chains(
    chains: list[Chain],
    params: list[reference.FeatureParams],
    table: Table,
    sink: OutputSink,
    log: reference.Repairs,
) -> int:
    """Run ``chains`` by one kernel into ``sink``; the number of rows with a value that is
    not finite."""
    learned = [params[c.feature][c.name] for c in chains]
    program = transform_program(
        chains, _text_columns(table), table.selection is not None, _tabled(table, chains)
    )
    offsets = np.array([sink.column_offset(c.feature) + c.position for c in chains], dtype=np.int64)
    reps = np.zeros((TRANSFORM_CHUNKS, max(len(program.repairs), 1)), dtype=np.int64)
    bads = np.zeros(TRANSFORM_CHUNKS, dtype=np.int64)
    args = [*_arrays(program, table), _param_array(program, chains, learned), table.n_rows,
            _selection(table), sink.dense, offsets, TRANSFORM_CHUNKS, reps, bads]  # fmt: skip
    module = _load(program, args, log)
    if table.n_rows >= PARALLEL_MIN_ROWS:
        module.kernel(*args)
    else:
        bads[0] = module.rows(*args[:-3], 0, table.n_rows, reps[0])
    totals = reps.sum(axis=0)
    for slot, (k, rule) in enumerate(program.repairs):
        log.add(chains[k].name, rule, int(totals[slot]))
    return int(bads.sum())


def target_values(target: Input, table: Table) -> tuple[np.ndarray, bool]:
    """The target over the table's rows as float32, by one generated kernel writing the
    output array directly: non-finite (NaN) where the reference's value is missing,
    undefined or beyond float32's range (the caller quarantines those rows); and whether
    there is any such row (counted by the kernel: clean data needs no second pass).

    Why: the reference path evaluated ``arr_delay > 15`` in float64 temporaries (the
    comparison, its missing mask, ``where``) and cast at the end — ~11 ms and ~75 MiB
    of temporaries at 3.3M rows, against ~2 ms and the 13 MiB output here."""
    chain = Chain(-1, 0, target.name, target.expr, target.is_plain_column, ())
    program = transform_program(
        [chain], _text_columns(table), table.selection is not None, _tabled(table, [chain])
    )
    y = ARENA.empty(table.n_rows, np.float32)
    reps = np.zeros((TRANSFORM_CHUNKS, max(len(program.repairs), 1)), dtype=np.int64)
    bads = np.zeros(TRANSFORM_CHUNKS, dtype=np.int64)
    args = [*_arrays(program, table), np.empty(1), table.n_rows, _selection(table),
            y.reshape(-1, 1), np.zeros(1, dtype=np.int64), TRANSFORM_CHUNKS, reps, bads]  # fmt: skip
    module = _load(program, args, None)
    if table.n_rows >= PARALLEL_MIN_ROWS:
        module.kernel(*args)
    else:
        bads[0] = module.rows(*args[:-3], 0, table.n_rows, reps[0])
    return y, bool(bads.sum())


def target_readiness(target: Input, table: Table) -> str:
    """:func:`kernel_readiness` of the target's kernel."""
    chain = Chain(-1, 0, target.name, target.expr, target.is_plain_column, ())
    program = transform_program(
        [chain], _text_columns(table), table.selection is not None, _tabled(table, [chain])
    )
    return _readiness_of(program.key)


# ---------------------------------------------------------------------------- plumbing


_NO_SELECTION = np.empty(0, dtype=np.int64)


def _selection(table: Table) -> np.ndarray:
    return _NO_SELECTION if table.selection is None else table.selection


def _arrays(program: Program, table: Table) -> list[np.ndarray]:
    """Source arrays as stored (no float64 copies, no row selection copies)."""
    arrays: list[np.ndarray] = []
    for name in program.number_columns:
        arrays.append(np.ascontiguousarray(table.raw(name)))
    for name in program.code_columns:
        arrays.append(table.raw(name).codes)
    for lookup in program.lookups:  # code -1 (missing) reads the last entry
        arrays.append(per_code_table(lookup.node, lookup.column, table.raw(lookup.column)))
    for func, name in program.hoisted:
        source = table.raw(name)
        if name in program.tabled:
            lowest, values = table.derive(("table", func, name), source,
                                          lambda f=func, v=source, n=name: _value_table(
                                              f, _int_range(table, n, v)))  # fmt: skip
            arrays += [values, np.int64(lowest)]
        else:
            arrays.append(table.derive(("numpy", func, name), source,
                                       lambda f=func, v=source: _ufunc(f, v)))  # fmt: skip
    for name, tz in program.zones:  # the zone's offset changes over the column's range
        source = table.raw(name)
        arrays += table.derive(("zone", tz, name), source,
                               lambda t=tz, v=source: zone_table(t, v))  # fmt: skip
    for node in program.evaluated:  # over the selected rows: read as ``ev[i]``
        arrays.append(np.ascontiguousarray(evaluate_expr(node, table), dtype=np.float64))
    return arrays


#: an integer column gets its hoisted functions as a table of values over its range when
#: the range is at most 1/RANGE_SHARE of its length and at most TABLE_MAX values
RANGE_SHARE = 8
TABLE_MAX = 1 << 16


def _tabled(table: Table, chains: list[Chain]) -> frozenset[str]:
    """The chains' int64 columns with a small range: a function of such a column (log1p of
    ``distance``, ``hour``) is computed once per value in the range and looked up by value
    inside the kernels — the same float64 results, no full-length array of them (26 MB at
    3.3M rows, written once and read by every fit round and the transform)."""
    from fastprep.plan.expr import Col, walk

    names = {n.name for c in chains for n in walk(c.expr) if isinstance(n, Col)}
    out = set()
    for name in names:
        source = table.columns.get(name)
        if isinstance(source, np.ndarray) and source.dtype == np.int64 and len(source):
            lowest, highest = _int_range(table, name, source)
            exact = max(abs(lowest), abs(highest)) < 2**53  # the range's values are floats
            if exact and highest - lowest < min(len(source) // RANGE_SHARE, TABLE_MAX):
                out.add(name)
    return frozenset(out)


def _int_range(table: Table, name: str, source: np.ndarray) -> tuple[int, int]:
    """An int64 column's range, from validation's remembered scan (else one scan)."""
    scanned = table.derive(("scan", name), source, lambda: moments_only(source))
    return int(scanned.smallest), int(scanned.largest)


def _value_table(func: str, bounds: tuple[int, int]) -> tuple[int, np.ndarray]:
    """(lowest, ``np.<func>`` of every integer in ``bounds`` as float64): bit-identical to
    the function of the column converted to float64, value by value."""
    lowest, highest = bounds
    domain = np.arange(lowest, highest + 1, dtype=np.int64)
    with np.errstate(all="ignore"):
        return lowest, getattr(np, func)(domain, dtype=np.float64)


#: below this many values a hoisted ufunc runs on one thread
UFUNC_THREADS_MIN = 1 << 20
#: thread chunks start at multiples of this many elements (whole SIMD blocks)
UFUNC_ALIGN = 4096


def _ufunc(func: str, values: np.ndarray) -> np.ndarray:
    """``np.<func>(values)`` as float64 into retained memory, split across threads for
    large columns (numpy's ufuncs release the GIL; element-wise, so bit-identical)."""
    out = ARENA.empty(len(values), np.float64)
    parts = min(threads.workers(), 8)
    if len(values) < UFUNC_THREADS_MIN or parts == 1:
        _ufunc_into(func, values, out, 0, len(values))
        return out
    step = -(-len(values) // parts // UFUNC_ALIGN) * UFUNC_ALIGN
    starts = range(0, len(values), step)
    threads.map_all(lambda lo: _ufunc_into(func, values, out, lo, lo + step), starts)
    return out


def _ufunc_into(func: str, values: np.ndarray, out: np.ndarray, lo: int, hi: int) -> None:
    with np.errstate(all="ignore"):  # per thread: the missing/invalid are counted later
        getattr(np, func)(values[lo:hi], out=out[lo:hi], dtype=np.float64)


def _param_array(
    program: Program, chains: list[Chain], learned: list[list[dict[str, Any]]]
) -> np.ndarray:
    values = np.empty(max(len(program.params), 1), dtype=np.float64)
    arrays: list[np.ndarray] = []  # fitted arrays, after the scalar slots
    at = len(values)
    for slot, (k, s, key) in enumerate(program.params):
        step = chains[k].steps[s]
        if key[:4] in ("off:", "len:"):
            data = _array_param(learned[k][s], key[4:])
            if key.startswith("len:"):
                values[slot] = len(data)
            else:
                values[slot] = at
                arrays.append(data)
                at += len(data)
        elif key.startswith("affine_"):
            a, b = compose_affine(chains[k].steps, learned[k], s, int(key.split(":")[1]))
            values[slot] = a if key.startswith("affine_a") else b
        elif NUMBA.has(step, "constants"):  # e.g. a clip's bounds
            values[slot] = NUMBA.entry(step, "constants")(step)[key]
        else:
            values[slot] = learned[k][s][key]
    return np.concatenate([values, *arrays]) if arrays else values


def _array_param(fitted: dict[str, Any], name: str) -> np.ndarray:
    """A fitted array read by a kernel: bin edges, quantiles, or the quantiles' levels."""
    if name == "references":  # QuantileTransformer's levels: linspace(0, 1, n)
        return np.linspace(0, 1, len(fitted["quantiles"]), endpoint=True)
    return np.asarray(fitted[name], dtype=np.float64)


def _load(program: Program, args: list[Any], log: reference.Repairs | None) -> Any:
    """Import the generated module (writing it once) and compile its kernel and row loop
    for these argument types; returns the module."""
    import numba

    key = program.key
    module = kernel_files.load_module(program.source)
    kernel = module.kernel
    signature = tuple(numba.typeof(a) for a in args)
    if signature not in kernel.overloads:
        hits = sum(kernel.stats.cache_hits.values())
        started = time.perf_counter()
        kernel.compile(signature)  # compiles (or loads) ``rows`` too: the kernel calls it
        seconds = time.perf_counter() - started
        cached = sum(kernel.stats.cache_hits.values()) > hits
        if log is not None:
            log.compiled.append({"kernel": key, "seconds": round(seconds, 4), "cache_hit": cached})
    return module


def kernel_readiness(plan: LogicalPlan, stage: Stage, table: Table) -> str:
    """Whether the fused transform kernel of ``stage`` is loaded, cached on disk or to be
    compiled (for the planner: the fit rounds' kernels are compiled alongside)."""
    found = set()
    for chains in kernel_parts(chains_of(plan, stage), table):
        program = transform_program(
            chains, _text_columns(table), table.selection is not None, _tabled(table, chains)
        )
        found.add(_readiness_of(program.key))
    return next(r for r in ("compile", "cached", "loaded") if r in found)


def _readiness_of(key: str) -> str:
    """Loaded in this process, in Numba's disk cache (the generated module is on disk and
    its ``kernel`` in Numba's index for the current source), or to be compiled."""
    if kernel_files.is_loaded(key):
        return "loaded"
    path = kernel_files.cache_dir() / f"fp_{key}.py"
    on_disk = kernel_files.is_on_disk(key) and kernel_files.numba_cached(path, "kernel")
    return "cached" if on_disk else "compile"
