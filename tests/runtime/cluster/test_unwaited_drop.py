"""A job's end lets the workers' kept values go without waiting for the message's round
trip; the next fit on the cluster starts only once they are gone."""

from __future__ import annotations

from pathlib import Path

from fastprep.cli import load_pipeline_file
from fastprep.runtime import kept_values
from fastprep.runtime.cluster import unwaited
from fastprep.runtime.partition_tasks import drop_kept_soon

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000


def test_a_fits_kept_values_are_gone_once_settled(flights_row_groups, client) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    # what the next fit waits for before its first pass: afterwards nothing is held
    # (the fit's input values, and its whole partitions once its transform took them)
    fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    unwaited.settle(client)
    assert set(client.run(kept_values.held_bytes).values()) == {0}
    assert set(client.run(kept_values.partition_bytes).values()) == {0}
    assert client.scheduler.address not in unwaited._PENDING


def test_a_message_to_a_closed_client_is_not_an_error(client) -> None:
    class Closed:
        scheduler = None

    unwaited.run_unwaited(Closed(), drop_kept_soon, ["absent"], True, True)
    unwaited.settle(Closed())
    unwaited.run_unwaited(client, drop_kept_soon, ["absent"], True, True)
    unwaited.settle(client)
