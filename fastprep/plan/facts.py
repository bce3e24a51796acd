"""What is known about a value before any data is seen: its range, and whether it can be missing.

Facts come from the schema (after validation, a non-nullable ``Float(min=0)`` column under a
quarantine/raise policy holds only finite numbers >= 0) and flow through expressions and
steps by interval arithmetic. Optimizer rewrites that are only valid for some inputs
(``x * 0 → 0`` needs x finite and present) ask these facts first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fastprep.plan.expr import (
    FIRST_SECOND,
    LAST_SECOND,
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
)

INF = math.inf


@dataclass(frozen=True)
class Facts:
    """``lo <= value <= hi`` whenever present; ``missing``: may be missing; ``finite``: never ±inf."""

    lo: float = -INF
    hi: float = INF
    missing: bool = True
    finite: bool = False

    @property
    def certain(self) -> bool:
        """Always present and finite: the value behaves like an ordinary real number."""
        return not self.missing and self.finite

    def within(self, lo: float, hi: float) -> bool:
        return self.lo >= lo and self.hi <= hi


UNKNOWN = Facts()
BOOLEAN = Facts(0.0, 1.0, True, True)
#: the range of each date part (local years 0 and 10000 lie at the ends of UTC's 1..9999)
_DATE_PART_RANGES = {
    "year": (0.0, 10000.0), "month": (1.0, 12.0), "day": (1.0, 31.0), "hour": (0.0, 23.0),
    "minute": (0.0, 59.0), "second": (0.0, 59.0), "dayofweek": (0.0, 6.0),
    "dayofyear": (1.0, 366.0), "quarter": (1.0, 4.0),
}  # fmt: skip


def const_facts(value: float) -> Facts:
    if value != value:
        return Facts(missing=True, finite=False)
    return Facts(value, value, False, math.isfinite(value))


def expr_facts(node: Expr, columns: dict[str, Facts]) -> Facts:
    """Facts of ``node`` from the facts of its columns (unknown columns: :data:`UNKNOWN`)."""
    if isinstance(node, Col):
        return columns.get(node.name, UNKNOWN)
    if isinstance(node, Const):
        return const_facts(node.value) if isinstance(node.value, float) else UNKNOWN
    if isinstance(node, Where):
        cond = expr_facts(node.cond, columns)
        a, b = expr_facts(node.then, columns), expr_facts(node.otherwise, columns)
        return Facts(min(a.lo, b.lo), max(a.hi, b.hi), cond.missing or a.missing or b.missing,
                     a.finite and b.finite)  # fmt: skip
    if isinstance(node, Unary):
        return _unary_facts(node.op, expr_facts(node.arg, columns))
    if isinstance(node, (Call, IsIn, DatePart)):
        return _function_facts(node, columns)
    assert isinstance(node, Binary)
    left, right = expr_facts(node.left, columns), expr_facts(node.right, columns)
    missing = left.missing or right.missing
    if node.op in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or"):
        return Facts(0.0, 1.0, missing, True)
    if node.op in ("add", "sub", "mul") and left.finite and right.finite:
        lo, hi = _interval(node.op, left, right)
        if math.isfinite(lo) and math.isfinite(hi):
            return Facts(lo, hi, missing, True)
    # division, power, modulo, possible overflow: the value may be NaN or ±inf
    return UNKNOWN


def input_facts(node: Expr, columns: dict[str, Facts]) -> Facts:
    """Facts of a feature input: a derived (non-column) value that is not finite becomes missing."""
    facts = expr_facts(node, columns)
    if isinstance(node, Col) or facts.finite:
        return facts
    return Facts(facts.lo, facts.hi, True, True)


def _interval(op: str, a: Facts, b: Facts) -> tuple[float, float]:
    if op == "add":
        return a.lo + b.lo, a.hi + b.hi
    if op == "sub":
        return a.lo - b.hi, a.hi - b.lo
    products = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    if any(p != p for p in products):  # 0 * inf
        return -INF, INF
    return min(products), max(products)


def _function_facts(node: Call | IsIn | DatePart, columns: dict[str, Facts]) -> Facts:
    """Date parts and membership have fixed ranges; missing where an argument may be."""
    args = [expr_facts(a, columns) for a in children(node)]
    missing = any(a.missing for a in args)
    if isinstance(node, IsIn):
        return Facts(0.0, 1.0, missing, True)
    if isinstance(node, DatePart):  # missing too outside the years 1..9999 (UTC)
        lo, hi = _DATE_PART_RANGES[node.part]
        inside = args[0].within(FIRST_SECOND, LAST_SECOND)
        return Facts(lo, hi, missing or not (args[0].finite and inside), True)
    if node.fn in ("startswith", "endswith", "contains"):
        return Facts(0.0, 1.0, args[0].missing, True)
    if node.fn in ("min", "max") and all(a.finite for a in args):
        pick = min if node.fn == "min" else max
        return Facts(pick(a.lo for a in args), pick(a.hi for a in args), missing, True)
    return UNKNOWN


def _unary_facts(op: str, arg: Facts) -> Facts:
    if op == "isnull":
        return Facts(0.0, 1.0, False, True)
    if op == "not":
        return Facts(0.0, 1.0, arg.missing, True)
    if op == "neg":
        return Facts(-arg.hi, -arg.lo, arg.missing, arg.finite)
    if op == "abs":
        lo = 0.0 if arg.lo <= 0 <= arg.hi else min(abs(arg.lo), abs(arg.hi))
        return Facts(lo, max(abs(arg.lo), abs(arg.hi)), arg.missing, arg.finite)
    if op == "exp" and arg.finite and arg.hi <= 700:
        return Facts(
            math.exp(arg.lo) if arg.lo > -INF else 0.0, math.exp(arg.hi), arg.missing, True
        )
    if op == "log1p" and arg.lo > -1:
        return Facts(math.log1p(arg.lo), math.log1p(arg.hi) if arg.hi < INF else INF,
                     arg.missing, arg.finite)  # fmt: skip
    if op in ("floor", "ceil", "trunc", "round") and arg.finite:
        lo = math.floor(arg.lo) if arg.lo > -INF else -INF
        hi = math.ceil(arg.hi) if arg.hi < INF else INF
        return Facts(lo, hi, arg.missing, True)
    if op == "sign":
        return Facts(-1.0, 1.0, arg.missing, True)
    if op in ("sin", "cos") and arg.finite:
        return Facts(-1.0, 1.0, arg.missing, True)
    if op in ("log", "sqrt") and arg.lo > 0:
        fn = math.log if op == "log" else math.sqrt
        return Facts(fn(arg.lo), fn(arg.hi) if arg.hi < INF else INF, arg.missing, arg.finite)
    return UNKNOWN
