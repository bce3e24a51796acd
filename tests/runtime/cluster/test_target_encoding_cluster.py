"""``TargetEncode``/``CountEncode`` fitted on partitions — a real Dask cluster and the
streamed fit in one process — give the single-process state bit for bit, and the same X
by ``transform``, ``batches`` and ``write_shards``. A partitioned ``fit_transform`` (which
would need out-of-fold values over all rows) is refused up front, naming the step."""

from __future__ import annotations

import numpy as np
import pytest
from support import streaming_budget

import fastprep as fp
from fastprep.runtime import aggregates as agg
from fastprep.runtime import streamed

SCHEMA = fp.Schema(
    {
        "arr_delay": fp.Float(nullable=True),
        "carrier": fp.Category(),
        "tailnum": fp.String(nullable=True),
        "dest": fp.String(),
        "hour": fp.Int(),
    }
)


def _pipeline(target="late") -> fp.Pipeline:
    return fp.Pipeline(
        SCHEMA,
        [
            fp.cols("carrier", "tailnum", "hour") >> fp.TargetEncode(),
            fp.col("dest") >> fp.FillMissing("UNK") >> fp.TargetEncode(smooth=4.0, cv=3),
            fp.cols("tailnum", "hour") >> fp.CountEncode(),
            fp.col("dest") >> fp.CountEncode(normalize=True),
        ],
        target=fp.expr("late = arr_delay > 15") if target == "late" else target,
    )


def _same_state(a, b) -> None:
    for fa, fb in zip(a.params, b.params, strict=True):
        for name in fa:
            for sa, sb in zip(fa[name], fb[name], strict=True):
                assert sa.keys() == sb.keys(), name
                for key in sa:
                    if isinstance(sa[key], np.ndarray):
                        np.testing.assert_array_equal(sa[key], sb[key])
                    else:
                        assert sa[key] == sb[key], (name, key)


@pytest.mark.parametrize("target", ["late", "arr_delay"])
def test_cluster_fit_equals_single_process(flights_row_groups, client, target) -> None:
    pipeline = _pipeline(target)
    single = pipeline.fit(flights_row_groups)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=5_000)
    _same_state(single, dist)
    x_single = single.transform(flights_row_groups).X
    x_dist = dist.transform(flights_row_groups, client=client, rows_per_partition=5_000).X
    np.testing.assert_array_equal(x_single, x_dist)


def test_streamed_fit_batches_and_shards_equal_single_process(flights_row_groups, tmp_path):
    pipeline = _pipeline()
    single = pipeline.fit(flights_row_groups)
    params, _ = streamed.fit(
        pipeline.optimized, pipeline.schema, str(flights_row_groups), rows_per_partition=2_500
    )
    _same_state(single, fp.FittedPipeline(pipeline, params))
    expected = single.transform(flights_row_groups)
    batches = list(single.batches(flights_row_groups, batch_size=4_096, rows_per_partition=3_000))
    np.testing.assert_array_equal(np.concatenate([X for X, _ in batches]), expected.X)
    single.write_shards(flights_row_groups, tmp_path / "shards", rows_per_partition=3_000)
    np.testing.assert_array_equal(
        np.asarray(fp.open_output(tmp_path / "shards").whole().X), expected.X
    )


def test_partitioned_fit_transform_is_refused_naming_the_step(flights_row_groups, tmp_path):
    pipeline = _pipeline()
    budget = streaming_budget(pipeline, str(flights_row_groups))
    with pytest.raises(
        fp.PipelineDefinitionError, match=r"TargetEncode\(\) on 'carrier'.*streamed.*fit"
    ):
        pipeline.fit_transform(flights_row_groups, memory_budget=budget, output_dir=tmp_path / "o")
    assert not (tmp_path / "o").exists()
    # the fit alone streams under the same budget, to the in-memory state
    fitted = pipeline.fit(flights_row_groups, memory_budget=budget)
    assert fitted.fit_report.backend == "streamed"
    _same_state(pipeline.fit(flights_row_groups), fitted)


def test_a_target_gather_above_the_cap_is_refused(flights_row_groups, client, monkeypatch):
    monkeypatch.setattr(agg, "MAX_GATHERED_VALUES", 1_000)
    with pytest.raises(fp.FitError, match=r"TargetEncode\(\) on 'carrier'.*without client="):
        _pipeline().fit(flights_row_groups, client=client, rows_per_partition=5_000)
