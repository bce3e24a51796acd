"""The reference backend: numpy-vectorized fit and transform, step by step.

Every other backend must produce the same X as this one. Steps never modify their input
in place (an input may be a column of the validated table, shared by other features).
What it does per step type is one entry of its table ``REFERENCE`` (at the end of this
module; see :mod:`fastprep.backends.base` for adding a step).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fastprep.backends import moments
from fastprep.backends.base import Dispatch
from fastprep.backends.base import FeatureParams as FeatureParams  # the reference API
from fastprep.backends.reference import dict_columns as dict_reference
from fastprep.backends.reference import group_stats, scalers, target_encoding
from fastprep.backends.reference import hashing as hashref
from fastprep.backends.reference import tags as tag_features
from fastprep.backends.reference.encoders import (  # noqa: F401  (re-exported: the reference API)
    categorify_codes,
    category_codes,
    fit_categories,
    onehot_block,
)
from fastprep.backends.reference.expressions import evaluate
from fastprep.backends.reference.map_step import apply_map
from fastprep.backends.reference.stats import (
    fill_value,
    minmax_from_range,
    minmax_params,
    standardize_params,
)
from fastprep.data.columns import Table, TextColumn
from fastprep.data.dict_column import DictColumn
from fastprep.data.tag_column import TagColumn
from fastprep.emit.blocks import CodesBlock, SparseBlock
from fastprep.emit.layout import bin_names, hash_prefix
from fastprep.emit.sink import OutputSink
from fastprep.errors import BackendError, FitError
from fastprep.plan.nodes import Feature, Input, LogicalPlan, Stage
from fastprep.plan.steps import (
    Bin,
    Categorify,
    Clip,
    CountEncode,
    FillMissing,
    GroupStats,
    Hash,
    Log1p,
    Map,
    MaxAbsScale,
    MinMax,
    OneHot,
    PowerTransform,
    QuantileTransform,
    RobustScale,
    Standardize,
    Step,
    TargetEncode,
    Vectorize,
)


@dataclass
class Repairs:
    """What a run did besides computing: values turned missing, kernels compiled."""

    #: (output, rule) -> count of values a step turned into missing (e.g. log1p of x < -1)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    #: one entry per kernel compiled or loaded: name, seconds, whether the disk cache served it
    compiled: list[dict[str, Any]] = field(default_factory=list)

    def add(self, output: str, rule: str, count: int) -> None:
        if count:
            self.counts[(output, rule)] = self.counts.get((output, rule), 0) + count


def input_values(item: Input, table: Table, repairs: Repairs) -> np.ndarray | TextColumn:
    """Evaluate a feature input; infinities/invalid results of an ``expr`` become missing."""
    if item.is_plain_column and isinstance(table.raw(item.name), (DictColumn, TagColumn)):
        return table[item.name]  # type: ignore[return-value]  # a dict/tag column as is
    value = evaluate(item.expr, table)
    if item.is_plain_column or isinstance(value, TextColumn):
        return value
    return finish_input(item, value, table, repairs)


def evaluate_expr(node: Any, table: Table) -> np.ndarray | TextColumn:
    """Reference evaluation of an expression tree (no missing-value repair)."""
    return evaluate(node, table)


def finish_input(item: Input, value: np.ndarray, table: Table, repairs: Repairs) -> np.ndarray:
    """Turn a derived input's ±inf/undefined values into missing, counting the new ones."""
    bad = ~np.isfinite(value)
    inputs_missing = np.zeros(len(value), dtype=bool)
    for name in item.columns:
        column = table[name]
        inputs_missing |= column.codes < 0 if isinstance(column, TextColumn) else np.isnan(column)
    new_missing = bad & ~inputs_missing
    repairs.add(item.name, "expr_not_finite", int(np.count_nonzero(new_missing)))
    if bad.any():
        value = np.where(bad, np.nan, value)
    return value


