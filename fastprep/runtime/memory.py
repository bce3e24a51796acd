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
