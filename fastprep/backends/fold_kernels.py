"""Cross-fitted target encoding in one pass over the rows for every fold at once: the
Numba twin of the per-fold numpy loop in
:mod:`fastprep.backends.reference.target_encoding`, which calls it where the planner's
helper path ``"target"`` says so (whichever backend runs the stage). It imports no other
fastprep module but the lazy ``jit``: the reference code imports it, nothing here imports
back.

Each row adds its target to the sums of every fold it trains (all but its own test fold),
so each (fold, category) sum receives its rows in row order — the order numpy's
``bincount`` over that fold's training rows adds them in, and scikit-learn's loop: the
same float64 sums, bit for bit, as the per-fold numpy twin
(:func:`fastprep.backends.reference.target_encoding.cross_fit`) in a fifth of its passes.
"""

from __future__ import annotations

import numpy as np

from fastprep.native.kernel_files import jit


@jit(cache=True, nogil=True)
def fold_sums(slots, y, of_row, cv, n_slots):  # type: ignore[no-untyped-def]
    """Per (slot, fold): the target sum and the row count over the fold's training rows
    (slot-major: a row's cells of every fold share a cache line)."""
    sums = np.zeros((n_slots, cv))
    counts = np.zeros((n_slots, cv))
    for i in range(len(slots)):
        s = slots[i]
        f = of_row[i]
        v = y[i]
        for k in range(cv):
            if k != f:
                sums[s, k] += v
                counts[s, k] += 1.0
    return sums, counts


@jit(cache=True, nogil=True)
def fold_squares(slots, y, of_row, means):  # type: ignore[no-untyped-def]
    """Per (slot, fold): the sum of squared deviations from that fold's slot mean."""
    n_slots, cv = means.shape
    out = np.zeros((n_slots, cv))
    for i in range(len(slots)):
        s = slots[i]
        f = of_row[i]
        v = y[i]
        for k in range(cv):
            if k != f:
                d = v - means[s, k]
                out[s, k] += d * d
    return out


@jit(cache=True, nogil=True)
def slot_sums(slots, y, n_slots):  # type: ignore[no-untyped-def]
    """Per slot: the target sum and the row count over every row (the full-data fit: the
    sums of ``np.bincount``, in its row order, with no temporary as long as the rows)."""
    sums = np.zeros(n_slots)
    counts = np.zeros(n_slots)
    for i in range(len(slots)):
        s = slots[i]
        sums[s] += y[i]
        counts[s] += 1.0
    return sums, counts


@jit(cache=True, nogil=True)
def slot_squares(slots, y, means):  # type: ignore[no-untyped-def]
    """Per slot: the sum of squared deviations from the slot's mean, in row order."""
    out = np.zeros(len(means))
    for i in range(len(slots)):
        s = slots[i]
        d = y[i] - means[s]
        out[s] += d * d
    return out
