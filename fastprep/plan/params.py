"""The shape of each step's fitted parameters, checked when a saved state is loaded.

A state file whose checksum is intact can still have been written by someone else; every
fitted value is checked for its type and range before anything computes with it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

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

_NUMBER_KEYS: dict[type, tuple[str, ...]] = {
    FillMissing: ("fill",),
    Standardize: ("mean", "scale"),
    MinMax: ("scale", "min"),
    MaxAbsScale: ("max_abs", "scale"),
    RobustScale: ("center", "scale"),
    PowerTransform: ("lambda",),
}


def check_step_params(step: Step, params: Any, where: str) -> None:
    """Raise ``ValueError`` naming ``where`` if ``params`` cannot belong to ``step``."""
    if not isinstance(params, dict):
        raise ValueError(f"{where}: parameters of {step.describe()} must be a mapping")
    text_fill = isinstance(step, FillMissing) and step.fills_text
    if text_fill and params.get("fill") != step.value:
        raise ValueError(f"{where}: {step.describe()} has a different fill {params.get('fill')!r}")
    _check_numbers(step, params, () if text_fill else _NUMBER_KEYS.get(type(step), ()), where)
    if isinstance(step, (Standardize, MaxAbsScale, RobustScale)) and params["scale"] <= 0:
        raise ValueError(f"{where}: {step.describe()} has a non-positive scale")
    if isinstance(step, PowerTransform) and step.standardize:
        _check_numbers(step, params, ("mean", "scale"), where)
        if params["scale"] <= 0:
            raise ValueError(f"{where}: {step.describe()} has a non-positive scale")
    if isinstance(step, (OneHot, Categorify)):
        _check_categories(step, params, where)
        _check_vocabulary(step, params, where)
    elif isinstance(step, Vectorize):  # its vocabulary: the sorted distinct feature names
        names = params.get("vocabulary")
        if not isinstance(names, list) or not all(isinstance(v, str) for v in names):
            raise ValueError(f"{where}: {step.describe()} needs a list of feature names")
        if names != sorted(set(names)):
            raise ValueError(f"{where}: {step.describe()} feature names must be sorted, distinct")
    elif isinstance(step, (TargetEncode, CountEncode)):
        _check_encoded_values(step, params, where)
    elif isinstance(step, Bin):
        edges = _sorted_array(step, params, "edges", where)
        inner = edges[1:-1]
        if len(edges) < 2 or not np.isfinite(inner).all() or np.isnan(edges).any():
            raise ValueError(f"{where}: {step.describe()} needs at least two edges, finite inside")
    elif isinstance(step, QuantileTransform):
        quantiles = _sorted_array(step, params, "quantiles", where)
        if not 1 <= len(quantiles) <= step.n_quantiles or not np.isfinite(quantiles).all():
            raise ValueError(f"{where}: {step.describe()} needs 1..n_quantiles finite quantiles")
    elif isinstance(step, GroupStats):
        _check_group_params(step, params, where)
    elif not isinstance(
        step,
        (FillMissing, Standardize, MinMax, Clip, Log1p, Hash, Map, MaxAbsScale, RobustScale,
         PowerTransform),
    ):  # fmt: skip
        raise ValueError(f"{where}: no parameter check for {step.describe()}")


def _check_numbers(step: Step, params: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    for key in keys:
        value = params.get(key)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise ValueError(f"{where}: {step.describe()} has a non-numeric {key!r}: {value!r}")


def _sorted_array(step: Step, params: dict[str, Any], key: str, where: str) -> np.ndarray:
    """A fitted 1-d float64 array (bin edges, quantiles), in non-decreasing order."""
    value = params.get(key)
    if not isinstance(value, np.ndarray) or value.dtype != np.float64 or value.ndim != 1:
        raise ValueError(f"{where}: {step.describe()} needs a float64 array {key!r}")
    if np.isnan(value).any() or (np.diff(value) < 0).any():
        raise ValueError(f"{where}: {step.describe()} has unsorted or NaN {key!r}")
    return value


def _check_categories(step: Step, params: dict[str, Any], where: str) -> None:
    categories = params.get("categories")
    numeric = params.get("numeric")
    if not isinstance(categories, list) or not isinstance(numeric, bool):
        raise ValueError(f"{where}: {step.describe()} needs a category list")
    if not isinstance(params.get("missing"), bool):
        raise ValueError(f"{where}: {step.describe()} needs a boolean 'missing'")
    kind = (int, float) if numeric else str
    if not all(isinstance(c, kind) and not isinstance(c, bool) for c in categories):
        raise ValueError(f"{where}: {step.describe()} has categories of the wrong type")
    if any(c != c for c in categories):
        raise ValueError(f"{where}: {step.describe()} has a NaN category (missing is a flag)")
    if len(set(categories)) != len(categories) or categories != sorted(categories):
        raise ValueError(f"{where}: {step.describe()} categories must be sorted and distinct")


def _check_vocabulary(step: OneHot | Categorify, params: dict[str, Any], where: str) -> None:
    """Counts and the infrequent tally agree with the step's ``min_frequency``/``max_categories``.

    A ``OneHot`` saved before these keys existed has neither: no infrequent categories.
    """
    counts = params.get("counts")
    infrequent = params.get("infrequent", 0)
    if counts is None and isinstance(step, OneHot):
        counts = [step.min_frequency] * len(params["categories"])
    if not isinstance(counts, list) or len(counts) != len(params["categories"]):
        raise ValueError(f"{where}: {step.describe()} needs one count per category")
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        raise ValueError(f"{where}: {step.describe()} has non-integer counts")
    if isinstance(infrequent, bool) or not isinstance(infrequent, int) or infrequent < 0:
        raise ValueError(f"{where}: {step.describe()} has a bad 'infrequent' {infrequent!r}")
    if any(c < step.min_frequency for c in counts):
        raise ValueError(
            f"{where}: {step.describe()} keeps a category seen fewer than min_frequency times"
        )
    if step.max_categories is not None and len(counts) > step.max_categories:
        raise ValueError(f"{where}: {step.describe()} keeps more than max_categories categories")


def _check_encoded_values(
    step: TargetEncode | CountEncode, params: dict[str, Any], where: str
) -> None:
    """Sorted distinct categories with one fitted value each: an encoding (float) or a
    count (int); the missing value's (None: not seen) and the target mean or row total."""
    categories = params.get("categories")
    numeric = params.get("numeric")
    if not isinstance(categories, list) or not isinstance(numeric, bool):
        raise ValueError(f"{where}: {step.describe()} needs a category list")
    kind = (int, float) if numeric else str
    if not all(isinstance(c, kind) and not isinstance(c, bool) for c in categories):
        raise ValueError(f"{where}: {step.describe()} has categories of the wrong type")
    if any(c != c for c in categories):
        raise ValueError(f"{where}: {step.describe()} has a NaN category (missing is apart)")
    if len(set(categories)) != len(categories) or categories != sorted(categories):
        raise ValueError(f"{where}: {step.describe()} categories must be sorted and distinct")
    if isinstance(step, CountEncode):
        counts = params.get("counts")
        numbers = [params.get("missing"), params.get("total")]
        if (
            not isinstance(counts, list)
            or len(counts) != len(categories)
            or not all(
                isinstance(c, int) and not isinstance(c, bool) and c >= 0
                for c in [*counts, *numbers]
            )
        ):
            raise ValueError(f"{where}: {step.describe()} needs one count per category")
        if sum(counts) + params["missing"] != params["total"]:
            raise ValueError(f"{where}: {step.describe()} counts do not add up to the total")
        return
    encodings = params.get("encodings")
    if (
        not isinstance(encodings, np.ndarray)
        or encodings.dtype != np.float64
        or encodings.shape != (len(categories),)
        or not np.isfinite(encodings).all()
    ):
        raise ValueError(f"{where}: {step.describe()} needs one finite encoding per category")
    _check_numbers(step, params, ("target_mean",), where)
    if params.get("missing") is not None:
        _check_numbers(step, params, ("missing",), where)


