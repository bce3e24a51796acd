"""Run a pipeline on a ``dask.distributed`` cluster: distributed fit, sharded transform.

Needs the ``distributed`` extra (``pip install 'fastprep[distributed]'``).
"""

from fastprep.distributed.job import fit, partitions_for, transform
from fastprep.distributed.shards import Manifest, load_shards
from fastprep.distributed.tasks import RetryPolicy

__all__ = ["Manifest", "RetryPolicy", "fit", "load_shards", "partitions_for", "transform"]
