"""Definition-time checks: every column exists, every op gets a type it can handle.

Errors are raised when the pipeline is built, before any data is read, and name the
feature, the column and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastprep.errors import PipelineDefinitionError
from fastprep.plan.dtypes import LType
from fastprep.plan.expr import (
    BINARY_OPS,
    COMPARISONS,
    LOGICAL,
    Binary,
    Col,
    Const,
    Expr,
    Unary,
    Where,
    to_source,
)
from fastprep.plan.nodes import Feature, Input, LogicalPlan
from fastprep.schema import unknown_column_message


def check_plan(plan: LogicalPlan, types: Mapping[str, LType]) -> None:
    """Raise :class:`PipelineDefinitionError` for the first problem found in ``plan``."""
    seen_outputs: dict[str, str] = {}
    for index, feature in enumerate(plan.features):
        where = f"feature {index + 1} {feature.describe()}"
        _check_feature(feature, types, where)
        for item in feature.inputs if _named_by_input(feature) else ():
            if item.name in seen_outputs:
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


def _named_by_input(feature: Feature) -> bool:
    """Features whose output columns carry the input's own name (numbers, Categorify)."""
    from fastprep.plan.steps import Categorify

    return feature.encoder is None or isinstance(feature.encoder, Categorify)


def _check_feature(feature: Feature, types: Mapping[str, LType], where: str) -> None:
    if not isinstance(feature, Feature):
        raise PipelineDefinitionError(f"{where}: expected fp.cols(...) >> ops, got {feature!r}")
    for position, step in enumerate(feature.steps):
        if step.kind == "encoder" and position != len(feature.steps) - 1:
            raise PipelineDefinitionError(
                f"{where}: {step.describe()} produces a block of columns and must be the last step"
            )
    if feature.cross:
        _check_cross(feature, types, where)
        return
    if _check_dict_feature(feature, types, where):
        return
    # an encoder of numbers (Bin's one-hot) needs a numeric input like a scaler does
    numeric_steps = [
        s for s in feature.steps if s.kind != "encoder" or getattr(s, "numeric_input", False)
    ]
    for item in feature.inputs:
        input_type = infer_type(item.expr, types, f"{where}, input {item.name!r}")
        if numeric_steps and not input_type.is_numeric:
            raise PipelineDefinitionError(
                f"{where}: {numeric_steps[0].describe()} needs a numeric input, but "
                f"{item.name!r} is {input_type.value}; encode it with fp.OneHot(), fp.Categorify() or fp.Hash()"
            )
        _check_vocabulary_input(feature, item.name, input_type, where)
        if feature.encoder is None and not input_type.is_numeric:
            raise PipelineDefinitionError(
                f"{where}: {item.name!r} is {input_type.value} and cannot be emitted as a number; "
                "end the chain with fp.OneHot(), fp.Categorify() or fp.Hash()"
            )


def _check_vocabulary_input(feature: Feature, name: str, found: LType, where: str) -> None:
    """Categorify encodes text, integers and booleans; a float column has no vocabulary."""
    from fastprep.plan.steps import Categorify

    if isinstance(feature.encoder, Categorify) and found == LType.FLOAT:
        raise PipelineDefinitionError(
            f"{where}: {feature.encoder.describe()} needs a text, integer or boolean input, "
            f"but {name!r} is float; declare it fp.Int() if its values are whole numbers, "
            "or bin/scale it instead (fp.Hash() encodes any value)"
        )


def _check_cross(feature: Feature, types: Mapping[str, LType], where: str) -> None:
    from fastprep.plan.steps import Hash

    if len(feature.steps) != 1 or not isinstance(feature.steps[0], Hash):
        raise PipelineDefinitionError(f"{where}: a cross is hashed: fp.cross(...) >> fp.Hash(n)")
    for item in feature.inputs:
        found = infer_type(item.expr, types, f"{where}, input {item.name!r}")
        if not found.is_text:
            raise PipelineDefinitionError(
                f"{where}: {item.name!r} is {found.value}; a cross joins text columns"
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
        if node.op == "isnull":
            infer_type(node.arg, types, where)
            return LType.BOOL
        _require_numeric(node.arg, node.op, types, where)
        return LType.BOOL if node.op == "not" else LType.FLOAT
    if isinstance(node, Where):
        for operand in (node.cond, node.then, node.otherwise):
            _require_numeric(operand, "where", types, where)
        return LType.FLOAT
    assert isinstance(node, Binary)
    left = infer_type(node.left, types, where)
    right = infer_type(node.right, types, where)
    if node.op in ("eq", "ne") and (left.is_text or right.is_text):
        text_const = [
            isinstance(n, Const) and isinstance(n.value, str) for n in (node.left, node.right)
        ]
        other_is_text_column = (left.is_text and not text_const[0]) or (
            right.is_text and not text_const[1]
        )
        if sum(text_const) != 1 or not other_is_text_column:
            raise PipelineDefinitionError(
                f"{where}: {to_source(node)!r}: a text column can only be compared with a "
                "quoted string, e.g. origin == 'JFK'"
            )
        return LType.BOOL
    _require_numeric(node.left, BINARY_OPS[node.op][0], types, where)
    _require_numeric(node.right, BINARY_OPS[node.op][0], types, where)
    return LType.BOOL if node.op in COMPARISONS or node.op in LOGICAL else LType.FLOAT


def _require_numeric(operand: Expr, op: str, types: Mapping[str, LType], where: str) -> None:
    found = infer_type(operand, types, where)
    if not found.is_numeric:
        raise PipelineDefinitionError(
            f"{where}: {op!r} needs numbers, but {to_source(operand)!r} is {found.value}; "
            "a text column can only be compared with a quoted string (origin == 'JFK') "
            "or encoded with fp.OneHot()/fp.Hash()"
        )


def input_types(inputs: tuple[Input, ...], types: Mapping[str, LType]) -> dict[str, LType]:
    """Logical type of each named input."""
    return {item.name: infer_type(item.expr, types, item.name) for item in inputs}


def _check_dict_feature(feature: Feature, types: Mapping[str, LType], where: str) -> bool:
    """(#8) A dict column is hashed or vectorized whole; Vectorize needs a dict column.
    True when the feature is a dict feature (and passed)."""
    from fastprep.plan.steps import Hash, Vectorize

    found = {i.name: infer_type(i.expr, types, where) for i in feature.inputs}
    dicts = [name for name, t in found.items() if t == LType.DICT]
    vectorize = isinstance(feature.encoder, Vectorize)
    if not dicts and not vectorize:
        return False
    if not dicts:
        name, kind = next(iter(found.items()))
        raise PipelineDefinitionError(
            f"{where}: fp.Vectorize() needs a column of dicts, but {name!r} is {kind.value}; "
            "declare it fp.DictOf() (or use fp.OneHot() for a text column)"
        )
    if len(feature.inputs) != 1 or not all(i.is_plain_column for i in feature.inputs):
        raise PipelineDefinitionError(
            f"{where}: a dict column {dicts[0]!r} is encoded alone: fp.Dict({dicts[0]!r}) >> "
            "fp.Hash(n) or fp.Vectorize()"
        )
    if len(feature.steps) != 1 or not isinstance(feature.steps[0], (Hash, Vectorize)):
        raise PipelineDefinitionError(
            f"{where}: {dicts[0]!r} is a column of dicts: end it with fp.Hash(n) or "
            "fp.Vectorize() (no other step applies to a dict)"
        )
    return True
