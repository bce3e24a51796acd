"""The ``repair`` policy: fix a broken numeric value in place of quarantining its row.

What each rule's repair is (anything else cannot be repaired without inventing a value,
so its rows are quarantined, and the finding says so):

- ``below_min`` / ``above_max``: clipped to the bound (``clip``);
- ``not_finite`` (±inf in a ``Float``): clipped to the bound on its side, if declared;
- ``not_integer`` (an ``Int`` holding 7.5): rounded half to even, then kept within the bounds (``round``); ±inf in an
  ``Int`` is clipped like ``not_finite``.
"""

from __future__ import annotations

import numpy as np

from fastprep.errors import Reason
from fastprep.schema import ColumnType, Float, Int

REPAIRABLE = frozenset(
    {Reason.BELOW_MIN.value, Reason.ABOVE_MAX.value, Reason.NOT_FINITE.value,
     Reason.NOT_INTEGER.value}
)  # fmt: skip


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
    out = values.astype(np.float64)  # a copy: the rare path, and bounds may be fractional
    left = np.zeros(len(out), dtype=bool)
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
