"""Constant folding and algebraic simplification inside ``expr`` trees.

Before: ``y = (x + 0) * 1 + log(exp(z)) + 2 * 3``   (x, z non-nullable, z in [0, 10])
After:  ``y = x + z + 6``

Rules that change results for some inputs only fire when the facts rule those inputs out:
``x * 0 → 0`` needs x always present and finite; ``log(exp(x)) → x`` needs x within
[-700, 700] (beyond, exp overflows); ``exp(log(x)) → x`` needs x > 0. Constant
sub-expressions are folded only when the result is finite (1/0 stays, to become missing).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fastprep.plan.expr import (
    Binary,
    Call,
    Col,
    Const,
    DatePart,
    Expr,
    IsIn,
    Unary,
    Where,
    children,
    with_children,
)
from fastprep.plan.facts import Facts, expr_facts
from fastprep.plan.nodes import Input, LogicalPlan

_EXACT_LOG_EXP = 700.0


def fold_constants(plan: LogicalPlan) -> LogicalPlan:
    facts = plan.column_facts
    features = tuple(
        replace(f, inputs=tuple(_fold_input(i, facts) for i in f.inputs)) for f in plan.features
    )
    target = None if plan.target is None else _fold_input(plan.target, facts)
    return replace(plan, features=features, target=target)


def _fold_input(item: Input, facts: dict[str, Facts]) -> Input:
    if isinstance(item.expr, Col):
        return item
    return Input(item.name, simplify(item.expr, facts))


def simplify(node: Expr, facts: dict[str, Facts]) -> Expr:
    """Bottom-up rewrite of ``node`` (one sweep; the driver repeats to a fixed point)."""
    if isinstance(node, Unary):
        return _unary(Unary(node.op, simplify(node.arg, facts)), facts)
    if isinstance(node, Binary):
        return _binary(
            Binary(node.op, simplify(node.left, facts), simplify(node.right, facts)), facts
        )
    if isinstance(node, Where):
        cond = simplify(node.cond, facts)
        then, otherwise = simplify(node.then, facts), simplify(node.otherwise, facts)
        if _number(cond) is not None and not math.isnan(_number(cond)):
            return then if _number(cond) != 0 else otherwise
        return Where(cond, then, otherwise)
    if isinstance(node, (Call, IsIn, DatePart)):
        node = with_children(node, tuple(simplify(c, facts) for c in children(node)))
        return _function(node)
    return node


def _function(node: Call | IsIn | DatePart) -> Expr:
    """A numeric function of constants folds to its value (when finite)."""
    if isinstance(node, DatePart):
        return node
    values = [_number(c) for c in children(node)]
    if any(v is None or math.isnan(v) for v in values):
        return node
    with np.errstate(all="ignore"):
        if isinstance(node, IsIn):
            if not node.values or isinstance(node.values[0], str):
                return node
            found = values[0] in node.values
            result = float(found != node.negate)
        elif node.fn == "round":
            result = float(np.round(np.float64(values[0]), int(values[1])))
        elif node.fn in ("min", "max"):
            result = float(min(values) if node.fn == "min" else max(values))
        elif node.fn == "clip":
            result = float(np.minimum(np.maximum(values[0], values[1]), values[2]))
        else:
            return node
    return Const(result) if math.isfinite(result) else node


def _number(node: Expr) -> float | None:
    return node.value if isinstance(node, Const) and isinstance(node.value, float) else None


def _certain(node: Expr, facts: dict[str, Facts]) -> bool:
    return expr_facts(node, facts).certain


def _unary(node: Unary, facts: dict[str, Facts]) -> Expr:
    arg = node.arg
    value = _number(arg)
    if value is not None:
        folded = _evaluate_unary(node.op, value)
        if folded is not None:
            return Const(folded)
    if node.op == "neg" and isinstance(arg, Unary) and arg.op == "neg":
        return arg.arg
    if node.op == "log" and isinstance(arg, Unary) and arg.op == "exp":
        inner = expr_facts(arg.arg, facts)
        if inner.finite and inner.within(-_EXACT_LOG_EXP, _EXACT_LOG_EXP):
            return arg.arg
    if node.op == "exp" and isinstance(arg, Unary) and arg.op == "log":
        inner = expr_facts(arg.arg, facts)
        if inner.finite and inner.lo > 0:
            return arg.arg
    if node.op == "isnull" and not expr_facts(arg, facts).missing:
        return Const(0.0)
    return node


def _binary(node: Binary, facts: dict[str, Facts]) -> Expr:
    left, right = node.left, node.right
    a, b = _number(left), _number(right)
    if a is not None and b is not None:
        folded = _evaluate_binary(node.op, a, b)
        if folded is not None:
            return Const(folded)
    op = node.op
    if op == "add":
        if b == 0.0:
            return left
        if a == 0.0:
            return right
    if op == "sub" and b == 0.0:
        return left
    if op == "sub" and left == right and _certain(left, facts):
        return Const(0.0)
    if op == "mul":
        if b == 1.0:
            return left
        if a == 1.0:
            return right
        if b == 0.0 and _certain(left, facts):
            return Const(0.0)
        if a == 0.0 and _certain(right, facts):
            return Const(0.0)
    if op == "div" and b == 1.0:
        return left
    if op == "pow" and b == 1.0:
        return left
    return node


def _evaluate_unary(op: str, value: float) -> float | None:
    with np.errstate(all="ignore"):
        functions = {"neg": np.negative, "abs": np.abs, "log": np.log, "log1p": np.log1p,
                     "exp": np.exp, "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil,
                     "trunc": np.trunc, "round": np.rint, "sign": np.sign, "log2": np.log2,
                     "log10": np.log10, "sin": np.sin, "cos": np.cos, "tan": np.tan}  # fmt: skip
        if op in functions:
            result = float(functions[op](np.float64(value)))
        elif op == "isnull":
            result = float(math.isnan(value))
        elif op == "not":
            result = math.nan if math.isnan(value) else float(value == 0)
        else:
            return None
    return result if math.isfinite(result) else None


def _evaluate_binary(op: str, a: float, b: float) -> float | None:
    if math.isnan(a) or math.isnan(b):
        return None
    x, y = np.float64(a), np.float64(b)
    with np.errstate(all="ignore"):
        table = {
            "add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
            "div": lambda: x / y, "mod": lambda: np.remainder(x, y), "pow": lambda: np.power(x, y),
            "floordiv": lambda: np.floor_divide(x, y),
            "eq": lambda: float(x == y), "ne": lambda: float(x != y), "lt": lambda: float(x < y),
            "le": lambda: float(x <= y), "gt": lambda: float(x > y), "ge": lambda: float(x >= y),
            "and": lambda: float(x != 0 and y != 0), "or": lambda: float(x != 0 or y != 0),
        }  # fmt: skip
        result = float(table[op]())
    return result if math.isfinite(result) else None
