"""``fp.GroupStats`` under a memory budget the in-memory run does not fit: the fit is
streamed partition by partition in this process, merges the partitions' groups into the
single-process state bit for bit (mean and std from exact sums), and the streamed output
equals the in-memory output."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from support import REPO, streaming_budget

import fastprep as fp
from fastprep.runtime import preflight

STATS = ("mean", "std", "count", "min", "max", "median")


@pytest.fixture(scope="module")
def grouped(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("groups") / "flights.parquet"
    pq.write_table(pq.read_table(REPO / "data_samples" / "flights.parquet"), path,
                   row_group_size=2_500)  # fmt: skip
    return str(path)


def _pipeline() -> fp.Pipeline:
    schema = fp.Schema(
        {
            "dest": fp.String(),
            "hour": fp.Int(),
            "tailnum": fp.String(nullable=True),
            "dep_delay": fp.Float(nullable=True),
            "air_time": fp.Float(nullable=True),
        }
    )
    return fp.Pipeline(
        schema,
        [
            fp.cols("dest", "hour") >> fp.GroupStats("dep_delay", stats=STATS)
            >> fp.FillMissing(-1),
            fp.cols("tailnum") >> fp.GroupStats("air_time", stats=("mean", "median"))
            >> fp.FillMissing("mean") >> fp.Standardize(),
        ],
    )  # fmt: skip


def test_streamed_fit_and_output_equal_the_in_memory_run(grouped, tmp_path) -> None:
    pipeline = _pipeline()
    single = pipeline.fit(grouped, memory_budget="100GB")
    budget = streaming_budget(pipeline, grouped)
    streamed = pipeline.fit(grouped, memory_budget=budget)
    assert "stream" in " ".join(streamed.fit_report.notes)
    for fa, fb in zip(single.params, streamed.params, strict=True):
        for name in fa:
            first_a, first_b = fa[name][0], fb[name][0]
            np.testing.assert_array_equal(first_a["groups"], first_b["groups"])
            # exact sums: the streamed state is the in-memory one, bit for bit
            np.testing.assert_array_equal(first_a["values"], first_b["values"])
    whole = single.transform(grouped).X
    opened = pipeline.fit_transform(grouped, memory_budget=budget, output_dir=tmp_path / "o")
    assert len(opened) >= 2
    np.testing.assert_allclose(np.asarray(opened.whole().X), whole, rtol=1e-6, atol=1e-6)


def test_the_preflight_counts_a_group_median_gather() -> None:
    """A partitioned fit of a group median gathers every present value with its group: the
    pre-flight counts it (once per step, whatever its outputs); mean/std need no gather."""
    with_median = _pipeline()
    partitioned, in_memory = preflight.gathered_bytes(with_median.optimized, 1_000_000)
    assert partitioned >= 2 * 32 * 1_000_000 and in_memory > 0  # two steps with a median
    schema = with_median.schema
    without = fp.Pipeline(
        schema, [fp.cols("dest") >> fp.GroupStats("dep_delay", stats=("mean", "std"))]
    )
    assert preflight.gathered_bytes(without.optimized, 1_000_000) == (0, 0)
