"""Drift on a real cluster, as in one process: the cluster fit records the drift profile
(its partitions' profiles merged) and a cluster transform measures each partition against
the fitted profile, merged into the report's ``drift`` (gathered and in the manifest)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO, assert_same_drift

from fastprep.cli import load_pipeline_file
from fastprep.runtime.cluster import load_shards

ROWS = 5_000


@pytest.fixture(scope="module")
def shifted(tmp_path_factory) -> str:
    """The sample drifted (8 row groups): dep_delay shifted, air_time a third missing,
    an unseen carrier in the second half."""
    frame = pq.read_table(REPO / "data_samples" / "flights.parquet").to_pandas()
    rng = np.random.default_rng(5)
    frame["dep_delay"] = frame["dep_delay"] + 120
    frame.loc[rng.random(len(frame)) < 0.33, "air_time"] = np.nan
    frame.loc[frame.index[10_000::3], "carrier"] = "ZZ"
    path = tmp_path_factory.mktemp("shifted") / "flights_shifted.parquet"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, path, row_group_size=2_500)
    return str(path)


def test_cluster_fit_and_transform_measure_drift_as_one_process(
    flights_row_groups, shifted, client, tmp_path
) -> None:
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(flights_row_groups)
    expected = fitted.transform(shifted).report.drift
    assert expected["dep_delay"]["alerts"] and expected["carrier"]["unseen_share"] > 0

    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    assert_same_drift(dist.transform(shifted).report.drift, expected)  # the cluster fit profile
    out = fitted.transform(shifted, client=client, rows_per_partition=ROWS)
    assert_same_drift(out.report.drift, expected)
    manifest = dist.transform(shifted, client=client, rows_per_partition=ROWS,
                              output_dir=tmp_path)  # fmt: skip
    assert_same_drift(manifest.report.drift, expected)
    assert_same_drift(load_shards(tmp_path).report.drift, expected)
    # the fit's own partitions, kept on the workers for its transform: measured the same
    same = fitted.transform(flights_row_groups).report.drift
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    kept = dist.transform(flights_row_groups, client=client, rows_per_partition=ROWS,
                          output_dir=tmp_path / "kept")  # fmt: skip
    assert any("kept from the fit" in note for note in kept.report.notes)
    assert_same_drift(kept.report.drift, same)
