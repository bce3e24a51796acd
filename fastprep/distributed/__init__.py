"""Run a pipeline on a ``dask.distributed`` cluster: distributed fit, sharded transform.

Needs the ``distributed`` extra (``pip install 'fastprep[distributed]'``). The names below
load on first use: the per-partition functions (:mod:`.tasks`, :mod:`.levels`) also run
in one process (:mod:`fastprep.streamed`), which never imports Dask.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "fit": "fastprep.distributed.job",
    "partitions_for": "fastprep.distributed.job",
    "transform": "fastprep.distributed.job",
    "Manifest": "fastprep.distributed.shards",
    "load_shards": "fastprep.distributed.shards",
    "RetryPolicy": "fastprep.distributed.tasks",
}

__all__ = ["Manifest", "RetryPolicy", "fit", "load_shards", "partitions_for", "transform"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'fastprep.distributed' has no attribute {name!r}")
    value = getattr(importlib.import_module(_NAMES[name]), name)
    globals()[name] = value
    return value
