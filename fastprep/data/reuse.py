"""Work done on a source's Arrow columns, kept for as long as the source object lives, so
that the same column read again gets the same result without the same work.

Why: ``fit(table)`` then ``transform(table)`` (or any two jobs on one in-memory table)
validated the table twice, and dictionary-encoding a 3.4M-row text column is ~20-45 ms of
each pass: half of a GroupStats job's time was spent encoding strings twice.

Safety — a result is never stale:

- an entry is keyed on the exact Arrow buffers the result was computed from (address and
  size of every buffer of every chunk, the chunks' offsets and lengths) plus what was
  computed (``what``);
- the entry holds those buffers (strong references), so their memory cannot be freed
  and reused for other data while the entry exists: equal addresses mean the same bytes
  (Arrow buffers are immutable; a pandas column set anew gets new buffers);
- entries belong to an *owner* (the caller's source object: a pyarrow Table, a pandas or
  Polars DataFrame) and are dropped when it is garbage-collected, so nothing outlives the
  data the user holds. Outside a :func:`scope` nothing is kept.

Results handed out are read-only arrays: a consumer that would modify them in place fails
loudly instead of corrupting a later job's input.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import pyarrow as pa

#: entries per owner at most (an owner's columns; a DataFrame whose columns are replaced
#: again and again drops its oldest entries)
MAX_ENTRIES = 64

T = TypeVar("T")

_Entries = OrderedDict  # key -> (buffers held, result)
_OWNERS: dict[int, _Entries] = {}
_LOCK = threading.Lock()
_SCOPE: ContextVar[_Entries | None] = ContextVar("fastprep_reuse_scope", default=None)


@contextmanager
def scope(owner: Any) -> Iterator[None]:
    """Within this block, :func:`reuse` keeps its results for ``owner``'s lifetime (an
    owner that cannot be weakly referenced, e.g. a path, keeps nothing)."""
    entries = _entries_of(owner)
    token = _SCOPE.set(entries)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _entries_of(owner: Any) -> _Entries | None:
    if owner is None or isinstance(owner, (str, bytes)):
        return None
    key = id(owner)
    with _LOCK:
        entries = _OWNERS.get(key)
        if entries is not None:
            return entries
        try:
            weakref.finalize(owner, _drop, key)
        except TypeError:  # not weakly referenceable: its lifetime cannot bound the entries
            return None
        entries = _OWNERS[key] = OrderedDict()
        return entries


def _drop(key: int) -> None:
    with _LOCK:
        _OWNERS.pop(key, None)


def active() -> bool:
    """Whether results are being kept (inside a :func:`scope` with a usable owner)."""
    return _SCOPE.get() is not None


def reuse(column: pa.ChunkedArray | pa.Array, what: tuple, compute: Callable[[], T]) -> T:
    """``compute()``, or the result it gave for these very buffers earlier in the scope's
    owner's life. ``what`` names the computation and its parameters."""
    entries = _SCOPE.get()
    if entries is None:
        return compute()
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    buffers: list[pa.Buffer] = []
    layout: list[tuple] = []
    for chunk in chunks:
        parts = [chunk, chunk.dictionary] if pa.types.is_dictionary(chunk.type) else [chunk]
        for part in parts:
            layout.append((str(part.type), part.offset, len(part), part.null_count))
            for buffer in part.buffers():
                if buffer is None:
                    layout.append((0, 0))
                else:
                    buffers.append(buffer)
                    layout.append((buffer.address, buffer.size))
    key = (what, tuple(layout))
    try:
        hash(key)
    except TypeError:  # parameters that cannot key a dict: computed every time
        return compute()
    with _LOCK:
        found = entries.get(key)
        if found is not None:
            entries.move_to_end(key)
            return found[1]
    result = compute()
    with _LOCK:
        entries[key] = (buffers, result)
        while len(entries) > MAX_ENTRIES:
            entries.popitem(last=False)
    return result


def clear() -> None:
    """Forget every kept result (tests; a memory-pressed caller)."""
    with _LOCK:
        for entries in _OWNERS.values():
            entries.clear()
