"""Retained memory for large output arrays: chunks this process keeps mapped and reuses.

Why: on the VMs fastprep is benchmarked on (and on many cloud hosts with free-page
reporting), memory a process frees is handed back to the host after a second or two, and
the next first touch of fresh pages ran at ~0.3 GiB/s instead of ~15 GiB/s into memory
the process still held. A 3.4M-row CSR output is ~250 MB: allocated fresh it costs ~0.7 s
of page faults, more than the kernels that fill it. The arena keeps the chunks of dropped
outputs (up to a byte limit) and carves the next run's arrays from them.

A chunk is free again when no array viewing it is alive: every array handed out is a view
whose ``base`` is the chunk, so the chunk's reference count says whether a caller (a user
holding ``out.X``, a torch tensor over it) still uses it — the same guard as the batch
pool's. Free chunks beyond the limit are released, least recently used first.

``FASTPREP_ARENA_BYTES`` sets the limit on retained free memory (default: 2 GiB or a tenth
of the machine's memory, whichever is smaller; ``0`` turns the arena off).
"""

from __future__ import annotations

import math
import os
import sys
import threading
from typing import Any

import numpy as np

#: arrays smaller than this come from numpy directly (page faults are not what they cost)
MIN_BYTES = 4 << 20
#: chunk sizes are rounded up to a class (steps of 2**(1/4), ~19%) so similar sizes reuse
CLASS_STEPS_PER_DOUBLING = 4
#: a free chunk up to this many classes larger than asked may serve a request
CLASS_SLACK = 2
#: arrays start on a page boundary: an output array can then be written to its file
#: straight from its own memory (``O_DIRECT`` needs aligned buffers), without a copy
ALIGN = 4096


def _default_limit() -> int:
    configured = os.environ.get("FASTPREP_ARENA_BYTES")
    if configured is not None:
        try:
            return max(int(configured), 0)
        except ValueError:
            return 0
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 16 << 30
    return int(min(2 << 30, total // 10))


def _size_class(nbytes: int) -> int:
    return math.ceil(math.log2(max(nbytes, 1)) * CLASS_STEPS_PER_DOUBLING)


def _class_bytes(size_class: int) -> int:
    raw = math.ceil(2 ** (size_class / CLASS_STEPS_PER_DOUBLING))
    return (raw + 4095) // 4096 * 4096


class Arena:
    """Hands out views of retained byte chunks; see the module docstring."""

    def __init__(self, limit_bytes: int | None = None) -> None:
        self.limit_bytes = _default_limit() if limit_bytes is None else limit_bytes
        self._chunks: list[np.ndarray] = []  # least recently used first
        self._lock = threading.Lock()
        self.stats = {"reused": 0, "allocated": 0, "bypassed": 0, "released": 0}
        self._free_refs: int | None = None

    def empty(self, shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
        """Like ``np.empty`` (C order), from a retained chunk when one is free."""
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        nbytes = math.prod(shape) * dtype.itemsize
        if self.limit_bytes <= 0 or nbytes < MIN_BYTES:
            self.stats["bypassed"] += 1
            return np.empty(shape, dtype)
        with self._lock:
            chunk = self._take_free(nbytes)
            if chunk is None:
                self._release_free(keep_bytes=self.limit_bytes)
                # 8-byte elements: scipy copies an array whose base has more than twice
                # its elements (``_prune_array``), which a uint8 chunk would always have
                chunk = np.empty((_class_bytes(_size_class(nbytes)) + ALIGN) // 8, np.uint64)
                self.stats["allocated"] += 1
            else:
                self.stats["reused"] += 1
            self._chunks.append(chunk)
            start = -chunk.ctypes.data % ALIGN
            view = chunk.view(np.uint8)[start : start + nbytes].view(dtype).reshape(shape)
        return view

    def zeros(self, shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
        out = self.empty(shape, dtype)
        out.fill(0)
        return out

    def retained_bytes(self) -> int:
        with self._lock:
            return sum(c.nbytes for c in self._chunks)

    def free_bytes(self) -> int:
        with self._lock:
            return sum(self._chunks[i].nbytes for i in self._free_indices())

    def clear(self) -> None:
        """Drop every free chunk (chunks still viewed stay until their views go)."""
        with self._lock:
            self._release_free(keep_bytes=0)

    # ------------------------------------------------------------------ internals

    def _refs(self, index: int) -> int:
        return sys.getrefcount(self._chunks[index])

    def _free_indices(self) -> list[int]:
        if self._free_refs is None:
            self._free_refs = _calibrate()
        return [i for i in range(len(self._chunks)) if self._refs(i) <= self._free_refs]

    def _take_free(self, nbytes: int) -> np.ndarray | None:
        """The smallest free chunk holding ``nbytes`` and not much larger."""
        most = _class_bytes(_size_class(nbytes) + CLASS_SLACK) + ALIGN
        best = None
        for i in self._free_indices():
            size = self._chunks[i].nbytes
            if nbytes + ALIGN <= size <= most and (
                best is None or size < self._chunks[best].nbytes
            ):
                best = i
        if best is None:
            return None
        return self._chunks.pop(best)

    def _release_free(self, keep_bytes: int) -> None:
        free = self._free_indices()
        total = sum(self._chunks[i].nbytes for i in free)
        dropped = set()
        for i in free:  # least recently used first
            if total <= keep_bytes:
                break
            dropped.add(i)
            total -= self._chunks[i].nbytes
            self.stats["released"] += 1
        self._chunks = [c for i, c in enumerate(self._chunks) if i not in dropped]


def _calibrate() -> int:
    """The reference count of a chunk nothing else views, measured the way ``_refs`` counts
    (interpreters differ in how many references a call holds); checked against a viewed one."""
    probe = Arena(limit_bytes=0)
    probe._chunks = [np.empty(16, dtype=np.uint8)]
    free = probe._refs(0)
    view = probe._chunks[0][:8]
    busy = probe._refs(0)
    del view
    if busy <= free:  # cannot tell a used chunk from a free one: never reuse
        return -1
    return free


#: the process-wide arena the emit layer allocates outputs from
ARENA = Arena()
