"""The cluster fit folds a fitted fill into the Standardize/MinMax right after it (one pass
fewer) and still equals the single-machine fit, on flights with values really missing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_cluster_runs import assert_same_params

import fastprep as fp


@pytest.fixture(scope="module")
def holes(tmp_path_factory, _flights_sample_cached):
    """The sample with 15% of the kept rows' dep_delay / air_time set missing."""
    frame = _flights_sample_cached.copy()
    rng = np.random.default_rng(6)
    for column in ("dep_delay", "air_time"):
        frame.loc[rng.random(len(frame)) < 0.15, column] = np.nan
    path = tmp_path_factory.mktemp("holes") / "flights_holes.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=2_500)
    return path


def _pipeline() -> fp.Pipeline:
    from test_cluster_runs import REPO

    from fastprep.cli import load_pipeline_file

    schema = load_pipeline_file(REPO / "pipelines" / "flights.py").schema
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.col("dep_delay") >> fp.FillMissing("mean") >> fp.MinMax(),  # folded
            fp.col("air_time") >> fp.FillMissing("median") >> fp.MinMax() >> fp.Standardize(),
            fp.col("distance") >> fp.FillMissing("median") >> fp.Log1p() >> fp.Standardize(),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )


def test_folded_fill_equals_single_machine_with_fewer_passes(holes, client) -> None:
    pipeline = _pipeline()
    single = pipeline.fit(holes)
    stages: list[str] = []
    dist = pipeline.fit(holes, client=client, rows_per_partition=5_000,
                        progress=lambda stage, done, total: stages.append(stage))  # fmt: skip
    assert_same_params(single.params, dist.params)
    # level 0: both fills' statistics (+ the folded moments); its median pass; level 1:
    # air_time's Standardize (after the folded MinMax) and distance's Standardize (after
    # Log1p: not foldable); without the fold there would be a level 2
    assert list(dict.fromkeys(stages)) == ["fit level 0", "fit level 0 median", "fit level 1"]
    assert np.abs(dist.transform(holes).X - single.transform(holes).X).max() <= 1e-6
