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
        identity = _identity(path)
    except OSError:
        return None  # the read names the missing file
    key = (identity, ())
    if key not in _MEMO:
        _MEMO[key] = _scan(path, [])
    if _MEMO[key] is None:
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
    identity = _identity(path)
    size = identity[0]
    targets = [0, *(size * k // parts for k in range(1, parts))]
    key = (identity, tuple(targets))
    if key not in _MEMO:
        _MEMO[key] = _scan(path, targets)
        if len(_MEMO) > 64:  # planning asks again for the same files, a few at a time
            del _MEMO[next(iter(_MEMO))]
    ends = _MEMO[key]
    if not ends or ends[0] >= size:  # bad quotes, or no line after the header
        return None
    header, cuts = ends[0], sorted({max(e, ends[0]) for e in ends[1:] if e < size})
    bounds = [header, *[c for c in cuts if c > header], size]
    ranges = tuple((a, b) for a, b in zip(bounds, bounds[1:]) if b > a)
    return CsvCut(header, ranges) if len(ranges) > 1 else None


#: scans by (size, modification time, path) and targets: planning (the pre-flight, the
#: run, explain) asks for the same cuts several times
_MEMO: dict[tuple, list[int] | None] = {}

#: whether a file (by its identity) holds a quote: the last file asked about
_QUOTED: dict[tuple, bool] = {}


def _identity(path: str) -> tuple[int, int, str]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns, os.path.abspath(path)


def _scan(path: str, targets: list[int]) -> list[int] | None:
    """For each of the ascending byte positions ``targets``, the position just after the
    first line end at or after it (the file's size when there is none); None when a quote
    of the file is neither an opening, a closing nor a doubled one."""
    delimiter = 0x09 if path.lower().endswith(".tsv") else 0x2C
    size = os.path.getsize(path)
    ends: list[int] = []
    pending = list(targets)
    with open(path, "rb") as handle:
        first = handle.read(len(_BOM))
        start_at = len(_BOM) if first == _BOM else 0  # a line starts after the mark
        identity = _identity(path)
        if identity not in _QUOTED:  # read once per file, whatever the parts asked
            _QUOTED.clear()
            _QUOTED[identity] = _has_quote(handle, first)
        quoted = _QUOTED[identity]
        if not quoted:  # every line end is one: look near each target only
            return [_next_line_end(handle, t, size) for t in targets]
        handle.seek(0)
        odd = False  # an odd number of quotes before the block: inside a quoted value
        buffer = bytearray(BLOCK_BYTES + 2)
        block_start = 0
        previous = -1  # the byte before the block (-1: the start of the file)
        while block_start < size and (pending or (quoted and not targets)):
            handle.seek(block_start)
            got = handle.readinto(memoryview(buffer)[: BLOCK_BYTES + 1])
            data = np.frombuffer(buffer, np.uint8, got)
            core = data[: min(BLOCK_BYTES, got)]
            following = int(data[len(core)]) if got > len(core) else -1  # -1: end of file
            quotes = np.flatnonzero(core == _QUOTE) if quoted else np.empty(0, np.int64)
            if len(quotes) and not _quotes_valid(core, quotes, odd, previous, following,
                                                 delimiter, block_start, start_at):  # fmt: skip
                return None
            if pending and pending[0] < block_start + len(core):
                lines = np.flatnonzero(core == _LF)
                if len(quotes):  # line ends after an even count of quotes in all
                    before = np.searchsorted(quotes, lines)
                    lines = lines[((before & 1) == 1) == odd]
                lines = lines + block_start
                while pending and pending[0] < block_start + len(core):
                    at = int(np.searchsorted(lines, pending[0]))
                    if at == len(lines):
                        break  # the next line end is in a later block
                    ends.append(int(lines[at]) + 1)
                    pending.pop(0)
            odd ^= bool(len(quotes) & 1)
            previous = int(core[-1]) if len(core) else previous
            block_start += len(core)
    return ends + [size] * len(pending)


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
    padded = np.concatenate(([previous], core.astype(np.int16), [following]))
    before = padded[quotes]  # padded[i] is the byte before core[i]
    after = padded[quotes + 2]
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
