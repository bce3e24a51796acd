"""A one-shot job process keeps the memory it frees (``fastprep.native.heap``).

Each case runs in its own interpreter: the policy is process-wide and for good."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import REPO

#: allocate, touch and free a 64 MiB array, then the same again: the second one's page
#: faults (minor faults counted by the kernel), relative to the first one's
PROBE = """
import resource, sys
import numpy as np
from fastprep.native.heap import keep_freed_memory
kept = keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
counts = []
for _ in range(2):
    before = faults()
    block = np.ones(64 << 17)  # 64 MiB of float64, every page touched
    counts.append(faults() - before)
    del block
print(kept, counts[0], counts[1])
"""


def run_probe(**env: str) -> tuple[bool, int, int]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )  # fmt: skip
    kept, first, second = result.stdout.split()
    return kept == "True", int(first), int(second)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc policy")
def test_freed_large_arrays_are_reused_without_new_page_faults():
    kept, first, second = run_probe()
    assert kept
    assert first > 0
    assert second * 4 < first  # the freed pages served the second array


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc policy")
def test_the_policy_can_be_turned_off():
    kept, first, second = run_probe(FASTPREP_KEEP_FREED_MEMORY="0")
    assert not kept
    assert second * 4 >= first  # glibc unmapped the first array: its pages were faulted again
