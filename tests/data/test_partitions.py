"""Partitions of a source: together they are the source, row ids included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastprep.data.partitions import iter_partitions, plan_partitions, read_partition, source_size
from fastprep.data.sources import read_source
from fastprep.errors import SchemaError, SourceError
from fastprep.runtime import execute

COLUMNS = ["dep_delay", "arr_delay", "origin", "tailnum"]


@pytest.fixture
def row_grouped(tmp_path, flights_sample):
    """The flights sample as a Parquet file of 20 row groups of 1,000 rows."""
    path = tmp_path / "flights.parquet"
    pq.write_table(pa.Table.from_pandas(flights_sample, preserve_index=False), path,
                   row_group_size=1000)  # fmt: skip
    return path


def test_parquet_partitions_pack_row_groups_and_know_their_offsets(row_grouped):
    specs = plan_partitions(row_grouped, rows_per_partition=3000)
    assert [s.n_rows for s in specs] == [3000] * 6 + [2000]
    assert [s.row_offset for s in specs] == [0, 3000, 6000, 9000, 12000, 15000, 18000]
    assert specs[0].row_groups == (0, 1, 2)
    assert "row groups 0-2" in specs[0].describe()


def test_partitions_concatenate_to_the_whole_source(row_grouped, tmp_path, flights_sample):
    whole, _ = read_source(row_grouped, COLUMNS, ["origin", "tailnum"])
    parts = list(iter_partitions(row_grouped, COLUMNS, ["origin", "tailnum"], 7000))
    assert [spec.row_offset for spec, _ in parts] == [0, 7000, 14000]
    assert all(isinstance(f, pa.Table) for _, f in parts)  # Arrow, no pandas detour
    assert pa.concat_tables([f for _, f in parts]).equals(whole)
    # a CSV glob: one partition per file, offsets filled in while streaming
    for k in range(3):
        flights_sample.iloc[k * 100 : (k + 1) * 100].to_csv(tmp_path / f"p{k}.csv", index=False)
    glob = str(tmp_path / "p*.csv")
    assert [s.row_offset for s in plan_partitions(glob)] == [0, None, None]
    streamed = list(iter_partitions(glob, COLUMNS, ["origin", "tailnum"]))
    assert [(s.row_offset, s.n_rows) for s, _ in streamed] == [(0, 100), (100, 100), (200, 100)]
    whole_csv, _ = read_source(glob, COLUMNS, ["origin", "tailnum"])
    assert pa.concat_tables([f for _, f in streamed]).equals(whole_csv)


def test_dataframe_partitions_are_slices(flights_sample):
    specs = plan_partitions(flights_sample, rows_per_partition=6000)
    assert [(s.start, s.stop) for s in specs] == [(0, 6000), (6000, 12000), (12000, 18000),
                                                  (18000, 20000)]  # fmt: skip
    part = read_partition(specs[1], COLUMNS, frame=flights_sample)
    pd.testing.assert_frame_equal(
        part, flights_sample.loc[6000:11999, COLUMNS].reset_index(drop=True)
    )
    with pytest.raises(SourceError, match="needs the source it reads"):
        read_partition(specs[1], COLUMNS)
    assert len(plan_partitions(flights_sample.iloc[:0])) == 1  # an empty frame: one partition


def test_source_size_is_exact_for_parquet_and_estimated_for_csv(row_grouped, flights_csv):
    assert source_size(row_grouped).n_rows == 20_000
    assert source_size(row_grouped).exact
    estimate = source_size(flights_csv)
    assert not estimate.exact
    assert 15_000 < estimate.n_rows < 25_000  # from the mean line length of the head


def test_a_missing_column_in_a_partition_is_a_schema_error(row_grouped):
    with pytest.raises(SchemaError, match="no_such"):
        read_partition(plan_partitions(row_grouped)[0], ["no_such"])
    with pytest.raises(SourceError):
        plan_partitions(row_grouped, rows_per_partition=0)


@pytest.mark.parametrize("rows", [1.5, "2500", True, float("nan"), float("inf"), None])
def test_rows_per_partition_must_be_a_whole_number(row_grouped, rows):
    with pytest.raises(SourceError, match=r"rows_per_partition=.*a whole number"):
        plan_partitions(row_grouped, rows_per_partition=rows)
    expected = plan_partitions(row_grouped, rows_per_partition=2_500)
    for whole in (np.int64(2_500), 2.5e3):  # 1e6 is a natural spelling
        assert plan_partitions(row_grouped, rows_per_partition=whole) == expected


def test_transforming_partitions_gives_the_whole_sources_rows(flights_pipeline, broken_path):
    """Row ids, X rows and quarantine reasons of partitions equal the one-piece run."""
    fitted = flights_pipeline.fit(flights_pipeline.sample)
    plan, schema = fitted.plan, fitted.schema
    text = [c for c in plan.columns if schema[c].ltype.is_text]
    broken, _ = read_source(broken_path, plan.columns, text)
    whole = fitted.transform(broken)
    assert whole.report.rows_quarantined > 5
    xs, ids, quarantined = [], [], []
    for spec, frame in iter_partitions(broken, plan.columns, text, rows_per_partition=7):
        prepared = execute.prepare(plan, schema, frame, phase="transform", backend="pandas",
                                   row_offset=spec.row_offset)  # fmt: skip
        out = execute.transform_prepared(plan, fitted.params, prepared)
        xs.append(out.X.toarray())
        ids.append(out.row_ids)
        quarantined.append(out.quarantine[["row_id", "reason"]])
    assert np.array_equal(np.concatenate(ids), whole.row_ids)
    assert np.array_equal(np.vstack(xs), whole.X.toarray())
    pd.testing.assert_frame_equal(
        pd.concat(quarantined, ignore_index=True), whole.quarantine[["row_id", "reason"]]
    )


def test_dataset_partitions_carry_their_fragment(row_grouped, tmp_path):
    """A Dataset's fragments are listed once, when the partitions are planned: each
    partition keeps its own (reading one must not list them all again, which made a pass
    quadratic in the number of fragments)."""
    import pyarrow.dataset as pads

    table = pq.read_table(row_grouped)
    folder = tmp_path / "ds"
    folder.mkdir()
    for i in range(4):
        pq.write_table(table.slice(i * 5000, 5000), folder / f"part-{i}.parquet",
                       row_group_size=2500)  # fmt: skip
    dataset = pads.dataset(folder)
    specs = plan_partitions(dataset, rows_per_partition=2500)
    assert len(specs) == 8
    for spec in specs:
        assert spec.fragment_object is not None and spec.fragment_object.path == spec.path
    read = [read_partition(spec, COLUMNS, ["origin", "tailnum"], dataset) for spec in specs]
    assert pa.concat_tables(read).equals(table.select(COLUMNS))
