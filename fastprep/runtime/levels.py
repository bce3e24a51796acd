"""The fit's passes over a source's partitions, wherever a pass runs (a Dask cluster, or
this process one partition at a time).

Fit is a few full passes: one per level of fitted steps in the longest chain, plus one for
each level with a median (a fitted ``Standardize``/``MinMax`` right after a fitted
``FillMissing`` folds into the fill's pass). A pass maps
:func:`fastprep.runtime.partition_tasks.fit_partials` over the partitions; the partial aggregates
are merged here, in partition order, so every executor learns the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.backends.reference import group_stats
from fastprep.data.sources import Source
from fastprep.errors import PipelineDefinitionError, Reason
from fastprep.plan.nodes import LogicalPlan
from fastprep.plan.steps import Bin, FillMissing, MinMax, Standardize
from fastprep.runtime import aggregates as agg
from fastprep.runtime.cross_fit import CrossFit
from fastprep.runtime.report import Report
from fastprep.validate.findings import Finding, merge_findings

if TYPE_CHECKING:  # the partition tasks (and the shard writers they import) load on use:
    # a run in memory only counts its passes here (the pre-flight)
    from fastprep.runtime.partition_tasks import Target

Learned = dict[tuple[int, str], list[dict[str, Any]]]
#: runs one pass: (learned so far, targets, stage name) -> one result per partition, in order
RunPass = Callable[[Learned, list["Target"], str], list[dict[str, Any]]]


def fitted_levels(plan: LogicalPlan) -> tuple[dict[Any, list[int]], dict[Any, set[int]]]:
    """Per (feature, input): the positions fitted level by level, and the folded ones."""
    levels = {
        (f, item.name): [s for s, step in enumerate(feature.steps) if step.needs_fit]
        for f, feature in enumerate(plan.features)
        for item in feature.inputs
    }
    folds = _folds(plan, levels)
    levels = {k: [q for q in v if q not in folds.get(k, ())] for k, v in levels.items()}
    return levels, folds


def level_targets(plan: LogicalPlan) -> list[list[Target]]:
    """Per level of fitted steps, what its pass computes: one target per (input, step) of
    that level (a median as its summary, ``"summary"``), plus the folded step after a fill
    (``"unfilled"``). A level with a median or a percentile takes a second pass."""
    levels, folds = fitted_levels(plan)
    out: list[list[Target]] = []
    for level in range(max((len(p) for p in levels.values()), default=0)):
        targets: list[Target] = []
        for (f, name), positions in levels.items():
            if level < len(positions):
                kind = agg.partial_kind(plan.features[f].steps[positions[level]])
                targets.append((f, name, positions[level], "summary" if kind == "median"
                                else kind, None))  # fmt: skip
                if positions[level] + 1 in folds.get((f, name), ()):
                    targets.append((f, name, positions[level] + 1, "unfilled", None))
        out.append(targets)
    return out


def _by_order(targets: list[Target]) -> list[Target]:
    """The targets whose level needs a second pass (medians, percentiles)."""
    return [t for t in targets if t[3] in ("summary", "order")]


def later_chains(plan: LogicalPlan) -> tuple[tuple[int, str], ...]:
    """The (feature, input) chains a pass after the first computes statistics of (a
    median's or percentiles' window pass, later levels): what a first pass keeps, 8 bytes
    a row each, for the later passes to run without reading the partition again."""
    levels = level_targets(plan)
    chains = {(f, name) for targets in levels[1:] for f, name, *_ in targets}
    chains |= {(f, name) for f, name, *_ in _by_order(levels[0] if levels else [])}
    return tuple(sorted(chains))


def count_passes(plan: LogicalPlan) -> int:
    """Full passes over the source the fit needs (at least one: validation)."""
    return max(sum(2 if _by_order(t) else 1 for t in level_targets(plan)), 1)


def fit_levels(
    plan: LogicalPlan, source: Source, run_pass: RunPass, rows: int = 0,
    cross_fit: CrossFit | None = None, whole_source: list[Finding] | None = None,
) -> tuple[list[dict[str, Any]], Report]:  # fmt: skip
    """Fitted parameters equal to the single-machine fit's, and the fit's report.
    ``rows``: the source's rows when known up front (a step that gathers its values is
    refused before any pass when they could not fit). ``cross_fit``: the fit of a
    partitioned fit_transform, which also collects the fit rows' out-of-fold encodings
    and each partition's fitted rows. ``whole_source``: findings about the source as a
    whole (its undeclared columns), first in the report, as in memory."""
    from fastprep.backends.reference import scalers

    learned: Learned = {
        (f, item.name): [_static(step) for step in feature.steps]
        for f, feature in enumerate(plan.features)
        for item in feature.inputs
    }
    passes = level_targets(plan)
    for targets in passes:
        for f, name, q, kind, _ in targets:
            step = plan.features[f].steps[q]
            gathers_median = kind == "groups" and "median" in getattr(step, "stats", ())
            if kind in ("values", "target") or gathers_median:  # gathered on the client
                agg.check_gather_size(step, name, rows)
    report: Report | None = None
    retries = 0
    fitted_rows: list[int] = []
    for level, targets in enumerate(passes):
        results = run_pass(learned, targets, f"fit level {level}")
        retries += sum(r["retries"] for r in results)
        if report is None:
            report = _fit_report(results, source, whole_source or [])
        medians = _by_order(targets)
        _merge(plan, results, [t for t in targets if t[3] not in ("summary", "order", "unfilled")],
               learned, report, cross_fit)  # fmt: skip
        fitted_rows = [r["rows_fit"] for r in results]
        if medians:
            windows, ranks = [], {}
            for f, name, position, kind, _ in medians:
                parts = [r["partials"][(f, name, position)] for r in results]
                step = plan.features[f].steps[position]
                what = f"{step.describe()} on {name!r}"
                if kind == "summary":
                    window = agg.median_window(parts, report.rows_out, what)
                    windows.append((f, name, position, "window", window))
                    continue
                total = sum(p.count for p in parts)
                agg.require_values(total, report.rows_out, what)
                ranks[(f, name, position)] = sorted(scalers.order_ranks(step, total))
                around = tuple(
                    agg.rank_windows(parts, [(r, r) for r in ranks[(f, name, position)]])
                )
                windows.append((f, name, position, "windows", around))
            second = run_pass(learned, windows, f"fit level {level} median")
            retries += sum(r["retries"] for r in second)
            for f, name, position, kind, _ in windows:
                parts = [r["partials"][(f, name, position)] for r in second]
                summaries = [r["partials"][(f, name, position)] for r in results]
                if kind == "window":
                    total = sum(p.count for p in summaries)
                    learned[(f, name)][position] = {"fill": agg.median_from_windows(parts, total)}
                else:
                    step = plan.features[f].steps[position]
                    learned[(f, name)][position] = agg.params_from_order(
                        step, summaries, parts, ranks[(f, name, position)],
                        f"{step.describe()} on {name!r}",
                    )  # fmt: skip
        _merge_folded(plan, results, [t for t in targets if t[3] == "unfilled"], learned, report)
    if report is None:
        validated = run_pass(learned, [], "validate")
        fitted_rows = [r["rows_fit"] for r in validated]
        report = _fit_report(validated, source, whole_source or [])
    if cross_fit is not None:
        cross_fit.finish(fitted_rows)
    report.notes.extend(retry_notes(retries))
    params = [
        {item.name: learned[(f, item.name)] for item in feature.inputs}
        for f, feature in enumerate(plan.features)
    ]
    return params, report


def retry_notes(retries: int) -> list[str]:
    """The report's note on the transient read errors a run retried (none: no note)."""
    return [f"{retries} transient read error(s) retried"] if retries else []


