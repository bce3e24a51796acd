"""Multi-valued text columns ("a|b|c" tags, Parquet ``list<string>``) as flattened entries.

Row ``i`` owns entries ``offsets[i]:offsets[i+1]``; entry ``e`` is the tag
``uniques[codes[e]]``. A row holds each tag once (a repeated tag counts once), never an
empty tag (``"a||b"`` is ``a``, ``b``), and a missing row holds none. Tags are
dictionary-encoded, so vocabularies and hashing work on the distinct tags and are gathered
per entry — no Python object per row. Built by :mod:`fastprep.data.tag_split`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fastprep.data.dict_column import EntryRows, gather_rows


class TagColumn(EntryRows):
    """Flattened tag rows; see the module docstring."""

    __slots__ = ("codes", "offsets", "uniques")

    def __init__(self, offsets: np.ndarray, codes: np.ndarray, uniques: Any) -> None:
        self.offsets = offsets  # int64, n_rows + 1
        self.codes = codes  # int32 per entry, into ``uniques``
        self.uniques = uniques  # Arrow large_string array of distinct tags (duck-typed here)

    def __repr__(self) -> str:
        return f"TagColumn({len(self):,} rows, {self.n_entries:,} tags)"

    def take(self, rows: np.ndarray) -> TagColumn:
        """The rows at positions ``rows`` (int array; -1 gives an empty row), in that order."""
        offsets, entries = gather_rows(self.offsets, rows)
        return TagColumn(offsets, self.codes[entries], self.uniques)

    def counts(self) -> np.ndarray:
        """Rows holding each distinct tag (a row holds a tag at most once)."""
        return np.bincount(self.codes, minlength=len(self.uniques))

    def to_lists(self) -> list[list[str]]:
        """Python lists again (for the reference backend and for comparisons with peers)."""
        names = self.uniques.to_pylist()
        codes = self.codes.tolist()
        bounds = self.offsets.tolist()
        return [[names[c] for c in codes[a:b]] for a, b in zip(bounds, bounds[1:])]
