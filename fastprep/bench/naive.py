"""Naive pandas, as a beginner writes it: ``df.apply(f, axis=1)`` and per-value Python.

Every feature input is computed row by row by walking the expression tree in Python,
numeric steps go value by value through ``Series.apply``, statistics come from pandas'
``.mean()/.std(ddof=0)/.median()/.min()/.max()``, one-hot is a Python loop over rows and
hashing feeds one ``{column: value}`` dict per row to ``FeatureHasher(input_type="dict")``.
Scalars are numpy float64 so that x/0, log(-1) and friends follow IEEE like fastprep.
"""

from __future__ import annotations

import math
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
    stack_blocks,
    standardize_scale,
    text_columns,
    unsupported,
)
from fastprep.plan.expr import Binary, Col, Const, Expr, Unary, Where
from fastprep.plan.steps import Clip, FillMissing, Hash, Log1p, MinMax, OneHot, Standardize, Step

NAN = float("nan")
_ARITH = NUMPY_ARITH
_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}
_FUNCS = NUMPY_FUNCS


def _missing(value: Any) -> bool:
    return value is None or (not isinstance(value, str) and value != value)


def eval_row(node: Expr, row: pd.Series, text: frozenset[str]) -> Any:
    """One row's value of ``node``: a float (NaN = missing) or, for a text column, a str/None."""
    if isinstance(node, Col):
        value = row[node.name]
        if node.name in text:
            return None if _missing(value) else str(value)
        return NAN if _missing(value) else np.float64(value)
    if isinstance(node, Const):
        return node.value if isinstance(node.value, str) else np.float64(node.value)
    if isinstance(node, Where):
        cond = eval_row(node.cond, row, text)
        if _missing(cond):
            return NAN
        return eval_row(node.then if cond != 0 else node.otherwise, row, text)
    if isinstance(node, Unary):
        arg = eval_row(node.arg, row, text)
        if node.op == "isnull":
            return 1.0 if _missing(arg) else 0.0
        if _missing(arg):
            return NAN
        if node.op == "neg":
            return -arg
        if node.op == "not":
            return 1.0 if arg == 0 else 0.0
        return _FUNCS[node.op](arg)
    assert isinstance(node, Binary)
    left, right = eval_row(node.left, row, text), eval_row(node.right, row, text)
    if _missing(left) or _missing(right):
        return NAN
    if node.op in _ARITH:
        return _ARITH[node.op](left, right)
    if node.op in _COMPARE:
        return 1.0 if _COMPARE[node.op](left, right) else 0.0
    if node.op == "and":
        return 1.0 if (left != 0 and right != 0) else 0.0
    return 1.0 if (left != 0 or right != 0) else 0.0


def _fit(step: Step, column: pd.Series) -> dict[str, float]:
    if isinstance(step, FillMissing):
        if step.value == "mean":
            return {"fill": column.mean()}
        if step.value == "median":
            return {"fill": column.median()}
        return {"fill": step.value}
    if isinstance(step, Standardize):
        mean, std = column.mean(), column.std(ddof=0)
        return {"mean": mean, "scale": standardize_scale(std * std, mean, column.count())}
    if isinstance(step, MinMax):
        scale, offset = minmax_scale(column.min(), column.max(), *step.feature_range)
        return {"scale": scale, "offset": offset}
    return {}


def _apply_one(step: Step, p: dict[str, float], v: float) -> float:
    if v != v:
        return p["fill"] if isinstance(step, FillMissing) else NAN
    if isinstance(step, FillMissing):
        return v
    if isinstance(step, Clip):
        if step.lower is not None and v < step.lower:
            v = step.lower
        if step.upper is not None and v > step.upper:
            v = step.upper
        return v
    if isinstance(step, Log1p):
        return math.log1p(v) if v > -1 else NAN
    if isinstance(step, Standardize):
        if step.with_mean:
            v = v - p["mean"]
        return v / p["scale"] if step.with_std else v
    if isinstance(step, MinMax):
        return v * p["scale"] + p["offset"]
    raise unsupported("naive pandas", step.describe())


def make(pipeline: Any) -> RunFn:
    """The beginner's implementation of ``pipeline`` (fit, then transform)."""
    text = text_columns(pipeline)
    plan = pipeline.plan
    inputs = [item for feature in plan.features for item in feature.inputs]
    if plan.target is not None:
        inputs.append(plan.target)
    for item in inputs:
        check_translatable(item.expr, "naive pandas")

    def row_values(row: pd.Series) -> list[Any]:
        out = []
        for item in inputs:
            value = eval_row(item.expr, row, text)
            if not isinstance(value, str) and not item.is_plain_column and not math.isfinite(value):
                value = NAN  # a derived value that is ±inf or undefined is missing
            out.append(value)
        return out

    def run(df: pd.DataFrame) -> Result:
        with np.errstate(all="ignore"):  # x/0, log(-1): IEEE results, then missing
            raw = df.apply(row_values, axis=1, result_type="expand")
        raw.columns = [f"{i}:{item.name}" for i, item in enumerate(inputs)]
        position, blocks = 0, []
        for feature in plan.features:
            columns = {}
            for item in feature.inputs:
                column = raw.iloc[:, position]
                position += 1
                for step in numeric_steps(feature.steps):
                    params = _fit(step, column)
                    column = column.apply(lambda v, s=step, p=params: _apply_one(s, p, v))
                columns[item.name] = column
            blocks.append(_encode(feature, columns, text, len(df)))
        y = None
        if plan.target is not None:
            y = np.array(raw.iloc[:, position].tolist(), dtype=np.float32)
        return stack_blocks(blocks, len(df)), y

    return run


def _encode(feature: Any, columns: dict[str, pd.Series], text: frozenset[str], n: int) -> Any:
    encoder = feature.encoder
    if encoder is None:
        rows = []
        for i in range(n):
            rows.append([float(columns[item.name].iloc[i]) for item in feature.inputs])
        return np.array(rows, dtype=np.float64).reshape(n, len(feature.inputs))
    if isinstance(encoder, OneHot):
        return _onehot(encoder, feature, columns, text, n)
    if isinstance(encoder, Hash):
        dicts = []
        for i in range(n):
            row = {}
            for item in feature.inputs:
                value = columns[item.name].iloc[i]
                if not _missing(value):
                    row[item.name] = value if is_text_input(item, text) else float(value)
            dicts.append(row)
        hasher = FeatureHasher(
            n_features=encoder.n_features, alternate_sign=encoder.alternate_sign, dtype=np.float32
        )
        return hasher.transform(dicts) if n else sp.csr_matrix((0, encoder.n_features))
    raise unsupported("naive pandas", encoder.describe())


def _onehot(encoder: OneHot, feature: Any, columns: dict, text: frozenset[str], n: int) -> Any:
    parts, widths = [], []
    for item in feature.inputs:
        column = columns[item.name]
        seen = [v for v in column.unique() if not _missing(v)]
        cats = sorted(str(v) for v in seen) if is_text_input(item, text) else sorted(seen)
        has_missing = bool(column.isna().any())
        rows = []
        for value in column:
            row = [1.0 if (not _missing(value) and value == c) else 0.0 for c in cats]
            if has_missing:
                row.append(1.0 if _missing(value) else 0.0)
            rows.append(row)
        widths.append(len(cats) + has_missing)
        parts.append(np.array(rows, dtype=np.float32).reshape(n, widths[-1]))
    dense = np.hstack(parts)
    return sp.csr_matrix(dense) if onehot_sparse(encoder, widths) else dense
