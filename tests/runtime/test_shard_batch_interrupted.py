"""A task of several partitions interrupted inside a shard's own writing (an error or a
KeyboardInterrupt in ``write_shard``, not before it): the partitions recorded before stay
done, every record names files that are there with the bytes it says, and the
interrupted partition has no record."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fastprep.cli import load_pipeline_file
from fastprep.data.partitions import plan_partitions
from fastprep.runtime import kept_values, shards
from fastprep.runtime.levels import fit_levels, later_chains
from fastprep.runtime.partition_tasks import Job, fit_partials, transform_partitions
from fastprep.storage import output_format

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def source(tmp_path) -> Path:
    frame = pd.read_parquet(REPO / "data_samples" / "flights.parquet")
    path = tmp_path / "flights.parquet"
    frame.to_parquet(path, row_group_size=5_000)
    return path


@pytest.fixture(autouse=True)
def _empty_store():
    kept_values.clear()
    yield
    kept_values.clear()


def _fit(job: Job, spec):
    first = []

    def run_pass(learned, targets, stage):
        reuse = "k0" if first else None
        result = fit_partials(job, spec, learned, targets, keep_as="k0", reuse=reuse,
                              inputs=later_chains(job.plan), whole="fit")  # fmt: skip
        first.append(result)
        return [result]

    return fit_levels(job.plan, str(spec.path), run_pass, spec.n_rows)[0]


def _records_name_whole_files(folder: Path) -> list[int]:
    indexes = []
    for record in folder.glob("part-*.json"):
        entry = json.loads(record.read_text())
        for written in entry["arrays"].values():
            assert (folder / written["file"]).stat().st_size == written["bytes"]
        indexes.append(entry["index"])
    return sorted(indexes)


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_an_interrupt_inside_a_shards_writing(source, tmp_path, monkeypatch, error):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    specs = plan_partitions(source, 5_000)[:3]
    params = _fit(job, specs[0])
    real = output_format.FileWriter.array

    def array(self, name, values):
        if name.startswith(f"part-{specs[1].index:05d}.") and name.endswith(".row_ids"):
            raise error
        return real(self, name, values)

    monkeypatch.setattr(output_format.FileWriter, "array", array)
    with pytest.raises(BaseException) as raised:
        transform_partitions(job, specs, params, "fp", str(tmp_path / "out"), "float32", None,
                             ["k0", "k1", "k2"])  # fmt: skip
    assert isinstance(raised.value, type(error)) or specs[1].describe() in str(raised.value)
    folder = tmp_path / "out"
    assert _records_name_whole_files(folder) == [specs[0].index]
    assert sorted(shards.completed(folder, specs, "fp")) == [specs[0].index]
