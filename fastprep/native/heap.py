"""A one-shot job process keeps the memory it frees, to reuse it for its next arrays.

Why: on the VMs fastprep is measured on (and many cloud hosts with free-page reporting),
pages a process gives back to the system are handed to the host within seconds, and the
first touch of fresh pages ran at 0.2-1 GiB/s instead of ~15 GiB/s into pages the process
still held. glibc's malloc serves every block above 32 MiB with its own ``mmap`` and
unmaps it when freed, so each of a job's large arrays (a validated column, a fused
kernel's output, the CSR arrays) paid those faults afresh even though arrays as large had
just been freed. The 3.4M-row flights job spent ~2.5 s of system time in page faults.

:func:`keep_freed_memory` makes glibc take large blocks from its heap too and never trim
it: a freed array's pages serve the next allocation instead. The heap only grows to the
job's peak, and the process's memory is freed at once when it exits, so this is for a
process that runs one job (the ``fastprep`` command), never for a library user's process
(a notebook would keep its peak for its whole life). Not glibc: nothing changes.
``FASTPREP_KEEP_FREED_MEMORY=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
#: the largest trim threshold (an int): free pages at the heap's top stay with the process
NEVER_TRIM = 2**31 - 1


def keep_freed_memory() -> bool:
    """Large blocks from glibc's heap, never trimmed; True when the policy was set."""
    if os.environ.get("FASTPREP_KEEP_FREED_MEMORY") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)  # the interpreter's own C library (no ldconfig lookup)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - glibc only (musl's mallopt does nothing)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    trim = mallopt(M_TRIM_THRESHOLD, NEVER_TRIM)
    return bool(mallopt(M_MMAP_MAX, 0) and trim)
