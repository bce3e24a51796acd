"""Definition-time checks: every column exists, every op gets a type it can handle.

Errors are raised when the pipeline is built, before any data is read, and name the
feature, the column and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastprep.api.schema import unknown_column_message
from fastprep.errors import PipelineDefinitionError
from fastprep.plan.dtypes import LType
from fastprep.plan.expr import (
    BINARY_OPS,
    COMPARISONS,
    INTEGRAL_UNARY,
    LOGICAL,
    TEXT_PREDICATES,
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
    to_source,
)
from fastprep.plan.nodes import Feature, Input, LogicalPlan


def check_plan(plan: LogicalPlan, types: Mapping[str, LType]) -> None:
    """Raise :class:`PipelineDefinitionError` for the first problem found in ``plan``."""
    seen_outputs: dict[str, str] = {}
    for index, feature in enumerate(plan.features):
        where = f"feature {index + 1} {feature.describe()}"
        _check_feature(feature, types, where)
        for name in _fixed_output_names(feature):
            if name in seen_outputs:
                raise PipelineDefinitionError(
                    f"output {name!r} is produced twice ({seen_outputs[name]} and "
                    f"{where}); give the expr a distinct name, or encode the column once"
                )
            seen_outputs[name] = where
    _check_target_encoding(plan, types)
    if plan.target is not None:
        target_type = infer_type(plan.target.expr, types, f"target {plan.target.name!r}")
        if not target_type.is_numeric:
            raise PipelineDefinitionError(
                f"target {plan.target.name!r} is {target_type.value}; a target must be numeric "
                'or boolean (e.g. fp.expr("late = arr_delay > 15"))'
            )


def _fixed_output_names(feature: Feature) -> list[str]:
    """The output names known before a fit: the input's own (numbers, Categorify) or with
    the encoder's suffix (``carrier:target``); others depend on the fitted categories."""
    from fastprep.plan.steps import SUFFIXED_ENCODERS, Categorify

    encoder = feature.encoder
    if encoder is None or isinstance(encoder, Categorify):
        return [item.name for item in feature.inputs]
    if isinstance(encoder, SUFFIXED_ENCODERS):
        return [item.name + encoder.output_suffix for item in feature.inputs]
    return []


def _check_feature(feature: Feature, types: Mapping[str, LType], where: str) -> None:
    if not isinstance(feature, Feature):
        raise PipelineDefinitionError(f"{where}: expected fp.cols(...) >> ops, got {feature!r}")
    for position, step in enumerate(feature.steps):
        if step.kind == "encoder" and position != len(feature.steps) - 1:
            raise PipelineDefinitionError(
                f"{where}: {step.describe()} produces a block of columns and must be the last step"
            )
    if any(step.kind == "group" for step in feature.steps):
        _check_group_stats(feature, types, where)
        return
    if feature.cross:
        _check_cross(feature, types, where)
        return
    if _check_dict_feature(feature, types, where):
        return
    if _check_tags_feature(feature, types, where):
        return
    # an encoder of numbers (Bin's one-hot) needs a numeric input like a scaler does
    element_steps = [
        s for s in feature.steps if s.kind != "encoder" or getattr(s, "numeric_input", False)
    ]
    text_fills = [s for s in element_steps if getattr(s, "fills_text", False)]
    numeric_steps = [s for s in element_steps if s not in text_fills]
    for item in feature.inputs:
        input_type = infer_type(item.expr, types, f"{where}, input {item.name!r}")
        _refuse_literal_text(item.expr, f"{where}, input {item.name!r}")
        if text_fills and (input_type.is_numeric or numeric_steps):
            raise PipelineDefinitionError(
                f"{where}: {text_fills[0].describe()} fills text, but {item.name!r} is "
                f"{input_type.value}{' with numeric steps' if input_type.is_text else ''}; "
                "fill numbers with a number, 'mean' or 'median'"
            )
        if numeric_steps and not input_type.is_numeric:
            raise PipelineDefinitionError(
                f"{where}: {numeric_steps[0].describe()} needs a numeric input, but "
                f"{item.name!r} is {input_type.value}; encode it with fp.OneHot(), fp.Categorify() or fp.Hash()"
            )
        _check_vocabulary_input(feature, item, input_type, where)
        if feature.encoder is None and not input_type.is_numeric:
            raise PipelineDefinitionError(
                f"{where}: {item.name!r} is {input_type.value} and cannot be emitted as a number; "
                "end the chain with fp.OneHot(), fp.Categorify() or fp.Hash()"
            )


