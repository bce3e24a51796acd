"""The reference backend: numpy-vectorized fit and transform, step by step.

Every other backend must produce the same X as this one. Steps never modify their input
in place (an input may be a column of the validated table, shared by other features).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher

from fastprep.backends import dict_reference
from fastprep.backends.encoders import (  # noqa: F401  (re-exported: the reference API)
    categorify_codes,
    category_codes,
    fit_categories,
    onehot_block,
)
from fastprep.backends.expressions import evaluate
from fastprep.backends.map_ import apply_map
from fastprep.backends.stats import fill_value, minmax_params, standardize_params
from fastprep.columns import Table, TextColumn
from fastprep.dict_column import DictColumn
from fastprep.emit.blocks import SparseBlock
from fastprep.emit.layout import hash_prefix
from fastprep.emit.sink import OutputSink
from fastprep.errors import BackendError
from fastprep.plan.nodes import Feature, Input, LogicalPlan, Stage
from fastprep.plan.steps import (
    Categorify,
    Clip,
    FillMissing,
    Hash,
    Log1p,
    Map,
    MinMax,
    OneHot,
    Standardize,
    Step,
    Vectorize,
)

FeatureParams = dict[str, list[dict[str, Any]]]


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
    if item.is_plain_column and isinstance(table.raw(item.name), DictColumn):
        return table[item.name]  # type: ignore[return-value]  # (#8) a dict column as is
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


def fit_feature(feature: Feature, table: Table) -> FeatureParams:
    """Learn each step's parameters, input by input, applying earlier steps as it goes."""
    params: dict[str, list[dict[str, Any]]] = {}
    repairs = Repairs()
    for item in feature.inputs:
        values = input_values(item, table, repairs)
        learned: list[dict[str, Any]] = []
        for step in feature.steps:
            what = f"{step.describe()} on {item.name!r}"
            learned.append(fit_step(step, values, what))
            if step.kind != "encoder":
                values = apply_step(step, learned[-1], values, item.name, repairs)
        params[item.name] = learned
    return params


def fit_step(step: Step, values: np.ndarray | TextColumn, what: str) -> dict[str, Any]:
    if isinstance(step, FillMissing):
        if step.needs_fit:
            return {"fill": fill_value(values, step.value, what)}
        return {"fill": step.value}
    if isinstance(step, Standardize):
        return standardize_params(values, what)
    if isinstance(step, MinMax):
        return minmax_params(values, *step.feature_range, what)
    if isinstance(step, (OneHot, Categorify)):
        return fit_categories(values, step.min_frequency, step.max_categories)
    if isinstance(step, (Clip, Log1p, Hash, Map)):
        return {}
    if isinstance(step, Vectorize):
        return {"vocabulary": dict_reference.fit_vocabulary(values)}  # type: ignore[arg-type]
    raise BackendError(f"pandas backend has no fit for {step.describe()}")


