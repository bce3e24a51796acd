"""Pipeline steps (the ops users chain with ``>>``), one small frozen class each.

A step is pure configuration; what it learns in ``fit`` lives in the fitted state, never
on the step, so the same step object can be reused in many pipelines.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from fastprep.errors import PipelineDefinitionError


class Step:
    """Base of every step. ``kind`` drives type checks and, later, fusion."""

    #: "elementwise": numeric in, numeric out, row by row, no statistics
    #: "fitted": numeric in, numeric out, with statistics learned in fit (an affine map)
    #: "encoder": any type in, a block of output columns out; must end a chain
    kind: ClassVar[str] = "elementwise"
    needs_fit: ClassVar[bool] = False

    def __rshift__(self, other: Step | StepChain) -> StepChain:
        return StepChain((self,)) >> other

    def describe(self) -> str:
        """Short text used in plan trees and error messages, e.g. ``Clip(-60, 600)``."""
        args = ", ".join(repr(getattr(self, f.name)) for f in fields(self))  # type: ignore[arg-type]
        return f"{type(self).__name__}({args})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: the op name and its arguments."""
        out: dict[str, Any] = {"op": type(self).__name__}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class StepChain:
    """Steps composed without an input yet: ``fp.FillMissing(0) >> fp.Standardize()``."""

    steps: tuple[Step, ...]

    def __rshift__(self, other: Step | StepChain) -> StepChain:
        if isinstance(other, Step):
            return StepChain(self.steps + (other,))
        if isinstance(other, StepChain):
            return StepChain(self.steps + other.steps)
        if isinstance(other, type) and issubclass(other, Step):
            raise PipelineDefinitionError(
                f"'>> fp.{other.__name__}' needs parentheses: '>> fp.{other.__name__}()'"
            )
        raise PipelineDefinitionError(
            f"cannot chain {type(other).__name__!r} after steps; expected an op such as "
            "fp.Standardize()"
        )


def _finite_or_none(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise PipelineDefinitionError(f"{name} must be a number or None, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class FillMissing(Step):
    """Replace missing values by a constant, or by the fitted ``"mean"``/``"median"``; on a
    text input (before an encoder), by a text constant (``FillMissing("UNK")``)."""

    value: float | str = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.value, str):
            if not self.value:
                raise PipelineDefinitionError(
                    "FillMissing(''): use a number, 'mean', 'median' or a non-empty text value"
                )
        elif isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise PipelineDefinitionError(
                f"FillMissing({self.value!r}): use a number, 'mean' or 'median'"
            )
        elif not math.isfinite(self.value):
            raise PipelineDefinitionError(f"FillMissing({self.value!r}): the fill must be finite")
        else:
            object.__setattr__(self, "value", float(self.value))

    @property
    def needs_fit(self) -> bool:  # type: ignore[override]
        return self.value in ("mean", "median")

    @property
    def fills_text(self) -> bool:
        """A text constant (for text inputs), not a number or a fitted statistic."""
        return isinstance(self.value, str) and not self.needs_fit


@dataclass(frozen=True)
class Clip(Step):
    """Limit values to ``[lower, upper]``; ``None`` leaves that side open. Missing stays."""

    lower: float | None = None
    upper: float | None = None

    def __post_init__(self) -> None:
        lower = _finite_or_none("Clip lower", self.lower)
        upper = _finite_or_none("Clip upper", self.upper)
        if lower is not None and upper is not None and lower > upper:
            raise PipelineDefinitionError(f"Clip({lower}, {upper}): lower is above upper")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)


@dataclass(frozen=True)
class Log1p(Step):
    """``log(1 + x)``; values below -1 become missing and are reported, never emitted."""


@dataclass(frozen=True)
class Standardize(Step):
    """``(x - mean) / std`` with population std, like sklearn's ``StandardScaler``."""

    kind: ClassVar[str] = "fitted"
    needs_fit: ClassVar[bool] = True
    with_mean: bool = True
    with_std: bool = True


@dataclass(frozen=True)
class MinMax(Step):
    """Scale to ``feature_range`` from the fitted min and max, like ``MinMaxScaler``."""

    kind: ClassVar[str] = "fitted"
    needs_fit: ClassVar[bool] = True
    feature_range: tuple[float, float] = (0.0, 1.0)

    def __post_init__(self) -> None:
        low, high = (float(v) for v in self.feature_range)
        if not low < high:
            raise PipelineDefinitionError(
                f"MinMax(feature_range={self.feature_range}): need low < high"
            )
        object.__setattr__(self, "feature_range", (low, high))


def _check_vocabulary_args(step: OneHot | Categorify) -> None:
    """``min_frequency`` an integer >= 1, ``max_categories`` None or an integer >= 1."""
    name = type(step).__name__
    low = step.min_frequency
    top = step.max_categories
    if isinstance(low, bool) or not isinstance(low, int) or low < 1:
        raise PipelineDefinitionError(
            f"{name}(min_frequency={low!r}): must be an integer >= 1 (a count of rows)"
        )
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise PipelineDefinitionError(
            f"{name}(max_categories={top!r}): must be None or an integer >= 1"
        )


class _Vocabulary(Step):
    """Shared by the encoders with a fitted vocabulary: describe only non-default args."""

    def describe(self) -> str:
        args = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)  # type: ignore[arg-type]
            if getattr(self, f.name) != f.default
        ]
        return f"{type(self).__name__}({', '.join(args)})"