def fit_feature(
    feature: Feature, table: Table, kernels: group_stats.GroupKernels | None = None
) -> FeatureParams:
    """Learn each step's parameters, input by input, applying earlier steps as it goes.
    ``kernels``: a ``GroupStats``' per-row work (default numpy's)."""
    if tag_features.is_tags(feature, table):  # the encoder learns from the rows' tag sets,
        return tag_features.fit_feature(feature, table)  # not from each input's values
    params: dict[str, list[dict[str, Any]]] = {}
    repairs = Repairs()
    grouped = _group_step(feature)
    if grouped is not None:  # one fit of the group table for every output column
        first, codes, lut = group_stats.fit(grouped, table, kernels)
    for item in feature.inputs:
        learned: list[dict[str, Any]] = []
        steps = feature.steps
        if grouped is not None:
            learned.append(first[item.name])
            steps = steps[1:]
            # the rows' statistics only when a later step learns from them
            fitted_later = any(step.needs_fit for step in steps)
            if fitted_later:
                index = codes if lut is None else (kernels or group_stats.NUMPY).take(lut, codes)
                values = group_stats.gather(first[item.name], index)
            else:
                values = np.empty(0)
        skipped = grouped is None and _learns_nothing(steps)
        if skipped:  # e.g. Hash: no gathered copy of the input's rows for nothing
            values = np.empty(0)
        elif grouped is None:
            values = input_values(item, table, repairs)
        for step in steps:
            what = f"{step.describe()} on {item.name!r}"
            if REFERENCE.has(step, "fit_target"):  # fitted against the fit's target
                fit = REFERENCE.entry(step, "fit_target")
                learned.append(fit(step, values, table.fit_target, what))
                continue
            learned.append(fit_step(step, values, what))
            if step.kind != "encoder" and not skipped:
                values = apply_step(step, learned[-1], values, item.name, repairs)
        params[item.name] = learned
    return params


def _learns_nothing(steps: Sequence[Step]) -> bool:
    """No step learns from the values (each fits to ``{}`` whatever the rows hold)."""
    return all(
        REFERENCE.entry(step, "fit") is no_fit and not REFERENCE.has(step, "fit_target")
        for step in steps
    )


def _group_step(feature: Feature) -> GroupStats | None:
    """The feature's ``GroupStats`` (always its first step), or None."""
    first = feature.steps[0] if feature.steps else None
    return first if isinstance(first, GroupStats) else None


def chain_values(
    feature: Feature, item: Input, table: Table, fitted: list[dict[str, Any]], upto: int,
    repairs: Repairs,
) -> np.ndarray | TextColumn:  # fmt: skip
    """``item``'s values after the feature's steps before position ``upto`` (``fitted``:
    their parameters); a ``GroupStats`` first step gathers its statistic from the table."""
    steps, params = feature.steps[:upto], fitted[:upto]
    grouped = _group_step(feature)
    if grouped is not None and upto > 0:
        index = group_stats.rows_group(grouped, params[0], table)
        values: np.ndarray | TextColumn = group_stats.gather(params[0], index)
        steps, params = steps[1:], params[1:]
    else:
        values = input_values(item, table, repairs)
    for step, step_params in zip(steps, params):
        if step.kind != "encoder":
            values = apply_step(step, step_params, values, item.name, repairs)  # type: ignore[arg-type]
    return values


def chain_from(
    feature: Feature, item: Input, values: np.ndarray, fitted: list[dict[str, Any]], upto: int,
    repairs: Repairs,
) -> np.ndarray:  # fmt: skip
    """:func:`chain_values` from the input's values as :func:`input_values` gave them (a
    feature without a ``GroupStats`` step): the same steps, without the table."""
    for step, step_params in zip(feature.steps[:upto], fitted[:upto]):
        if step.kind != "encoder":
            values = apply_step(step, step_params, values, item.name, repairs)
    return values


def fit_step(step: Step, values: np.ndarray | TextColumn, what: str) -> dict[str, Any]:
    """What ``step`` learns from ``values`` (its fitted parameters)."""
    return REFERENCE.entry(step, "fit")(step, values, what)


