"""Tag features fitted on partitions — a real Dask cluster and the streamed (memory-budget)
run in one process — give the single-process fitted state and X: a tags ``OneHot``'s
vocabulary is each partition's tags with their row counts, merged; ``Hash`` needs no fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import assert_same_matrix, streaming_budget

import fastprep as fp

ROWS = 5_000


@pytest.fixture(scope="module")
def tagged_groups(tmp_path_factory, _flights_sample_cached: pd.DataFrame) -> str:
    """The flights sample with each flight's route carriers (text "AA|DL" and a Parquet
    list<string>), 2,500-row row groups; a tag seen only in the last partition."""
    frame = _flights_sample_cached
    route = frame.groupby(["origin", "dest", "month"])["carrier"].agg(
        lambda s: "|".join(sorted(set(s)))
    )
    text = frame.join(route.rename("tags"), on=["origin", "dest", "month"])["tags"].to_numpy()
    text = text.astype(object)
    text[::53] = None
    text[-3] = "late|AA||late"
    lists = [None if t is None else t.split("|") for t in text]
    table = pa.table(
        {
            "route_carriers": pa.array(list(text), type=pa.string()),
            "route_list": pa.array(lists, type=pa.list_(pa.string())),
            "distance": pa.array(frame.distance.astype(float)),
        }
    )
    path = tmp_path_factory.mktemp("tags") / "tags.parquet"
    pq.write_table(table, path, row_group_size=2_500)
    return str(path)


def _pipeline() -> fp.Pipeline:
    schema = fp.Schema(
        {
            "route_carriers": fp.String(nullable=True),
            "route_list": fp.ListOf(nullable=True),
            "distance": fp.Float(),
        }
    )
    return fp.Pipeline(
        schema,
        [
            fp.Tags("route_carriers", sep="|") >> fp.OneHot(),
            fp.cols("route_list") >> fp.OneHot(),
            fp.cols("route_list") >> fp.Hash(2**10),
            fp.col("distance"),
        ],
    )


def test_cluster_fit_equals_single_process(tagged_groups, client) -> None:
    pipeline = _pipeline()
    single = pipeline.fit(tagged_groups)
    dist = pipeline.fit(tagged_groups, client=client, rows_per_partition=ROWS)
    assert dist.params == single.params
    assert "late" in single.params[0]["route_carriers"][0]["categories"]
    x_single = single.transform(tagged_groups).X
    x_dist = dist.transform(tagged_groups, client=client, rows_per_partition=ROWS).X
    assert_same_matrix(x_dist, x_single)


def test_streamed_fit_equals_in_memory(tagged_groups, tmp_path) -> None:
    pipeline = _pipeline()
    memory = pipeline.fit_transform(tagged_groups, memory_budget="100GB")
    budget = streaming_budget(pipeline, tagged_groups)
    opened = pipeline.fit_transform(tagged_groups, memory_budget=budget, output_dir=tmp_path)
    assert len(opened) >= 2 and "streamed in this process" in opened.notes[-1]
    assert_same_matrix(opened.whole().X, memory.X)
    loaded = fp.load(opened.pipeline_path)
    np.testing.assert_equal(loaded.params, pipeline.fit(tagged_groups).params)
