"""Encoders with a fitted vocabulary: ``OneHot`` and ``Categorify`` (the reference code).

Fit counts each distinct value once (text: a ``bincount`` of the dictionary codes; numbers:
``np.unique``), keeps the categories seen at least ``min_frequency`` times, then at most the
``max_categories`` most frequent (count descending, ties by value ascending), and stores the
kept categories sorted by value with their counts. Missing is never a category: it is a
flag (``OneHot``: its own column; ``Categorify``: code 0). Transform looks each distinct
text value up once and gathers by code; numbers go through ``np.searchsorted``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fastprep.data.columns import TextColumn
from fastprep.data.text_encode import count_codes
from fastprep.emit.blocks import CodesBlock
from fastprep.emit.layout import category_count, category_names
from fastprep.plan.nodes import Feature

#: Categorify's reserved codes
MISSING_CODE = 0
INFREQUENT_CODE = 1
FIRST_CODE = 2


def fit_categories(
    values: np.ndarray | TextColumn, min_frequency: int = 1, max_categories: int | None = None
) -> dict[str, Any]:
    """The fitted vocabulary: ``categories`` (sorted), their ``counts``, ``numeric``,
    whether missing was seen (``missing``) and how many distinct categories were
    infrequent (``infrequent``, 0 when none)."""
    if isinstance(values, TextColumn):
        per_slot = values.value_counts(count_codes)  # once per column (drift may have)
        per_unique = per_slot[1:]
        seen = np.flatnonzero(per_unique)
        pairs = sorted((str(values.uniques[i]), int(per_unique[i])) for i in seen)
        categories: list[Any] = [p[0] for p in pairs]
        counts = np.array([p[1] for p in pairs], dtype=np.int64)
        numeric, missing = False, bool(per_slot[0])
    else:
        nan = np.isnan(values)
        uniques, counts = np.unique(values[~nan], return_counts=True)
        categories = [float(v) for v in uniques]
        numeric, missing = True, bool(nan.any())
    kept = kept_positions(counts, min_frequency, max_categories)
    return {
        "categories": [categories[i] for i in kept],
        "counts": [int(counts[i]) for i in kept],
        "numeric": numeric,
        "missing": missing,
        "infrequent": len(categories) - len(kept),
    }


def kept_positions(
    counts: np.ndarray, min_frequency: int, max_categories: int | None
) -> np.ndarray:
    """Positions (ascending) of the categories kept, ``counts`` being in sorted value order."""
    kept = np.flatnonzero(counts >= min_frequency)
    if max_categories is not None and len(kept) > max_categories:
        # lexsort: last key first -> count descending, then position (= value) ascending
        order = np.lexsort((kept, -counts[kept]))
        kept = np.sort(kept[order[:max_categories]])
    return kept


def lookup(
    values: np.ndarray | TextColumn, params: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the position of its value in ``categories`` or -1 (unseen or infrequent),
    and the mask of missing rows."""
    categories = params["categories"]
    if isinstance(values, TextColumn):
        table = {c: i for i, c in enumerate(categories) if isinstance(c, str)}
        per_unique = np.array([table.get(str(u), -1) for u in values.uniques], dtype=np.int64)
        missing = values.codes < 0
        return np.append(per_unique, -1)[values.codes], missing
    numbers = np.asarray(categories, dtype=np.float64)
    missing = np.isnan(values)
    if not len(numbers):
        return np.full(len(values), -1, dtype=np.int64), missing
    position = np.searchsorted(numbers, values)
    clipped = np.minimum(position, len(numbers) - 1)
    found = (position < len(numbers)) & (numbers[clipped] == values)
    return np.where(found, position, -1), missing


def category_codes(values: np.ndarray | TextColumn, params: dict[str, Any]) -> np.ndarray:
    """OneHot: per row, its column within the input's block, or -1 (all zeros).

    Columns: the kept categories, then ``<missing>`` if missing was seen at fit, then
    ``<infrequent>`` if some category was infrequent at fit. Unseen values — and missing,
    when it was not seen at fit — go to ``<infrequent>`` if it exists, else nowhere.
    Text: one gather of a column per distinct value (missing in the last slot, which code
    -1 indexes), instead of four passes with int64 temporaries.
    """
    n = len(params["categories"])
    has_missing = bool(params["missing"])
    other = n + has_missing if params.get("infrequent", 0) else -1
    on_missing = n if has_missing else other
    if isinstance(values, TextColumn):
        table = {c: i for i, c in enumerate(params["categories"]) if isinstance(c, str)}
        per_unique = [table.get(str(u), other) for u in values.uniques]
        return np.array([*per_unique, on_missing], dtype=np.int64)[values.codes]
    index, missing = lookup(values, params)
    codes = np.where(index < 0, other, index)
    codes[missing] = on_missing
    return codes


def categorify_codes(values: np.ndarray | TextColumn, params: dict[str, Any]) -> np.ndarray:
    """Categorify: 0 = missing, 1 = unseen or infrequent, 2.. = kept categories (float64)."""
    index, missing = lookup(values, params)
    codes = np.where(index < 0, INFREQUENT_CODE, index + FIRST_CODE).astype(np.float64)
    codes[missing] = MISSING_CODE
    return codes


def onehot_block(
    feature: Feature, params: dict[str, list[dict[str, Any]]], values: dict[str, Any]
) -> CodesBlock:
    names: list[str] = []
    codes: list[np.ndarray] = []
    widths: list[int] = []
    for item in feature.inputs:
        fitted = params[item.name][-1]
        names.extend(category_names(item.name, fitted))
        widths.append(category_count(fitted))
        codes.append(category_codes(values[item.name], fitted))
    return CodesBlock(names, codes, widths)
