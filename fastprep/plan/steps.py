"""Pipeline steps (the ops users chain with ``>>``), one small frozen class each.

A step is pure configuration; what it learns in ``fit`` lives in the fitted state, never
on the step, so the same step object can be reused in many pipelines.
"""

from __future__ import annotations

import math
import numbers
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


def _is_number(value: Any) -> bool:
    """A real number, numpy's scalars included (``np.arange``'s values, a column's
    ``min()``), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_whole(value: Any) -> bool:
    """An integer, numpy's included, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _finite_or_none(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or math.isnan(value):
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
        elif not _is_number(self.value):
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


@dataclass(frozen=True)
class MaxAbsScale(Step):
    """``x / max|x|`` from the fitted largest magnitude, like sklearn's ``MaxAbsScaler``."""

    kind: ClassVar[str] = "fitted"
    needs_fit: ClassVar[bool] = True


@dataclass(frozen=True)
class RobustScale(Step):
    """``(x - median) / (q_high - q_low)``, like sklearn's ``RobustScaler`` (quantiles by
    ``numpy.nanpercentile``'s linear interpolation; a zero range scales by 1)."""

    kind: ClassVar[str] = "fitted"
    needs_fit: ClassVar[bool] = True
    with_centering: bool = True
    with_scaling: bool = True
    quantile_range: tuple[float, float] = (25.0, 75.0)

    def __post_init__(self) -> None:
        _require_bools(self, "with_centering", "with_scaling")
        low, high = _number_pair(self, "quantile_range", self.quantile_range)
        if not 0 <= low <= high <= 100:
            raise PipelineDefinitionError(
                f"RobustScale(quantile_range={self.quantile_range}): need 0 <= low <= high <= 100"
            )
        object.__setattr__(self, "quantile_range", (low, high))


@dataclass(frozen=True)
class Bin(Step):
    """Discretize into bins, like sklearn's ``KBinsDiscretizer`` (``subsample=None``,
    ``quantile_method="averaged_inverted_cdf"``): ``strategy`` "quantile" or "uniform" with
    ``n_bins`` fitted bins, or fixed ``edges=[e0, ..., ek]`` (k bins, no fit; values below
    ``e0`` go to bin 0, at or above ``ek`` to bin k-1). ``encode="ordinal"`` gives the bin
    number (missing stays missing); ``"onehot"`` a CSR block ``col=bin<i>`` (a missing value
    is a row of zeros) that ends the chain.
    """

    n_bins: int = 5
    strategy: str = "quantile"
    encode: str = "ordinal"
    edges: tuple[float, ...] | None = None
    numeric_input: ClassVar[bool] = True

    def __post_init__(self) -> None:
        n = self.n_bins
        if not _is_whole(n) or n < 2:
            raise PipelineDefinitionError(f"Bin(n_bins={n!r}): must be an integer >= 2")
        object.__setattr__(self, "n_bins", int(n))
        if self.strategy not in ("quantile", "uniform"):
            raise PipelineDefinitionError(
                f"Bin(strategy={self.strategy!r}): use 'quantile' or 'uniform'"
            )
        if self.encode not in ("ordinal", "onehot"):
            raise PipelineDefinitionError(f"Bin(encode={self.encode!r}): use 'ordinal' or 'onehot'")
        if self.edges is not None:
            edges = self.edges
            if isinstance(edges, (str, bytes)) or not hasattr(edges, "__iter__"):
                raise PipelineDefinitionError(f"Bin(edges={edges!r}): a list of numbers")
            values = tuple(edges)
            if len(values) < 2 or not all(_is_number(v) and math.isfinite(v) for v in values):
                raise PipelineDefinitionError(
                    f"Bin(edges={list(values)!r}): at least two finite numbers"
                )
            values = tuple(float(v) for v in values)
            if any(b <= a for a, b in zip(values, values[1:])):
                raise PipelineDefinitionError(
                    f"Bin(edges={list(values)!r}): edges must be strictly increasing"
                )
            object.__setattr__(self, "edges", values)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "encoder" if self.encode == "onehot" else "fitted"

    @property
    def needs_fit(self) -> bool:  # type: ignore[override]
        return self.edges is None

    def describe(self) -> str:
        if self.edges is not None:
            args = [f"edges={list(self.edges)!r}"]
        else:
            args = [f"n_bins={self.n_bins}", f"strategy={self.strategy!r}"]
        if self.encode != "ordinal":
            args.append(f"encode={self.encode!r}")
        return f"Bin({', '.join(args)})"


