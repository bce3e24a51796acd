"""Features and the logical plan: what to compute, before any backend is chosen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    columns_of,
    to_source,
)
from fastprep.plan.facts import Facts
from fastprep.plan.steps import Step, step_from_dict


@dataclass(frozen=True)
class Input:
    """One named input of a feature: a column, or a derived ``expr`` with its output name."""

    name: str
    expr: Expr

    @property
    def columns(self) -> tuple[str, ...]:
        return columns_of(self.expr)

    @property
    def is_plain_column(self) -> bool:
        return isinstance(self.expr, Col) and self.expr.name == self.name


@dataclass(frozen=True)
class Feature:
    """A group of inputs and the chain of steps applied to each (or jointly, for encoders)."""

    inputs: tuple[Input, ...]
    steps: tuple[Step, ...] = ()
    #: a cross: the encoder sees one joint token per row (``a=x^b=y``), not each input
    cross: bool = False
    #: the backend this feature's stage must run on (``.backend("pandas")``), or None: the
    #: planner's choice
    backend: str | None = None
    #: a tags feature: ``fp.Tags(..., sep=)`` splits each text input on this text; ``""``
    #: for inputs that are lists already (``fp.ListOf`` columns)
    tags: str | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for item in self.inputs:
            for name in item.columns:
                seen.setdefault(name)
        for name in self.key_columns:
            seen.setdefault(name)
        return tuple(seen)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """Columns a step reads besides the inputs (``GroupStats``' group keys)."""
        return tuple(k for s in self.steps if s.kind == "group" for k in s.keys)  # type: ignore[attr-defined]

    @property
    def encoder(self) -> Step | None:
        """The trailing encoder step (OneHot, Hash), if the chain ends with one."""
        if self.steps and self.steps[-1].kind == "encoder":
            return self.steps[-1]
        return None

    def describe(self) -> str:
        names = ("^" if self.cross else ", ").join(i.name for i in self.inputs)
        if self.key_columns:
            names = ", ".join(self.key_columns)
        chain = " >> ".join(s.describe() for s in self.steps)
        head = _tags_head(names, self.tags)
        return head + (f" >> {chain}" if chain else "")


@dataclass(frozen=True)
class Stage:
    """Features executed together: ``"fused"`` element-wise chains run as one kernel."""

    kind: str  # "fused" | "single"
    features: tuple[int, ...]


@dataclass(frozen=True)
class LogicalPlan:
    """The whole pipeline as data: features in output order, and an optional target.

    The optimizer fills the annotations: ``facts`` (what the schema guarantees about each
    column), ``stages`` (which features run fused) and ``release`` (per stage, the source
    columns whose last consumer it is, so they can be freed right after).
    """

    features: tuple[Feature, ...]
    target: Input | None = None
    facts: tuple[tuple[str, Facts], ...] = ()
    stages: tuple[Stage, ...] | None = None
    release: tuple[tuple[str, ...], ...] | None = None

    @property
    def column_facts(self) -> dict[str, Facts]:
        return dict(self.facts)

    def execution_stages(self) -> tuple[Stage, ...]:
        """The optimizer's stages, or one stage per feature for an unoptimized plan."""
        if self.stages is not None:
            return self.stages
        return tuple(Stage("single", (i,)) for i in range(len(self.features)))

    @property
    def columns(self) -> tuple[str, ...]:
        """Every source column the plan reads, in first-use order."""
        seen: dict[str, None] = {}
        inputs = [i for f in self.features for i in f.inputs]
        if self.target is not None:
            inputs.append(self.target)
        for item in inputs:
            for name in item.columns:
                seen.setdefault(name)
        for feature in self.features:
            for name in feature.key_columns:
                seen.setdefault(name)
        return tuple(seen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": [
                {
                    "inputs": [input_to_dict(i) for i in f.inputs],
                    "steps": [s.to_dict() for s in f.steps],
                    "cross": f.cross,
                    **({"backend": f.backend} if f.backend is not None else {}),
                    **({"tags": f.tags} if f.tags is not None else {}),
                }
                for f in self.features
            ],
            "target": None if self.target is None else input_to_dict(self.target),
        }

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], functions: dict[str, Any] | None = None
    ) -> LogicalPlan:
        features = tuple(
            Feature(
                inputs=tuple(input_from_dict(i) for i in f["inputs"]),
                steps=tuple(step_from_dict(s, functions) for s in f["steps"]),
                cross=bool(f.get("cross", False)),
                backend=None if f.get("backend") is None else str(f["backend"]),
                tags=None if f.get("tags") is None else str(f["tags"]),
            )
            for f in data["features"]
        )
        target = data.get("target")
        return cls(features, None if target is None else input_from_dict(target))

    def tree(self) -> str:
        """A readable tree of the plan, for ``explain`` and error messages."""
        lines = ["LogicalPlan"]
        stages = self.execution_stages()
        for number, stage in enumerate(stages):
            lines.append(f"├─ stage {number} ({stage.kind})")
            for index in stage.features:
                lines.append(f"│  └─ feature {index}: {_feature_line(self.features[index])}")
                notes = [s.fit_note() for s in self.features[index].steps if hasattr(s, "fit_note")]
                lines += [f"│     {note}" for note in notes]
            if self.release is not None and self.release[number]:
                lines.append(f"│     release after: {', '.join(self.release[number])}")
        if self.target is not None:
            lines.append(f"└─ target {self.target.name} = {to_source(self.target.expr)}")
        return "\n".join(lines)


