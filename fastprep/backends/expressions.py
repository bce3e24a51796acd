"""Vectorized (numpy) evaluation of ``expr`` trees: the reference semantics.

Missing values propagate: an arithmetic, comparison or logical operator with a missing
operand is missing (SQL-like), so ``arr_delay > 15`` is missing — not False — where
``arr_delay`` is missing. ``isnull`` is the only way to turn missing into a value.
"""

from __future__ import annotations

import numpy as np

from fastprep.columns import Table, TextColumn
from fastprep.errors import BackendError
from fastprep.plan.expr import Binary, Col, Const, Expr, Unary, Where

_ARITH = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "mod": np.remainder,  # Python semantics: the sign follows the divisor
    "pow": np.power,
}
_COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
_FUNCS = {"log": np.log, "log1p": np.log1p, "exp": np.exp, "sqrt": np.sqrt, "abs": np.abs}


def evaluate(node: Expr, table: Table) -> np.ndarray | TextColumn:
    """Evaluate ``node`` over ``table``; numbers come back as float64 arrays."""
    with np.errstate(all="ignore"):
        value = _eval(node, table)
    if not isinstance(value, TextColumn) and np.ndim(value) == 0:  # a constant expression
        return np.full(table.n_rows, float(value))
    return value


def _eval(node: Expr, table: Table) -> np.ndarray | TextColumn:
    if isinstance(node, Col):
        return table[node.name]
    if isinstance(node, Const):
        if isinstance(node.value, str):
            raise BackendError(f"string constant {node.value!r} outside a text comparison")
        return np.asarray(node.value, dtype=np.float64)  # 0-d: broadcasts, no n-sized array
    if isinstance(node, Unary):
        return _unary(node, table)
    if isinstance(node, Where):
        cond = _number(node.cond, table)
        result = np.where(cond != 0, _number(node.then, table), _number(node.otherwise, table))
        return _missing_where(np.isnan(cond), result)
    assert isinstance(node, Binary)
    if node.op in ("eq", "ne") and _is_text_comparison(node, table):
        return _text_compare(node, table)
    left, right = _number(node.left, table), _number(node.right, table)
    if node.op == "pow":  # IEEE says nan ** 0 == 1 ** nan == 1: missing must stay missing
        return _missing_where(np.isnan(left) | np.isnan(right), np.power(left, right))
    if node.op in _ARITH:
        return _ARITH[node.op](left, right)
    missing = np.isnan(left) | np.isnan(right)
    if node.op in _COMPARE:
        result = _COMPARE[node.op](left, right)
    elif node.op == "and":
        result = (left != 0) & (right != 0)
    else:
        result = (left != 0) | (right != 0)
    return _missing_where(missing, result)


def _missing_where(missing: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` as float64 with NaN where ``missing`` (arrays or 0-d constants)."""
    out = np.asarray(values, dtype=np.float64)
    if out.ndim == 0 or np.ndim(missing) != out.ndim:
        return np.where(missing, np.nan, out)
    if out is values:
        out = out.copy()
    out[missing] = np.nan
    return out


def _number(node: Expr, table: Table) -> np.ndarray:
    value = _eval(node, table)
    if isinstance(value, TextColumn):
        raise BackendError("a text column was used as a number (the type check should catch this)")
    return value


def _unary(node: Unary, table: Table) -> np.ndarray:
    if node.op == "isnull":
        value = _eval(node.arg, table)
        missing = value.codes < 0 if isinstance(value, TextColumn) else np.isnan(value)
        return np.asarray(missing, dtype=np.float64)
    arg = _number(node.arg, table)
    if node.op == "neg":
        return np.negative(arg)
    if node.op == "not":
        return _missing_where(np.isnan(arg), arg == 0)
    return _FUNCS[node.op](arg)


def _is_text_comparison(node: Binary, table: Table) -> bool:
    for side in (node.left, node.right):
        if isinstance(side, Const) and isinstance(side.value, str):
            return True
        if isinstance(side, Col) and isinstance(table[side.name], TextColumn):
            return True
    return False


def _text_compare(node: Binary, table: Table) -> np.ndarray:
    left, right = node.left, node.right
    if isinstance(left, Const):
        left, right = right, left
    column = _eval(left, table)
    if not isinstance(column, TextColumn) or not isinstance(right, Const):
        raise BackendError("text comparisons need a text column and a quoted string")
    equal = np.fromiter(
        (u == right.value for u in column.uniques), dtype=bool, count=len(column.uniques)
    )
    per_unique = (equal if node.op == "eq" else ~equal).astype(np.float64)
    result = np.append(per_unique, np.nan)[column.codes]
    return result
