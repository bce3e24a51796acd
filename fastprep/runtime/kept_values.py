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
- whole validated partitions, packed by :mod:`~fastprep.runtime.kept_rows` (22-30 bytes
  a row for the flights job, in one buffer), kept past the fit for its transform, which
  takes each one (once). In memory up to a fixed budget (:data:`PARTITION_BYTES` less the
  input values held: :func:`memory_budget`), so a worker's memory does not grow with the
  job; beyond it each partition's buffer goes to a spill file of its own in the worker's
  local directory (:mod:`~fastprep.storage.spill_files`, written on a background thread,
  up to :func:`spill_capacity` bytes), and the transform reads that back (one sequential
  read, no Parquet decode, no validation) instead of the partition; only the partitions
  beyond the disk cap too are read again. Room is made by evicting other fits'
  partitions (a fit never transformed), never the same fit's earlier ones: those are as
  useful as the one being kept; as the input values grow, the fit's partitions held in
  memory go to disk, least recently used first. A spill file is removed when its
  partition is taken, dropped or evicted, and at the latest with the worker's local
  directory (or this process's temporary one) when the worker closes.

Both are caches, never the only copy: a task that finds nothing (another worker ran it,
the worker was restarted, the entry was evicted, its spill file is missing, short or
changed) reads its partition as before, so a lost worker or file costs time, not
correctness.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fastprep.storage import spill_files

#: bytes of kept input values one process holds at most (``FASTPREP_KEPT_BYTES``
#: overrides): 8 bytes per row and order statistic, so 256 MiB is 32M values per worker
KEPT_BYTES = int(os.environ.get("FASTPREP_KEPT_BYTES", 256 * 2**20))
#: bytes of memory for whole validated partitions and kept input values together, per
#: process (``FASTPREP_KEPT_PARTITION_BYTES`` overrides; 0 keeps no partition): the
#: partitions beyond it go to spill files, so it decides a worker's peak, not how many
#: partitions the transform reads again. Why 64 MiB: about what a worker of a 2-worker job
#: holds at 3.4M rows (four packed 500,000-row partitions of 14.9 MB as counted by
#: :func:`size_of`, the entry's 13.5 MB buffer and its quarantined rows as read, and 13 MiB
#: of input values: 6-8 of the 8 partitions stay in memory), and the same at 10M rows.
#: Measured (2-worker LocalCluster, busy machine, ``bench_cluster.py`` 3.4M then 10M rows,
#: 2 runs each, twice): per-worker peak 540 -> 582 and 586 -> 612 MiB (1.08x, 1.04x),
#: against 521 -> 649 and 534 -> 662 MiB (1.25x, 1.24x) with 128 MiB and the partitions
#: beyond it read again; every partition transformed without a Parquet read at 10M (30 of
#: 30; was 18 of 30 at 128 MiB). A partition read back from its file costs its transform
#: task ~20 ms more than one in memory, ~100 ms less than reading and validating it
#: (``benchmarks/bench_kept_spill.py``). Before the packing (one buffer per entry) two fit
#: in 128 MiB, and three grew the peak 649 -> 738 MiB, the heap fragmenting around them.
PARTITION_BYTES = int(os.environ.get("FASTPREP_KEPT_PARTITION_BYTES", 64 * 2**20))
#: bytes of spill files one process holds (``FASTPREP_KEPT_SPILL_BYTES``; 0 spills none):
#: the partitions beyond :data:`PARTITION_BYTES` go there, so the transform reads one
#: file back instead of reading and validating the partition's rows again. Unset: the
#: smaller of :data:`DEFAULT_SPILL_BYTES` and half the free space of the spill folder
SPILL_BYTES = (
    int(os.environ["FASTPREP_KEPT_SPILL_BYTES"])
    if os.environ.get("FASTPREP_KEPT_SPILL_BYTES", "").strip()
    else None
)
DEFAULT_SPILL_BYTES = 8 * 2**30
#: spill writes queued on the writer thread at most; a fit task finding more writes its
#: own (the queued buffers are memory the cap no longer counts)
PENDING_WRITES = 2


class _Store:
    """Entries by key with their size, at most ``capacity()`` bytes in all (least
    recently used evicted first)."""

    def __init__(self, capacity: Callable[[], int]) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[str, tuple[int, dict[str, Any]]] = OrderedDict()
        self.lock = threading.Lock()  # a worker with several threads runs tasks at once

    def keep(self, key: str, entry: dict[str, Any], size: int) -> bool:
        capacity = self.capacity()
        if size > capacity:
            return False
        with self.lock:
            self.entries.pop(key, None)
            held = sum(s for s, _ in self.entries.values())
            for old in list(self.entries):  # least recently used first
                if held + size <= capacity:
                    break
                held -= self.entries.pop(old)[0]
            if held + size > capacity:
                return False
            self.entries[key] = (size, entry)
        return True

    def get(self, key: str, take: bool = False) -> dict[str, Any] | None:
        with self.lock:
            found = self.entries.pop(key, None) if take else self.entries.get(key)
            if found is not None and not take:
                self.entries.move_to_end(key)  # in use: evicted last
        return None if found is None else found[1]

    def drop(self, keys: list[str]) -> int:
        with self.lock:
            return sum(self.entries.pop(k, None) is not None for k in keys)

    def held(self) -> int:
        with self.lock:
            return sum(s for s, _ in self.entries.values())

    def clear(self) -> int:
        with self.lock:
            count = len(self.entries)
            self.entries.clear()
        return count


_INPUTS = _Store(lambda: KEPT_BYTES)


@runtime_checkable
class Spillable(Protocol):
    """What a kept partition is to be written to a spill file: one contiguous byte
    buffer (:attr:`buffer`), the rest small enough to stay in memory."""

    buffer: np.ndarray | None

    def without_buffer(self) -> Any: ...

    def with_buffer(self, buffer: np.ndarray) -> Any: ...


@dataclass
class _Spill:
    """Where a spilled entry's buffer is: its file, the token naming this entry in it."""

    field: str  # the entry's value that is Spillable
    path: Path
    token: bytes
    nbytes: int  # the file's bytes (counted against the disk cap)
    buffer_bytes: int
    written: bool = False
    gone: bool = False  # taken or dropped: the file is not wanted (the writer removes it)


@dataclass
class _Held:
    size: int  # bytes as kept in memory
    group: str
    entry: dict[str, Any]
    resident: int  # bytes of this process's memory it holds now
    spill: _Spill | None = None

    def settled(self) -> int:
        """Bytes of memory it holds once its file is written (what the budget counts: a
        buffer being written is on its way out)."""
        return max(self.size - self.spill.buffer_bytes, 0) if self.spill else self.resident


class _Partitions:
    """Whole partitions by key: in memory up to :func:`memory_budget`, then their buffers
    in spill files up to the disk cap (:func:`spill_capacity`). Room is made by evicting
    other fits' entries (least recently used first), never the same fit's: those beyond
    the memory budget go to disk instead, the least recently used first."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, _Held] = OrderedDict()
        self.lock = threading.Lock()
        self.pending = 0  # writes queued on the writer thread

    def keep(self, key: str, entry: dict[str, Any], size: int, group: str) -> bool:
        gone: list[_Held] = []
        writes: list[tuple[str, _Held]] = []
        try:
            with self.lock:
                gone += self._pop([key])
                budget = memory_budget()
                if size <= budget and self._room(size, group, gone, disk=False, capacity=budget):
                    self.entries[key] = _Held(size, group, entry, size)
                    kept = True
                else:
                    spill = self._new_spill(key, entry, group, gone)
                    kept = spill is not None
                    if spill is not None:
                        self.entries[key] = held = _Held(size, group, entry, size, spill)
                        writes.append((key, held))
                writes += self._demote(group, budget, gone)
                queued = [self._queue() for _ in writes]
        finally:
            _remove_files(gone)
        for (key, held), on_writer in zip(writes, queued):
            if on_writer:
                _writer().submit(self._write, key, held, queued=True)
            else:  # the writer is behind: this task writes (its memory is not queued)
                self._write(key, held, queued=False)
        return kept

    def _queue(self) -> bool:
        """Whether one more write goes to the writer thread (else the caller writes it)."""
        if self.pending >= PENDING_WRITES:
            return False
        self.pending += 1
        return True

    def _demote(self, group: str, budget: int, gone: list[_Held]) -> list[tuple[str, _Held]]:
        """Send the fit's partitions held in memory to disk, least recently used first,
        while the memory held is over ``budget`` (the kept input values grew since they
        were kept); the writes to make. Under the lock."""
        resident = sum(h.settled() for h in self.entries.values())
        writes = []
        for key, held in list(self.entries.items()):
            if resident <= budget:
                break
            if held.spill is not None or held.group != group:
                continue
            spill = self._new_spill(key, held.entry, group, gone)
            if spill is None:
                break
            held.spill = spill
            writes.append((key, held))
            resident -= spill.buffer_bytes  # leaves memory when written
        return writes

    def _new_spill(
        self, key: str, entry: dict[str, Any], group: str, gone: list[_Held]
    ) -> _Spill | None:
        """Where ``entry``'s buffer is to be written, when it has one and the disk cap has
        room for it (after evicting other fits' files); None: not spilled. Under the lock."""
        field = next((k for k, v in entry.items() if isinstance(v, Spillable)), None)
        buffer = None if field is None else entry[field].buffer
        if buffer is None or not buffer.flags.c_contiguous:
            return None
        folder = _spill_directory()
        nbytes = len(spill_files.header(key, bytes(16), buffer, 0)) + buffer.nbytes
        if folder is None or not self._room(nbytes, group, gone, disk=True, folder=folder):
            return None
        global _SERIAL
        _SERIAL += 1
        path = folder / f"{os.getpid()}-{_SERIAL}.kept"
        return _Spill(field, path, os.urandom(16), nbytes, int(buffer.nbytes))

    def _room(
        self, size: int, group: str, gone: list[_Held], disk: bool, folder: Path | None = None,
        capacity: int = 0,
    ) -> bool:  # fmt: skip
        """Whether ``size`` more bytes fit in memory (within ``capacity``) or on disk (in
        ``folder``), after evicting other fits' entries as needed (appended to ``gone``).
        Under the lock."""

        def used() -> int:
            if disk:
                return sum(h.spill.nbytes for h in self.entries.values() if h.spill)
            return sum(h.settled() for h in self.entries.values())

        held = used()
        if disk:
            capacity = spill_capacity(folder, held)
        for old in list(self.entries):  # least recently used first
            if held + size <= capacity:
                break
            if self.entries[old].group != group and (not disk or self.entries[old].spill):
                gone += self._pop([old])
                held = used()
        return held + size <= capacity

    def _write(self, key: str, held: _Held, queued: bool) -> None:
        """Write ``held``'s buffer to its file; then only the rest stays in memory."""
        spill = held.spill
        assert spill is not None
        try:
            if spill.gone:
                return
            rows = held.entry[spill.field]
            try:
                spill_files.write(spill.path, key, spill.token, rows.buffer)
            except OSError:  # a full disk: the transform reads the partition instead
                with self.lock:
                    if self.entries.get(key) is held:
                        del self.entries[key]
                return
            with self.lock:
                if not spill.gone:
                    held.entry = {**held.entry, spill.field: rows.without_buffer()}
                    held.resident = max(held.size - spill.buffer_bytes, 0)
                    spill.written = True
                    return
            spill_files.remove(spill.path)  # taken or dropped while it was written
        finally:
            if queued:
                with self.lock:
                    self.pending -= 1

    def get(self, key: str, take: bool = False) -> dict[str, Any] | None:
        with self.lock:
            held = self.entries.get(key)
            if held is None:
                return None
            if take:
                del self.entries[key]
                if held.spill is not None:
                    held.spill.gone = True
            else:
                self.entries.move_to_end(key)  # in use: evicted last
            entry, spill = held.entry, held.spill
        if spill is None or not spill.written:
            return entry  # in memory (a write under way is given up when taken)
        buffer = spill_files.read(spill.path, key, spill.token)
        if take:
            spill_files.remove(spill.path)
        if buffer is None:  # missing, short or changed: a miss (the partition is read)
            if not take:
                self.drop([key], only=held)
            return None
        return {**entry, spill.field: entry[spill.field].with_buffer(buffer)}

    def _pop(self, keys: list[str]) -> list[_Held]:
        """Remove ``keys``' entries (under the lock); those removed, their files to go."""
        out = []
        for key in keys:
            held = self.entries.pop(key, None)
            if held is not None:
                if held.spill is not None:
                    held.spill.gone = True
                out.append(held)
        return out

    def drop(self, keys: list[str], only: _Held | None = None) -> int:
        with self.lock:
            if only is not None and self.entries.get(keys[0]) is not only:
                return 0
            gone = self._pop(keys)
        _remove_files(gone)
        return len(gone)

    def held(self) -> int:
        with self.lock:
            return sum(h.resident for h in self.entries.values())

    def spilled(self) -> tuple[int, int]:
        with self.lock:
            written = [h.spill for h in self.entries.values() if h.spill and h.spill.written]
            return len(written), sum(s.nbytes for s in written)

    def clear(self) -> int:
        with self.lock:
            gone = self._pop(list(self.entries))
        _remove_files(gone)
        return len(gone)


def _remove_files(gone: list[_Held]) -> None:
    """Remove the written spill files of entries let go (one still being written is
    removed by its writer, which sees it gone)."""
    for held in gone:
        if held.spill is not None and held.spill.written:
            spill_files.remove(held.spill.path)


_PARTITIONS = _Partitions()
_SERIAL = 0
_WRITER: ThreadPoolExecutor | None = None
_WRITER_LOCK = threading.Lock()
_DIRECTORIES: dict[str, Path] = {}  # a worker's local directory -> this process's folder in it


def _writer() -> ThreadPoolExecutor:
    """The thread writing spill files (one: the writes are sequential I/O; made on first
    use, not inherited by a forked child)."""
    global _WRITER
    with _WRITER_LOCK:
        if _WRITER is None:
            _WRITER = ThreadPoolExecutor(1, thread_name_prefix="fastprep-spill")
        return _WRITER


def _forget_after_fork() -> None:
    global _WRITER, _WRITER_LOCK
    _WRITER, _WRITER_LOCK = None, threading.Lock()
    _PARTITIONS.lock = threading.Lock()
    _PARTITIONS.pending = 0
    _PARTITIONS.entries.clear()  # the parent's files are the parent's
    _DIRECTORIES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def flush() -> int:
    """Wait until the spill files queued so far are written; how many entries are in
    spill files (tests, benchmarks: ``client.run(kept_values.flush)``)."""
    with _WRITER_LOCK:
        writer = _WRITER
    if writer is not None:
        writer.submit(lambda: None).result()
    return _PARTITIONS.spilled()[0]


def spill_directories() -> list[str]:
    """The folders this process wrote spill files to (each made on first use: in the
    Dask worker's ``local_directory``, removed with it when the worker closes; else a
    temporary folder removed when the process exits)."""
    return [str(folder) for folder in _DIRECTORIES.values()]


def running_worker() -> Any:
    """The Dask worker running the current task, None outside one (a process that never
    imported distributed runs no worker: it is not imported for the question)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        return distributed.get_worker()
    except (ValueError, AttributeError):
        return None


def _local_directory() -> str | None:
    worker = running_worker()
    return None if worker is None else str(worker.local_directory)


def _spill_directory() -> Path | None:
    """This process's spill folder (see :func:`spill_directories`); None if it cannot be
    made (the partition is then read again by its transform)."""
    local = _local_directory()
    found = _DIRECTORIES.get(local or "")
    if found is not None:
        return found
    try:
        if local is not None:
            found = Path(local) / "fastprep-kept"
            found.mkdir(exist_ok=True)
        else:
            found = Path(tempfile.mkdtemp(prefix="fastprep-kept-"))
    except OSError:
        return None
    _DIRECTORIES[local or ""] = found
    return found


@atexit.register
def _remove_spill_directories() -> None:
    clear()
    for folder in _DIRECTORIES.values():
        shutil.rmtree(folder, ignore_errors=True)


def memory_budget() -> int:
    """Bytes of memory whole partitions may hold in this process: :data:`PARTITION_BYTES`
    less the kept input values (:data:`KEPT_BYTES`), so that what a worker keeps does not
    grow with the job: the input values grow with a worker's rows (8 bytes a row per
    chain, until the fit ends), and the partitions that no longer fit go to disk."""
    return PARTITION_BYTES - _INPUTS.held()


def placement(partition: float, count: int, inputs: float = 0.0) -> tuple[int, int]:
    """Of ``count`` partitions of ``partition`` bytes each kept by one worker that also
    keeps ``inputs`` bytes of input values, how many stay in memory and how many go to
    spill files (the others are read again by the transform), as :func:`keep_partition`
    places them: a prediction for ``explain`` and the cost model, made where no worker's
    folder is known (the disk cap: :data:`SPILL_BYTES`, else :data:`DEFAULT_SPILL_BYTES`)."""
    if PARTITION_BYTES <= 0 or count <= 0:
        return 0, 0
    size = max(partition, 1.0)
    memory = min(count, max(0, int((PARTITION_BYTES - inputs) // size)))
    disk_cap = DEFAULT_SPILL_BYTES if SPILL_BYTES is None else SPILL_BYTES
    return memory, min(count - memory, int(disk_cap // size))


def spill_capacity(folder: Path | None, held: int = 0) -> int:
    """Bytes of spill files this process may hold in ``folder`` (``held`` of them there
    now): :data:`SPILL_BYTES` when set, else the smaller of :data:`DEFAULT_SPILL_BYTES`
    and half of what is free there (with what is held)."""
    if SPILL_BYTES is not None:
        return SPILL_BYTES
    if folder is None:
        return 0
    try:
        stat = os.statvfs(folder)
    except OSError:
        return 0
    return min(DEFAULT_SPILL_BYTES, (held + stat.f_bavail * stat.f_frsize) // 2)


def nbytes(values: dict[Any, np.ndarray]) -> int:
    """Bytes of the arrays of ``values``."""
    return sum(int(v.nbytes) for v in values.values())


def keep(key: str, entry: dict[str, Any], size: int) -> bool:
    """Keep input values ``entry`` (``size`` bytes) under ``key``; False when it can
    never fit."""
    return _INPUTS.keep(key, entry, size)


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
    """Bytes of whole partitions held in this process's memory (of a spilled one, what
    is not in its file)."""
    return _PARTITIONS.held()


def set_caps(memory: int | None = None, disk: int | None = -1) -> tuple[int, int | None]:
    """Set this process's caps on whole partitions: ``memory`` bytes in memory, ``disk``
    bytes of spill files (None: the default, bounded by the free space; -1 leaves it);
    the caps before (``client.run(kept_values.set_caps, ...)`` sets a cluster's)."""
    global PARTITION_BYTES, SPILL_BYTES
    before = PARTITION_BYTES, SPILL_BYTES
    if memory is not None:
        PARTITION_BYTES = memory
    if disk is None or disk >= 0:
        SPILL_BYTES = disk
    return before


def spilled_partitions() -> tuple[int, int]:
    """How many whole partitions this process holds in spill files, and their bytes."""
    return _PARTITIONS.spilled()


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