@dataclass(frozen=True)
class QuantileTransform(Step):
    """Map values through their fitted quantiles to a uniform or normal distribution, like
    sklearn's ``QuantileTransformer(subsample=None)``."""

    kind: ClassVar[str] = "fitted"
    needs_fit: ClassVar[bool] = True
    n_quantiles: int = 1000
    output_distribution: str = "uniform"

    def __post_init__(self) -> None:
        n = self.n_quantiles
        if not _is_whole(n) or n < 1:
            raise PipelineDefinitionError(
                f"QuantileTransform(n_quantiles={n!r}): must be an integer >= 1"
            )
        object.__setattr__(self, "n_quantiles", int(n))
        if self.output_distribution not in ("uniform", "normal"):
            raise PipelineDefinitionError(
                f"QuantileTransform(output_distribution={self.output_distribution!r}): "
                "use 'uniform' or 'normal'"
            )


@dataclass(frozen=True)
class PowerTransform(Step):
    """Yeo-Johnson or Box-Cox with the maximum-likelihood lambda, then (``standardize``)
    zero mean and unit variance, like sklearn's ``PowerTransformer``. Box-Cox is defined
    for positive values: a value <= 0 becomes missing and is counted in the report
    (``boxcox_domain``, like ``Log1p`` below -1), never a crash; fit sees the positive ones.
    """

    kind: ClassVar[str] = "fitted"
    needs_fit: ClassVar[bool] = True
    method: str = "yeo-johnson"
    standardize: bool = True

    def __post_init__(self) -> None:
        if self.method not in ("yeo-johnson", "box-cox"):
            raise PipelineDefinitionError(
                f"PowerTransform(method={self.method!r}): use 'yeo-johnson' or 'box-cox'"
            )
        _require_bools(self, "standardize")


def _require_bools(step: Step, *names: str) -> None:
    for name in names:
        value = getattr(step, name)
        if not isinstance(value, bool):
            raise PipelineDefinitionError(
                f"{type(step).__name__}({name}={value!r}): must be True or False"
            )


def _number_pair(step: Step, name: str, value: Any) -> tuple[float, float]:
    try:
        low, high = value
    except (TypeError, ValueError):
        raise PipelineDefinitionError(
            f"{type(step).__name__}({name}={value!r}): a pair of numbers"
        ) from None
    for v in (low, high):
        if not _is_number(v) or not math.isfinite(v):
            raise PipelineDefinitionError(
                f"{type(step).__name__}({name}={value!r}): a pair of finite numbers"
            )
    return float(low), float(high)


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


# ---------------------------------------------------------------- target and count encoding


@dataclass(frozen=True)
class TargetEncode(_Vocabulary):
    """Each category's shrunk mean of the pipeline's target, like scikit-learn's
    ``TargetEncoder`` (binary when the target is ``Bool``, continuous otherwise): one output
    column per input, named ``<col>:target``. Missing is its own category; a category
    unseen at fit gets the target's mean. ``smooth="auto"`` is the empirical Bayes
    shrinkage, a number the fixed weight of the mean.

    The fit's own rows get cross-fitted values (``fit_transform``, ``fastprep run``): each
    row the encoding learned on the other folds of ``KFold(cv, shuffle=True,
    random_state=seed)`` (``StratifiedKFold`` for a binary target); every later transform
    uses the encodings learned on all fitted rows.
    """

    kind: ClassVar[str] = "encoder"
    needs_fit: ClassVar[bool] = True
    #: fitted against the pipeline's target (the fit reads y)
    needs_target: ClassVar[bool] = True
    #: its output on the fit's own rows differs from its transform of them
    fit_transform_differs: ClassVar[bool] = True
    output_suffix: ClassVar[str] = ":target"
    smooth: float | str = "auto"
    cv: int = 5
    seed: int = 0

    def fit_note(self) -> str:
        """How a partitioned run learns and cross-fits (``explain``)."""
        return (
            "fit: partitioned, each row's category and target are gathered on the client "
            "and fitted as one process; a partitioned fit_transform draws the folds there "
            "and sends each partition its rows' folds with the per-fold encodings"
        )

    def __post_init__(self) -> None:
        smooth = self.smooth
        if smooth != "auto":
            if (
                isinstance(smooth, bool)
                or not isinstance(smooth, (int, float))
                or not math.isfinite(smooth)
                or smooth < 0
            ):
                raise PipelineDefinitionError(
                    f"TargetEncode(smooth={smooth!r}): 'auto' or a finite number >= 0"
                )
            object.__setattr__(self, "smooth", float(smooth))
        cv = self.cv
        if isinstance(cv, bool) or not isinstance(cv, int) or cv < 2:
            raise PipelineDefinitionError(f"TargetEncode(cv={cv!r}): an integer >= 2 (folds)")
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise PipelineDefinitionError(
                f"TargetEncode(seed={seed!r}): an integer in [0, 2**32 - 1]"
            )


