"""Run a pipeline on a ``dask.distributed`` cluster: distributed fit, sharded transform.

Needs the ``distributed`` extra (``pip install 'fastprep[distributed]'``). The names below
load on first use: the per-partition functions (:mod:`fastprep.runtime.partition_tasks`,
:mod:`fastprep.runtime.levels`) also run in one process (:mod:`fastprep.runtime.streamed`),
which never imports Dask. A LocalCluster is started only by :mod:`.local`.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "fit": "fastprep.runtime.cluster.job",
    "fit_with_profile": "fastprep.runtime.cluster.job",
    "partitions_for": "fastprep.runtime.cluster.job",
    "transform": "fastprep.runtime.cluster.job",
    "Manifest": "fastprep.runtime.shards",
    "load_shards": "fastprep.runtime.shards",
    "RetryPolicy": "fastprep.runtime.partition_tasks",
    "warm_workers": "fastprep.runtime.cluster.warm",
    "start_local": "fastprep.runtime.cluster.local",
}

__all__ = [
    "Manifest",
    "RetryPolicy",
    "fit",
    "fit_with_profile",
    "load_shards",
    "partitions_for",
    "start_local",
    "transform",
    "warm_workers",
]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'fastprep.runtime.cluster' has no attribute {name!r}")
    value = getattr(importlib.import_module(_NAMES[name]), name)
    globals()[name] = value
    return value