def _check_group_params(step: GroupStats, params: dict[str, Any], where: str) -> None:
    """Levels per key (sorted distinct text, or a sorted float64 array), the groups' codes
    (sorted, distinct, within the keys' code space) and one float64 statistic per group."""
    what = f"{where}: {step.describe()}"
    if params.get("stat") not in step.stats:
        raise ValueError(f"{what} has an unknown statistic {params.get('stat')!r}")
    levels = params.get("levels")
    if not isinstance(levels, list) or len(levels) != len(step.keys):
        raise ValueError(f"{what} needs one list of levels per key")
    space = 1
    for level in levels:
        if isinstance(level, list):
            if not all(isinstance(v, str) for v in level) or level != sorted(set(level)):
                raise ValueError(f"{what} has text levels that are not sorted distinct strings")
        elif not (isinstance(level, np.ndarray) and level.dtype == np.float64 and level.ndim == 1
                  and not np.isnan(level).any() and (np.diff(level) > 0).all()):  # fmt: skip
            raise ValueError(f"{what} has numeric levels that are not a sorted float64 array")
        space *= len(level) + 1
    groups, values = params.get("groups"), params.get("values")
    if not (isinstance(groups, np.ndarray) and groups.dtype == np.int64 and groups.ndim == 1):
        raise ValueError(f"{what} needs an int64 array of groups")
    if len(groups) and (groups[0] < 0 or groups[-1] >= space or (np.diff(groups) <= 0).any()):
        raise ValueError(f"{what} has groups that are not sorted, distinct codes of its keys")
    if not (isinstance(values, np.ndarray) and values.dtype == np.float64
            and values.shape == groups.shape):  # fmt: skip
        raise ValueError(f"{what} needs one float64 statistic per group")
