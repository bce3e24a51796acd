"""Give back the memory fastprep keeps between runs, on request.

Why it keeps any: on the VMs fastprep is measured on, memory a process frees is handed
back to the host within seconds and touching it again is ~50x slower, so large per-run
arrays come from a retained arena (:mod:`fastprep.native.arena`) and row ids are views of
one cached range. A
long-lived process that is done with fastprep (a notebook after a big job), or a
benchmark measuring one run's working memory, calls :func:`release_memory` to drop them
all and return the C heap's free pages to the system.
"""

from __future__ import annotations

import os
import sys

from fastprep.data import columns
from fastprep.native.arena import ARENA


def release_memory() -> dict[str, int]:
    """Drop fastprep's retained buffers; returns the bytes dropped per kind (and whether
    the C heap gave pages back). Arrays a
    caller still holds (``out.X``, ``out.row_ids``) are not touched: only what nothing
    else uses is released, so the next run is as correct, only slower to start."""
    released = {"arena": ARENA.free_bytes()}
    ARENA.clear()
    released["row_ids"] = columns.release_row_range()
    released["heap_trimmed"] = int(_malloc_trim())
    return released


def _malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: freed heap pages back to the system (False elsewhere)."""
    import ctypes  # here: ctypes.util imports subprocess, shutil, tempfile (~8 ms)
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(name).malloc_trim(0))
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return False


#: glibc's ``mallopt`` parameters, and the values its dynamic thresholds settle on for a
#: process that frees large blocks (mmap up to 32 MiB, trim at twice that)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD, _TRIM_THRESHOLD = 32 << 20, 64 << 20
_SETTLED: list[bool] = []


def settle_heap() -> bool:
    """In a process started with ``MALLOC_TRIM_THRESHOLD_`` set (a Dask nanny starts its
    workers so, to hand freed memory back at once), give glibc the thresholds its
    defaults would have settled on; once per process, True if set.

    Why: that variable also turns off glibc's dynamic mmap threshold, so every array
    above 128 KiB is a fresh mapping whose pages fault in on first touch, and is unmapped
    when freed. A worker's partition task (500,000 rows of flights: a fit pass and a
    transform) took ~35,000 minor faults that way against ~8,000 in a plain process and
    ~2,500 with these thresholds; CPU 0.23 -> 0.18 s per task. Freed blocks below 32 MiB
    then stay in the heap for the next task (its peak, not beyond)."""
    if _SETTLED or "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        return False
    _SETTLED.append(True)
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
        )
    except (OSError, AttributeError):  # not glibc
        return False
