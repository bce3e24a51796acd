"""On a real cluster the fit's passes after the first take the values each worker kept from
the first read instead of reading their partition again, and a worker that lost them
(restarted, evicted) reads the partition: the fitted state is the single machine's
either way."""

from __future__ import annotations

from pathlib import Path

from test_cluster_runs import assert_same_params
from test_transform_kept import eventually

import fastprep as fp
from fastprep.cli import load_pipeline_file
from fastprep.runtime import kept_values

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000  # 4 partitions of the 8 row groups


def _taken(fitted) -> tuple[int, int]:
    note = next(n for n in fitted.fit_report.notes if n.startswith("passes after the first"))
    words = note.split(":")[1].split()
    return int(words[0]), int(words[2])


def test_median_pass_takes_kept_values(flights_row_groups, client) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert_same_params(single.params, dist.params)
    taken, tasks = _taken(dist)
    assert tasks == 4 and taken >= 3  # Dask may move one to an idle worker (it then reads)
    # dropped at the end
    assert eventually(lambda: set(client.run(kept_values.held_bytes).values()) == {0})


def test_later_levels_take_kept_values(flights_row_groups, client) -> None:
    """Two levels of fitted steps (a median fill, Log1p, Standardize) and a text encoder:
    the median pass and level 1 both from the kept input values."""
    schema = load_pipeline_file(REPO / "pipelines" / "flights.py").schema
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.col("air_time") >> fp.FillMissing("median") >> fp.Log1p() >> fp.Standardize(),
            fp.cols("origin", "carrier") >> fp.OneHot(),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )
    single = pipeline.fit(flights_row_groups)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert_same_params(single.params, dist.params)
    taken, tasks = _taken(dist)
    assert tasks == 8 and taken >= 6


def test_values_lost_between_passes_are_read_again(flights_row_groups, client) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups)

    def forget(stage: str, done: int, total: int) -> None:
        if stage == "fit level 0" and done == total:  # before the median pass is sent
            client.run(kept_values.clear)

    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS,
                        progress=forget)  # fmt: skip
    assert_same_params(single.params, dist.params)
    assert _taken(dist) == (0, 4)


def test_worker_killed_between_passes(flights_row_groups, cluster, client) -> None:
    """A worker holding kept values dies after the first pass: the fit is still exact."""
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    single = pipeline.fit(flights_row_groups)

    def kill_one(stage: str, done: int, total: int) -> None:
        if stage == "fit level 0" and done == total:  # the worker holding kept values
            held = client.run(kept_values.held_bytes)
            victim = max(held, key=held.get)
            name = client.scheduler_info()["workers"][victim]["name"]
            cluster.kill(cluster.workers[int(str(name)[1:])])

    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS,
                        progress=kill_one)  # fmt: skip
    assert_same_params(single.params, dist.params)
    # its first-pass results died with it: Dask may run those tasks again on the other
    # worker (which then keeps their values), or the median tasks read their partitions
    assert _taken(dist)[1] == 4
