"""The ``repair`` policy: fix a broken numeric value in place of quarantining its row.

What each rule's repair is (anything else cannot be repaired without inventing a value,
so its rows are quarantined, and the finding says so):

- ``below_min`` / ``above_max``: clipped to the bound (``clip``);
- ``not_finite`` (±inf in a ``Float``): clipped to the bound on its side, if declared;
- ``not_integer`` (an ``Int`` holding 7.5): rounded half to even, then kept within the
  bounds (``round``); ±inf in an ``Int`` is clipped like ``not_finite``;
- ``overflow`` (beyond a declared ``dtype``'s range): clipped to that range (``clip``).

Missing values are imputed (action ``impute``) only where the column declares
``impute=<number>``, whatever its policy: the declaration is the repair.
"""

from __future__ import annotations

import numpy as np

from fastprep.api.schema import ColumnType, Float, Int
from fastprep.errors import Reason

REPAIRABLE = frozenset(
    {Reason.BELOW_MIN.value, Reason.ABOVE_MAX.value, Reason.NOT_FINITE.value,
     Reason.NOT_INTEGER.value, Reason.OVERFLOW.value}
)  # fmt: skip


def dtype_range(spec: Float | Int) -> tuple[float, float]:
    """The finite range of the column's declared storage dtype."""
    assert spec.dtype is not None
    info = np.iinfo(spec.dtype) if isinstance(spec, Int) else np.finfo(spec.dtype)
    return float(info.min), float(info.max)


def overflow_mask(values: np.ndarray, spec: Float | Int) -> np.ndarray | None:
    """Finite values within the declared bounds but beyond the dtype's range (None: none).

    Values beyond ``min``/``max`` already break those rules, so each value breaks one rule.
    """
    low, high = dtype_range(spec)
    lo = -np.inf if spec.min is None else float(spec.min)
    hi = np.inf if spec.max is None else float(spec.max)
    if len(values) == 0 or (lo >= low and hi <= high):
        return None
    with np.errstate(invalid="ignore"):
        finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
        if not len(finite) or (finite.min() >= low and finite.max() <= high):
            return None  # two reductions; the mask only when something overflows
        mask = ((values < low) & (values >= lo)) | ((values > high) & (values <= hi))
    return mask if mask.any() else None


def impute_missing(
    values: np.ndarray, bad_type: np.ndarray | None, spec: Float | Int
) -> tuple[np.ndarray, np.ndarray | None]:
    """Missing values (not wrong-type ones; ``bad_type`` None: none is) set to
    ``spec.impute``, in a copy; the mask."""
    if spec.impute is None or values.dtype.kind != "f":
        return values, None  # an integer array has no missing value
    missing = np.isnan(values) if bad_type is None else np.isnan(values) & ~bad_type
    if not missing.any():
        return values, None
    out = values.copy()
    out[missing] = float(spec.impute)
    return out, missing


def repair_values(
    values: np.ndarray, rule: str, mask: np.ndarray, spec: ColumnType
) -> tuple[np.ndarray, np.ndarray, str]:
    """Repair ``values[mask]`` for ``rule``: (values, rows left unrepaired, action name).

    ``values`` is never written to (it may be the source's own array): a float64 copy is.
    """
    if rule not in REPAIRABLE or not isinstance(spec, (Float, Int)):
        return values, mask, "quarantine"
    lo = -np.inf if spec.min is None else float(spec.min)
    hi = np.inf if spec.max is None else float(spec.max)
    if rule == Reason.OVERFLOW.value:
        lo, hi = dtype_range(spec)
    out = values.astype(np.float64)  # a copy: the rare path, and bounds may be fractional
    left = np.zeros(len(out), dtype=bool)
    if rule == Reason.OVERFLOW.value:
        out[mask] = np.clip(out[mask], lo, hi)
        return out, left, "clip"
    if rule == Reason.BELOW_MIN.value:
        out[mask] = lo
        return out, left, "clip"
    if rule == Reason.ABOVE_MAX.value:
        out[mask] = hi
        return out, left, "clip"
    with np.errstate(invalid="ignore"):
        plus = mask & (out == np.inf)
        minus = mask & (out == -np.inf)
    out[plus] = hi
    out[minus] = lo
    if rule == Reason.NOT_INTEGER.value:
        fractional = mask & ~plus & ~minus
        out[fractional] = np.clip(np.rint(out[fractional]), lo, hi)
        action = "round"
    else:
        action = "clip"
    left = mask & ~np.isfinite(out)  # an infinity with no bound on its side
    out[left] = values[left]
    return out, left, action
