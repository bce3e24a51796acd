"""The memory-bandwidth roofline and the machine description.

The bound for a size is the time to read the input columns the pipeline uses once and to
write the output once, at this machine's measured copy bandwidth. Copying B bytes reads B
and writes B, so bandwidth = 2·B / t, and the bound is (input + output bytes) / bandwidth.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
import time
from importlib import metadata
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

LIBRARIES = ("numpy", "pandas", "pyarrow", "polars", "scikit-learn", "scipy", "numba", "fastprep")


def copy_bandwidth(megabytes: int = 512, repeats: int = 5) -> dict[str, Any]:
    """Median bytes/s (read + write) of ``np.copyto`` between two touched float64 buffers."""
    n = megabytes * 1024 * 1024 // 8
    source = np.ones(n, dtype=np.float64)
    target = np.empty_like(source)
    np.copyto(target, source)  # touch every page first: measure copying, not page faults
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        np.copyto(target, source)
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    return {
        "bytes_per_s": 2 * source.nbytes / median,
        "buffer_mib": megabytes,
        "seconds": times,
        "method": f"np.copyto of {megabytes} MiB float64 into a preallocated buffer, "
        f"median of {repeats}; bandwidth counts bytes read + written",
    }


def frame_bytes(frame: pd.DataFrame) -> int:
    """In-memory bytes of the input columns (deep: string buffers included)."""
    return int(frame.memory_usage(deep=True, index=False).sum())


def output_bytes(X: Any, y: Any) -> int:
    """Dense bytes, or CSR data + indices + indptr bytes, plus ``y``."""
    if sp.issparse(X):
        total = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    else:
        total = np.asarray(X).nbytes
    return int(total + (0 if y is None else np.asarray(y).nbytes))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_total() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """CPU, cores, memory, OS, Python and library versions, and the date."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "memory_gib": round(_memory_total() / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": {name: _version(name) for name in LIBRARIES},
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
