"""Resolve names an expression cannot know alone, once the schema is known.

- An expression may use the output of an earlier ``fp.expr`` by name: the name is replaced
  by that expression's tree (``speed`` in ``fast = speed > 400`` becomes
  ``distance / air_time * 60 > 400``). Every backend then computes derived columns from
  source columns, and a distributed fit or a saved plan needs nothing more. A schema
  column of the same name wins (it is what the name meant before any expr existed).
- A feature of ``fp.ListOf`` columns is marked a tags feature (``tags=""``: already split).
- A date part (``hour(time_hour)``, ``hour(time_hour + 3600)``) takes the declared zone of
  the ``fp.Datetime`` column its argument reads from the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fastprep.api.schema import Datetime
from fastprep.errors import PipelineDefinitionError
from fastprep.plan.dtypes import LType
from fastprep.plan.expr import Col, DatePart, Expr, children, to_source, walk, with_children
from fastprep.plan.nodes import Feature, Input, LogicalPlan


def resolve_plan(plan: LogicalPlan, schema: Mapping[str, Any]) -> LogicalPlan:
    """``plan`` with earlier expr outputs inlined and date parts zoned (idempotent)."""
    defined: dict[str, Expr] = {}
    # a rename (``dist = distance``) is an expr output too: only plain columns are not
    later = {i.name for f in plan.features for i in f.inputs if not i.is_plain_column}
    features = []
    for feature in plan.features:
        for item in feature.inputs:
            _refuse_forward_reference(item, defined, later, schema)
        inputs = tuple(_resolve_input(item, defined, schema) for item in feature.inputs)
        features.append(replace(feature, inputs=inputs, tags=_tags(feature, schema)))
        for item in inputs:  # later features may use these outputs (not the same feature)
            if not item.is_plain_column and item.name not in schema:
                defined.setdefault(item.name, item.expr)
    target = plan.target
    if target is not None:
        target = _resolve_input(target, defined, schema)
    return replace(plan, features=tuple(features), target=target)


def _tags(feature: Feature, schema: Mapping[str, Any]) -> str | None:
    """A feature of list columns (``fp.ListOf``) is a tags feature like ``fp.Tags`` (the
    planner and the backends see it as one): its separator ``""``, for already split."""
    if feature.tags is not None or not feature.inputs:
        return feature.tags
    kinds = [getattr(schema.get(i.name), "ltype", None) for i in feature.inputs]
    plain = all(i.is_plain_column for i in feature.inputs)
    return "" if plain and all(k == LType.LIST for k in kinds) else None


def _refuse_forward_reference(
    item: Input, defined: dict[str, Expr], later: set[str], schema: Mapping[str, Any]
) -> None:
    for name in item.columns:
        if name not in schema and name not in defined and name in later:
            raise PipelineDefinitionError(
                f"{item.name!r} uses {name!r}, which a later fp.expr defines; an expression "
                f"can use the outputs of the features before it: move {name!r} earlier"
            )


def _resolve_input(item: Input, defined: dict[str, Expr], schema: Mapping[str, Any]) -> Input:
    return Input(item.name, _resolve(item.expr, defined, schema, item.name))


def _resolve(node: Expr, defined: dict[str, Expr], schema: Mapping[str, Any], where: str) -> Expr:
    if isinstance(node, Col):
        if node.name not in schema and node.name in defined:
            return defined[node.name]
        return node
    parts = children(node)
    if parts:
        node = with_children(node, tuple(_resolve(p, defined, schema, where) for p in parts))
    if isinstance(node, DatePart):
        return _zoned(node, schema, where)
    return node


def _zoned(node: DatePart, schema: Mapping[str, Any], where: str) -> DatePart:
    """The part in the zone of the ``fp.Datetime`` column(s) its argument reads: a column,
    or an expression of one (``hour(time_hour + 3600)``, an earlier expr's output)."""
    arg = node.arg
    names = sorted({n.name for n in walk(arg) if isinstance(n, Col)})
    if any(name not in schema for name in names):
        return node  # the definition check names the unknown column
    zones = {schema[n].tz for n in names if isinstance(schema[n], Datetime)}
    if not zones:
        raise PipelineDefinitionError(
            f"{where!r}: {to_source(node)!r}: {node.part}() takes a column declared "
            f"fp.Datetime() or an expression of one, but {to_source(arg)!r} reads none; "
            "declare it fp.Datetime(tz=...)"
        )
    if len(zones) > 1:
        raise PipelineDefinitionError(
            f"{where!r}: {to_source(node)!r}: its fp.Datetime columns declare different "
            f"zones ({', '.join(sorted(map(str, zones)))}); which zone's {node.part} is meant "
            "is ambiguous"
        )
    return DatePart(node.part, arg, zones.pop())
