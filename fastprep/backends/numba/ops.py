"""The Numba backend's table: what it does for each step type (see
:mod:`fastprep.backends.base` for adding a step).

A step in a fused stage is compiled into the stage's kernels: ``code`` gives its lines
(the value in variable ``v``, fitted numbers read from the parameter array), ``stat``
the statistic a fit round computes for it, ``params`` its parameters from that
statistic. A step in another stage (an encoder, ``Map``) runs by the reference code
unless its entry has its own ``fit`` / ``encode``. A step type without an entry is an
:class:`~fastprep.backends.base.UnsupportedOperation` on this backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastprep.backends.base import Dispatch
from fastprep.backends.moments import Moments
from fastprep.backends.numba import encode, group_stats, tags
from fastprep.backends.reference import backend as reference
from fastprep.plan.steps import (
    Bin,
    Categorify,
    Clip,
    CountEncode,
    FillMissing,
    GroupStats,
    Hash,
    Log1p,
    Map,
    MaxAbsScale,
    MinMax,
    OneHot,
    PowerTransform,
    QuantileTransform,
    RobustScale,
    Standardize,
    Step,
    TargetEncode,
    Vectorize,
)

#: lines of a fused kernel: (emitter, chain index, step index, step, variable, counted)
Code = Callable[[Any, int, int, Any, str, bool], list[str]]


@dataclass(frozen=True)
class NumbaOp:
    """What the Numba backend does for one step type (every field optional).

    - ``code``: the step's lines in a fused kernel;
    - ``stat(step)``: what a fit round computes for it: ``"moments"``, ``"range"``,
      ``"median"``, ``"values"`` (fitted by the reference on all its input values), or
      None (nothing learned from data: its parameters come from the reference's fit);
    - ``params(step, stats, what)``: fitted parameters from ``"moments"``/``"range"``;
    - ``fills``: the step fills missing values (a fitted fill's pass can also fit a step
      with ``folds_after_fill`` right after it, from the present values' statistics);
    - ``affine(step, fitted, a, b) -> (a, b)``: the step is affine; ``a * x + b`` followed
      by it (runs of such steps are composed into one multiply-add);
    - ``constants(step)``: parameter-array values taken from the step itself;
    - ``hoist``: the numpy ufunc the step applies to a plain column (precomputed by numpy's
      SIMD loop when the step comes first);
    - ``fit(plan, index, table)`` / ``encode(feature, fitted, table, sink, index, log)``:
      an encoder's own fit / block outside fused stages (else the reference's); also a
      first step that makes the chain's values from the table (``GroupStats``), whose
      ``encode`` returns whether it checked its outputs finite.
    """

    code: Code | None = None
    stat: Callable[[Any], str | None] | None = None
    params: Callable[[Any, Moments, str], dict[str, Any]] | None = None
    fills: bool = False
    folds_after_fill: bool = False
    affine: Callable[[Any, dict[str, Any], float, float], tuple[float, float]] | None = None
    constants: Callable[[Any], dict[str, Any]] | None = None
    hoist: str | None = None
    fit: Callable[..., Any] | None = None
    encode: Callable[..., None] | None = None


#: the step runs by the reference code (outside fused stages)
BY_REFERENCE = NumbaOp()


def log1p_code(value: str, v: str, bump: str) -> list[str]:
    """log1p with the reference's rule: a non-finite result of a present value -> missing."""
    return [
        f"lg = {value}",
        f"if not np.isfinite(lg) and {v} == {v}:",
        f"    {bump}",
        "    lg = np.nan",
        f"{v} = lg",
    ]


# ---------------------------------------------------------------- kernel code


def _fill_code(e: Any, index: int, s: int, step: FillMissing, v: str, counted: bool) -> list[str]:
    return [f"if {v} != {v}:", f"    {v} = {e.param(index, s, 'fill')}"]


def _clip_code(e: Any, index: int, s: int, step: Clip, v: str, counted: bool) -> list[str]:
    lines = []
    if step.lower is not None:
        lower = e.param(index, s, "lower")
        lines += [f"if {v} < {lower}:", f"    {v} = {lower}"]
    if step.upper is not None:
        upper = e.param(index, s, "upper")
        lines += [f"if {v} > {upper}:", f"    {v} = {upper}"]
    return lines


def _log1p_step_code(e: Any, index: int, s: int, step: Log1p, v: str, counted: bool) -> list[str]:
    return log1p_code(f"np.log1p({v})", v, e.count(index, "log1p_domain", counted))


def _standardize_code(
    e: Any, index: int, s: int, step: Standardize, v: str, counted: bool
) -> list[str]:
    lines = [f"{v} = {v} - {e.param(index, s, 'mean')}"] if step.with_mean else []
    return lines + ([f"{v} = {v} / {e.param(index, s, 'scale')}"] if step.with_std else [])


def _minmax_code(e: Any, index: int, s: int, step: MinMax, v: str, counted: bool) -> list[str]:
    return [f"{v} = {v} * {e.param(index, s, 'scale')}", f"{v} = {v} + {e.param(index, s, 'min')}"]


def _maxabs_code(e: Any, index: int, s: int, step: MaxAbsScale, v: str, counted: bool) -> list[str]:
    return [f"{v} = {v} / {e.param(index, s, 'scale')}"]


def _robust_code(e: Any, index: int, s: int, step: RobustScale, v: str, counted: bool) -> list[str]:
    lines = [f"{v} = {v} - {e.param(index, s, 'center')}"] if step.with_centering else []
    return lines + ([f"{v} = {v} / {e.param(index, s, 'scale')}"] if step.with_scaling else [])


def _bin_code(e: Any, index: int, s: int, step: Bin, v: str, counted: bool) -> list[str]:
    """The fitted edges are read from the parameter array."""
    off, n = e.param(index, s, "off:edges"), e.param(index, s, "len:edges")
    return [f"{v} = bin_of(p, np.int64({off}), np.int64({n}), {v})"]


def _quantile_code(
    e: Any, index: int, s: int, step: QuantileTransform, v: str, counted: bool
) -> list[str]:
    q, r = e.param(index, s, "off:quantiles"), e.param(index, s, "off:references")
    n = e.param(index, s, "len:quantiles")
    helper = f"quantile_{step.output_distribution}"  # quantile_uniform / quantile_normal
    return [f"{v} = {helper}(p, np.int64({q}), np.int64({r}), np.int64({n}), {v})"]


def _power_code(
    e: Any, index: int, s: int, step: PowerTransform, v: str, counted: bool
) -> list[str]:
    lam = e.param(index, s, "lambda")
    if step.method == "box-cox":  # the reference's rule: a value <= 0 -> missing
        lines = [
            f"if {v} <= 0.0:",
            f"    {e.count(index, 'boxcox_domain', counted)}",
            f"    {v} = np.nan",
            "else:",
            f"    {v} = box_cox({v}, {lam})",
        ]
    else:
        lines = [f"{v} = yeo_johnson({v}, {lam})"]
    if step.standardize:
        lines += [
            f"{v} = {v} - {e.param(index, s, 'mean')}",
            f"{v} = {v} / {e.param(index, s, 'scale')}",
        ]
    return lines


# ---------------------------------------------------------------- fit rounds


def _values(step: Step) -> str:
    return "values"


def _fill_stat(step: FillMissing) -> str | None:
    if not step.needs_fit:
        return None
    return "median" if step.value == "median" else "moments"


def _bin_stat(step: Bin) -> str | None:
    return "values" if step.needs_fit else None


# ---------------------------------------------------------------- affine runs
# ``(a, b)`` of the steps so far, then this one: the arithmetic of applying it to a * x + b


def _standardize_affine(
    step: Standardize, fitted: dict[str, Any], a: float, b: float
) -> tuple[float, float]:
    mean = fitted["mean"] if step.with_mean else 0.0
    scale = fitted["scale"] if step.with_std else 1.0
    return a / scale, (b - mean) / scale


def _minmax_affine(step: MinMax, fitted: dict[str, Any], a: float, b: float) -> tuple[float, float]:
    return a * fitted["scale"], b * fitted["scale"] + fitted["min"]


def _maxabs_affine(
    step: MaxAbsScale, fitted: dict[str, Any], a: float, b: float
) -> tuple[float, float]:
    return a / fitted["scale"], b / fitted["scale"]


def _robust_affine(
    step: RobustScale, fitted: dict[str, Any], a: float, b: float
) -> tuple[float, float]:
    center = fitted["center"] if step.with_centering else 0.0
    scale = fitted["scale"] if step.with_scaling else 1.0
    return a / scale, (b - center) / scale


NUMBA: Dispatch[NumbaOp] = Dispatch(
    "numba",
    {
        FillMissing: NumbaOp(_fill_code, _fill_stat, reference.fill_from_moments, fills=True),
        Clip: NumbaOp(_clip_code, constants=lambda s: {"lower": s.lower, "upper": s.upper}),
        Log1p: NumbaOp(_log1p_step_code, hoist="log1p"),
        Standardize: NumbaOp(
            _standardize_code,
            lambda s: "moments",
            reference.standardize_from_moments,
            folds_after_fill=True,
            affine=_standardize_affine,
        ),
        MinMax: NumbaOp(
            _minmax_code,
            lambda s: "range",
            reference.minmax_from_moments,
            folds_after_fill=True,
            affine=_minmax_affine,
        ),
        MaxAbsScale: NumbaOp(
            _maxabs_code, lambda s: "range", reference.maxabs_from_moments, affine=_maxabs_affine
        ),
        RobustScale: NumbaOp(_robust_code, _values, affine=_robust_affine),
        Bin: NumbaOp(_bin_code, _bin_stat),
        QuantileTransform: NumbaOp(_quantile_code, _values),
        PowerTransform: NumbaOp(_power_code, _values),
        Map: BY_REFERENCE,
        OneHot: NumbaOp(fit=tags.fit_onehot, encode=tags.encode_onehot),  # tags: multi-hot
        Categorify: BY_REFERENCE,
        Hash: NumbaOp(encode=tags.encode_hash),  # text, numbers, tags
        Vectorize: NumbaOp(fit=encode.fit_vectorize, encode=encode.encode_vectorize),
        # the reference code, whose cross-fit takes Numba's one pass over all folds
        # (backends/fold_kernels.py) where the planner's helper path says so
        TargetEncode: BY_REFERENCE,
        CountEncode: BY_REFERENCE,
        GroupStats: NumbaOp(fit=group_stats.fit_feature, encode=group_stats.encode_feature),
    },
)