def apply_step(
    step: Step, params: dict[str, Any], values: np.ndarray, output: str, repairs: Repairs
) -> np.ndarray:
    """One element-wise step; returns a new array."""
    if isinstance(values, TextColumn):  # the check allows only a text fill here
        assert isinstance(step, FillMissing) and step.fills_text
        return fill_text(values, str(params["fill"]))
    if isinstance(step, FillMissing):
        return np.where(np.isnan(values), params["fill"], values)
    if isinstance(step, Clip):
        out = values if step.lower is None else np.maximum(values, step.lower)
        return out if step.upper is None else np.minimum(out, step.upper)
    if isinstance(step, Log1p):
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.log1p(values)
        bad = ~np.isfinite(out) & ~np.isnan(values)
        repairs.add(output, "log1p_domain", int(np.count_nonzero(bad)))
        out[bad] = np.nan
        return out
    if isinstance(step, Standardize):
        out = values - params["mean"] if step.with_mean else values.copy()
        if step.with_std:
            out /= params["scale"]
        return out
    if isinstance(step, MinMax):
        out = values * params["scale"]
        out += params["min"]
        return out
    if isinstance(step, Map):
        out, bad = apply_map(step.func, values)
        repairs.add(output, "map_not_finite", bad)
        return out
    raise BackendError(f"pandas backend has no element-wise apply for {step.describe()}")


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
) -> set[int]:
    """Compute the stage's features into ``sink``; returns features already checked finite."""
    for index in stage.features:
        feature = plan.features[index]
        fitted = params[index]
        values = {item.name: input_values(item, table, repairs) for item in feature.inputs}
        encoder = feature.encoder
        if encoder is not None and len(feature.steps) > 1:
            values = before_encoder(feature, fitted, values, repairs)
        if encoder is None:
            view = sink.numeric_view(index)
            for j, item in enumerate(feature.inputs):
                with np.errstate(over="ignore"):  # beyond float32 -> inf -> quarantined
                    view[:, j] = apply_chain(feature.steps, fitted[item.name], values[item.name],
                                             item.name, repairs)  # fmt: skip
        elif isinstance(encoder, OneHot):
            sink.put(index, onehot_block(feature, fitted, values))
        elif isinstance(encoder, Categorify):
            view = sink.numeric_view(index)
            for j, item in enumerate(feature.inputs):
                view[:, j] = categorify_codes(values[item.name], fitted[item.name][-1])
        elif isinstance(encoder, Hash) and isinstance(values[feature.inputs[0].name], DictColumn):
            hashed = dict_reference.hash_dicts(
                values[feature.inputs[0].name], encoder.n_features, encoder.alternate_sign
            )
            sink.put(index, SparseBlock(hash_prefix(feature), hashed))
        elif isinstance(encoder, Vectorize):
            name = feature.inputs[0].name
            vocabulary = fitted[name][-1]["vocabulary"]
            matrix = dict_reference.vectorize_dicts(values[name], vocabulary)
            sink.put(index, SparseBlock(f"{name}:", matrix))
        elif isinstance(encoder, Hash):
            hashed = hash_with_sklearn(encoder, values, table.n_rows, cross=feature.cross)
            sink.put(index, SparseBlock(hash_prefix(feature), hashed))
        else:
            raise BackendError(f"pandas backend has no encoder {encoder.describe()}")
    return set()


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


def hash_with_sklearn(step: Hash, values: dict[str, Any], n_rows: int, cross: bool = False):
    """sklearn ``FeatureHasher`` over each row's ``{name: value}`` pairs (the reference).

    A cross hashes one token per row, ``a=x^b=y``, with value 1 (none if a member is missing).
    """
    if cross:
        values = {"^".join(values): _cross_tokens(values)}
    per_input: list[list[Any]] = []
    for name, value in values.items():
        if isinstance(value, list):  # cross tokens, already joined
            per_input.append([None if t is None else (t, 1) for t in value])
        elif isinstance(value, TextColumn):
            tokens = np.array([f"{name}={u}" for u in value.uniques] + [None], dtype=object)
            per_input.append(
                [(t, 1) if t is not None else None for t in tokens[value.codes].tolist()]
            )
        else:
            per_input.append([None if v != v else (name, v) for v in value.tolist()])
    rows = (
        ([pair for pair in row if pair is not None] for row in zip(*per_input)) if per_input else ()
    )
    hasher = FeatureHasher(
        n_features=step.n_features,
        input_type="pair",
        alternate_sign=step.alternate_sign,
        dtype=np.float32,
    )
    if n_rows == 0:
        return sp.csr_matrix((0, step.n_features), dtype=np.float32)
    return hasher.transform(rows)


def _cross_tokens(values: dict[str, Any]) -> list[str | None]:
    """Per row ``a=x^b=y``, or None when any member is missing."""
    parts = []
    for name, column in values.items():
        labels = np.array([f"{name}={u}" for u in column.uniques] + [None], dtype=object)
        parts.append(labels[column.codes])
    return [None if any(p is None for p in row) else "^".join(row) for row in zip(*parts)]
