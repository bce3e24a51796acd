"""One uncompressed CSV file cut into byte ranges of whole lines, read one at a time.

A cut is made right after a line end that is not inside a quoted value (RFC 4180: a
value opens with ``"`` and a quote inside it is doubled). With no ``"`` in the file every
``\\n`` is a line end; otherwise the file is read in blocks (never whole) and a ``\\n`` is
a line end where the quotes before it are even in number. That count is exact only when
every quote opens a value (after a delimiter or a line start), closes one (before a
delimiter, a line end or the end of the file) or is one of a doubled pair: Arrow reads a
quote in the middle of an unquoted value as a plain character, which the count would take
for an opening one. A file holding such a quote is not cut (:func:`why_not_cut`).

A chunk is read as the file would be, with the file's header line in front
(:func:`fastprep.data.sources.read_csv_range`); the first chunk starts after the header,
whose bytes (a UTF-8 byte order mark too) are the same for every chunk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from fastprep.data.sources import csv_delimiter

#: bytes read at a time while looking for line ends outside quotes
BLOCK_BYTES = 1 << 22
_QUOTE, _LF, _CR = 0x22, 0x0A, 0x0D
_BOM = b"\xef\xbb\xbf"
#: compressed files are read through their codec: no byte of them starts a line
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".zst", ".xz", ".lz4", ".zip")


@dataclass(frozen=True)
class CsvCut:
    """Where a CSV file is cut: its header's bytes and each chunk's ``(start, stop)``."""

    header_bytes: int
    ranges: tuple[tuple[int, int], ...]


def is_compressed(path: str) -> bool:
    return path.lower().endswith(COMPRESSED_SUFFIXES)


def why_not_cut(path: str) -> str | None:
    """Why the CSV file ``path`` cannot be cut into chunks (it is then one partition),
    None when it can."""
    if is_compressed(path):
        return (
            f"{path!r} is compressed: a compressed CSV file is read whole, as one partition "
            "(no byte of it starts a line); write it as Parquet with row groups (or as "
            "uncompressed CSV) to read it in parts"
        )
    try:
        lines = _lines(path)
    except OSError:
        return None  # the read names the missing file
    if lines is None:
        return (
            f"{path!r} has a quote character inside an unquoted value: where its lines end "
            "cannot be told without reading it whole, so it is read as one partition; "
            "quote those values (RFC 4180) or write the file as Parquet"
        )
    return None


def cut_csv(path: str, parts: int) -> CsvCut | None:
    """``path`` cut into about ``parts`` chunks of equal bytes, each of whole lines;
    None when it cannot be cut (:func:`why_not_cut`) or is one chunk."""
    if parts < 2 or is_compressed(path):
        return None
    lines = _lines(path)
    if lines is None:
        return None
    size = lines.size
    ends = [lines.end_after(size * k // parts) for k in range(parts)]
    header = ends[0]  # the first line end of the file closes its header
    bounds = [header, *sorted({e for e in ends[1:] if header < e < size}), size]
    ranges = tuple((a, b) for a, b in zip(bounds, bounds[1:]) if b > a)
    return CsvCut(header, ranges) if len(ranges) > 1 else None


#: points per file at which the first line end after is kept (quoted files): a cut is at
#: most ``size / GRID_POINTS`` bytes from where it was asked
GRID_POINTS = 1 << 16


@dataclass(frozen=True)
class _Lines:
    """Where the lines of a file end: near any position, by reading a few bytes there (no
    quote in the file), or from a grid of positions kept from one scan (quotes)."""

    path: str
    size: int
    #: quoted files: the grid's spacing, and the end after each of its points
    step: int = 0
    ends: np.ndarray | None = None

    def end_after(self, at: int) -> int:
        """The position just after the first line end at or after ``at`` (the size: none)."""
        if self.ends is None:
            with open(self.path, "rb") as handle:
                return _next_line_end(handle, at, self.size)
        point = -(-at // self.step)
        return int(self.ends[point]) if point < len(self.ends) else self.size


#: the files scanned, by (size, modification time, path): planning (the pre-flight's
#: options, the run, explain) asks for cuts of the same file several times
_MEMO: dict[tuple, _Lines | None] = {}


def _lines(path: str) -> _Lines | None:
    """Where ``path``'s lines end (one read of the file), None when its quotes do not say
    it exactly."""
    stat = os.stat(path)
    key = (stat.st_size, stat.st_mtime_ns, os.path.abspath(path))
    if key not in _MEMO:
        if len(_MEMO) >= 8:
            del _MEMO[next(iter(_MEMO))]
        _MEMO[key] = _scan(path, stat.st_size)
    return _MEMO[key]


def _scan(path: str, size: int) -> _Lines | None:
    """The file's :class:`_Lines`: with no quote, nothing more to know; with quotes, the
    grid of line ends outside quoted values, from one read of the file in blocks; None
    when a quote is neither an opening, a closing nor a doubled one."""
    delimiter = ord(csv_delimiter(path))
    with open(path, "rb") as handle:
        first = handle.read(len(_BOM))
        start_at = len(_BOM) if first == _BOM else 0  # a line starts after the mark
        if not _has_quote(handle, first):
            return _Lines(path, size)
        step = max(1, -(-size // GRID_POINTS))
        points = np.arange(0, size, step, dtype=np.int64)
        ends = np.full(len(points), size, dtype=np.int64)
        done = 0  # the grid points before this one have their line end
        odd = False  # an odd number of quotes before the block: inside a quoted value
        buffer = bytearray(BLOCK_BYTES + 1)
        block_start, previous = 0, -1  # the byte before the block (-1: the file's start)
        handle.seek(0)
        while block_start < size:
            got = handle.readinto(memoryview(buffer)[: BLOCK_BYTES + 1])
            if not got:
                break
            data = np.frombuffer(buffer, np.uint8, got)
            core = data[: min(BLOCK_BYTES, got)]
            following = int(data[len(core)]) if got > len(core) else -1  # -1: the end
            quotes = np.flatnonzero(core == _QUOTE)
            if len(quotes) and not _quotes_valid(core, quotes, odd, previous, following,
                                                 delimiter, block_start, start_at):  # fmt: skip
                return None
            lines = np.flatnonzero(core == _LF)
            if len(quotes):  # line ends after an even count of quotes in all
                before = np.searchsorted(quotes, lines)
                lines = lines[((before & 1) == 1) == odd]
            block_end = block_start + len(core)
            if len(lines):
                lines = lines + block_start
                upto = int(np.searchsorted(points, block_end))
                at = np.searchsorted(lines, points[done:upto])
                found = int(np.count_nonzero(at < len(lines)))  # a prefix: points ascend
                ends[done : done + found] = lines[at[:found]] + 1
                done += found
            odd ^= bool(len(quotes) & 1)
            previous = int(core[-1])
            block_start = block_end
            handle.seek(block_start)  # the byte read past the block is read again
    return _Lines(path, size, step, ends)


def _next_line_end(handle: BinaryIO, at: int, size: int) -> int:
    """The position just after the first ``\\n`` at or after ``at`` (``size``: none)."""
    handle.seek(at)
    while block := handle.read(1 << 16):
        found = block.find(b"\n")
        if found >= 0:
            return at + found + 1
        at += len(block)
    return size


def _has_quote(handle: BinaryIO, first: bytes) -> bool:
    """Whether the file holds a ``"`` (read in blocks from the handle's position)."""
    if b'"' in first:
        return True
    while block := handle.read(BLOCK_BYTES):
        if b'"' in block:
            return True
    return False


