"""Definition-time checks: every column exists, every op gets a type it can handle.

Errors are raised when the pipeline is built, before any data is read, and name the
feature, the column and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastprep.errors import PipelineDefinitionError
from fastprep.plan.dtypes import LType
from fastprep.plan.expr import COMPARISONS, LOGICAL, Binary, Col, Const, Expr, Unary, Where
from fastprep.plan.nodes import Feature, Input, LogicalPlan
from fastprep.schema import unknown_column_message


def check_plan(plan: LogicalPlan, types: Mapping[str, LType]) -> None:
    """Raise :class:`PipelineDefinitionError` for the first problem found in ``plan``."""
    seen_outputs: dict[str, str] = {}
    for index, feature in enumerate(plan.features):
        where = f"feature {index + 1} {feature.describe()}"
        _check_feature(feature, types, where)
        for item in feature.inputs:
            if item.name in seen_outputs and feature.encoder is None:
                raise PipelineDefinitionError(
                    f"output {item.name!r} is produced twice ({seen_outputs[item.name]} and "
                    f"{where}); give the expr a distinct name"
                )
            seen_outputs[item.name] = where
    if plan.target is not None:
        target_type = infer_type(plan.target.expr, types, f"target {plan.target.name!r}")
        if not target_type.is_numeric:
            raise PipelineDefinitionError(
                f"target {plan.target.name!r} is {target_type.value}; a target must be numeric "
                'or boolean (e.g. fp.expr("late = arr_delay > 15"))'
            )


def _check_feature(feature: Feature, types: Mapping[str, LType], where: str) -> None:
    if not isinstance(feature, Feature):
        raise PipelineDefinitionError(f"{where}: expected fp.cols(...) >> ops, got {feature!r}")
    for position, step in enumerate(feature.steps):
        if step.kind == "encoder" and position != len(feature.steps) - 1:
            raise PipelineDefinitionError(
                f"{where}: {step.describe()} produces a block of columns and must be the last step"
            )
    numeric_steps = [s for s in feature.steps if s.kind != "encoder"]
    for item in feature.inputs:
        input_type = infer_type(item.expr, types, f"{where}, input {item.name!r}")
        if numeric_steps and not input_type.is_numeric:
            raise PipelineDefinitionError(
                f"{where}: {numeric_steps[0].describe()} needs a numeric input, but "
                f"{item.name!r} is {input_type.value}; encode it with fp.OneHot() or fp.Hash()"
            )
        if feature.encoder is None and not input_type.is_numeric:
            raise PipelineDefinitionError(
                f"{where}: {item.name!r} is {input_type.value} and cannot be emitted as a number; "
                "end the chain with fp.OneHot() or fp.Hash()"
            )


def infer_type(node: Expr, types: Mapping[str, LType], where: str) -> LType:
    """Logical type of ``node``; raises for unknown columns and type errors."""
    if isinstance(node, Col):
        if node.name not in types:
            raise PipelineDefinitionError(unknown_column_message(node.name, list(types), where))
        return types[node.name]
    if isinstance(node, Const):
        return LType.STRING if isinstance(node.value, str) else LType.FLOAT
    if isinstance(node, Unary):
        arg = infer_type(node.arg, types, where)
        if node.op == "isnull":
            return LType.BOOL
        _require_numeric(arg, node.op, where)
        return LType.BOOL if node.op == "not" else LType.FLOAT
    if isinstance(node, Where):
        _require_numeric(infer_type(node.cond, types, where), "where", where)
        for branch in (node.then, node.otherwise):
            _require_numeric(infer_type(branch, types, where), "where", where)
        return LType.FLOAT
    assert isinstance(node, Binary)
    left = infer_type(node.left, types, where)
    right = infer_type(node.right, types, where)
    if node.op in ("eq", "ne") and (left.is_text or right.is_text):
        other = node.right if left.is_text else node.left
        if not (isinstance(other, Const) and isinstance(other.value, str)):
            raise PipelineDefinitionError(
                f"{where}: a text column can only be compared with a quoted string, "
                f"e.g. origin == 'JFK'"
            )
        return LType.BOOL
    _require_numeric(left, node.op, where)
    _require_numeric(right, node.op, where)
    return LType.BOOL if node.op in COMPARISONS or node.op in LOGICAL else LType.FLOAT


def _require_numeric(found: LType, op: str, where: str) -> None:
    if not found.is_numeric:
        raise PipelineDefinitionError(
            f"{where}: {op!r} needs numbers but got a {found.value} value; "
            "text columns can only be compared with a quoted string or encoded"
        )


def input_types(inputs: tuple[Input, ...], types: Mapping[str, LType]) -> dict[str, LType]:
    """Logical type of each named input."""
    return {item.name: infer_type(item.expr, types, item.name) for item in inputs}
