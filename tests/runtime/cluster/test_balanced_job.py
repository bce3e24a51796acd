"""A cluster job plans its partitions for the cluster's worker threads: on the 2-worker
cluster of this folder's conftest, a source that packs into 7 partitions for one worker runs
8 tasks per pass (no worker idle through a last round), shown by ``explain``, with the same
X as one process; a transform runs its fit's partitions; and the job's bookkeeping (re-runs
counted from the scheduler's log) does not mistake a later job's run for a re-run."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import assert_same_matrix

from fastprep.cli import load_pipeline_file
from fastprep.data.partitions import plan_partitions

REPO = Path(__file__).resolve().parents[3]
ROWS = 3_000  # rows_per_partition: 7 partitions of 1,500-row groups for one worker


@pytest.fixture(scope="module")
def coarse(tmp_path_factory, _flights_sample_cached) -> Path:
    """The 20,000-row sample in 13 row groups of 1,500 rows and one of 500."""
    path = tmp_path_factory.mktemp("balanced") / "flights.parquet"
    table = pa.Table.from_pandas(_flights_sample_cached, preserve_index=False)
    pq.write_table(table, path, row_group_size=1_500)
    return path


def test_each_pass_runs_a_multiple_of_the_workers(coarse, client, tmp_path) -> None:
    assert len(plan_partitions(coarse, ROWS)) == 7
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    totals: dict[str, int] = {}
    record = lambda stage, done, total: totals.__setitem__(stage, total)  # noqa: E731
    fitted = pipeline.fit(coarse, client=client, rows_per_partition=ROWS, progress=record)
    out = fitted.transform(coarse, client=client, rows_per_partition=ROWS, progress=record)
    assert totals == {"fit level 0": 8, "fit level 0 median": 8, "transform": 8}
    single = pipeline.fit(coarse).transform(coarse)
    assert_same_matrix(single.X, out.X)
    assert (single.y == out.y).all() and (single.row_ids == out.row_ids).all()

    text = pipeline.explain(str(coarse), client=client, rows_per_partition=ROWS)
    assert "8 partition(s) of 20,000 rows (1,500-3,000 rows each" in text
    assert "4 per worker thread, balanced" in text


def test_a_transform_runs_its_fits_partitions_when_workers_join(coarse, cluster, client) -> None:
    """Partition i is the same rows in the fit and its transform (where the fit's worker
    kept it), even when a worker joined in between; the next fit plans for the three."""
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    totals: dict[str, int] = {}
    record = lambda stage, done, total: totals.__setitem__(stage, total)  # noqa: E731
    fitted = pipeline.fit(coarse, client=client, rows_per_partition=ROWS, progress=record)
    third = cluster.start_worker()
    try:
        cluster.wait_for_workers(3)
        out = fitted.transform(coarse, client=client, rows_per_partition=ROWS, progress=record)
        assert totals["transform"] == 8
        assert_same_matrix(pipeline.fit(coarse).transform(coarse).X, out.X)
        pipeline.fit(coarse, client=client, rows_per_partition=ROWS, progress=record)
        assert totals["fit level 0"] == 9  # a multiple of 3 workers
    finally:
        third.terminate()
        third.wait(10)
        cluster.ensure_two_workers()


def test_a_task_run_again_by_a_later_job_is_no_rerun(coarse, client) -> None:
    """The same transform twice: the second job submits the same task keys again (the
    first's results released); each ran once in its job, so neither says a task ran again
    after a lost worker (re-runs are counted from the key's latest submission)."""
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(coarse, client=client, rows_per_partition=ROWS)
    for _ in range(2):
        out = fitted.transform(coarse, client=client, rows_per_partition=ROWS)
        assert not [n for n in out.report.notes if "re-run" in n]
        del out
