"""Expression nodes for ``fp.expr``: columns, constants, operators, functions, ``where``.

Nodes are frozen dataclasses, so two structurally equal trees compare and hash equal —
that is what lets the optimizer find duplicate sub-expressions and key kernel caches.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass

#: unary functions and operators: name -> surface syntax used by the printer
UNARY_OPS: dict[str, str] = {
    "neg": "-",
    "not": "~",
    "log": "log",
    "log1p": "log1p",
    "exp": "exp",
    "sqrt": "sqrt",
    "abs": "abs",
    "isnull": "isnull",
    "floor": "floor",
    "ceil": "ceil",
    "trunc": "trunc",
    "round": "round",
    "sign": "sign",
    "log2": "log2",
    "log10": "log10",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    # text in, number out
    "length": "length",
    # text in, text out
    "lower": "lower",
    "upper": "upper",
    "strip": "strip",
}
#: unary functions whose value is text (their argument is text too)
TEXT_UNARY = frozenset({"lower", "upper", "strip"})
#: unary functions whose value is a whole number (or missing)
INTEGRAL_UNARY = frozenset({"floor", "ceil", "trunc", "round", "sign", "length"})
#: functions of several arguments: name -> (fewest, most (None: any number) arguments)
CALL_ARITY: dict[str, tuple[int, int | None]] = {
    "round": (2, 2),
    "min": (2, None),
    "max": (2, None),
    "clip": (3, 3),
    "startswith": (2, 2),
    "endswith": (2, 2),
    "contains": (2, 2),
}
#: text predicates: a text value and a quoted string
TEXT_PREDICATES = frozenset({"startswith", "endswith", "contains"})
#: date/time parts of a ``fp.Datetime`` column, as pandas' ``Series.dt`` accessors
DATE_PARTS = (
    "year", "month", "day", "hour", "minute", "second", "dayofweek", "dayofyear", "quarter",
)  # fmt: skip
#: 0001-01-01 00:00:00 and 9999-12-31 23:59:59 UTC in seconds since 1970: a date part of
#: an instant outside them is missing (time-zone libraries cannot localize it)
FIRST_SECOND, LAST_SECOND = -62_135_596_800, 253_402_300_799

#: binary operators: name -> (surface syntax, Python precedence, used by the printer).
#: As in Python, ``&``/``|`` bind tighter than comparisons: ``(a > 1) & (b < 2)``.
BINARY_OPS: dict[str, tuple[str, int]] = {
    "eq": ("==", 3),
    "ne": ("!=", 3),
    "lt": ("<", 3),
    "le": ("<=", 3),
    "gt": (">", 3),
    "ge": (">=", 3),
    "or": ("|", 4),
    "and": ("&", 5),
    "add": ("+", 6),
    "sub": ("-", 6),
    "mul": ("*", 7),
    "div": ("/", 7),
    "mod": ("%", 7),
    "floordiv": ("//", 7),
    "pow": ("**", 9),
}
_UNARY_PRECEDENCE = 8
_COMPARISON_PRECEDENCE = 3
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
LOGICAL = frozenset({"and", "or"})


@dataclass(frozen=True)
class Col:
    """A reference to an input column by name."""

    name: str


@dataclass(frozen=True)
class Const:
    """A literal: a number, or a string only where compared with a text column."""

    value: float | str


@dataclass(frozen=True)
class Unary:
    """A unary operator or whitelisted function applied to one operand."""

    op: str
    arg: Expr

    def __post_init__(self) -> None:
        if self.op not in UNARY_OPS:
            raise ValueError(f"unknown unary op {self.op!r}")


@dataclass(frozen=True)
class Binary:
    """An arithmetic, comparison or logical operator over two operands."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in BINARY_OPS:
            raise ValueError(f"unknown binary op {self.op!r}")


@dataclass(frozen=True)
class Where:
    """``where(cond, a, b)``: a where cond is true, b where false, missing where cond is."""

    cond: Expr
    then: Expr
    otherwise: Expr


@dataclass(frozen=True)
class Call:
    """A whitelisted function of several arguments: ``min(a, b)``, ``round(x, 2)``..."""

    fn: str
    args: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if self.fn not in CALL_ARITY:
            raise ValueError(f"unknown function {self.fn!r}")
        fewest, most = CALL_ARITY[self.fn]
        if len(self.args) < fewest or (most is not None and len(self.args) > most):
            raise ValueError(f"{self.fn}() cannot take {len(self.args)} arguments")


@dataclass(frozen=True)
class IsIn:
    """``arg in (v1, v2, ...)`` (``not in`` when ``negate``); missing where ``arg`` is."""

    arg: Expr
    values: tuple[float | str, ...]
    negate: bool = False


