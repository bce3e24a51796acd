"""Values a fit pass keeps in its (worker) process for the later passes over the same
partition.

The fit's passes after the first (a median's or percentiles' window pass, the next level
of fitted steps) compute their statistics from the same validated rows as the first: only
the parameters applied before each statistic differ. Re-reading and re-validating the
partition to get those rows again is most of such a pass's cost. So the first pass keeps
the input values of the chains the later passes need here, in the process that ran it,
under a key of the fit and the partition; the later passes' tasks (sent to that worker)
apply the learned steps to them: no read, no validation.

The store is a cache, never the only copy: a task that finds nothing (another worker ran
it, the worker was restarted, the values were evicted) reads its partition as before, so
a lost worker costs time, not correctness. It is bounded (:data:`KEPT_BYTES` per process,
least recently used entries evicted first), and the fit drops its entries when it ends.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

#: bytes of kept values one process holds at most (``FASTPREP_KEPT_BYTES`` overrides):
#: 8 bytes per row and order statistic, so 256 MiB is 32M values per worker
KEPT_BYTES = int(os.environ.get("FASTPREP_KEPT_BYTES", 256 * 2**20))

_STORE: OrderedDict[str, tuple[int, dict[str, Any]]] = OrderedDict()
_LOCK = threading.Lock()  # a worker with several threads runs several tasks at once


def nbytes(values: dict[Any, np.ndarray]) -> int:
    """Bytes of the arrays of ``values``."""
    return sum(int(v.nbytes) for v in values.values())


def keep(key: str, entry: dict[str, Any], size: int) -> bool:
    """Keep ``entry`` (``size`` bytes) under ``key``; False when it can never fit."""
    if size > KEPT_BYTES:
        return False
    with _LOCK:
        _STORE.pop(key, None)
        while _STORE and sum(s for s, _ in _STORE.values()) + size > KEPT_BYTES:
            _STORE.popitem(last=False)
        _STORE[key] = (size, entry)
    return True


def get(key: str) -> dict[str, Any] | None:
    """The entry kept under ``key`` (None: not here); it stays until dropped or evicted."""
    with _LOCK:
        found = _STORE.get(key)
        if found is not None:
            _STORE.move_to_end(key)  # in use: evicted last
    return None if found is None else found[1]


def drop(keys: list[str]) -> int:
    """Forget the entries of ``keys`` (those no later task took); how many were here."""
    with _LOCK:
        return sum(_STORE.pop(k, None) is not None for k in keys)


def held_bytes() -> int:
    with _LOCK:
        return sum(s for s, _ in _STORE.values())


def clear() -> int:
    """Forget everything kept in this process; how many entries there were."""
    with _LOCK:
        count = len(_STORE)
        _STORE.clear()
    return count
