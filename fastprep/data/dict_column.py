"""A validated column of dicts, flattened once into entry arrays (no per-row Python dicts).

Row ``i`` owns entries ``offsets[i]:offsets[i+1]``, in the dict's own key order. Entry ``e``
has key ``key_uniques[key_codes[e]]`` and either a string value
``value_uniques[value_codes[e]]`` (``value_codes[e] >= 0``) or the number ``numbers[e]``
(``value_codes[e] == -1``). Keys and string values are dictionary-encoded, so hashing and
vocabulary work run on the distinct (key, value) pairs and are gathered per entry.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class EntryRows:
    """Rows that own runs of flattened entries: row ``i`` owns ``offsets[i]:offsets[i+1]``
    (the part :class:`DictColumn` and tag columns share)."""

    __slots__ = ()
    offsets: np.ndarray  # int64, n_rows + 1

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_entries(self) -> int:
        return int(self.offsets[-1] - self.offsets[0])

    def entry_rows(self) -> np.ndarray:
        """The row of each entry (int64)."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.offsets))


class DictColumn(EntryRows):
    """Flattened ``{str: number | str}`` rows; see the module docstring."""

    __slots__ = ("key_codes", "key_uniques", "numbers", "offsets", "value_codes", "value_uniques")

    def __init__(
        self,
        offsets: np.ndarray,
        key_codes: np.ndarray,
        key_uniques: Any,
        value_codes: np.ndarray,
        value_uniques: Any,
        numbers: np.ndarray,
    ) -> None:
        self.offsets = offsets  # int64, n_rows + 1
        self.key_codes = key_codes  # int32 per entry
        self.key_uniques = key_uniques  # Arrow large_string array (duck-typed here)
        self.value_codes = value_codes  # int32 per entry, -1 for a number
        self.value_uniques = value_uniques  # Arrow large_string array
        self.numbers = numbers  # float64 per entry (NaN for a string entry)

    def __repr__(self) -> str:
        return f"DictColumn({len(self):,} rows, {self.n_entries:,} entries)"

    def take(self, rows: np.ndarray) -> DictColumn:
        """The rows at positions ``rows`` (int array), entries copied in row order."""
        offsets, entries = gather_rows(self.offsets, rows)
        return DictColumn(
            offsets,
            self.key_codes[entries],
            self.key_uniques,
            self.value_codes[entries],
            self.value_uniques,
            self.numbers[entries],
        )

    def to_dicts(self) -> list[dict[str, Any]]:
        """Python dicts again (for the reference backend and for sklearn comparisons)."""
        keys = self.key_uniques.to_pylist()
        texts = self.value_uniques.to_pylist()
        out: list[dict[str, Any]] = []
        kc, vc, nums = self.key_codes.tolist(), self.value_codes.tolist(), self.numbers.tolist()
        bounds = self.offsets.tolist()
        for i in range(len(bounds) - 1):
            out.append(
                {
                    keys[kc[e]]: (texts[vc[e]] if vc[e] >= 0 else nums[e])
                    for e in range(bounds[i], bounds[i + 1])
                }
            )
        return out


def gather_rows(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` (-1: an empty row) of row-grouped entries with ``offsets``: the new
    offsets and, per new entry, the position of the entry it copies (a CSR row gather)."""
    rows = np.asarray(rows, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    if len(rows) and rows.min() < 0:  # a trailing empty row for -1 (a missing text value)
        lengths = np.append(lengths, 0)
        rows = np.where(rows < 0, len(lengths) - 1, rows)
    starts = np.append(offsets[:-1], offsets[-1])[rows]
    taken = lengths[rows]
    out = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(taken, out=out[1:])
    # entry e of new row r: starts[r] + (e - out[r])
    entries = np.arange(out[-1], dtype=np.int64)
    entries += np.repeat(starts - out[:-1], taken)
    return out, entries
