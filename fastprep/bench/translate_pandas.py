"""Idiomatic vectorized pandas + numpy: what a careful pandas user writes by hand.

Column operations on whole Series, statistics with ``Series.mean/std(ddof=0)/median``,
one-hot with ``pd.get_dummies`` over a ``Categorical`` fixed to the fitted categories, and
``FeatureHasher(input_type="string")`` over ``column=value`` tokens. The expression evaluator
here is also what the sklearn translation's ``FunctionTransformer`` calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher

from fastprep.bench.common import (
    NUMPY_ARITH,
    NUMPY_FUNCS,
    Result,
    RunFn,
    check_translatable,
    is_text_input,
    minmax_scale,
    numeric_steps,
    onehot_sparse,
    refuse_tags,
    stack_blocks,
    standardize_scale,
    text_columns,
    unsupported,
)
from fastprep.plan.expr import Binary, Col, Const, Expr, Unary, Where
from fastprep.plan.nodes import Input
from fastprep.plan.steps import Clip, FillMissing, Hash, Log1p, MinMax, OneHot, Standardize, Step

_ARITH = NUMPY_ARITH
_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_FUNCS = NUMPY_FUNCS


def eval_series(node: Expr, df: pd.DataFrame, text: frozenset[str]) -> pd.Series:
    """Vectorized expression: numbers as float64 Series (NaN = missing), text as-is."""
    check_translatable(node, "pandas")
    with np.errstate(all="ignore"):
        return _eval(node, df, text)


def _eval(node: Expr, df: pd.DataFrame, text: frozenset[str]) -> pd.Series:
    if isinstance(node, Col):
        column = df[node.name]
        return column if node.name in text else column.astype("float64")
    if isinstance(node, Const):
        if isinstance(node.value, str):
            raise unsupported("pandas", f"string constant {node.value!r} outside a comparison")
        return pd.Series(node.value, index=df.index, dtype="float64")
    if isinstance(node, Where):
        cond = _eval(node.cond, df, text)
        then, otherwise = _eval(node.then, df, text), _eval(node.otherwise, df, text)
        return then.where(cond != 0, otherwise).mask(cond.isna())
    if isinstance(node, Unary):
        return _unary(node, df, text)
    assert isinstance(node, Binary)
    if node.op in ("eq", "ne"):
        for column, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(other, Const) and isinstance(other.value, str):
                s = _eval(column, df, text)
                return getattr(s, node.op)(other.value).astype("float64").mask(s.isna())
    left, right = _eval(node.left, df, text), _eval(node.right, df, text)
    if node.op in _ARITH:
        return _ARITH[node.op](left, right)
    missing = left.isna() | right.isna()
    if node.op in _COMPARE:
        result = getattr(left, _COMPARE[node.op])(right)
    elif node.op == "and":
        result = (left != 0) & (right != 0)
    else:
        result = (left != 0) | (right != 0)
    return result.astype("float64").mask(missing)


def _unary(node: Unary, df: pd.DataFrame, text: frozenset[str]) -> pd.Series:
    arg = _eval(node.arg, df, text)
    if node.op == "isnull":
        return arg.isna().astype("float64")
    if node.op == "neg":
        return -arg
    if node.op == "not":
        return (arg == 0).astype("float64").mask(arg.isna())
    return _FUNCS[node.op](arg)


def input_series(item: Input, df: pd.DataFrame, text: frozenset[str]) -> pd.Series:
    """A feature input; a derived expression's ±inf/undefined results become missing."""
    value = eval_series(item.expr, df, text)
    if item.is_plain_column or is_text_input(item, text):
        return value
    return value.where(np.isfinite(value))


def fit_numeric(step: Step, s: pd.Series) -> dict[str, float]:
    """The statistics one numeric step needs, computed the pandas way."""
    if isinstance(step, FillMissing):
        if step.value == "mean":
            return {"fill": float(s.mean())}
        if step.value == "median":
            return {"fill": float(s.median())}
        return {"fill": float(step.value)}
    if isinstance(step, Standardize):
        mean, var = float(s.mean()), float(s.var(ddof=0))
        return {"mean": mean, "scale": standardize_scale(var, mean, int(s.count()))}
    if isinstance(step, MinMax):
        scale, offset = minmax_scale(float(s.min()), float(s.max()), *step.feature_range)
        return {"scale": scale, "offset": offset}
    return {}