def _folds(plan: LogicalPlan, levels: dict[tuple[int, str], list[int]]) -> dict[Any, set[int]]:
    """Per chain, the fitted ``Standardize``/``MinMax`` positions right after a fitted
    ``FillMissing``: their moments are the fill's input moments with the fill value folded
    in (:func:`aggregates.with_fill`), learned in the fill's pass — one pass fewer per such
    level (the flights pipeline's ``FillMissing("median") >> Standardize()``: 3 -> 2)."""
    out: dict[Any, set[int]] = {}
    for (f, name), positions in levels.items():
        steps = plan.features[f].steps
        for before, q in zip(positions, positions[1:]):
            fill = steps[before]
            if (before == q - 1 and isinstance(fill, FillMissing) and fill.needs_fit
                    and isinstance(steps[q], (Standardize, MinMax))):  # fmt: skip
                out.setdefault((f, name), set()).add(q)
    return out


def _merge_folded(
    plan: LogicalPlan, results: list[dict[str, Any]], targets: list[Target], learned: Learned,
    report: Report,
) -> None:  # fmt: skip
    for f, name, position, _, _ in targets:
        step = plan.features[f].steps[position]
        present = agg.merge_moments([r["partials"][(f, name, position)] for r in results])
        fill = learned[(f, name)][position - 1]["fill"]
        total = agg.with_fill(present, fill, report.rows_out)
        what = f"{step.describe()} on {name!r}"
        learned[(f, name)][position] = agg.params_from_moments(step, total, report.rows_out, what)


def _static(step: Any) -> dict[str, Any]:
    if isinstance(step, FillMissing) and not step.needs_fit:
        return {"fill": step.value}
    if isinstance(step, Bin) and not step.needs_fit:  # fixed edges
        return {"edges": np.asarray(step.edges, dtype=np.float64)}
    return {}


def learned_list(learned: Learned) -> list[Any]:
    return [[list(k), v] for k, v in sorted(learned.items())]


