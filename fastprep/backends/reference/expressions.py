"""Vectorized (numpy) evaluation of ``expr`` trees: the reference semantics.

Missing values propagate: an arithmetic, comparison or logical operator with a missing
operand is missing (SQL-like), so ``arr_delay > 15`` is missing — not False — where
``arr_delay`` is missing. ``isnull`` is the only way to turn missing into a value.

Text values stay dictionary-encoded: a text function (``lower``, ``length``,
``startswith``, ``==``, ``in``...) runs once per distinct value and is gathered by code;
a text result is again a :class:`TextColumn` (its distinct values made distinct again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fastprep.backends.reference.datetime_parts import date_part
from fastprep.data.columns import RowRange, Table, TextColumn
from fastprep.errors import BackendError
from fastprep.plan.expr import (
    TEXT_UNARY,
    Binary,
    Call,
    Col,
    Const,
    DatePart,
    Expr,
    IsIn,
    Unary,
    Where,
)

_ARITH = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "mod": np.remainder,  # Python semantics: the sign follows the divisor
    "floordiv": np.floor_divide,  # x // 0 is ±inf or NaN: made missing (and counted) later
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
_FUNCS = {
    "log": np.log, "log1p": np.log1p, "exp": np.exp, "sqrt": np.sqrt, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint, "sign": np.sign,
    "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos, "tan": np.tan,
}  # fmt: skip
_TEXT_FUNCS: dict[str, Callable[[str], str]] = {
    "lower": str.lower,
    "upper": str.upper,
    "strip": str.strip,
}
_TEXT_PREDICATES: dict[str, Callable[[str, str], bool]] = {
    "startswith": str.startswith,
    "endswith": str.endswith,
    "contains": lambda s, part: part in s,
}


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
            raise BackendError(f"string constant {node.value!r} outside a text expression")
        return np.asarray(node.value, dtype=np.float64)  # 0-d: broadcasts, no n-sized array
    if isinstance(node, Unary):
        return _unary(node, table)
    if isinstance(node, Where):
        cond = _number(node.cond, table)
        result = np.where(cond != 0, _number(node.then, table), _number(node.otherwise, table))
        return _missing_where(np.isnan(cond), result)
    if isinstance(node, Call):
        return _call(node, table)
    if isinstance(node, IsIn):
        return _is_in(node, table)
    if isinstance(node, DatePart):
        return date_part(_number(node.arg, table), node.part, node.tz)
    assert isinstance(node, Binary)
    if node.op == "add" and is_text(node, table):
        return _concat(node, table)
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
        raise BackendError("a text value was used as a number (the type check should catch this)")
    return value


def _unary(node: Unary, table: Table) -> np.ndarray | TextColumn:
    if node.op == "isnull":
        value = _eval(node.arg, table)
        missing = value.codes < 0 if isinstance(value, TextColumn) else np.isnan(value)
        return np.asarray(missing, dtype=np.float64)
    if node.op in TEXT_UNARY:
        column = text_value(node.arg, table)
        return recode(column, [_TEXT_FUNCS[node.op](u) for u in column.uniques])
    if node.op == "length":
        return per_distinct(text_value(node.arg, table), len)
    arg = _number(node.arg, table)
    if node.op == "neg":
        return np.negative(arg)
    if node.op == "not":
        return _missing_where(np.isnan(arg), arg == 0)
    return _FUNCS[node.op](arg)


def _call(node: Call, table: Table) -> np.ndarray:
    if node.fn in _TEXT_PREDICATES:
        test, part = _TEXT_PREDICATES[node.fn], node.args[1]
        assert isinstance(part, Const) and isinstance(part.value, str)
        return per_distinct(text_value(node.args[0], table), lambda u: test(u, part.value))
    args = [_number(a, table) for a in node.args]
    if node.fn == "round":
        return np.round(args[0], int(args[1]))
    if node.fn == "min":
        return _reduce(np.minimum, args)  # NaN (missing) propagates, as in numpy
    if node.fn == "max":
        return _reduce(np.maximum, args)
    assert node.fn == "clip"  # np.clip's definition: min(max(x, lo), hi)
    return np.minimum(np.maximum(args[0], args[1]), args[2])


def _reduce(ufunc: Any, args: list[np.ndarray]) -> np.ndarray:
    out = args[0]
    for arg in args[1:]:
        out = ufunc(out, arg)
    return out


def _is_in(node: IsIn, table: Table) -> np.ndarray:
    if node.values and isinstance(node.values[0], str):
        wanted = set(node.values)
        found = per_distinct(text_value(node.arg, table), lambda u: u in wanted)
        return _missing_where(np.isnan(found), found == 0) if node.negate else found
    arg = _number(node.arg, table)
    found = np.isin(arg, np.asarray(node.values, dtype=np.float64))
    return _missing_where(np.isnan(arg), ~found if node.negate else found)


# ---------------------------------------------------------------------------- text


def is_text(node: Expr, table: Table) -> bool:
    """Whether ``node``'s value is text (a text column, a text function, a concatenation)."""
    if isinstance(node, Col):
        return isinstance(table.raw(node.name), TextColumn)
    if isinstance(node, Const):
        return isinstance(node.value, str)
    if isinstance(node, Unary):
        return node.op in TEXT_UNARY
    if isinstance(node, Binary) and node.op == "add":
        return is_text(node.left, table) or is_text(node.right, table)
    return False


