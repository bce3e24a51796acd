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

from fastprep.backends import pandas_ as reference
from fastprep.columns import Table, TextColumn
from fastprep.emit.sink import OutputSink
from fastprep.errors import BackendError
from fastprep.plan.expr import Binary, Col, Const, Expr, Unary, Where
from fastprep.plan.nodes import Input, LogicalPlan, Stage

_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_FUNCS = {"log": "log", "log1p": "log1p", "exp": "exp", "sqrt": "sqrt", "abs": "abs"}
#: computed by numpy's ufunc on the numexpr-evaluated argument (sqrt and abs are exact in
#: both; these three are not correctly rounded and the two libraries differ)
_NUMPY_FUNCS = ("log", "log1p", "exp")


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
        if isinstance(node, Unary):
            return self._unary(node)
        if isinstance(node, Where):
            c = self.translate(node.cond)
            a, b = self.translate(node.then), self.translate(node.otherwise)
            return f"where({c} != {c}, nan, where({c} != 0, {a}, {b}))"
        assert isinstance(node, Binary)
        if node.op in ("eq", "ne") and any(
            isinstance(s, Const) and isinstance(s.value, str) for s in (node.left, node.right)
        ):
            return self.bind(("text", node), reference.evaluate_expr(node, self.table))
        if node.op == "mod":
            # numexpr has no remainder with numpy's edge cases (an infinite divisor keeps
            # the dividend; a - floor(a / b) * b gives NaN there): numpy evaluates it
            return self.bind(("mod", node), reference.evaluate_expr(node, self.table))
        a, b = self.translate(node.left), self.translate(node.right)
        missing = f"({a} != {a}) | ({b} != {b})"
        if node.op == "pow":  # IEEE says nan ** 0 == 1 ** nan == 1: missing stays missing
            return f"where({missing}, nan, {a} ** {b})"
        if node.op in _ARITH:
            return f"({a} {_ARITH[node.op]} {b})"
        if node.op in _COMPARE:
            test = f"{a} {_COMPARE[node.op]} {b}"
        elif node.op == "and":
            test = f"({a} != 0) & ({b} != 0)"
        else:
            test = f"({a} != 0) | ({b} != 0)"
        return f"where({missing}, nan, where({test}, 1.0, 0.0))"

    def _unary(self, node: Unary) -> str:
        if node.op == "isnull":
            arg = node.arg
            if isinstance(arg, Col) and isinstance(self.table[arg.name], TextColumn):
                codes = self.table[arg.name].codes
                return f"where({self.bind(('codes', arg.name), codes)} < 0, 1.0, 0.0)"
            a = self.translate(arg)
            return f"where({a} != {a}, 1.0, 0.0)"
        a = self.translate(node.arg)
        if node.op == "neg":
            return f"(-{a})"
        if node.op == "not":
            return f"where({a} != {a}, nan, where({a} == 0, 1.0, 0.0))"
        if node.op in _NUMPY_FUNCS:
            # numexpr's exp/log differ from numpy's SIMD ufuncs in the last bit (found by
            # the random-pipeline test: exp then MinMax gave 5.9e-39 where numpy gives 0);
            # the argument's arithmetic is exact in both, so numpy finishes the call
            argument = numexpr.evaluate(a, local_dict=self.names)
            with np.errstate(all="ignore"):
                value = getattr(np, node.op)(argument)
            return self.bind(("ufunc", node), value)
        return f"{_FUNCS[node.op]}({a})"
