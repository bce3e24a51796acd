"""A Hive-partitioned folder (``origin=EWR/part-0.parquet``) holds a partition column only in
its folder names: the error for the missing column says so and how to read such a folder."""

from __future__ import annotations

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from support import REPO

import fastprep as fp


def test_a_hive_partition_column_is_named_as_one(tmp_path):
    table = pq.read_table(REPO / "data_samples" / "weather.parquet").slice(0, 3000)
    ds.write_dataset(table, tmp_path / "hive", format="parquet", partitioning=["origin"],
                     partitioning_flavor="hive")  # fmt: skip
    schema = fp.Schema({"origin": fp.Category(), "temp": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(schema, [fp.col("origin") >> fp.OneHot()])
    with pytest.raises(fp.SchemaError, match=r"partitioning='hive'") as info:
        pipeline.fit(tmp_path / "hive")
    assert "['origin']" in str(info.value) and "folder names" in str(info.value)
    hive = ds.dataset(tmp_path / "hive", partitioning="hive")  # the way the message names
    assert pipeline.fit_transform(hive).X.shape == (3000, 1)
    with pytest.raises(fp.SchemaError) as plain:  # a column simply absent: no such hint
        fp.Pipeline(fp.Schema({"nope": fp.Float()}), [fp.col("nope")]).fit(tmp_path / "hive")
    assert "hive" not in str(plain.value).split("that the pipeline reads")[1]