def apply_step(
    step: Step, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    """One element-wise step; returns a new array."""
    return REFERENCE.entry(step, "apply")(step, params, values, output, repairs)


def fit_stage(
    plan: LogicalPlan, stage: Stage, table: Table, log: Repairs | None = None
) -> dict[int, FeatureParams]:
    """Fit the features of one stage (the reference fits feature by feature)."""
    return {i: fit_feature(plan.features[i], table) for i in stage.features}


def run_stage(
    plan: LogicalPlan,
    stage: Stage,
    params: list[FeatureParams],
    table: Table,
    sink: OutputSink,
    repairs: Repairs,
    kernels: group_stats.GroupKernels | None = None,
) -> set[int]:
    """Compute the stage's features into ``sink``; returns features already checked finite.
    ``kernels``: a ``GroupStats``' per-row work (default numpy's)."""
    checked: set[int] = set()
    for index in stage.features:
        feature = plan.features[index]
        fitted = params[index]
        grouped = _group_step(feature)
        if grouped is not None:
            if group_rows(feature, fitted, table, sink.numeric_view(index), repairs, kernels):
                checked.add(index)
            continue
        if feature.encoder is not None:
            encode_feature(feature, fitted, table, sink, index, repairs)
            continue
        view = sink.numeric_view(index)
        for j, item in enumerate(feature.inputs):
            values = input_values(item, table, repairs)
            with np.errstate(over="ignore"):  # beyond float32 -> inf -> quarantined
                view[:, j] = apply_chain(feature.steps, fitted[item.name], values, item.name,
                                         repairs)  # fmt: skip
    return checked


#: steps whose output counts repairs per row (a value turned missing): applied row by row
_COUNTING = (Log1p, PowerTransform, Map)


def group_rows(
    feature: Feature, fitted: FeatureParams, table: Table, view: np.ndarray, repairs: Repairs,
    kernels: group_stats.GroupKernels | None = None,
) -> bool:  # fmt: skip
    """A ``GroupStats`` feature into ``view``; whether every value written is finite.

    The steps after the statistics are functions of the value alone and every row of a
    group has its group's value: they run once per group (and once for the unseen group,
    missing), then each row takes its group's outputs — unless a step counts its repairs
    per row (``Log1p``' domain, ``Map``), which then runs row by row."""
    step = feature.steps[0]
    assert isinstance(step, GroupStats)
    rest = feature.steps[1:]
    codes, lookup = group_stats.rows_code(step, fitted[step.outputs[0]][0], table, kernels)
    if any(isinstance(s, _COUNTING) for s in rest):
        codes = group_stats.combined_codes(codes, kernels)
        index = codes if lookup is None else (kernels or group_stats.NUMPY).take(lookup, codes)
        for j, item in enumerate(feature.inputs):
            values = group_stats.gather(fitted[item.name][0], index)
            with np.errstate(over="ignore"):  # beyond float32 -> inf -> quarantined
                view[:, j] = apply_chain(rest, fitted[item.name][1:], values, item.name, repairs)
        return False
    per_group = [
        apply_chain(rest, fitted[item.name][1:],
                    np.append(fitted[item.name][0]["values"], np.nan), item.name, repairs)
        for item in feature.inputs
    ]  # fmt: skip
    with np.errstate(over="ignore"):
        return group_stats.write_rows(view, np.column_stack(per_group), codes, kernels, lookup)


def encode_feature(
    feature: Feature, fitted: FeatureParams, table: Table, sink: OutputSink, index: int,
    repairs: Repairs,
) -> None:  # fmt: skip
    """An encoder feature's block into ``sink`` by its encoder's table entry (the inputs
    through the steps before the encoder first)."""
    values = {item.name: input_values(item, table, repairs) for item in feature.inputs}
    if len(feature.steps) > 1:
        values = before_encoder(feature, fitted, values, repairs)
    REFERENCE.entry(feature.encoder, "encode")(feature, fitted, values, table, sink, index)


def bin_block(feature: Feature, fitted: FeatureParams, values: dict[str, Any]) -> CodesBlock:
    """``Bin(encode="onehot")``: per input, one column per fitted bin (``col=bin<i>``), a
    one in the value's bin; a missing value is a row of zeros. Always CSR."""
    names: list[str] = []
    codes: list[np.ndarray] = []
    widths: list[int] = []
    for item in feature.inputs:
        params = fitted[item.name][-1]
        names.extend(bin_names(item.name, params))
        widths.append(scalers.bin_count(params))
        binned = scalers.bin_codes(params, values[item.name])
        codes.append(np.where(np.isnan(binned), -1, binned).astype(np.int64))
    return CodesBlock(names, codes, widths, sparse=True)


def before_encoder(
    feature: Feature, fitted: FeatureParams, values: dict[str, Any], repairs: Repairs
) -> dict[str, Any]:
    """Numeric inputs through the steps before the encoder (fit saw them that way too)."""
    return {
        name: apply_chain(feature.steps, fitted[name], value, name, repairs)
        for name, value in values.items()
    }


def fill_text(column: TextColumn, value: str) -> TextColumn:
    """``column`` with its missing values replaced by ``value`` (a new distinct value, or
    the code of the equal one)."""
    missing = column.codes < 0
    if not missing.any():
        return column
    uniques = column.uniques
    found = np.flatnonzero(uniques == value)
    if len(found):
        code = int(found[0])
    else:
        code, uniques = len(uniques), np.append(uniques, np.array([value], dtype=object))
    return TextColumn(np.where(missing, np.int32(code), column.codes), uniques)


def apply_chain(
    steps: tuple[Step, ...], fitted: list[dict[str, Any]], values: np.ndarray, output: str,
    repairs: Repairs,
) -> np.ndarray:  # fmt: skip
    """Every element-wise/fitted step of a chain, in order."""
    for step, step_params in zip(steps, fitted):
        if step.kind != "encoder":
            values = apply_step(step, step_params, values, output, repairs)
    return values


def hash_features(step: Hash, values: dict[str, Any], n_rows: int, cross: bool = False):
    """sklearn ``FeatureHasher``'s matrix for each row's ``{name: value}`` pairs (the
    reference), each distinct token hashed once (:mod:`fastprep.backends.reference.hashing`).

    A cross hashes one token per row, ``a=x^b=y``, with value 1 (none if a member is missing).
    """
    if cross:
        present, codes, tokens = _cross_tokens(values)
        inputs = [_by_code(present, codes, tokens, step)]
    else:
        inputs = [_hash_input(name, value, step) for name, value in values.items()]
    return hashref.hash_entries(inputs, n_rows, step.n_features, np.float32)


def _by_code(
    present: np.ndarray, codes: np.ndarray, tokens: list[str], step: Hash
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(present, column, signed 1.0) per row of text given as codes into ``tokens`` (-1:
    missing): the column and sign are worked out once per distinct token, then gathered."""
    columns, signs = hashref.columns_and_signs(hashref.signed_hashes(tokens), step.n_features)
    if not step.alternate_sign:
        signs = np.ones(len(tokens))
    # a trailing slot for code -1, so the gathers need no masking; the signs (+-1, 0) in
    # float32, exact, so the gather is the output's type already (no float64 copy to cast)
    columns = np.append(columns, np.int32(0))
    signs = np.append(signs, 0.0).astype(np.float32)
    return present, columns[codes], signs[codes]


def _hash_input(name: str, value: Any, step: Hash) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(present, column, signed value) per row of one hashed input."""
    if isinstance(value, TextColumn):
        tokens = [f"{name}={u}" for u in value.uniques]
        return _by_code(value.codes >= 0, value.codes, tokens, step)
    numbers = np.asarray(value, dtype=np.float64)
    present = ~np.isnan(numbers)
    column, sign = hashref.columns_and_signs(hashref.signed_hashes([name]), step.n_features)
    signed = numbers * sign[0] if step.alternate_sign else numbers
    return present, np.full(len(numbers), column[0]), signed


def _cross_tokens(values: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per row of a cross: whether every member is present, the code of its combination
    among the distinct ones present, and those combinations' tokens ``a=x^b=y``."""
    members = list(values.items())
    codes = [column.codes for _, column in members]
    present = np.logical_and.reduce([c >= 0 for c in codes])
    sizes = tuple(max(column.n_unique, 1) for _, column in members)
    if math.prod(sizes) < 2**62:  # one int64 per combination: the fast unique
        combined = np.ravel_multi_index([np.where(present, c, 0) for c in codes], sizes)
        distinct, inverse = np.unique(combined[present], return_inverse=True)
        parts = np.unravel_index(distinct, sizes)
    else:  # too many possible combinations to number: unique rows, in the same order
        distinct, inverse = np.unique(np.stack(codes, axis=1)[present], axis=0, return_inverse=True)
        parts = tuple(distinct.T)
    labels = [
        np.array([f"{name}={u}" for u in column.uniques], dtype=object)[part]
        for (name, column), part in zip(members, parts)
    ]
    combination = np.full(len(present), -1, np.int64)
    combination[present] = inverse
    return present, combination, ["^".join(row) for row in zip(*labels)]


# ---------------------------------------------------------------- the step table
# One function per (step type, feature); ``REFERENCE`` maps each step type to them.


def _fit_fill(step: FillMissing, values: Any, what: str) -> dict[str, Any]:
    if step.needs_fit:
        return {"fill": fill_value(values, str(step.value), what)}
    return {"fill": step.value}


def _fit_standardize(step: Standardize, values: Any, what: str) -> dict[str, Any]:
    return standardize_params(values, what)


def _fit_minmax(step: MinMax, values: Any, what: str) -> dict[str, Any]:
    return minmax_params(values, *step.feature_range, what)


def _fit_vocabulary(step: OneHot | Categorify, values: Any, what: str) -> dict[str, Any]:
    return fit_categories(values, step.min_frequency, step.max_categories)


def _fit_maxabs(step: MaxAbsScale, values: Any, what: str) -> dict[str, Any]:
    return scalers.maxabs_params(values, what)


def _fit_dict_vocabulary(step: Vectorize, values: Any, what: str) -> dict[str, Any]:
    return {"vocabulary": dict_reference.fit_vocabulary(values)}


def _fit_counts(step: CountEncode, values: Any, what: str) -> dict[str, Any]:
    return target_encoding.fit_counts(values)


def no_fit(step: Step, values: Any, what: str) -> dict[str, Any]:
    """A step that learns nothing."""
    return {}


def _apply_fill(
    step: FillMissing, params: dict[str, Any], values: Any, output: str, repairs: Repairs
) -> Any:
    if isinstance(values, TextColumn):  # the definition check allows only a text fill here
        assert step.fills_text
        return fill_text(values, str(params["fill"]))
    return np.where(np.isnan(values), params["fill"], values)


def _apply_clip(
    step: Clip, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    if step.lower is None and step.upper is None:
        return values
    # one pass, the same values as maximum-then-minimum (NaN stays NaN); numpy's
    # maximum/minimum take a slow path on arrays holding NaN, clip does not (~7x)
    return np.clip(values, step.lower, step.upper)


def _apply_log1p(
    step: Log1p, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.log1p(values)
    bad = ~np.isfinite(out) & ~np.isnan(values)
    repairs.add(output, "log1p_domain", int(np.count_nonzero(bad)))
    out[bad] = np.nan
    return out


def _apply_standardize(
    step: Standardize, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    out = values - params["mean"] if step.with_mean else values.copy()
    if step.with_std:
        out /= params["scale"]
    return out


def _apply_minmax(
    step: MinMax, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    out = values * params["scale"]
    out += params["min"]
    return out


def _apply_maxabs(
    step: MaxAbsScale, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    return values / params["scale"]


def _apply_robust(
    step: RobustScale, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    return scalers.robust_apply(step, params, values)


def _apply_bin(
    step: Bin, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    return scalers.bin_codes(params, values)


def _apply_quantile(
    step: QuantileTransform, params: dict[str, Any], values: np.ndarray, output: str,
    repairs: Repairs,
) -> np.ndarray:  # fmt: skip
    return scalers.quantile_apply(step, params, values)


def _apply_power(
    step: PowerTransform, params: dict[str, Any], values: np.ndarray, output: str,
    repairs: Repairs,
) -> np.ndarray:  # fmt: skip
    out, outside = scalers.power_apply(step, params, values)
    repairs.add(output, "boxcox_domain", outside)
    return out


def _apply_map(
    step: Map, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    out, bad = apply_map(step.func, values)
    repairs.add(output, "map_not_finite", bad)
    return out


def _encode_onehot(
    feature: Feature, fitted: FeatureParams, values: dict[str, Any], table: Table,
    sink: OutputSink, index: int,
) -> None:  # fmt: skip
    if tag_features.is_tags(feature, table):  # multi-hot of the rows' tags
        sink.put(index, tag_features.block(feature, fitted, table))
        return
    sink.put(index, onehot_block(feature, fitted, values))


def _encode_categorify(
    feature: Feature, fitted: FeatureParams, values: dict[str, Any], table: Table,
    sink: OutputSink, index: int,
) -> None:  # fmt: skip
    view = sink.numeric_view(index)
    for j, item in enumerate(feature.inputs):
        view[:, j] = categorify_codes(values[item.name], fitted[item.name][-1])


def _encode_bin(
    feature: Feature, fitted: FeatureParams, values: dict[str, Any], table: Table,
    sink: OutputSink, index: int,
) -> None:  # fmt: skip
    sink.put(index, bin_block(feature, fitted, values))


def _encode_vectorize(
    feature: Feature, fitted: FeatureParams, values: dict[str, Any], table: Table,
    sink: OutputSink, index: int,
) -> None:  # fmt: skip
    name = feature.inputs[0].name
    vocabulary = fitted[name][-1]["vocabulary"]
    sink.put(
        index, SparseBlock(f"{name}:", dict_reference.vectorize_dicts(values[name], vocabulary))
    )


def _encode_hash(
    feature: Feature, fitted: FeatureParams, values: dict[str, Any], table: Table,
    sink: OutputSink, index: int,
) -> None:  # fmt: skip
    encoder = feature.encoder
    assert isinstance(encoder, Hash)
    if tag_features.is_tags(feature, table):  # each tag a token ``col=tag``
        sink.put(index, tag_features.block(feature, fitted, table))
        return
    first = values[feature.inputs[0].name]
    if isinstance(first, DictColumn):  # fp.Dict >> Hash: the dict's entries are the pairs
        hashed = dict_reference.hash_dicts(first, encoder.n_features, encoder.alternate_sign)
    else:
        hashed = hash_features(encoder, values, table.n_rows, cross=feature.cross)
    sink.put(index, SparseBlock(hash_prefix(feature), hashed))


def _fit_needs_target(step: Step, values: Any, what: str) -> dict[str, Any]:
    raise FitError(f"{what}: fitted against the pipeline's target, which this fit has not")


def _encode_by_value(
    feature: Feature, fitted: FeatureParams, values: dict[str, Any], table: Table,
    sink: OutputSink, index: int,
) -> None:  # fmt: skip
    """One column per input: its value's target encoding or count (the fit's own rows,
    when the table carries the fit's target, out of fold)."""
    encoder = feature.encoder
    assert isinstance(encoder, (TargetEncode, CountEncode))
    view = sink.numeric_view(index)
    for j, item in enumerate(feature.inputs):
        view[:, j] = target_encoding.encode(
            encoder, fitted[item.name][-1], values[item.name], table.fit_target,
            f"{encoder.describe()} on {item.name!r}",
        )  # fmt: skip


# a partitioned fit: what each partition computes for a fitted step, and the parameters
# from merged moments (the Numba fit rounds use the same functions)


def _moments(step: Step) -> str:
    return "moments"


def _fill_partial(step: FillMissing) -> str:
    return "median" if step.value == "median" else "moments"


def _bin_partial(step: Bin) -> str:
    return "order" if step.strategy == "quantile" else "moments"  # uniform: the extremes


def fill_from_moments(step: FillMissing, total: moments.Moments, what: str) -> dict[str, Any]:
    return {"fill": total.mean()}


def standardize_from_moments(
    step: Standardize, total: moments.Moments, what: str
) -> dict[str, Any]:
    return moments.standardize_params(total, what)


def minmax_from_moments(step: MinMax, total: moments.Moments, what: str) -> dict[str, Any]:
    return minmax_from_range(total.low, total.high, *step.feature_range)


def maxabs_from_moments(step: MaxAbsScale, total: moments.Moments, what: str) -> dict[str, Any]:
    return scalers.maxabs_from_range(total.low, total.high)


def _bin_from_moments(step: Bin, total: moments.Moments, what: str) -> dict[str, Any]:
    return scalers.bin_from_range(step, total.low, total.high, what)


def _fit_group_stats(step: GroupStats, values: Any, what: str) -> dict[str, Any]:
    """``GroupStats`` makes its chain's values from the table (its keys and column): it is
    fitted and applied by :func:`fit_feature` / :func:`group_rows`, never from one value."""
    raise BackendError(f"{what}: GroupStats is fitted from its key columns, not from values")


@dataclass(frozen=True)
class ReferenceOp:
    """What the reference backend does for one step type.

    ``fit(step, values, what) -> params``; ``apply(step, params, values, output, repairs)
    -> values`` for an element-wise or fitted step; ``encode(feature, fitted, values,
    table, sink, index)`` writes an encoder's block into the sink. A partitioned fit
    (streamed, or on a cluster) of a fitted step: ``partial(step)`` names what each
    partition computes (``"moments"``, ``"median"``, ``"order"`` — exact order statistics
    —, ``"values"`` — gathered, then ``fit`` —, ``"vocabulary"``) and, for ``"moments"``,
    ``from_moments(step, merged, what) -> params``. A step fitted against
    the pipeline's target has ``fit_target(step, values, target, what)`` (``target``: the
    table's ``fit_target``), used instead of ``fit``.
    """

    fit: Callable[..., dict[str, Any]]
    apply: Callable[..., Any] | None = None
    encode: Callable[..., None] | None = None
    fit_target: Callable[..., dict[str, Any]] | None = None
    partial: Callable[[Any], str] | None = None
    from_moments: Callable[..., dict[str, Any]] | None = None


REFERENCE: Dispatch[ReferenceOp] = Dispatch(
    "pandas",
    {
        FillMissing: ReferenceOp(
            _fit_fill, apply=_apply_fill, partial=_fill_partial, from_moments=fill_from_moments
        ),
        Clip: ReferenceOp(no_fit, apply=_apply_clip),
        Log1p: ReferenceOp(no_fit, apply=_apply_log1p),
        Standardize: ReferenceOp(
            _fit_standardize,
            apply=_apply_standardize,
            partial=_moments,
            from_moments=standardize_from_moments,
        ),
        MinMax: ReferenceOp(
            _fit_minmax, apply=_apply_minmax, partial=_moments, from_moments=minmax_from_moments
        ),
        MaxAbsScale: ReferenceOp(
            _fit_maxabs, apply=_apply_maxabs, partial=_moments, from_moments=maxabs_from_moments
        ),
        RobustScale: ReferenceOp(
            scalers.robust_params, apply=_apply_robust, partial=lambda s: "order"
        ),
        Bin: ReferenceOp(
            scalers.bin_params,
            apply=_apply_bin,
            encode=_encode_bin,
            partial=_bin_partial,
            from_moments=_bin_from_moments,
        ),
        QuantileTransform: ReferenceOp(
            scalers.quantile_params, apply=_apply_quantile, partial=lambda s: "values"
        ),
        PowerTransform: ReferenceOp(
            scalers.power_params, apply=_apply_power, partial=lambda s: "values"
        ),
        Map: ReferenceOp(no_fit, apply=_apply_map),
        OneHot: ReferenceOp(_fit_vocabulary, encode=_encode_onehot, partial=lambda s: "vocabulary"),
        Categorify: ReferenceOp(
            _fit_vocabulary, encode=_encode_categorify, partial=lambda s: "vocabulary"
        ),
        Hash: ReferenceOp(no_fit, encode=_encode_hash),
        Vectorize: ReferenceOp(
            _fit_dict_vocabulary, encode=_encode_vectorize, partial=lambda s: "vocabulary"
        ),
        TargetEncode: ReferenceOp(
            _fit_needs_target,
            encode=_encode_by_value,
            fit_target=target_encoding.fit_target_encoding,
            partial=lambda s: "target",
        ),
        CountEncode: ReferenceOp(_fit_counts, encode=_encode_by_value, partial=lambda s: "counts"),
        GroupStats: ReferenceOp(_fit_group_stats, partial=lambda s: "groups"),
    },
)
