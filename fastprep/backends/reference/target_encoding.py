"""``TargetEncode`` and ``CountEncode``: fit, transform and the cross-fitted fit_transform.

Every input is first numbered into *slots*: one per distinct present value, plus a last
slot for missing (missing is a category of its own). Text is already dictionary-encoded,
so its slots are its codes; numbers get theirs from ``np.unique``. Statistics per slot are
``np.bincount`` sums over the rows in row order — the order scikit-learn's
``TargetEncoder`` adds them in, so the encodings are the peer's own float64 values.

The fitted state keeps the categories sorted (strings or numbers), one value per category,
and the missing value's if missing was seen; transform looks each distinct value up once
(:func:`fastprep.backends.reference.encoders.lookup`) and gathers.

The fit's own rows are encoded out of fold (:func:`cross_fit`): the folds are
scikit-learn's ``KFold(cv, shuffle=True, random_state=seed)`` — or ``StratifiedKFold`` for
a binary target — reproduced here with ``np.random.RandomState`` (no scikit-learn at run
time), over the fitted rows in their order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.backends.reference.encoders import lookup
from fastprep.data.columns import FitTarget, FoldedRows, TextColumn
from fastprep.errors import FitError
from fastprep.native.arena import ARENA
from fastprep.plan.steps import CountEncode, TargetEncode

# ---------------------------------------------------------------- slots


def slots_of(values: np.ndarray | TextColumn) -> tuple[np.ndarray, list[Any], bool]:
    """Per row its slot (``len(categories)`` = missing), the categories of the slots
    (strings or floats, in slot order) and whether they are numbers."""
    if isinstance(values, TextColumn):
        # retained memory: 8 bytes a row, fresh pages at every fit otherwise (see ARENA)
        slots = ARENA.empty(len(values.codes), np.int64)
        np.copyto(slots, values.codes)
        np.putmask(slots, slots < 0, values.n_unique)  # missing's slot
        return slots, list(values.uniques), False
    nan = np.isnan(values)
    uniques, inverse = np.unique(values[~nan], return_inverse=True)
    slots = np.full(len(values), len(uniques), dtype=np.int64)
    slots[~nan] = inverse
    return slots, [float(v) for v in uniques], True


def _shared_slots(
    values: np.ndarray | TextColumn, target: FitTarget, last_use: bool = False
) -> tuple[np.ndarray, list[Any], bool]:
    """:func:`slots_of`, computed once per fit for an input both fitted and cross-fitted
    (the same column object at fit and at the transform of the fit's rows); released at
    its ``last_use`` (8 bytes a row)."""
    key = ("slots", id(values))
    found = target.shared.pop(key, None) if last_use else target.shared.get(key)
    if found is None or found[0] is not values:  # (the object kept: its id stays its own)
        found = (values, slots_of(values))
        if not last_use:
            target.shared[key] = found
    return found[1]


def _sorted_state(
    categories: list[Any], numeric: bool, per_slot: np.ndarray, counts: np.ndarray
) -> tuple[list[Any], np.ndarray]:
    """The categories seen (count > 0) sorted by value, and their per-slot values."""
    seen = np.flatnonzero(counts[:-1])
    if numeric:  # np.unique's slots are already sorted
        return [categories[i] for i in seen], per_slot[seen]
    order = sorted(seen, key=lambda i: str(categories[i]))
    return [str(categories[i]) for i in order], per_slot[np.array(order, dtype=np.int64)]


def _per_row(values: np.ndarray | TextColumn, params: dict[str, Any], key: str,
             unseen: float) -> np.ndarray:  # fmt: skip
    """Each row's fitted value: its category's, the missing value's, else ``unseen``."""
    table = np.append(np.asarray(params[key], dtype=np.float64), unseen)
    index, missing = lookup(values, params)
    # index -1 reads ``unseen``; the column into retained memory (see ``slots_of``)
    out = np.take(table, index, out=ARENA.empty(len(index), np.float64))
    missing_value = params["missing"]
    out[missing] = unseen if missing_value is None else missing_value
    return out


# ---------------------------------------------------------------- count encoding


def fit_counts(values: np.ndarray | TextColumn) -> dict[str, Any]:
    """Rows per category, the missing rows (``missing``: their count, 0 if none) and the
    fitted rows (``total``)."""
    slots, categories, numeric = slots_of(values)
    counts = np.bincount(slots, minlength=len(categories) + 1)
    kept, per_category = _sorted_state(categories, numeric, counts, counts)
    return {
        "categories": kept,
        "numeric": numeric,
        "counts": [int(c) for c in per_category],
        "missing": int(counts[-1]),
        "total": len(slots),
    }


def count_values(
    step: CountEncode, params: dict[str, Any], values: np.ndarray | TextColumn
) -> np.ndarray:
    """Each row's count at fit (or share of the fitted rows), 0 for a value unseen at fit."""
    counts = np.asarray(params["counts"], dtype=np.float64)
    missing = float(params["missing"])
    if step.normalize:  # pandas divides each count by their sum, in float64
        total = float(params["total"])
        counts, missing = counts / total if total else counts, missing / total if total else 0.0
    table = {"categories": params["categories"], "numeric": params["numeric"],
             "values": counts, "missing": missing}  # fmt: skip
    return _per_row(values, table, "values", 0.0)


# ---------------------------------------------------------------- target encoding


def encoded_target(target: FitTarget) -> np.ndarray:
    """The target the encodings average: continuous as is; binary as scikit-learn's
    ``LabelEncoder`` numbers it (the sorted classes 0, 1, ...: one class alone is 0).
    Computed once per fit (every input shares it)."""
    found = target.shared.get("encoded")
    if found is None:
        values = target.values
        if not target.binary:
            found = values
        elif np.all((values == 0) | (values == 1)):  # a Bool target: no sort needed
            found = values if values.any() and not values.all() else np.zeros_like(values)
        else:
            found = np.searchsorted(np.unique(values), values).astype(np.float64)
        target.shared["encoded"] = found
    return found


def shrunk(
    sums: np.ndarray, counts: np.ndarray, squares: Any, mean: Any, variance: Any,
    smooth: float | str,
) -> np.ndarray:  # fmt: skip
    """scikit-learn's encodings from per-category target sums and row counts:
    ``smooth="auto"`` — ``_fit_encoding_fast_auto_smooth``: the category mean shrunk
    towards ``mean`` by ``variance`` against the category's own (``squares(means)``: the
    sums of squared deviations from the category means) — else ``_fit_encoding_fast``.
    A category without rows (or with a zero-variance shrinkage 0/0) gets ``mean``. Arrays
    of any shape: one fold's categories, or (fold, category) with ``mean`` per fold."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if smooth == "auto":
            means = sums / counts
            lam = variance * counts / (variance * counts + squares(means) / counts)
            out = lam * means + (1 - lam) * mean
            return np.where(np.isnan(lam), mean, out)
        weight = float(smooth)
        weights = counts + weight
        out = (sums + weight * mean) / weights
        return np.where(weights == 0, mean, out)


def slot_encodings(
    slots: np.ndarray, y: np.ndarray, n_slots: int, smooth: float | str, mean: float,
    variance: float,
) -> np.ndarray:  # fmt: skip
    """The encoding of every slot from these rows (``mean``/``variance``: of ``y``)."""
    counts = np.bincount(slots, minlength=n_slots).astype(np.float64)
    sums = np.bincount(slots, weights=y, minlength=n_slots)

    def squares(means: np.ndarray) -> np.ndarray:
        diff = y - means[slots]
        return np.bincount(slots, weights=diff * diff, minlength=n_slots)

    return shrunk(sums, counts, squares, mean, variance, smooth)


def full_encodings(
    slots: np.ndarray, y: np.ndarray, n_slots: int, smooth: float | str, mean: float,
    variance: float,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`slot_encodings` of every row, and the rows per slot: on the helper path
    the planner chooses (Numba's two passes add the same terms in the same order as
    numpy's bincounts, without their temporaries as long as the rows)."""
    if _fold_kernels_pay(len(slots), 1, n_slots, "slot_sums"):
        from fastprep.backends.fold_kernels import slot_squares, slot_sums

        sums, counts = slot_sums(slots, y, n_slots)
        squares = lambda means: slot_squares(slots, y, means)  # noqa: E731
        return shrunk(sums, counts, squares, mean, variance, smooth), counts
    encodings = slot_encodings(slots, y, n_slots, smooth, mean, variance)
    return encodings, np.bincount(slots, minlength=n_slots)


def mean_and_variance(y: np.ndarray, rows: np.ndarray | None = None) -> tuple[float, float]:
    """``np.mean`` and ``np.var`` of ``y`` (of its ``rows``, a mask): the same pairwise
    sums over the same values, so the same bits, with the selected values and their
    squared deviations written into one retained buffer, not two fresh arrays as long."""
    n = len(y) if rows is None else int(np.count_nonzero(rows))
    buffer = ARENA.empty(max(n, 1), np.float64)[:n]
    part = np.compress(rows, y, out=buffer) if rows is not None else y
    mean = np.add.reduce(part) / n if n else float("nan")
    np.subtract(part, mean, out=buffer)
    np.multiply(buffer, buffer, out=buffer)
    variance = np.add.reduce(buffer) / n if n else float("nan")
    return float(mean), float(variance)


def fit_target_encoding(
    step: TargetEncode, values: np.ndarray | TextColumn, target: FitTarget | None, what: str
) -> dict[str, Any]:
    """The full-data encodings: per category (sorted), the missing value's (None if no
    row was missing) and ``target_mean`` (what a value unseen at fit gets)."""
    y = _require_target(target, len(values), what)
    assert target is not None
    slots, categories, numeric = _shared_slots(values, target)
    n_slots = len(categories) + 1
    mean, variance = mean_and_variance(y)
    encodings, counts = full_encodings(slots, y, n_slots, step.smooth, mean, variance)
    kept, per_category = _sorted_state(categories, numeric, encodings, counts)
    return {
        "categories": kept,
        "numeric": numeric,
        "encodings": np.ascontiguousarray(per_category, dtype=np.float64),
        "missing": float(encodings[-1]) if counts[-1] else None,
        "target_mean": mean,
    }


def target_values(params: dict[str, Any], values: np.ndarray | TextColumn) -> np.ndarray:
    """Transform: each row's category encoding, ``target_mean`` for a value unseen at fit
    (missing, when no fitted row was missing, is unseen too)."""
    return _per_row(values, params, "encodings", float(params["target_mean"]))


@dataclass(frozen=True)
class Folds:
    """The cross-fitting folds of a fit's rows, shared by every input encoded with them."""

    #: each row's test fold
    of_row: np.ndarray
    #: per fold, the mean and population variance of its training rows' target
    means: np.ndarray
    variances: np.ndarray


def folds_for(step: TargetEncode, target: FitTarget, what: str) -> Folds:
    """The folds of ``step``'s ``cv`` and ``seed`` over the fit's rows (made once per fit)."""
    key = ("folds", step.cv, step.seed)
    found = target.shared.get(key)
    if found is None:
        y = encoded_target(target)
        of_row = fold_of_rows(target.values, step.cv, step.seed, target.binary, what)
        # per fold, its training rows (every row not in it)
        moments = [mean_and_variance(y, of_row != k) for k in range(step.cv)]
        means, variances = (np.array(m) for m in zip(*moments))
        found = target.shared[key] = Folds(of_row, means, variances)
    return found


def cross_fit(
    step: TargetEncode, values: np.ndarray | TextColumn, target: FitTarget, what: str
) -> np.ndarray:
    """The fit's own rows, each encoded by the encodings learned on the other folds."""
    if target.folded is not None:  # a partition of a partitioned fit_transform
        return encode_folded(target.folded, values, what)
    y = _require_target(target, len(values), what)
    slots, categories, _ = _shared_slots(values, target, last_use=True)
    folds = folds_for(step, target, what)
    encodings = fold_encodings(step, slots, y, folds, len(categories) + 1)
    # each row's (slot, fold) cell, gathered into retained memory (see ``slots_of``)
    cells = np.multiply(slots, step.cv, out=ARENA.empty(len(slots), np.int64))
    np.add(cells, folds.of_row, out=cells)
    return np.take(encodings.ravel(), cells, out=ARENA.empty(len(slots), np.float64))


def fold_encodings(
    step: TargetEncode, slots: np.ndarray, y: np.ndarray, folds: Folds, n_slots: int
) -> np.ndarray:
    """Per (slot, fold): the encoding learned on the fold's training rows (a slot absent
    from them gets the training rows' mean, as in the peer)."""
    if _fold_kernels_pay(len(slots), step.cv, n_slots, "fold_sums"):
        from fastprep.backends.fold_kernels import fold_squares, fold_sums

        sums, counts = fold_sums(slots, y, folds.of_row, step.cv, n_slots)  # (slot, fold)
        squares = lambda means: fold_squares(slots, y, folds.of_row, means)  # noqa: E731
        means, variances = folds.means[None, :], folds.variances[None, :]
        return shrunk(sums, counts, squares, means, variances, step.smooth)
    out = np.empty((n_slots, step.cv), dtype=np.float64)
    for k in range(step.cv):
        train = folds.of_row != k
        out[:, k] = slot_encodings(slots[train], y[train], n_slots, step.smooth,
                                   folds.means[k], folds.variances[k])  # fmt: skip
    return out


def fold_table(
    step: TargetEncode, values: np.ndarray | TextColumn, target: FitTarget, what: str
) -> dict[str, Any]:
    """The cross-fit of all the fit's rows as a table a partition of them can read: per
    fold, the encoding of every category seen at fit (sorted, as the fitted state's) and
    of missing (``missing``: per fold, NaN when no fitted row was missing)."""
    y = _require_target(target, len(values), what)
    slots, categories, numeric = _shared_slots(values, target, last_use=True)
    n_slots = len(categories) + 1
    encodings = fold_encodings(step, slots, y, folds_for(step, target, what), n_slots)
    counts = np.bincount(slots, minlength=n_slots)
    kept, per_category = _sorted_state(categories, numeric, encodings, counts)
    missing = encodings[-1] if counts[-1] else np.full(step.cv, np.nan)
    return {
        "categories": kept,
        "numeric": numeric,
        "encodings": np.ascontiguousarray(np.asarray(per_category).reshape(-1, step.cv).T),
        "missing": np.ascontiguousarray(missing, dtype=np.float64),
        "folds": (step.cv, step.seed),
    }


def encode_folded(folded: FoldedRows, values: np.ndarray | TextColumn, what: str) -> np.ndarray:
    """A partition of the fit's rows, each by its fold's encoding of its category (the
    values of :func:`cross_fit` over all the rows)."""
    table = folded.tables.get(what)
    if table is None:
        raise FitError(f"{what}: no cross-fitted encodings for this partition's rows")
    of_row = folded.of_row[table["folds"]]
    if len(of_row) != len(values):
        raise FitError(
            f"{what}: the partition has {len(values):,} fitted rows at transform but "
            f"{len(of_row):,} at fit (the source changed between the passes?)"
        )
    index, missing = lookup(values, table)
    if (index[~missing] < 0).any():
        raise FitError(f"{what}: a fitted row's category was not seen at fit (the source "
                       "changed between the passes?)")  # fmt: skip
    encodings = np.column_stack([table["encodings"], table["missing"]])  # missing: last
    return encodings[of_row, np.where(missing, encodings.shape[1] - 1, index)]


def _fold_kernels_pay(n_rows: int, cv: int, n_slots: int, kernel: str) -> bool:
    """Numba's one pass over the rows for every fold (the same sums, in the same order) or
    numpy's pass per fold: the planner's choice of helper path, costed per row and fold
    (the work is ``cv`` passes' worth, which also decides whether it repays importing
    Numba); never for a table of (slot, fold) sums much larger than the rows (a column of
    distinct ids). ``kernel``: the :mod:`~fastprep.backends.fold_kernels` kernel the call
    runs first (``cv=1``: the full-data fit's)."""
    from fastprep.backends import fold_kernels
    from fastprep.native.kernel_files import numba_cached, numba_loaded
    from fastprep.planning.planner import kernel_path

    if cv * n_slots > 4 * n_rows + 4096:
        return False
    dispatcher = getattr(fold_kernels, kernel)
    loaded = numba_loaded(dispatcher)
    cached = loaded or numba_cached(dispatcher)  # (a look at Numba's index on disk)
    return kernel_path("target", n_rows * cv, cached=cached, loaded=loaded) == "numba"


def _require_target(target: FitTarget | None, n_rows: int, what: str) -> np.ndarray:
    if target is None:
        raise FitError(f"{what}: fitted against the pipeline's target, but the fit has no target")
    if len(target.values) != n_rows:
        raise FitError(f"{what}: {len(target.values):,} target values for {n_rows:,} rows")
    if n_rows == 0:
        raise FitError(f"{what}: no rows to fit on (all rows quarantined or the source is empty)")
    return encoded_target(target)


# ---------------------------------------------------------------- folds


def fold_of_rows(y: np.ndarray, cv: int, seed: int, binary: bool, what: str) -> np.ndarray:
    """Each row's test fold: scikit-learn's ``KFold(cv, shuffle=True, random_state=seed)``
    or, for a binary target, ``StratifiedKFold(cv, shuffle=True, random_state=seed)``."""
    n = len(y)
    if cv > n:
        raise FitError(f"{what}: cv={cv} folds need at least {cv} fitted rows, got {n:,}")
    return stratified_folds(y, cv, seed, what) if binary else kfold_folds(n, cv, seed)


def kfold_folds(n: int, cv: int, seed: int) -> np.ndarray:
    """``KFold``: the rows shuffled by ``RandomState(seed)``, then cut into ``cv``
    consecutive folds, the first ``n % cv`` one row larger."""
    order = np.arange(n)
    np.random.RandomState(seed).shuffle(order)
    sizes = np.full(cv, n // cv, dtype=np.int64)
    sizes[: n % cv] += 1
    folds = np.empty(n, dtype=np.int64)
    folds[order] = np.repeat(np.arange(cv), sizes)
    return folds


def stratified_folds(y: np.ndarray, cv: int, seed: int, what: str) -> np.ndarray:
    """``StratifiedKFold._make_test_folds`` in numpy: classes numbered by first
    appearance, each fold's share of a class by round robin over the sorted classes, and
    each class's fold labels shuffled by one ``RandomState(seed)``, class by class."""
    rng = np.random.RandomState(seed)
    classes, n_classes = _classes_by_appearance(y)
    per_class = np.array([np.count_nonzero(classes == k) for k in range(n_classes)])
    if np.all(cv > per_class):
        raise FitError(
            f"{what}: cv={cv} folds, but no class of the target has that many rows "
            f"(rows per class: {per_class.tolist()}); lower cv"
        )
    # scikit-learn counts each class in ``np.sort(classes)[i::cv]``; the sorted classes are
    # runs (class k over positions [start, end)), so the counts are arithmetic on the runs'
    # ends: positions j < x with j % cv == i number (x - i + cv - 1) // cv
    ends = np.cumsum(per_class)
    starts = ends - per_class
    allocation = np.asarray(
        [(ends - i + cv - 1) // cv - (starts - i + cv - 1) // cv for i in range(cv)]
    )
    folds = ARENA.empty(len(y), np.int64)  # (retained memory, as the slots')
    for k in range(n_classes):  # every row is of a class: every fold written
        # a byte a label: the shuffle's draws depend on the length alone, not the dtype
        labels = np.arange(cv, dtype=np.min_scalar_type(cv - 1)).repeat(allocation[:, k])
        rng.shuffle(labels)
        folds[classes == k] = labels
    return folds


def _classes_by_appearance(y: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's class numbered by first appearance (0 = the first row's), and how
    many. A 0/1 target (binary) without a sort, its classes a byte a row."""
    if len(y) and np.all((y == 0) | (y == 1)):
        first_is_one = bool(y[0] == 1)
        ones = y == 1
        classes = (ones != first_is_one).view(np.int8)
        return classes, 1 if (ones.all() or not ones.any()) else 2
    _, first, inverse = np.unique(y, return_index=True, return_inverse=True)
    _, by_appearance = np.unique(first, return_inverse=True)
    return by_appearance[inverse], len(first)


def encode(
    step: TargetEncode | CountEncode, params: dict[str, Any], values: np.ndarray | TextColumn,
    fit_target: FitTarget | None, what: str,
) -> np.ndarray:  # fmt: skip
    """One input's output column (float64). Rows that are the fit's own (a table carrying
    its ``fit_target``) are target-encoded out of fold; any other rows by the fitted state."""
    if isinstance(step, CountEncode):
        return count_values(step, params, values)
    if fit_target is not None:
        return cross_fit(step, values, fit_target, what)
    return target_values(params, values)
