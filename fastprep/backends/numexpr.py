"""The numexpr backend: each element-wise output column is one ``numexpr.evaluate`` call.

The expression string is generated from fastprep's own parsed tree (never the user's
text — numexpr and pandas ``eval`` have had code-execution advisories) with the same
missing-value semantics as the reference. numexpr evaluates it in cache-sized blocks on
its own threads, as ``df.eval`` would. Encoders and non-fusable stages use the reference.
"""

from __future__ import annotations

from typing import Any

import numexpr
import numpy as np

from fastprep.backends.reference import backend as reference
from fastprep.backends.reference.expressions import is_text
from fastprep.data.columns import Table, TextColumn
from fastprep.emit.sink import OutputSink
from fastprep.errors import BackendError
from fastprep.plan.expr import (
    TEXT_PREDICATES,
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
from fastprep.plan.nodes import Input, LogicalPlan, Stage

_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_FUNCS = {
    "log": "log", "log1p": "log1p", "exp": "exp", "sqrt": "sqrt", "abs": "abs",
    "floor": "floor", "ceil": "ceil",
}  # fmt: skip
#: computed by numpy's ufunc on the numexpr-evaluated argument (sqrt, abs, floor and ceil
#: are exact in both; the others are not correctly rounded and the libraries differ, or
#: numexpr has no such function)
_NUMPY_FUNCS = ("log", "log1p", "exp", "log2", "log10", "sin", "cos", "tan", "trunc", "sign")


def fit_stage(
    plan: LogicalPlan, stage: Stage, table: Table, log: reference.Repairs | None = None
) -> dict[int, reference.FeatureParams]:
    """Statistics come from the reference code: numexpr has no reductions that help here."""
    return reference.fit_stage(plan, stage, table, log)


def run_stage(
    plan: LogicalPlan,
    stage: Stage,
    params: list[reference.FeatureParams],
    table: Table,
    sink: OutputSink,
    log: reference.Repairs,
) -> set[int]:
    if stage.kind != "fused":
        return reference.run_stage(plan, stage, params, table, sink, log)
    for index in stage.features:
        feature = plan.features[index]
        view = sink.numeric_view(index)
        for j, item in enumerate(feature.inputs):
            values = input_values(item, table, log)
            with np.errstate(over="ignore"):  # beyond float32 -> inf -> quarantined
                view[:, j] = reference.apply_chain(
                    feature.steps, params[index][item.name], values, item.name, log
                )
    return set()


def input_values(item: Input, table: Table, log: reference.Repairs) -> np.ndarray:
    """Evaluate a numeric input with numexpr; non-finite results become missing (counted)."""
    if item.is_plain_column:
        return table[item.name]
    translator = _Translator(table)
    text = translator.translate(item.expr)
    value = numexpr.evaluate(text, local_dict=translator.names)
    value = np.asarray(value, dtype=np.float64)
    if value.ndim == 0:
        value = np.full(table.n_rows, float(value))
    return reference.finish_input(item, value, table, log)


class _Translator:
    """Our tree → a numexpr string over generated names (``a0``, ``a1``...)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.names: dict[str, Any] = {"nan": np.nan}
        self._ids: dict[Any, str] = {}

    def bind(self, key: Any, value: Any) -> str:
        if key not in self._ids:
            self._ids[key] = f"a{len(self._ids)}"
            self.names[self._ids[key]] = value
        return self._ids[key]

    def once(self, text: str) -> str:
        """``text`` as an operand written several times (``where(a != a, nan, ...)``): a
        long one is evaluated first and read by name, so nested comparisons, ``min``s and
        ``where``s do not grow the string threefold per level (numexpr took minutes to
        compile 12 ``&``-joined comparisons). The same values: numexpr keeps its
        temporaries in float64 either way."""
        if len(text) <= _INLINE_OPERAND:
            return text
        value = np.asarray(numexpr.evaluate(text, local_dict=self.names), dtype=np.float64)
        return self.bind(("operand", text), value)

    def translate(self, node: Expr) -> str:
        if isinstance(node, Col):
            column = self.table[node.name]
            if isinstance(column, TextColumn):
                raise BackendError(f"text column {node.name!r} used as a number")
            return self.bind(("col", node.name), column)
        if isinstance(node, Const):
            if isinstance(node.value, str):
                raise BackendError("string constants only appear in text comparisons")
            return self.bind(("const", repr(node.value)), np.float64(node.value))
        if self._numpy_only(node):
            # text work runs per distinct value (gathered by code); date parts need the
            # zone's calendar; ``//`` and ``%`` need numpy's edge cases (an infinite divisor,
            # a zero), which numexpr's arithmetic does not give: numpy evaluates these
            return self.bind(("numpy", node), reference.evaluate_expr(node, self.table))
        if isinstance(node, Unary):
            return self._unary(node)
        if isinstance(node, Where):
            c = self.once(self.translate(node.cond))
            a, b = self.translate(node.then), self.translate(node.otherwise)
            return f"where({c} != {c}, nan, where({c} != 0, {a}, {b}))"
        if isinstance(node, Call):
            return self._call(node)
        if isinstance(node, IsIn):
            a = self.once(self.translate(node.arg))
            test = " | ".join(f"({a} == {self.translate(Const(v))})" for v in node.values)
            yes, no = ("0.0", "1.0") if node.negate else ("1.0", "0.0")
            return f"where({a} != {a}, nan, where({test}, {yes}, {no}))"
        assert isinstance(node, Binary)
        a, b = self.translate(node.left), self.translate(node.right)
        if node.op in _ARITH and node.op != "pow":
            return f"({a} {_ARITH[node.op]} {b})"
        a, b = self.once(a), self.once(b)
        missing = f"({a} != {a}) | ({b} != {b})"
        if node.op == "pow":  # IEEE says nan ** 0 == 1 ** nan == 1: missing stays missing
            return f"where({missing}, nan, {a} ** {b})"
        if node.op in _COMPARE:
            test = f"{a} {_COMPARE[node.op]} {b}"
        elif node.op == "and":
            test = f"({a} != 0) & ({b} != 0)"
        else:
            test = f"({a} != 0) | ({b} != 0)"
        return f"where({missing}, nan, where({test}, 1.0, 0.0))"

    def _numpy_only(self, node: Expr) -> bool:
        if isinstance(node, DatePart):
            return True
        if isinstance(node, Binary):
            texts = node.op in ("eq", "ne") and (
                is_text(node.left, self.table) or is_text(node.right, self.table)
            )
            return texts or node.op in ("mod", "floordiv")
        if isinstance(node, Call):
            return node.fn in TEXT_PREDICATES
        if isinstance(node, IsIn):
            return isinstance(node.values[0], str)
        if isinstance(node, Unary) and node.op == "isnull":  # of a text column: its codes
            return is_text(node.arg, self.table) and not isinstance(node.arg, Col)
        return isinstance(node, Unary) and node.op == "length"

    def _call(self, node: Call) -> str:
        args = [self.once(self.translate(a)) for a in node.args]
        if node.fn == "round":  # numexpr has no rint: numpy rounds the computed argument
            value = numexpr.evaluate(args[0], local_dict=self.names)
            digits = node.args[1]
            assert isinstance(digits, Const) and isinstance(digits.value, float)
            with np.errstate(all="ignore"):
                rounded = np.round(np.asarray(value, dtype=np.float64), int(digits.value))
            return self.bind(("round", node), rounded)
        if node.fn == "clip":  # numpy's definition: min(max(x, lo), hi)
            return _minimum(self.once(_maximum(args[0], args[1])), args[2])
        pick = _minimum if node.fn == "min" else _maximum
        out = args[0]
        for arg in args[1:]:
            out = pick(self.once(out), arg)
        return out

    def _unary(self, node: Unary) -> str:
        if node.op == "isnull":
            arg = node.arg
            if isinstance(arg, Col) and isinstance(self.table[arg.name], TextColumn):
                codes = self.table[arg.name].codes
                return f"where({self.bind(('codes', arg.name), codes)} < 0, 1.0, 0.0)"
            a = self.once(self.translate(arg))
            return f"where({a} != {a}, 1.0, 0.0)"
        a = self.translate(node.arg)
        if node.op == "neg":
            return f"(-{a})"
        if node.op == "not":
            a = self.once(a)
            return f"where({a} != {a}, nan, where({a} == 0, 1.0, 0.0))"
        if node.op in _NUMPY_FUNCS:
            # numexpr's exp/log differ from numpy's SIMD ufuncs in the last bit (found by
            # the random-pipeline test: exp then MinMax gave 5.9e-39 where numpy gives 0);
            # the argument's arithmetic is exact in both, so numpy finishes the call
            argument = numexpr.evaluate(a, local_dict=self.names)
            with np.errstate(all="ignore"):
                value = getattr(np, node.op)(argument)
            return self.bind(("ufunc", node), value)
        if node.op == "round":  # numexpr has no rint
            argument = numexpr.evaluate(a, local_dict=self.names)
            return self.bind(("ufunc", node), np.rint(np.asarray(argument, dtype=np.float64)))
        return f"{_FUNCS[node.op]}({a})"


#: an operand written several times is evaluated first when longer than this (a column
#: name or a short sum stays inline, fused in numexpr's one pass)
_INLINE_OPERAND = 120


def _minimum(a: str, b: str) -> str:
    """numpy's ``minimum`` (NaN if either is NaN) in numexpr's syntax."""
    return f"where(({a} < {b}) | ({a} != {a}), {a}, {b})"


def _maximum(a: str, b: str) -> str:
    return f"where(({a} > {b}) | ({a} != {a}), {a}, {b})"
