"""On a real cluster the median pass takes the values each worker kept from the pass
before instead of reading its partition again, and a worker that lost them (restarted,
evicted) reads the partition: the fitted state is the single machine's either way."""

from __future__ import annotations

from pathlib import Path

from test_cluster_runs import assert_same_params

from fastprep.cli import load_pipeline_file
from fastprep.runtime import kept_values

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000  # 4 partitions of the 8 row groups


def _note(fitted) -> str:
    return next(n for n in fitted.fit_report.notes if n.startswith("median/percentile pass"))


def test_median_pass_takes_kept_values(flights_row_groups, client) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert_same_params(single.params, dist.params)
    taken = int(_note(dist).split(":")[1].split()[0])
    assert taken >= 3  # of 4: Dask may move one task to an idle worker (it then reads)
    assert set(client.run(kept_values.held_bytes).values()) == {0}  # nothing left behind


def test_values_lost_between_passes_are_read_again(flights_row_groups, client) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups)

    def forget(stage: str, done: int, total: int) -> None:
        if stage == "fit level 0" and done == total:  # before the median pass is sent
            client.run(kept_values.clear)

    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS,
                        progress=forget)  # fmt: skip
    assert_same_params(single.params, dist.params)
    assert _note(dist).startswith("median/percentile pass: 0 of 4")