def _feature_line(feature: Feature) -> str:
    if feature.key_columns:  # GroupStats: show the keys it groups by and the outputs
        keys = ", ".join(feature.key_columns)
        steps = " >> ".join(s.describe() for s in feature.steps)
        outputs = ", ".join(i.name for i in feature.inputs)
        pinned = f"  [backend={feature.backend}]" if feature.backend is not None else ""
        return f"[{keys}] >> {steps} -> {outputs}{pinned}"
    inputs = ("^" if feature.cross else ", ").join(
        i.name if i.is_plain_column else f"{i.name} = {to_source(i.expr)}" for i in feature.inputs
    )
    steps = " >> ".join(s.describe() for s in feature.steps)
    pinned = f"  [backend={feature.backend}]" if feature.backend is not None else ""
    head = _tags_head(inputs, feature.tags)
    return head + (f" >> {steps}" if steps else "") + pinned


def _tags_head(inputs: str, tags: str | None) -> str:
    if tags is None:
        return f"[{inputs}]"
    return f"Tags({inputs}, sep={tags!r})" if tags else f"Tags({inputs})"


def input_to_dict(item: Input) -> dict[str, Any]:
    return {"name": item.name, "expr": expr_to_dict(item.expr), "source": to_source(item.expr)}


def input_from_dict(data: dict[str, Any]) -> Input:
    return Input(str(data["name"]), expr_from_dict(data["expr"]))


def expr_to_dict(node: Expr) -> dict[str, Any]:
    """A JSON tree of the expression (no source text to re-parse, nothing to evaluate)."""
    if isinstance(node, Col):
        return {"col": node.name}
    if isinstance(node, Const):
        value = node.value
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            return {"const": repr(value), "special": True}
        return {"const": value}
    if isinstance(node, Unary):
        return {"op": node.op, "args": [expr_to_dict(node.arg)]}
    if isinstance(node, Binary):
        return {"op": node.op, "args": [expr_to_dict(node.left), expr_to_dict(node.right)]}
    if isinstance(node, Call):
        return {"call": node.fn, "args": [expr_to_dict(a) for a in node.args]}
    if isinstance(node, IsIn):
        values = [expr_to_dict(Const(v)) for v in node.values]
        return {"isin": values, "negate": node.negate, "args": [expr_to_dict(node.arg)]}
    if isinstance(node, DatePart):
        return {"datepart": node.part, "tz": node.tz, "args": [expr_to_dict(node.arg)]}
    return {
        "op": "where",
        "args": [expr_to_dict(a) for a in (node.cond, node.then, node.otherwise)],
    }


def expr_from_dict(data: dict[str, Any]) -> Expr:
    if "col" in data:
        return Col(str(data["col"]))
    if "const" in data:
        value = data["const"]
        if data.get("special"):
            return Const(float(value))
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"bad constant {value!r} in saved expression")
        return Const(float(value) if isinstance(value, int) else value)
    args = [expr_from_dict(a) for a in data["args"]]
    if "call" in data:
        return Call(str(data["call"]), tuple(args))
    if "isin" in data and len(args) == 1:
        values = [expr_from_dict(v) for v in data["isin"]]
        if not all(isinstance(v, Const) for v in values):
            raise ValueError(f"bad 'in' list {data['isin']!r} in saved expression")
        return IsIn(args[0], tuple(v.value for v in values), bool(data.get("negate")))  # type: ignore[union-attr]
    if "datepart" in data and len(args) == 1:
        tz = data.get("tz")
        return DatePart(str(data["datepart"]), args[0], None if tz is None else str(tz))
    op = data["op"]
    if op == "where" and len(args) == 3:
        return Where(*args)
    if len(args) == 1:
        return Unary(op, args[0])
    if len(args) == 2:
        return Binary(op, args[0], args[1])
    raise ValueError(f"bad expression node {data!r}")
