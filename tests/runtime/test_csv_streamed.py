"""One CSV file over the memory budget streams in chunks, as a Parquet file of the same
rows streams by row groups: the bundled flights sample as one CSV file, under a budget
the in-memory run does not fit, is cut into several chunks at its line ends, and the
streamed run's output (and training batches over the chunks) is exactly the in-memory
run's. A compressed CSV file cannot be cut: the refusal names it and says what to do."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from support import REPO, assert_same_output, streaming_budget

from fastprep.errors import MemoryBudgetError

CSV = str(REPO / "data_samples" / "flights.csv")


@pytest.fixture(scope="module")
def reference():
    from fastprep.cli import load_pipeline_file

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    return pipeline, pipeline.fit_transform(CSV, memory_budget="100GB")


def test_one_csv_file_over_the_budget_streams_in_chunks(reference, tmp_path) -> None:
    pipeline, out = reference
    budget = streaming_budget(pipeline, CSV)
    opened = pipeline.fit_transform(CSV, memory_budget=budget, output_dir=tmp_path / "o")
    assert "streamed in this process" in opened.notes[-1]
    assert len(opened) >= 2  # shards: one per chunk
    assert_same_output(opened, out)
    text = pipeline.explain(CSV, memory_budget=budget)
    assert "→ streamed in this process" in text
    chunks = next(line for line in text.splitlines() if "CSV chunk(s)" in line)
    assert "of 1 file(s), cut at line ends" in chunks and "rows each (estimated)" in chunks


def test_a_compressed_csv_file_is_one_partition_and_the_refusal_says_why(
    reference, tmp_path
) -> None:
    pipeline, _ = reference
    packed = tmp_path / "flights.csv.gz"
    packed.write_bytes(gzip.compress(Path(CSV).read_bytes()))
    with pytest.raises(MemoryBudgetError) as refused:
        pipeline.fit_transform(str(packed), memory_budget="150MB", output_dir=tmp_path / "no")
    message = str(refused.value)
    assert "flights.csv.gz' is compressed" in message and "Parquet" in message
    text = pipeline.explain(str(packed), memory_budget="150MB")
    assert "read whole: " in text and "flights.csv.gz" in text


def test_batches_over_chunks_are_the_rows_of_the_transform(reference) -> None:
    import numpy as np
    import scipy.sparse as sp

    from fastprep.data.partitions import plan_partitions

    pipeline, _ = reference
    assert len(plan_partitions(CSV, 3_000)) >= 6
    fitted = pipeline.fit(CSV)
    out = fitted.transform(CSV)
    batches = list(fitted.batches(CSV, batch_size=1_000, rows_per_partition=3_000,
                                  shuffle=True, seed=1, return_row_ids=True))  # fmt: skip
    ids = np.concatenate([b[2] for b in batches])
    assert np.array_equal(np.sort(ids), out.row_ids)
    X = sp.vstack([b[0] for b in batches], format="csr")
    order = np.argsort(ids)
    assert (X[order] != out.X[np.searchsorted(out.row_ids, ids[order])]).nnz == 0