@dataclass(frozen=True)
class CountEncode(_Vocabulary):
    """Each value's number of rows at fit (``normalize=True``: its share of the fitted
    rows), like pandas ``value_counts(dropna=False)`` mapped onto the rows: one output
    column per input, named ``<col>:count``. Missing is counted as its own value; a value
    unseen at fit gives 0."""

    kind: ClassVar[str] = "encoder"
    needs_fit: ClassVar[bool] = True
    output_suffix: ClassVar[str] = ":count"
    normalize: bool = False

    def __post_init__(self) -> None:
        _require_bools(self, "normalize")


#: the encoders whose output is one dense column per input, named ``<col><suffix>``
SUFFIXED_ENCODERS: tuple[type[Step], ...] = (TargetEncode, CountEncode)
# ---------------------------------------------------------------- group statistics

#: the statistics ``GroupStats`` computes, each as pandas ``groupby(keys, dropna=False)`` does
GROUP_STATS = ("mean", "std", "count", "min", "max", "median")


@dataclass(frozen=True)
class GroupStats(Step):
    """Statistics of the numeric ``column`` per group of the key columns, learned at fit and
    joined back onto every row: ``fp.cols("carrier", "origin") >> fp.GroupStats("dep_delay",
    stats=("mean", "std"))`` gives one column per statistic, ``carrier,origin:dep_delay_mean``.

    Like pandas ``groupby(keys, dropna=False)[column]``: a missing key is a group value of its
    own; ``std`` is the population std (ddof=0); ``count`` counts present values; a group whose
    values are all missing has count 0 and missing mean/std/min/max/median; a group unseen at
    fit gives missing values. Steps that follow apply to each output column. ``keys`` is set
    by ``fp.cols(...) >>`` (the columns the step follows).
    """

    kind: ClassVar[str] = "group"
    needs_fit: ClassVar[bool] = True
    fusable: ClassVar[bool] = False
    column: str = ""
    stats: tuple[str, ...] = ("mean",)
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise PipelineDefinitionError(
                f"GroupStats({self.column!r}): name the numeric column to summarize, e.g. "
                'fp.GroupStats("dep_delay")'
            )
        stats = (self.stats,) if isinstance(self.stats, str) else self.stats
        try:
            stats = tuple(stats)
        except TypeError:
            raise PipelineDefinitionError(
                f"GroupStats(stats={self.stats!r}): a tuple of {', '.join(GROUP_STATS)}"
            ) from None
        unknown = [s for s in stats if s not in GROUP_STATS]
        if not stats or unknown or len(set(stats)) != len(stats):
            raise PipelineDefinitionError(
                f"GroupStats(stats={self.stats!r}): name one or more distinct statistics "
                f"among {', '.join(GROUP_STATS)}"
                + (f" ({', '.join(map(repr, unknown))} is not one)" if unknown else "")
            )
        keys = tuple(self.keys)
        if not all(isinstance(k, str) and k for k in keys) or len(set(keys)) != len(keys):
            raise PipelineDefinitionError(f"GroupStats(keys={self.keys!r}): distinct column names")
        object.__setattr__(self, "stats", stats)
        object.__setattr__(self, "keys", keys)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The output column names, one per statistic: ``carrier,origin:dep_delay_mean``."""
        prefix = ",".join(self.keys)
        return tuple(f"{prefix}:{self.column}_{stat}" for stat in self.stats)

    def describe(self) -> str:
        return f"GroupStats({self.column!r}, stats={self.stats!r})"

    def fit_note(self) -> str:
        """How the fit learns the groups (``explain``)."""
        note = ("fit: one pass over the rows (per group: count, exact sums, min, max; a "
                "partitioned fit adds the partitions' sums as integers: the same state")  # fmt: skip
        if "median" in self.stats:
            note += "; the exact median gathers each group's present values in that pass"
        return note + ")"


#: functions ``fp.Map`` steps were built with in this process, by the digest of their code
FUNCTIONS: dict[str, Callable[[float], float]] = {}


@dataclass(frozen=True)
class Map(Step):
    """Apply a plain Python scalar function to every present value (JIT-compiled by Numba).

    Missing values stay missing and are not passed to ``func``; a result that is NaN or
    ±inf becomes missing and is counted. A function is identified by its code (a digest of
    its bytecode, constants and plain values it reads), not its name: two lambdas in one
    pipeline are two functions, a notebook cell run again redefines its function. Saved
    pipelines keep the name and the digest (never the code): ``fp.load`` finds a function
    with that digest defined in this process or passed as ``functions={name: func}``.
    """

    func: Callable[[float], float] = field(compare=False)
    name: str = ""
    code: str = field(default="", repr=False)
    fusable: ClassVar[bool] = False

    def __post_init__(self) -> None:
        from fastprep.plan.func_code import code_digest

        if not callable(self.func):
            raise PipelineDefinitionError(f"fp.Map needs a function, got {self.func!r}")
        name = self.name or getattr(self.func, "__qualname__", "") or repr(self.func)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "code", code_digest(self.func))
        FUNCTIONS[self.code] = self.func

    def describe(self) -> str:
        return f"Map({self.name})"

    def to_dict(self) -> dict[str, Any]:
        return {"op": "Map", "name": self.name, "code": self.code}


def _saved_function(
    data: dict[str, Any], functions: dict[str, Callable[[float], float]] | None
) -> Map:
    """The function a saved ``Map`` was fitted with: matched by its code digest among the
    functions passed and those defined in this process (by name for a state saved
    before digests were kept). A passed function whose code differs is refused."""
    from fastprep.plan.func_code import code_digest

    name = str(data.get("name", ""))
    code = data.get("code")
    passed = functions or {}
    if code is None:  # an older state: by name only
        func = passed.get(name) or next(
            (f for f in FUNCTIONS.values() if getattr(f, "__qualname__", "") == name), None
        )
    else:
        func = next((f for f in passed.values() if code_digest(f) == code), None)
        if func is None and name in passed:
            raise PipelineDefinitionError(
                f"the saved pipeline applies fp.Map({name}) fitted with other code than the "
                f"function passed as {name!r} (code digest {code}, passed "
                f"{code_digest(passed[name])}); pass the function it was fitted with, or fit again"
            )
        func = func or FUNCTIONS.get(str(code))
    if func is None:
        raise PipelineDefinitionError(
            f"the saved pipeline applies fp.Map({name}); pass the function: "
            f"fp.load(path, functions={{{name!r}: {name.split('.')[-1]}}})"
        )
    return Map(func, name)


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
        MaxAbsScale,
        RobustScale,
        Bin,
        QuantileTransform,
        PowerTransform,
        TargetEncode,
        CountEncode,
        GroupStats,
    )
}
AnyStep = (
    FillMissing
    | Clip
    | Log1p
    | Standardize
    | MinMax
    | OneHot
    | Categorify
    | Hash
    | Map
    | Vectorize
    | MaxAbsScale
    | RobustScale
    | Bin
    | QuantileTransform
    | PowerTransform
    | TargetEncode
    | CountEncode
    | GroupStats
)


def step_from_dict(
    data: dict[str, Any], functions: dict[str, Callable[[float], float]] | None = None
) -> Step:
    """Inverse of :meth:`Step.to_dict`; rejects unknown op names.

    ``Map`` steps are resolved by their code digest among ``functions`` and functions
    already defined in this process — never by importing or evaluating anything named in
    the file.
    """
    data = dict(data)
    name = data.pop("op", None)
    if name not in STEP_TYPES:
        raise PipelineDefinitionError(f"unknown step {name!r}; known: {sorted(STEP_TYPES)}")
    if name == "Map":
        return _saved_function(data, functions)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return STEP_TYPES[name](**kwargs)