@dataclass(frozen=True)
class OneHot(_Vocabulary):
    """One column per fitted category (sorted), like ``OneHotEncoder(handle_unknown="ignore")``.

    With ``min_frequency``/``max_categories``, categories seen fewer than ``min_frequency``
    times at fit, or beyond the ``max_categories`` most frequent, are *infrequent*: they and
    unseen values share one last column ``col=<infrequent>`` (present only if some category
    was infrequent at fit), like ``OneHotEncoder(handle_unknown="infrequent_if_exist")``.
    ``sparse=None`` lets fastprep pick: a CSR block when there are many categories.
    """

    kind: ClassVar[str] = "encoder"
    needs_fit: ClassVar[bool] = True
    min_frequency: int = 1
    max_categories: int | None = None
    sparse: bool | None = None

    def __post_init__(self) -> None:
        _check_vocabulary_args(self)


@dataclass(frozen=True)
class Categorify(_Vocabulary):
    """One integer code per value from a fitted vocabulary: a single numeric output column.

    Codes: 0 = missing, 1 = unseen at fit or infrequent (seen fewer than ``min_frequency``
    times, or not among the ``max_categories`` most frequent; ties by value, smallest
    first), 2.. = the kept categories in sorted order of their value.
    """

    kind: ClassVar[str] = "encoder"
    needs_fit: ClassVar[bool] = True
    min_frequency: int = 1
    max_categories: int | None = None

    def __post_init__(self) -> None:
        _check_vocabulary_args(self)


@dataclass(frozen=True)
class Hash(Step):
    """Feature hashing of the group's ``{column: value}`` dict, like sklearn ``FeatureHasher``."""

    kind: ClassVar[str] = "encoder"
    n_features: int = 2**20
    alternate_sign: bool = True

    def __post_init__(self) -> None:
        n = self.n_features
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 2**31 - 1:
            raise PipelineDefinitionError(
                f"Hash(n_features={n!r}): must be an integer in [1, 2**31 - 1]"
            )


@dataclass(frozen=True)
class Vectorize(Step):
    """A fitted vocabulary of a dict column's feature names, like sklearn ``DictVectorizer``.

    ``fp.Dict("col") >> fp.Vectorize()``: a string value gives feature ``key=value``
    (value 1), a number gives feature ``key`` (that value); the vocabulary is every name
    seen at fit, sorted; names unseen at fit are ignored at transform. Always CSR.
    """

    kind: ClassVar[str] = "encoder"
    needs_fit: ClassVar[bool] = True

    def describe(self) -> str:
        return "Vectorize()"


#: functions ``fp.Map`` steps refer to by name; saved pipelines store only the name
FUNCTIONS: dict[str, Callable[[float], float]] = {}


@dataclass(frozen=True)
class Map(Step):
    """Apply a plain Python scalar function to every present value (JIT-compiled by Numba).

    Missing values stay missing and are not passed to ``func``; a result that is NaN or
    ±inf becomes missing and is counted. Saved pipelines keep the function's ``name``
    only (never its code): ``fp.load(path, functions={name: func})`` supplies it again.
    """

    func: Callable[[float], float] = field(compare=False)
    name: str = ""
    fusable: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise PipelineDefinitionError(f"fp.Map needs a function, got {self.func!r}")
        name = self.name or getattr(self.func, "__qualname__", "") or repr(self.func)
        object.__setattr__(self, "name", name)
        registered = FUNCTIONS.get(name)
        if registered is not None and registered is not self.func:
            raise PipelineDefinitionError(
                f"fp.Map: another function is already named {name!r}; pass name='...'"
            )
        FUNCTIONS[name] = self.func

    def describe(self) -> str:
        return f"Map({self.name})"

    def to_dict(self) -> dict[str, Any]:
        return {"op": "Map", "name": self.name}


STEP_TYPES: dict[str, type[Step]] = {
    cls.__name__: cls
    for cls in (
        FillMissing,
        Clip,
        Log1p,
        Standardize,
        MinMax,
        OneHot,
        Categorify,
        Hash,
        Map,
        Vectorize,
    )
}
AnyStep = (
    FillMissing | Clip | Log1p | Standardize | MinMax | OneHot | Categorify | Hash | Map | Vectorize
)


def step_from_dict(
    data: dict[str, Any], functions: dict[str, Callable[[float], float]] | None = None
) -> Step:
    """Inverse of :meth:`Step.to_dict`; rejects unknown op names.

    ``Map`` steps are resolved by name from ``functions`` or functions already defined in
    this process — never by importing or evaluating anything named in the file.
    """
    data = dict(data)
    name = data.pop("op", None)
    if name not in STEP_TYPES:
        raise PipelineDefinitionError(f"unknown step {name!r}; known: {sorted(STEP_TYPES)}")
    if name == "Map":
        func_name = str(data.get("name", ""))
        func = (functions or {}).get(func_name) or FUNCTIONS.get(func_name)
        if func is None:
            raise PipelineDefinitionError(
                f"the saved pipeline applies fp.Map({func_name}); pass the function: "
                f"fp.load(path, functions={{{func_name!r}: {func_name.split('.')[-1]}}})"
            )
        return Map(func, func_name)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return STEP_TYPES[name](**kwargs)
