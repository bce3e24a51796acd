"""``explain`` for a cluster source: the Dask job's partitions, its passes (the same stages
the job runs, with what each collects) and the predicted time per pass from the planner's
cost model, on the real 2-worker cluster of this folder's conftest."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastprep.cli import load_pipeline_file, main
from fastprep.errors import PipelineDefinitionError
from fastprep.planning import planner

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pipeline():
    return load_pipeline_file(REPO / "pipelines" / "flights.py")


@pytest.fixture(scope="module")
def parts(tmp_path_factory, _flights_sample_cached) -> Path:
    """The 20,000-row sample split into 4 Parquet files of 5,000 rows."""
    folder = tmp_path_factory.mktemp("parts")
    table = pa.Table.from_pandas(_flights_sample_cached, preserve_index=False)
    for i in range(4):
        pq.write_table(table.slice(i * 5_000, 5_000), folder / f"part-{i}.parquet")
    return folder


def _job(text: str) -> list[str]:
    start = next(i for i, line in enumerate(text.splitlines()) if line.startswith("Dask job"))
    return text.splitlines()[start:]


def test_cluster_explain_lists_the_passes_the_job_runs(pipeline, parts, client) -> None:
    source = str(parts / "*.parquet")
    job = _job(pipeline.explain(source, client=client))
    assert (
        "2 worker thread(s): 4 partition(s) of 20,000 rows (5,000 rows each; "
        "rows_per_partition=1,000,000 the upper bound; 2 per worker thread, balanced)"
    ) in job[0]
    # the partitions, each with its file and rows
    assert job[1].startswith("│  partition 0 (") and job[1].endswith(
        "part-0.parquet, row group 0): 5,000 rows"
    )
    assert [line.split(" (")[0] for line in job[1:5]] == [f"│  partition {i}" for i in range(4)]
    passes = [line[3:].split(":")[0] for line in job[1:] if line.startswith("├─ ")]

    stages: list[str] = []
    record = lambda stage, done, total: stages.append(stage) if stage not in stages else None  # noqa: E731
    fitted = pipeline.fit(source, client=client, progress=record)
    fitted.transform(source, client=client, progress=record)
    assert passes == stages == ["fit level 0", "fit level 0 median", "transform"]
    # what each pass collects, per fitted step and input
    text = "\n".join(job)
    assert "FillMissing('median') on 'speed': median summary" in text
    assert "OneHot() on 'carrier': distinct values with counts" in text
    assert "counts below and values inside the median's window" in text
    # the prediction is the planner's cost model, once per pass
    profile = planner.load_profile()
    one = planner.dask_pass_seconds(profile, 20_000, 4, 2)
    first = next(line for line in job if line.startswith("├─ fit level 0:"))
    assert first.endswith(f"predicted {one:.2f} s")
    # one reading pass, the median's pass from the values the workers kept (a task per
    # worker, no rows) and the transform from the partitions the fit kept
    light = planner.dask_light_pass_seconds(profile, 4, 2, 20_000)
    assert next(line for line in job if line.startswith("├─ fit level 0 median:")).endswith(
        f"predicted {light:.2f} s"
    )
    transform = next(line for line in job if line.startswith("├─ transform:"))
    assert "from the partitions the fit kept on the workers" in transform
    assert transform.endswith(
        f"predicted {planner.dask_transform_seconds(profile, 20_000, 4, 2, 1.0):.2f} s"
    )
    total = planner.dask_job_seconds(profile, 20_000, 4, 2, 1, light=1, kept=1.0)
    assert job[-1].startswith(
        f"└─ predicted {total:.2f} s (±{profile.dask_fit_error:.0%} on the fitted runs) on a "
        "running cluster"
    )


def test_job_is_shown_only_where_it_runs(pipeline, parts) -> None:
    # no cluster named and the data fit in memory: the run is one process, so explain shows
    # the pre-flight and the backends, no Dask job, however many partitions the files make
    text = pipeline.explain(str(parts / "*.parquet"))
    assert "Dask job" not in text
    assert "pre-flight:" in text and "backends for" in text
    # a local cluster named: the job as it would run there, without reading the data here
    job = _job(pipeline.explain(str(parts / "*.parquet"), scheduler="local"))
    assert job[0].startswith("Dask job on a LocalCluster started for the run")
    assert "to start the LocalCluster" in job[-1]


def test_rows_per_partition_and_analyze(pipeline, parts, flights_row_groups, client) -> None:
    job = _job(pipeline.explain(str(parts), client=client, rows_per_partition=2_000))
    assert "4 partition(s)" in job[0]  # a partition never splits a row group
    # many partitions (8 row groups): the first two, then the last
    job = _job(pipeline.explain(flights_row_groups, client=client, rows_per_partition=1))
    assert "8 partition(s)" in job[0]
    # partitions of a row group larger than the bound: the bound is not said to hold
    assert "the upper bound" not in job[0]
    assert ("rows_per_partition=1, below the 2,500 rows of a row group: a partition is at "
            "least one whole row group") in job[0]  # fmt: skip
    assert job[3] == "│  …" and job[4].startswith("│  partition 7 (")
    with pytest.raises(PipelineDefinitionError, match="analyze"):
        pipeline.explain(str(parts), client=client, analyze=True)


def test_cli_explain_with_scheduler(parts, cluster, capsys) -> None:
    code = main(["explain", str(REPO / "pipelines" / "flights.py"), "--input",
                 str(parts / "*.parquet"), "--scheduler", cluster.address])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert f"Dask job on the cluster at {cluster.address}, 2 worker thread(s)" in out
    assert "pre-flight" not in out  # the workers read the source, not this process
