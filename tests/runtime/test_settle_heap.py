"""A process started the way a Dask nanny starts its workers (``MALLOC_TRIM_THRESHOLD_``
set) gets glibc's settled thresholds back: its partition tasks' arrays reuse freed heap
memory instead of faulting in fresh mappings."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHILD = """
import resource, numpy as np
from fastprep.runtime import memory
settled = memory.settle_heap()
again = memory.settle_heap()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    a = np.ones(500_000)  # 4 MB: above glibc's fixed 128 KiB mmap threshold
    del a
print(settled, again, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults)
"""


def _run(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_nanny_started_worker_reuses_freed_arrays() -> None:
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}
    settled, again, faults = _run(env)
    assert (settled, again) == ("True", "False")  # once per process
    plain = {k: v for k, v in env.items() if k != "MALLOC_TRIM_THRESHOLD_"}
    untouched, _, _ = _run(plain)
    assert untouched == "False"  # glibc's own defaults are left alone
    assert int(faults) < 50 * 977 // 4  # not a fresh 4 MB mapping (977 pages) per array