def apply_numeric(step: Step, params: dict[str, float], s: pd.Series) -> pd.Series:
    if isinstance(step, FillMissing):
        return s.fillna(params["fill"])
    if isinstance(step, Clip):
        return s.clip(step.lower, step.upper)
    if isinstance(step, Log1p):
        out = np.log1p(s)
        return out.where(np.isfinite(out))
    if isinstance(step, Standardize):
        out = s - params["mean"] if step.with_mean else s
        return out / params["scale"] if step.with_std else out
    if isinstance(step, MinMax):
        return s * params["scale"] + params["offset"]
    raise unsupported("pandas", step.describe())


def fit_categories(s: pd.Series, is_text: bool) -> tuple[list[Any], bool]:
    """Sorted categories seen at fit, and whether missing was seen."""
    present = s.dropna().unique()
    cats = sorted(str(v) for v in present) if is_text else sorted(float(v) for v in present)
    return cats, bool(s.isna().any())


def onehot_frame(s: pd.Series, cats: list[Any], missing: bool) -> pd.DataFrame:
    """``get_dummies`` aligned to the fitted categories; unseen → zeros; missing → own column."""
    dummies = pd.get_dummies(pd.Categorical(s, categories=cats), dtype=np.float32)
    if missing:
        dummies["<missing>"] = s.isna().to_numpy(dtype=np.float32)
    return dummies


def hash_rows(item_values: list[tuple[str, pd.Series, bool]]) -> tuple[list[Any], str]:
    """Per-row token lists (text: ``name=value``) or pairs (numbers), missing left out."""
    columns, any_numeric = [], False
    for name, s, is_text in item_values:
        if is_text:
            columns.append((name + "=" + s).to_numpy(dtype=object, na_value=None))
        else:
            any_numeric = True
            values = s.to_numpy(dtype=np.float64)
            columns.append(
                np.array([None if v != v else (name, v) for v in values.tolist()], dtype=object)
            )
    if not any_numeric:
        rows = [[t for t in row if t is not None] for row in zip(*columns)]
        return rows, "string"
    rows = [
        [t if isinstance(t, tuple) else (t, 1) for t in row if t is not None]
        for row in zip(*columns)
    ]
    return rows, "pair"


def make(pipeline: Any) -> RunFn:
    """The idiomatic pandas implementation of ``pipeline`` (fit, then transform)."""
    refuse_tags(pipeline, "pandas")
    text = text_columns(pipeline)
    plan = pipeline.plan

    def run(df: pd.DataFrame) -> Result:
        blocks = []
        for feature in plan.features:
            values = {}
            for item in feature.inputs:
                s = input_series(item, df, text)
                for step in numeric_steps(feature.steps):
                    s = apply_numeric(step, fit_numeric(step, s), s)
                values[item.name] = s
            blocks.append(_encode(feature, values, text, len(df)))
        y = None
        if plan.target is not None:
            y = input_series(plan.target, df, text).to_numpy(dtype=np.float32)
        return stack_blocks(blocks, len(df)), y

    return run


def _encode(feature: Any, values: dict[str, pd.Series], text: frozenset[str], n: int) -> Any:
    encoder = feature.encoder
    if encoder is None:
        return np.column_stack([values[i.name].to_numpy(dtype=np.float64) for i in feature.inputs])
    if isinstance(encoder, OneHot):
        frames = []
        for item in feature.inputs:
            cats, missing = fit_categories(values[item.name], is_text_input(item, text))
            frames.append(onehot_frame(values[item.name], cats, missing))
        dense = np.column_stack([f.to_numpy(dtype=np.float32) for f in frames])
        widths = [f.shape[1] for f in frames]
        return sp.csr_matrix(dense) if onehot_sparse(encoder, widths) else dense
    if isinstance(encoder, Hash):
        parts = [(i.name, values[i.name], is_text_input(i, text)) for i in feature.inputs]
        rows, kind = hash_rows(parts)
        hasher = FeatureHasher(
            n_features=encoder.n_features,
            input_type=kind,
            alternate_sign=encoder.alternate_sign,
            dtype=np.float32,
        )
        return hasher.transform(rows) if n else sp.csr_matrix((0, encoder.n_features))
    raise unsupported("pandas", encoder.describe())
