"""What a fit's first pass keeps in its (worker) process for the later tasks over the same
partition: the input values of the chains the fit's later passes need, and the whole
validated partition for the transform.

The fit's passes after the first (a median's or percentiles' window pass, the next level
of fitted steps) compute their statistics from the same validated rows as the first: only
the parameters applied before each statistic differ. The transform, too, starts from those
rows. Re-reading and re-validating the partition to get them again is most of such a task's
cost. So the first pass keeps them here, in the process that ran it, under a key of the fit
and the partition; the later tasks (sent to that worker) take them: no read, no validation.

Two stores, each bounded per process:

- input values (:data:`KEPT_BYTES`, 8 bytes a row per chain; least recently used entries
  evicted first), dropped when the fit ends;
- whole validated partitions (:data:`PARTITION_BYTES`), packed by
  :mod:`~fastprep.runtime.kept_rows` (22-30 bytes a row for the flights job), kept past
  the fit for its transform, which takes each one (once). A fixed cap, so a
  worker's memory does not grow with the job: the partitions beyond it are read again by
  the transform. Room is made by evicting other fits' partitions (a fit never transformed),
  never the same fit's earlier ones: those are as useful as the one being kept.

Both are caches, never the only copy: a task that finds nothing (another worker ran it,
the worker was restarted, the entry was evicted) reads its partition as before, so a lost
worker costs time, not correctness.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

#: bytes of kept input values one process holds at most (``FASTPREP_KEPT_BYTES``
#: overrides): 8 bytes per row and order statistic, so 256 MiB is 32M values per worker
KEPT_BYTES = int(os.environ.get("FASTPREP_KEPT_BYTES", 256 * 2**20))
#: bytes of whole validated partitions one process keeps for the transform
#: (``FASTPREP_KEPT_PARTITION_BYTES`` overrides; 0 keeps none). Why 128 MiB: 8-9 packed
#: 500,000-row partitions of the 3.4M-row flights file (14.9 MB each as counted by
#: :func:`size_of`, which is what the entry's mmap and its quarantined rows hold; 58.5 MB
#: unpacked), so a 2-worker job at 3.4M rows keeps all its partitions (8 of 8 transformed
#: from kept rows, was 4) and its per-worker peak went down (2-worker LocalCluster, busy
#: machine, 3 jobs each, alternated: 501-541 MiB against 516-619 before the packing).
#: From 3.4M to 10M rows the peak stays flat: 604-659 -> 681-692 MiB with partitions of
#: 20.7 MB (18 of 30 kept at 10M), measured before the target-only column and the
#: selection were packed too. Before the packing two fit (586 -> 631 MiB; three: 649 ->
#: 738, the heap fragmenting around the kept buffers: an entry now has memory of its own)
PARTITION_BYTES = int(os.environ.get("FASTPREP_KEPT_PARTITION_BYTES", 128 * 2**20))


class _Store:
    """Entries by key with their size, at most ``capacity()`` bytes in all."""

    def __init__(self, capacity: Callable[[], int], evict_own: bool) -> None:
        self.capacity = capacity
        self.evict_own = evict_own
        self.entries: OrderedDict[str, tuple[int, str, dict[str, Any]]] = OrderedDict()
        self.lock = threading.Lock()  # a worker with several threads runs tasks at once

    def keep(self, key: str, entry: dict[str, Any], size: int, group: str) -> bool:
        capacity = self.capacity()
        if size > capacity:
            return False
        with self.lock:
            self.entries.pop(key, None)
            held = sum(s for s, _, _ in self.entries.values())
            for old in list(self.entries):  # least recently used first
                if held + size <= capacity:
                    break
                if self.evict_own or self.entries[old][1] != group:
                    held -= self.entries.pop(old)[0]
            if held + size > capacity:
                return False
            self.entries[key] = (size, group, entry)
        return True

    def get(self, key: str, take: bool = False) -> dict[str, Any] | None:
        with self.lock:
            found = self.entries.pop(key, None) if take else self.entries.get(key)
            if found is not None and not take:
                self.entries.move_to_end(key)  # in use: evicted last
        return None if found is None else found[2]

    def drop(self, keys: list[str]) -> int:
        with self.lock:
            return sum(self.entries.pop(k, None) is not None for k in keys)

    def held(self) -> int:
        with self.lock:
            return sum(s for s, _, _ in self.entries.values())

    def clear(self) -> int:
        with self.lock:
            count = len(self.entries)
            self.entries.clear()
        return count


_INPUTS = _Store(lambda: KEPT_BYTES, evict_own=True)
_PARTITIONS = _Store(lambda: PARTITION_BYTES, evict_own=False)


def nbytes(values: dict[Any, np.ndarray]) -> int:
    """Bytes of the arrays of ``values``."""
    return sum(int(v.nbytes) for v in values.values())


def keep(key: str, entry: dict[str, Any], size: int) -> bool:
    """Keep input values ``entry`` (``size`` bytes) under ``key``; False when it can
    never fit."""
    return _INPUTS.keep(key, entry, size, "")


def get(key: str) -> dict[str, Any] | None:
    """The input values kept under ``key`` (None: not here); they stay until dropped or
    evicted."""
    return _INPUTS.get(key)


def drop(keys: list[str]) -> int:
    """Forget the input values of ``keys`` (those no later task took); how many were here."""
    return _INPUTS.drop(keys)


def held_bytes() -> int:
    """Bytes of input values held in this process."""
    return _INPUTS.held()


def keep_partition(key: str, entry: dict[str, Any], size: int, group: str) -> bool:
    """Keep a whole validated partition (``size`` bytes) under ``key`` for fit ``group``;
    False when there is no room (the transform then reads the partition)."""
    return _PARTITIONS.keep(key, entry, size, group)


def peek_partition(key: str) -> dict[str, Any] | None:
    """The partition kept under ``key``, left in place (a later fit pass reads it)."""
    return _PARTITIONS.get(key)


def take_partition(key: str) -> dict[str, Any] | None:
    """The partition kept under ``key``, removed: its one transform may change it."""
    return _PARTITIONS.get(key, take=True)


def drop_partitions(keys: list[str]) -> int:
    """Forget the partitions of ``keys`` (those no transform took); how many were here."""
    return _PARTITIONS.drop(keys)


def partition_bytes() -> int:
    """Bytes of whole partitions held in this process."""
    return _PARTITIONS.held()


def clear() -> int:
    """Forget everything kept in this process; how many entries there were."""
    return _INPUTS.clear() + _PARTITIONS.clear()


def size_of(value: Any) -> int:
    """Bytes of the arrays reachable from ``value`` (numpy arrays, Arrow tables and
    arrays, through dicts, lists and objects' attributes), each buffer once: a numpy view
    counts its owning array once; an array over an Arrow buffer counts unless that buffer
    belongs to an Arrow table or array reached earlier (list those first: the numeric
    columns validated from a table as read are views of its buffers, the text columns'
    codes are not)."""
    return _Sizer().size(value)


class _Sizer:
    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.spans: list[tuple[int, int]] = []  # Arrow buffers counted: (address, end)

    def size(self, value: Any) -> int:
        if id(value) in self.seen or value is None or isinstance(value, (str, bytes, int, float)):
            return 0
        self.seen.add(id(value))
        if isinstance(value, np.ndarray):
            return self._array(value)
        if type(value).__module__.startswith("pyarrow"):
            return self._arrow(value)
        if isinstance(value, dict):
            return sum(self.size(v) for v in value.values())
        if isinstance(value, (list, tuple)):
            return sum(self.size(v) for v in value)
        fields = getattr(value, "__dict__", None)
        if fields is None:
            slots = getattr(type(value), "__slots__", ())
            fields = {s: getattr(value, s, None) for s in slots}
        return sum(self.size(v) for v in fields.values())

    def _array(self, value: np.ndarray) -> int:
        owner = value
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        if owner is not value and id(owner) in self.seen:
            return 0
        self.seen.add(id(owner))
        if owner.base is None:
            return int(owner.nbytes)
        address = owner.__array_interface__["data"][0]
        if any(lo <= address < hi for lo, hi in self.spans):
            return 0  # a view of a counted Arrow buffer
        self.spans.append((address, address + int(owner.nbytes)))
        return int(owner.nbytes)

    def _arrow(self, value: Any) -> int:
        chunks = getattr(value, "columns", None) or [value]
        for column in chunks:
            for chunk in getattr(column, "chunks", [column]):
                for buffer in chunk.buffers() if hasattr(chunk, "buffers") else ():
                    if buffer is not None:
                        self.spans.append((buffer.address, buffer.address + buffer.size))
        nbytes = getattr(value, "nbytes", 0)
        return nbytes if isinstance(nbytes, int) else 0