def text_value(node: Expr, table: Table) -> TextColumn:
    value = _eval(node, table)
    if not isinstance(value, TextColumn):
        raise BackendError("a text function got a number (the type check should catch this)")
    return value


def per_distinct(column: TextColumn, function: Callable[[str], Any]) -> np.ndarray:
    """``function`` of each distinct value as float64, gathered by code (missing -> NaN)."""
    values = np.fromiter(
        (function(u) for u in column.uniques), dtype=np.float64, count=column.n_unique
    )
    return np.append(values, np.nan)[column.codes]  # code -1 reads the trailing NaN


def recode(column: TextColumn, mapped: list[str]) -> TextColumn:
    """``column`` with distinct value ``i`` replaced by ``mapped[i]``; equal results merge
    into one code (encoders count categories by code)."""
    index: dict[str, int] = {}
    remap = np.fromiter(
        (index.setdefault(v, len(index)) for v in mapped), dtype=np.int32, count=len(mapped)
    )
    codes = np.append(remap, np.int32(-1))[column.codes]
    return TextColumn(codes, np.array(list(index), dtype=object))


def per_code_table(node: Expr, name: str, column: TextColumn) -> np.ndarray:
    """``node`` (a number computed from the text column ``name`` alone) for each distinct
    value of the column, then for a missing value: indexed by code, ``-1`` reading the
    last entry. What compiled kernels gather by code."""
    codes = np.append(np.arange(column.n_unique, dtype=np.int32), np.int32(-1))
    distinct = TextColumn(codes, column.uniques)
    values = evaluate(node, Table(RowRange(0, len(codes)), {name: distinct}))
    return np.asarray(values, dtype=np.float64)


def _concat(node: Binary, table: Table) -> TextColumn:
    left, right = node.left, node.right
    if isinstance(right, Const):
        column = text_value(left, table)
        return recode(column, [u + str(right.value) for u in column.uniques])
    if isinstance(left, Const):
        column = text_value(right, table)
        return recode(column, [str(left.value) + u for u in column.uniques])
    a, b = text_value(left, table), text_value(right, table)
    present = (a.codes >= 0) & (b.codes >= 0)
    pairs = a.codes.astype(np.int64) * max(b.n_unique, 1) + b.codes
    distinct, inverse = np.unique(pairs[present], return_inverse=True)
    codes = np.full(len(pairs), -1, dtype=np.int32)
    codes[present] = inverse
    ua, ub = a.uniques, b.uniques
    joined = [ua[p // max(b.n_unique, 1)] + ub[p % max(b.n_unique, 1)] for p in distinct.tolist()]
    return recode(TextColumn(codes, np.array(joined, dtype=object)), joined)


def _is_text_comparison(node: Binary, table: Table) -> bool:
    return is_text(node.left, table) or is_text(node.right, table)


def _text_compare(node: Binary, table: Table) -> np.ndarray:
    left, right = node.left, node.right
    if isinstance(left, Const):
        left, right = right, left
    if not isinstance(right, Const) or not isinstance(right.value, str):
        raise BackendError("text comparisons need a text value and a quoted string")
    equal = per_distinct(text_value(left, table), lambda u: u == right.value)
    return equal if node.op == "eq" else _missing_where(np.isnan(equal), equal == 0)
