"""The in-memory table every backend works on after validation.

Numbers are float64 arrays with NaN for missing (exact for integers up to 2**53; the
validator rejects larger ones). Text is dictionary-encoded once, at validation: int32
codes (-1 = missing) into an array of unique strings, so encoders and domain checks work
on the few distinct values instead of every row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TextColumn:
    """Dictionary-encoded text: ``uniques[codes[i]]`` is row i's value, ``-1`` is missing."""

    codes: np.ndarray
    uniques: np.ndarray

    def __len__(self) -> int:
        return len(self.codes)

    def take(self, rows: np.ndarray) -> TextColumn:
        return TextColumn(self.codes[rows], self.uniques)

    def values(self) -> np.ndarray:
        """Object array of Python strings with ``None`` for missing (for peers and reports)."""
        out = np.empty(len(self.codes), dtype=object)
        present = self.codes >= 0
        out[present] = self.uniques[self.codes[present]]
        return out


Column = np.ndarray | TextColumn


@dataclass
class Table:
    """Validated columns plus fastprep's own row ids (positions in the source)."""

    row_ids: np.ndarray
    columns: dict[str, Column] = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        return len(self.row_ids)

    def __getitem__(self, name: str) -> Column:
        return self.columns[name]

    def take(self, rows: np.ndarray) -> Table:
        """Rows by position (an index array or a boolean mask)."""
        taken = {
            name: col.take(rows) if isinstance(col, TextColumn) else col[rows]
            for name, col in self.columns.items()
        }
        return Table(self.row_ids[rows], taken)