@dataclass(frozen=True)
class DatePart:
    """A calendar part of a ``fp.Datetime`` column in its declared zone (``tz``; None: as
    stored). The zone comes from the schema when the pipeline is built; it is not printed."""

    part: str
    arg: Expr
    tz: str | None = None

    def __post_init__(self) -> None:
        if self.part not in DATE_PARTS:
            raise ValueError(f"unknown date part {self.part!r}")


Expr = Col | Const | Unary | Binary | Where | Call | IsIn | DatePart


def children(node: Expr) -> tuple[Expr, ...]:
    """The direct operands of ``node``."""
    if isinstance(node, Unary):
        return (node.arg,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Where):
        return (node.cond, node.then, node.otherwise)
    if isinstance(node, Call):
        return node.args
    if isinstance(node, (IsIn, DatePart)):
        return (node.arg,)
    return ()


def with_children(node: Expr, new: tuple[Expr, ...]) -> Expr:
    """``node`` with its operands replaced by ``new`` (same order as :func:`children`)."""
    if isinstance(node, Unary):
        return Unary(node.op, new[0])
    if isinstance(node, Binary):
        return Binary(node.op, new[0], new[1])
    if isinstance(node, Where):
        return Where(new[0], new[1], new[2])
    if isinstance(node, Call):
        return Call(node.fn, tuple(new))
    if isinstance(node, IsIn):
        return IsIn(new[0], node.values, node.negate)
    if isinstance(node, DatePart):
        return DatePart(node.part, new[0], node.tz)
    return node


def walk(node: Expr):
    """Yield ``node`` and every sub-expression, parents before children."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def columns_of(node: Expr) -> tuple[str, ...]:
    """Input column names ``node`` reads, in first-appearance order, without repeats."""
    seen: dict[str, None] = {}
    for sub in walk(node):
        if isinstance(sub, Col):
            seen.setdefault(sub.name)
    return tuple(seen)


def to_source(node: Expr, parent_precedence: int = 0) -> str:
    """Print ``node`` back as expression text that :mod:`fastprep.api.expr_parser` accepts."""
    if isinstance(node, Col):
        return node.name if _plain_name(node.name) else f"`{node.name}`"
    if isinstance(node, Const):
        if not isinstance(node.value, float):
            return repr(node.value)
        text = _float_source(node.value)
        negative = text.startswith("-")
        return f"({text})" if negative and parent_precedence > _UNARY_PRECEDENCE else text
    if isinstance(node, Unary):
        prefix = node.op in ("neg", "not")
        inner = to_source(node.arg, _UNARY_PRECEDENCE if prefix else 0)
        if prefix:
            text = f"{UNARY_OPS[node.op]}{inner}"
            return f"({text})" if parent_precedence > _UNARY_PRECEDENCE else text
        return f"{node.op}({inner})"
    if isinstance(node, Where):
        args = ", ".join(to_source(a) for a in (node.cond, node.then, node.otherwise))
        return f"where({args})"
    if isinstance(node, Call):
        return f"{node.fn}({', '.join(to_source(a) for a in node.args)})"
    if isinstance(node, DatePart):
        return f"{node.part}({to_source(node.arg)})"
    if isinstance(node, IsIn):
        items = ", ".join(to_source(Const(v)) for v in node.values)
        items += "," if len(node.values) == 1 else ""
        word = "not in" if node.negate else "in"
        text = f"{to_source(node.arg, _COMPARISON_PRECEDENCE + 1)} {word} ({items})"
        return f"({text})" if parent_precedence > _COMPARISON_PRECEDENCE else text
    symbol, precedence = BINARY_OPS[node.op]
    # ``**`` is right-associative; every other operator here is left-associative
    left_prec = precedence + 1 if node.op == "pow" else precedence
    right_prec = precedence if node.op == "pow" else precedence + 1
    if node.op in COMPARISONS:  # Python would chain ``a < b < c``; keep them apart
        left_prec = right_prec = precedence + 1
    text = f"{to_source(node.left, left_prec)} {symbol} {to_source(node.right, right_prec)}"
    return f"({text})" if precedence < parent_precedence else text


#: names the parser reads as something else, so a column with such a name needs backticks.
#: The later functions' names (``hour``, ``day``, ``min``, ``length``...) are not reserved:
#: they are common column names, and a name is such a function only where it is called.
RESERVED_NAMES = frozenset(
    {"where", "nan", "inf", "pi", "e", "True", "False", "None", "and", "or", "not",
     "neg", "log", "log1p", "exp", "sqrt", "abs", "isnull"}
)  # fmt: skip


def _plain_name(name: str) -> bool:
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and name not in RESERVED_NAMES
        and not name.startswith("__")
        and not name.startswith("_fpq")
    )


def _float_source(value: float) -> str:
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)