def _quotes_valid(
    core: np.ndarray, quotes: np.ndarray, odd: bool, previous: int, following: int,
    delimiter: int, block_start: int, start_at: int,
) -> bool:  # fmt: skip
    """Whether every quote at ``quotes`` of the block ``core`` opens a value (after a
    delimiter, a line start or a closing quote), closes one (before a delimiter, a line
    end, the end of the file or an opening quote): then the count of quotes says exactly
    which line ends are inside a quoted value."""
    opening = (np.arange(len(quotes)) & 1) == (1 if odd else 0)
    last = len(core) - 1
    before = np.where(quotes > 0, core[np.maximum(quotes - 1, 0)].astype(np.int16), previous)
    after = np.where(quotes < last, core[np.minimum(quotes + 1, last)].astype(np.int16),
                     following)  # fmt: skip
    line_start = (quotes + block_start) == start_at
    opens_ok = (
        (before == delimiter) | (before == _LF) | (before == _CR) | (before == _QUOTE)
        | (before == -1) | line_start
    )  # fmt: skip
    closes_ok = (
        (after == delimiter) | (after == _LF) | (after == _CR) | (after == _QUOTE)
        | (after == -1)
    )  # fmt: skip
    return bool(np.all(np.where(opening, opens_ok, closes_ok)))
