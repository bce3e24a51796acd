"""Feature names, one per column of X, without building a string per hashed column.

A hashed block of 2**18 columns would otherwise cost ~0.1 s of string formatting on every
transform; its names (``hash:tailnum,dest[12345]``) are produced only when asked for.
``FeatureNames`` behaves like a read-only list of ``str`` and compares equal to one.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import Any, overload


def _position(index: int, length: int) -> int:
    """A list's index rules: negative counts from the end; out of range is IndexError."""
    position = index + length if index < 0 else index
    if not 0 <= position < length:
        raise IndexError(index)
    return position


class HashedNames(Sequence[str]):
    """``prefix[0]`` ... ``prefix[width - 1]``, generated on demand."""

    def __init__(self, prefix: str, width: int) -> None:
        self.prefix, self.width = prefix, width

    def __len__(self) -> int:
        return self.width

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.width))]
        return f"{self.prefix}[{_position(index, self.width)}]"


class FeatureNames(Sequence[str]):
    """The names of X's columns: concatenated parts (lists, or lazily generated runs)."""

    def __init__(self, parts: list[Sequence[str]]) -> None:
        self._parts = [p for p in parts if len(p)]
        self._starts = []
        total = 0
        for part in self._parts:
            self._starts.append(total)
            total += len(part)
        self._length = total

    def __len__(self) -> int:
        return self._length

    @property
    def parts(self) -> list[Sequence[str]]:
        """The runs of names (lists, and :class:`HashedNames` blocks) in column order."""
        return list(self._parts)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        index = _position(index, self._length)
        part = bisect_right(self._starts, index) - 1
        return self._parts[part][index - self._starts[part]]

    def __iter__(self) -> Iterator[str]:
        for part in self._parts:
            yield from part

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __hash__(self) -> int:  # a list is unhashable; so is this
        raise TypeError("FeatureNames is unhashable")

    def __repr__(self) -> str:
        head = ", ".join(repr(n) for n in self[:5])
        more = f", ... ({self._length:,} names)" if self._length > 5 else ""
        return f"FeatureNames([{head}{more}])"

    def to_list(self) -> list[str]:
        return list(self)