def _merge(
    plan: LogicalPlan, results: list[dict[str, Any]], targets: list[Target], learned: Learned,
    report: Report, cross_fit: CrossFit | None = None,
) -> None:  # fmt: skip
    grouped: dict[int, dict[str, Any]] = {}  # GroupStats: merged once for all outputs
    for f, name, position, kind, _ in targets:
        step = plan.features[f].steps[position]
        parts = [r["partials"][(f, name, position)] for r in results]
        what = f"{step.describe()} on {name!r}"
        if kind == "groups":
            if f not in grouped:
                grouped[f] = group_stats.merge(step, parts)
            learned[(f, name)][position] = grouped[f][name]
        elif kind == "vocabulary":
            learned[(f, name)][position] = agg.params_from_vocabularies(
                parts, step.min_frequency, step.max_categories
            )
        elif kind == "values":
            # the gathered values are let go once fitted, not held through the rest of the
            # level (its median pass reads every partition again)
            for r in results:
                del r["partials"][(f, name, position)]
            learned[(f, name)][position] = agg.params_from_values(step, parts, what)
            del parts
        elif kind == "target":  # gathered rows, let go once fitted as the values above
            for r in results:
                del r["partials"][(f, name, position)]
            learned[(f, name)][position] = agg.params_from_target_rows(step, parts, what, cross_fit)
            del parts
        elif kind == "counts":
            learned[(f, name)][position] = agg.params_from_counts(parts)
        else:
            total = agg.merge_moments(parts)
            learned[(f, name)][position] = agg.params_from_moments(
                step, total, report.rows_out, what
            )


def _fit_report(
    results: list[dict[str, Any]], source: Source, whole_source: list[Finding]
) -> Report:
    report = Report(source=str(source), backend="distributed")
    report.rows_in = sum(r["rows_in"] for r in results)
    report.rows_out = sum(r["rows_fit"] for r in results)
    report.rows_quarantined = sum(r["rows_quarantined"] for r in results)
    report.findings = merge_findings([*whole_source, *_source_findings(results)])
    report.check_accounting()
    return report


#: fit warnings about a whole column (or the whole input): a partition knows only itself
WHOLE_SOURCE_RULES = (Reason.ALL_NULL.value, Reason.CONSTANT.value, Reason.EMPTY.value)


def _source_findings(results: list[dict[str, Any]]) -> list[Finding]:
    """The partitions' findings totalled (one per rule), keeping a whole-column fit warning
    only where every partition with rows gave it: a column missing in one partition is not
    all missing, and one empty partition does not make the input empty. A column whose
    partitions say what their one value is gets the one-process verdict instead
    (:func:`_constant_findings`)."""
    findings = [f for r in results for f in r["findings"] if f.rule not in WHOLE_SOURCE_RULES]
    with_rows = [r for r in results if r["rows_in"]] or results[:1]
    told = {c for r in with_rows for c in r.get("constants", {})}
    keys = [
        {(f.column, f.rule) for f in r["findings"] if f.rule in WHOLE_SOURCE_RULES}
        for r in with_rows
    ]
    everywhere = set.intersection(*keys) if keys else set()
    everywhere -= {(c, Reason.CONSTANT.value) for c in told}
    whole = [f for r in with_rows for f in r["findings"] if (f.column, f.rule) in everywhere]
    if len(with_rows) > 1:  # each partition's single value may differ from the others'
        whole = [
            replace(f, detail="(one distinct value within every partition at fit time)")
            if f.rule == Reason.CONSTANT.value
            else f
            for f in whole
        ]
    whole = merge_findings([*whole, *_constant_findings(with_rows, told)])
    return merge_findings([*findings, *whole])


def _constant_findings(results: list[dict[str, Any]], columns: set[str]) -> list[Finding]:
    """``columns`` that hold one distinct value over the whole fit, as one process finds
    them: every partition with rows found the column constant or all missing, and the
    constant ones' values agree (text: the same value; numbers: within the rounding one
    process allows over all the rows, ``validator.near_equal``). Counted over those
    partitions' rows, first rows the smallest."""
    from fastprep.validate.validator import near_equal

    rows = sum(r["rows_in"] for r in results)
    kinds = (Reason.CONSTANT.value, Reason.ALL_NULL.value)
    out: list[Finding] = []
    for column in sorted(columns):
        parts = [[f for f in r["findings"] if f.column == column and f.rule in kinds]
                 for r in results]  # fmt: skip
        values = [r["constants"][column] for r in results if column in r.get("constants", {})]
        if not all(parts) or len({v[0] for v in values}) != 1:
            continue  # a partition where the column has values but no single one
        if values[0][0] == "text":
            same = len({v[1] for v in values}) == 1
        else:
            same = near_equal(min(v[1] for v in values), max(v[2] for v in values), rows)
        if same:
            detail = next(f.detail for p in parts for f in p if f.rule == Reason.CONSTANT.value)
            out += [replace(f, rule=Reason.CONSTANT.value, detail=detail) for p in parts for f in p]
    return out


def count_order_targets(plan: LogicalPlan) -> int:
    """How many (input, step) order statistics (medians, percentiles) the fit learns."""
    return sum(len(_by_order(targets)) for targets in level_targets(plan))


def check_fittable(plan: LogicalPlan) -> None:
    """A plan whose fit cannot be merged from partitions is refused up front."""
    from fastprep.plan.steps import Vectorize

    if any(isinstance(f.encoder, Vectorize) for f in plan.features):  # no partials
        raise PipelineDefinitionError(
            "fp.Vectorize() is not fitted on partitions yet (no partial vocabulary of dict "
            "features); fit without client= and transform on the cluster, or use fp.Hash(n)"
        )
