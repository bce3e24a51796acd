"""``fp.cols("a", "b") >> fp.FillMissing(0) >> fp.Standardize()`` builds a :class:`Feature`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from fastprep.api.expr_parser import parse_expr
from fastprep.errors import PipelineDefinitionError
from fastprep.plan.expr import Col
from fastprep.plan.nodes import Feature, Input
from fastprep.plan.steps import GroupStats, Step, StepChain


@dataclass(frozen=True)
class FeatureBuilder:
    """An input group plus the steps chained onto it so far (immutable; ``>>`` returns new)."""

    inputs: tuple[Input, ...]
    steps: tuple[Step, ...] = ()
    cross: bool = False
    pinned: str | None = None
    tags: str | None = None

    def backend(self, name: str) -> FeatureBuilder:
        """Run this feature's stage on backend ``name`` (e.g. ``"pandas"``) whatever the
        pipeline's ``backend=`` or the planner would pick; shown in ``explain``."""
        if not isinstance(name, str) or not name or name == "auto":
            raise PipelineDefinitionError(
                f".backend({name!r}): name a backend such as 'pandas' or 'numba'"
            )
        return FeatureBuilder(self.inputs, self.steps, self.cross, name, self.tags)

    def __rshift__(self, other: Step | StepChain) -> FeatureBuilder:
        if isinstance(other, Step):
            added: tuple[Step, ...] = (other,)
        elif isinstance(other, StepChain):
            added = other.steps
        elif isinstance(other, type) and issubclass(other, Step):
            raise PipelineDefinitionError(
                f"'>> fp.{other.__name__}' needs parentheses: '>> fp.{other.__name__}()'"
            )
        else:
            raise PipelineDefinitionError(
                f"cannot apply {other!r} with '>>'; expected an op such as fp.Standardize()"
            )
        if any(isinstance(step, GroupStats) for step in added):
            return self._group_stats(added)
        return FeatureBuilder(self.inputs, self.steps + added, self.cross, self.pinned, self.tags)

    def _group_stats(self, added: tuple[Step, ...]) -> FeatureBuilder:
        """``fp.cols(keys) >> fp.GroupStats(column)``: the selected columns become the step's
        keys and the feature's inputs its output columns (each the summarized column, named
        by its statistic), so the steps that follow apply to each output as to any number."""
        step = added[0]
        if self.steps or not isinstance(step, GroupStats) or self.cross:
            raise PipelineDefinitionError(
                "fp.GroupStats(...) follows the key columns directly: "
                'fp.cols("carrier", "origin") >> fp.GroupStats("dep_delay") >> ...'
            )
        if self.tags is not None:  # a row's set of tags is no group key
            names = ", ".join(repr(i.name) for i in self.inputs)
            verb = "is" if len(self.inputs) == 1 else "are"
            raise PipelineDefinitionError(
                f"fp.Tags({names}) >> {step.describe()}: {names} {verb} multi-valued (tags), "
                "and a list of tags is no group key; group by a single-valued column, or "
                "encode the tags whole with fp.OneHot() or fp.Hash(n)"
            )
        derived = [i.name for i in self.inputs if not i.is_plain_column]
        if derived:
            raise PipelineDefinitionError(
                f"fp.GroupStats({step.column!r}): its keys are source columns; {derived[0]!r} is "
                "an expression (declare the key as a column of the source)"
            )
        step = replace(step, keys=tuple(i.name for i in self.inputs))
        inputs = tuple(Input(name, Col(step.column)) for name in step.outputs)
        return FeatureBuilder(inputs, (step, *added[1:]), False, self.pinned)

    def build(self) -> Feature:
        return Feature(self.inputs, self.steps, self.cross, self.pinned, self.tags)


def cols(*names: str) -> FeatureBuilder:
    """Select one or more source columns; steps apply to each column independently."""
    if len(names) == 1 and isinstance(names[0], (list, tuple)):
        names = tuple(names[0])
    if not names:
        raise PipelineDefinitionError("fp.cols() needs at least one column name")
    for name in names:
        if not isinstance(name, str) or not name:
            raise PipelineDefinitionError(f"fp.cols(...) takes column names, got {name!r}")
    if len(set(names)) != len(names):
        raise PipelineDefinitionError(f"fp.cols{names} names a column twice")
    return FeatureBuilder(tuple(Input(n, Col(n)) for n in names))


def col(name: str) -> FeatureBuilder:
    """Select a single source column."""
    return cols(name)


def cross(*names: str) -> FeatureBuilder:
    """A cross of 2-3 text columns: ``fp.cross("origin", "dest") >> fp.Hash(2**16)`` hashes
    one joint token per row, ``origin=JFK^dest=LAX`` (nothing when a member is missing)."""
    group = cols(*names)
    if not 2 <= len(group.inputs) <= 3:
        raise PipelineDefinitionError(f"fp.cross{names}: a cross joins 2 or 3 columns")
    return FeatureBuilder(group.inputs, (), cross=True)


def expr(text: str) -> FeatureBuilder:
    """A derived column from a restricted expression: ``fp.expr("speed = distance / air_time")``."""
    name, tree = parse_expr(text)
    return FeatureBuilder((Input(name, tree),))


def Dict(name: str) -> FeatureBuilder:
    """A column of dicts (declared ``fp.DictOf()``), hashed or vectorized as a whole:
    ``fp.Dict("extras") >> fp.Hash(2**18)`` or ``fp.Dict("extras") >> fp.Vectorize()``.
    Each key plays the part of a column name: tokens are ``key=value`` and ``key``."""
    if not isinstance(name, str) or not name:
        raise PipelineDefinitionError(f"fp.Dict(...) takes one column name, got {name!r}")
    return cols(name)


def Tags(*names: str, sep: str = "|") -> FeatureBuilder:
    """Multi-valued text columns: ``fp.Tags("genres", sep="|") >> fp.OneHot()`` (multi-hot:
    one column per tag seen at fit, like ``MultiLabelBinarizer``) or ``>> fp.Hash(n)``
    (tokens ``genres=<tag>``, like ``FeatureHasher(input_type="string")``). A text column
    is split on ``sep`` (literal text); a ``list<string>`` column (``fp.ListOf()``) is
    already split, and ``sep`` is not used. Empty pieces are no tag, a repeated tag counts
    once, a missing value has no tags."""
    if not isinstance(sep, str) or not sep:
        raise PipelineDefinitionError(
            f"fp.Tags(..., sep={sep!r}): the separator must be non-empty text, e.g. sep='|'"
        )
    group = cols(*names)
    return FeatureBuilder(group.inputs, tags=sep)