def _check_vocabulary_input(feature: Feature, item: Input, found: LType, where: str) -> None:
    """Categorify (and target/count encoding) encode text, integers and booleans; a float
    column has no vocabulary."""
    from fastprep.plan.steps import SUFFIXED_ENCODERS, Categorify

    if isinstance(feature.encoder, (Categorify, *SUFFIXED_ENCODERS)) and found == LType.FLOAT:
        # an expression's arithmetic gives floats: no schema declaration can make it whole
        fix = ("declare it fp.Int() if its values are whole numbers" if isinstance(item.expr, Col)
               else "wrap the expression in round(...) if its values are whole numbers")  # fmt: skip
        raise PipelineDefinitionError(
            f"{where}: {feature.encoder.describe()} needs a text, integer or boolean input, "
            f"but {item.name!r} is float; {fix}, or bin/scale it instead (fp.Hash() encodes "
            "any value)"
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
            _refuse_literal_text(node.arg, where)
            return LType.BOOL
        if node.op in TEXT_UNARY or node.op == "length":
            _require_text(node.arg, node.op, types, where)
            return LType.STRING if node.op in TEXT_UNARY else LType.INT
        _require_numeric(node.arg, node.op, types, where)
        if node.op in INTEGRAL_UNARY:
            return LType.INT
        return LType.BOOL if node.op == "not" else LType.FLOAT
    if isinstance(node, Where):
        for operand in (node.cond, node.then, node.otherwise):
            _require_numeric(operand, "where", types, where)
        return LType.FLOAT
    if isinstance(node, Call):
        return _call_type(node, types, where)
    if isinstance(node, IsIn):
        if isinstance(node.values[0], str):
            _require_text(node.arg, "in", types, where)
        else:
            _require_numeric(node.arg, "in", types, where)
        return LType.BOOL
    if isinstance(node, DatePart):
        _require_numeric(node.arg, node.part, types, where)
        return LType.INT
    assert isinstance(node, Binary)
    left = infer_type(node.left, types, where)
    right = infer_type(node.right, types, where)
    if node.op == "add" and left.is_text and right.is_text:  # joining text
        _refuse_literal_text(node, where)
        return LType.STRING
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
    for operand, found in ((node.left, left), (node.right, right)):
        _refuse_non_numeric(operand, found, BINARY_OPS[node.op][0], where)
    if node.op == "floordiv":
        return LType.INT
    return LType.BOOL if node.op in COMPARISONS or node.op in LOGICAL else LType.FLOAT


def _call_type(node: Call, types: Mapping[str, LType], where: str) -> LType:
    if node.fn in TEXT_PREDICATES:
        _require_text(node.args[0], node.fn, types, where)
        return LType.BOOL
    found = [_require_numeric(a, node.fn, types, where) for a in node.args]
    if node.fn == "round":
        return LType.FLOAT
    integral = all(
        t in (LType.INT, LType.BOOL) or _whole_number(a) for t, a in zip(found, node.args)
    )
    return LType.INT if integral else LType.FLOAT


def _whole_number(node: Expr) -> bool:
    """A literal like ``0`` or ``5`` (``clip(speed // 100, 0, 5)`` stays integral)."""
    return isinstance(node, Const) and isinstance(node.value, float) and node.value.is_integer()


def _refuse_literal_text(node: Expr, where: str) -> None:
    """Text made of quoted literals alone has no rows: it is an argument, never a value."""
    parts = [node]
    while parts:
        part = parts.pop()
        if isinstance(part, Binary) and part.op == "add":
            parts += [part.left, part.right]
        elif not (isinstance(part, Const) and isinstance(part.value, str)):
            return
    raise PipelineDefinitionError(
        f"{where}: {to_source(node)!r} is only quoted text; use it with a text column "
        "(origin + '-' + dest, origin == 'JFK')"
    )


def _require_text(operand: Expr, op: str, types: Mapping[str, LType], where: str) -> LType:
    found = infer_type(operand, types, where)
    if not found.is_text or (isinstance(operand, Const)):
        raise PipelineDefinitionError(
            f"{where}: {op!r} needs a text column or text expression, but "
            f"{to_source(operand)!r} is {'a literal' if isinstance(operand, Const) else found.value}"
        )
    return found


def _require_numeric(operand: Expr, op: str, types: Mapping[str, LType], where: str) -> LType:
    found = infer_type(operand, types, where)
    _refuse_non_numeric(operand, found, op, where)
    return found


def _refuse_non_numeric(operand: Expr, found: LType, op: str, where: str) -> None:
    """``operand`` (of type ``found``, inferred once: typing it again at every level of a
    long sum took time exponential in its length) must be a number."""
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
    """A dict column is hashed or vectorized whole (its keys are its features); Vectorize needs a dict column.
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


def _check_tags_feature(feature: Feature, types: Mapping[str, LType], where: str) -> bool:
    """Tags (``fp.Tags`` on text, or ``fp.ListOf`` columns) are encoded whole, by
    ``OneHot()`` (multi-hot) or ``Hash(n)`` alone. True when the feature is a tags feature
    (and passed)."""
    from fastprep.plan.steps import Hash, OneHot

    found = {i.name: infer_type(i.expr, types, where) for i in feature.inputs}
    lists = [name for name, t in found.items() if t == LType.LIST]
    if feature.tags is None and not lists:
        return False
    if feature.tags is None and len(lists) < len(found):
        other = next(name for name in found if name not in lists)
        raise PipelineDefinitionError(
            f"{where}: {lists[0]!r} is a list column and {other!r} is not; encode list "
            f"columns in their own feature: fp.cols({lists[0]!r}) >> fp.OneHot() or fp.Hash(n)"
        )
    first = lists[0] if lists else next(iter(found))
    for item in feature.inputs:
        kind = found[item.name]
        if not item.is_plain_column:
            raise PipelineDefinitionError(
                f"{where}: fp.Tags(...) takes source columns, not the expression "
                f"{item.name!r}; split a source column: fp.Tags('genres', sep='|')"
            )
        if not (kind.is_text or kind == LType.LIST):
            raise PipelineDefinitionError(
                f"{where}: fp.Tags({item.name!r}) needs a text column (split on sep) or a "
                f"list column (fp.ListOf()), but {item.name!r} is {kind.value}"
            )
    encoder = feature.steps[0] if len(feature.steps) == 1 else None
    if not isinstance(encoder, (OneHot, Hash)):
        chain = " >> ".join(s.describe() for s in feature.steps) or "no step"
        raise PipelineDefinitionError(
            f"{where}: {first!r} is multi-valued (tags) and is encoded whole: end it with "
            f"fp.OneHot() (multi-hot) or fp.Hash(n) alone, not {chain} (no other step "
            "applies to a list of tags)"
        )
    if isinstance(encoder, OneHot) and (encoder.min_frequency != 1 or encoder.max_categories):
        raise PipelineDefinitionError(
            f"{where}: {encoder.describe()} on tags: min_frequency/max_categories are not "
            "supported for multi-valued columns (every tag seen at fit is a column, like "
            "MultiLabelBinarizer); use fp.OneHot() or fp.Hash(n) for many tags"
        )
    return True


def _check_target_encoding(plan: LogicalPlan, types: Mapping[str, LType]) -> None:
    """A step fitted against the target needs one: binary (``Bool``) or continuous (a
    number); a text target would be multiclass, which target encoding does not do."""
    for index, feature in enumerate(plan.features):
        for step in feature.steps:
            if not getattr(step, "needs_target", False):
                continue
            where = f"feature {index + 1} {feature.describe()}"
            if plan.target is None:
                raise PipelineDefinitionError(
                    f"{where}: {step.describe()} learns from the pipeline's target, and this "
                    'pipeline has none: add target=... (e.g. fp.expr("late = arr_delay > 15") '
                    "for a binary target, or a numeric column)"
                )
            name = plan.target.name
            found = infer_type(plan.target.expr, types, f"target {name!r}")
            if not found.is_numeric:
                raise PipelineDefinitionError(
                    f"{where}: {step.describe()} needs a binary (Bool) or continuous (numeric) "
                    f"target, but target {name!r} is {found.value} (multiclass target encoding "
                    'is not supported); use a comparison such as fp.expr("late = arr_delay > '
                    '15") or a numeric target'
                )


def _check_group_stats(feature: Feature, types: Mapping[str, LType], where: str) -> None:
    """``fp.cols(keys) >> fp.GroupStats(column) >> numeric steps``: keys of text, integer or
    boolean type, a numeric summarized column, and no encoder after (the outputs are numbers)."""
    from fastprep.plan.expr import Col
    from fastprep.plan.steps import GroupStats

    step = feature.steps[0]
    if not isinstance(step, GroupStats) or any(s.kind == "group" for s in feature.steps[1:]):
        raise PipelineDefinitionError(
            f"{where}: fp.GroupStats(...) comes first, right after its key columns: "
            'fp.cols("carrier", "origin") >> fp.GroupStats("dep_delay") >> ...'
        )
    expected = tuple(Input(name, Col(step.column)) for name in step.outputs)
    if not step.keys or feature.inputs != expected or feature.cross:
        raise PipelineDefinitionError(
            f"{where}: build group statistics as fp.cols(key, ...) >> {step.describe()}"
        )
    for key in step.keys:
        if key not in types:
            raise PipelineDefinitionError(unknown_column_message(key, list(types), where))
        found = types[key]
        if found == LType.LIST:
            raise PipelineDefinitionError(
                f"{where}: group key {key!r} is multi-valued (a list of tags per row), no group "
                f"key for {step.describe()}; group by a single-valued column, or encode the "
                "tags whole with fp.OneHot() or fp.Hash(n)"
            )
        if found in (LType.FLOAT, LType.DICT):
            raise PipelineDefinitionError(
                f"{where}: group key {key!r} is {found.value}; group by text, category, integer "
                "or boolean columns (declare it fp.Int() if its values are whole numbers)"
            )
    if step.column not in types:
        raise PipelineDefinitionError(
            unknown_column_message(step.column, list(types), f"{where}, {step.describe()}")
        )
    if not types[step.column].is_numeric:
        raise PipelineDefinitionError(
            f"{where}: {step.describe()} summarizes {step.column!r}, which is "
            f"{types[step.column].value}; the statistics need a numeric column (declare it "
            "fp.Float() or fp.Int())"
        )
    for later in feature.steps[1:]:
        if later.kind == "encoder" or getattr(later, "fills_text", False):
            raise PipelineDefinitionError(
                f"{where}: {later.describe()} cannot follow {step.describe()}: its outputs are "
                "numbers; use numeric steps (fp.FillMissing(0), fp.Standardize(), ...)"
            )
