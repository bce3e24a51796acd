"""Progress per stage on a real cluster: one tick per completed partition task, a tqdm bar on
stderr when asked (the CLI's default on a terminal), nothing by default in the API."""

from __future__ import annotations

from pathlib import Path

import pytest

from fastprep.cli import load_pipeline_file, main
from fastprep.errors import PipelineDefinitionError
from fastprep.runtime.cluster.progress import Progress

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000  # 4 partitions of the 8 row groups


@pytest.fixture(scope="module")
def pipeline():
    return load_pipeline_file(REPO / "pipelines" / "flights.py")


def _recorder():
    events: list[tuple[str, int, int]] = []
    return events, lambda stage, done, total: events.append((stage, done, total))


def _by_stage(events):
    stages: dict[str, list[tuple[int, int]]] = {}
    for stage, done, total in events:
        stages.setdefault(stage, []).append((done, total))
    return stages


def test_callback_counts_completed_partitions_per_stage(pipeline, flights_row_groups, client,
                                                        tmp_path) -> None:  # fmt: skip
    events, record = _recorder()
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS,
                          progress=record)  # fmt: skip
    stages = _by_stage(events)
    # flights: level 0 (with a median on speed), its median pass; the Standardize after the
    # fill is folded into them (no level 1)
    assert list(stages) == ["fit level 0", "fit level 0 median"]  # level 1 folded away
    for ticks in stages.values():
        assert ticks == [(n, 4) for n in range(5)]  # start at 0, one tick per partition
    events.clear()
    fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                     output_dir=tmp_path, progress=record)  # fmt: skip
    assert _by_stage(events) == {"transform": [(n, 4) for n in range(5)]}


def test_resumed_transform_counts_skipped_partitions_as_done(pipeline, flights_row_groups,
                                                             client, tmp_path) -> None:  # fmt: skip
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                     output_dir=tmp_path)  # fmt: skip
    for index in (1, 3):  # as if the job crashed before writing these
        next(tmp_path.glob(f"part-{index:05d}.*.json")).unlink()  # the partition's record
    events, record = _recorder()
    fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                     output_dir=tmp_path, progress=record)  # fmt: skip
    assert events == [("transform", 2, 4), ("transform", 3, 4), ("transform", 4, 4)]


def test_bar_on_stderr_when_asked_and_silent_by_default(pipeline, flights_row_groups, client,
                                                        capsys) -> None:  # fmt: skip
    fitted = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert capsys.readouterr().err == ""  # the API's default: no bar
    fitted.transform(flights_row_groups, client=client, rows_per_partition=ROWS, progress=True)
    err = capsys.readouterr().err
    assert "transform" in err and "4/4" in err and "partition" in err


def test_cli_bar_follows_the_terminal_and_flags(cluster, flights_row_groups, tmp_path,
                                                capsys) -> None:  # fmt: skip
    cluster.ensure_two_workers()
    args = ["run", "pipelines/flights.py", "--input", str(flights_row_groups),
            "--scheduler", cluster.address]  # fmt: skip
    assert main([*args, "--output", str(tmp_path / "a")]) == 0
    assert "fit level" not in capsys.readouterr().err  # captured stderr is not a terminal
    assert main([*args, "--output", str(tmp_path / "b"), "--progress"]) == 0
    err = capsys.readouterr().err
    for stage in ("fit level 0", "fit level 0 median", "transform"):
        assert stage in err


def test_auto_follows_stderr_and_bad_values_are_named(monkeypatch) -> None:
    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    assert Progress("auto").enabled
    monkeypatch.undo()
    assert not Progress(False).enabled and not Progress(None).enabled
    with pytest.raises(PipelineDefinitionError, match="progress='yes'"):
        Progress("yes")
