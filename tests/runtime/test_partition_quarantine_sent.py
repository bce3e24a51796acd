"""A partition task's gathered output carries its rejected rows, not the partition it read:
a Dask worker sends the output back to the client, pickled."""

from __future__ import annotations

import pickle

from support import REPO

from fastprep.cli import load_pipeline_file
from fastprep.data.partitions import plan_partitions
from fastprep.runtime.partition_tasks import Job, transform_partition


def test_gathered_partition_output_holds_only_the_quarantined_rows() -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    source = REPO / "data_samples" / "flights.parquet"
    fitted = pipeline.fit(source)
    [spec] = plan_partitions(source)
    job = Job(pipeline.optimized, pipeline.schema)
    output = transform_partition(job, spec, fitted.params, "fingerprint", None)["output"]
    expected = fitted.transform(source).quarantine
    assert 0 < len(expected) < spec.n_rows / 20
    sent = len(pickle.dumps(output.quarantine_rows))
    read = len(pickle.dumps(output.quarantine))  # the rows as a frame: what must travel
    assert sent < 3 * read  # before: the whole partition's columns as read, 20x more
    assert output.quarantine.equals(expected)
