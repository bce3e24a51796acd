"""Partitions planned for several workers: a multiple of the workers, of equal rows where
the row groups allow, never over ``rows_per_partition`` (unless one row group is), never
across files, and together still the whole source in order."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastprep.data.partitions import balanced_count, busiest_rows, plan_partitions, read_partition


def _write(path, frame, row_group_size: int):
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                   row_group_size=row_group_size)  # fmt: skip
    return path


def _rows(specs) -> list[int]:
    return [s.n_rows for s in specs]


def test_balanced_count_is_the_fewest_multiple_of_the_workers() -> None:
    assert balanced_count(3_367_760, 500_000, 1) == 7
    assert balanced_count(3_367_760, 500_000, 2) == 8
    assert balanced_count(3_367_760, 500_000, 3) == 9
    assert balanced_count(10_000_000, 500_000, 2) == 20
    assert balanced_count(0, 500_000, 2) == 2
    assert balanced_count(5, 500_000, 4) == 4


def test_busiest_worker_runs_largest_first() -> None:
    # 7 equal partitions on 2 workers: 4 of them on one worker (the idle last round)
    assert busiest_rows([500] * 7, 2) == 4 * 500 + 4 * busiest_rows([0], 1)
    assert busiest_rows([500, 500, 200, 200, 100], 2) == busiest_rows([500, 200, 100], 1)


def test_the_benchmarks_layout_gets_a_multiple_of_the_workers(tmp_path, flights_sample) -> None:
    # 13 row groups of 1,500 rows and one of 500 (as 3.4M rows in 250,000-row groups):
    # packed greedily to 3,000 rows it is 7 partitions, one worker's round idle on two
    path = _write(tmp_path / "f.parquet", flights_sample, 1_500)
    one = plan_partitions(path, 3_000)
    assert _rows(one) == [3_000] * 6 + [2_000]
    two = plan_partitions(path, 3_000, workers=2)
    assert len(two) % 2 == 0 and max(_rows(two)) <= 3_000
    assert busiest_rows(_rows(two), 2) < busiest_rows(_rows(one), 2)
    assert sum(_rows(two)) == 20_000
    assert [s.row_offset for s in two] == [sum(_rows(two)[:i]) for i in range(len(two))]
    groups = [g for s in two for g in s.row_groups]
    assert groups == list(range(14))  # every row group once, in order


def test_fine_row_groups_give_equal_partitions(tmp_path, flights_sample) -> None:
    path = _write(tmp_path / "f.parquet", flights_sample, 500)
    specs = plan_partitions(path, 3_000, workers=2)
    assert _rows(specs) == [2_500] * 8
    specs = plan_partitions(path, 3_000, workers=3)
    assert len(specs) == 9 and max(_rows(specs)) - min(_rows(specs)) <= 500


def test_bounds_and_files_are_kept(tmp_path, flights_sample) -> None:
    # groups of 1,200 rows under a 2,000-row bound: one group per partition at most
    path = _write(tmp_path / "coarse.parquet", flights_sample, 1_200)
    assert max(_rows(plan_partitions(path, 2_000, workers=2))) <= 2_000
    # a row group over the bound stays whole
    big = _write(tmp_path / "big.parquet", flights_sample, 20_000)
    assert _rows(plan_partitions(big, 3_000, workers=2)) == [20_000]
    # several files: no partition spans two
    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(3):
        _write(folder / f"p{i}.parquet", flights_sample.iloc[i * 6_000 : (i + 1) * 6_000], 1_000)
    specs = plan_partitions(str(folder / "*.parquet"), 4_000, workers=2)
    assert len(specs) % 2 == 0 and max(_rows(specs)) <= 4_000 and sum(_rows(specs)) == 18_000
    for spec in specs:
        assert pq.ParquetFile(spec.path).metadata.num_row_groups > max(spec.row_groups)


def test_balanced_partitions_read_back_as_the_source(tmp_path, flights_sample) -> None:
    path = _write(tmp_path / "f.parquet", flights_sample, 1_500)
    specs = plan_partitions(path, 3_000, workers=2)
    parts = [read_partition(s, ["dep_delay", "tailnum"]) for s in specs]
    assert pa.concat_tables(parts).equals(pq.read_table(path, columns=["dep_delay", "tailnum"]))


def test_a_frame_is_sliced_evenly_for_several_workers(flights_sample) -> None:
    assert _rows(plan_partitions(flights_sample, 6_000)) == [6_000] * 3 + [2_000]
    assert _rows(plan_partitions(flights_sample, 6_000, workers=2)) == [5_000] * 4


@pytest.mark.parametrize("workers", [0, -3])
def test_no_workers_plans_as_for_one(tmp_path, flights_sample, workers) -> None:
    path = _write(tmp_path / "f.parquet", flights_sample, 1_500)
    assert plan_partitions(path, 3_000, workers=workers) == plan_partitions(path, 3_000)


def test_a_datasets_fragments_are_balanced_too(tmp_path, flights_sample) -> None:
    import pyarrow.dataset as pads

    folder = tmp_path / "ds"
    folder.mkdir()
    table = pa.Table.from_pandas(flights_sample, preserve_index=False)
    for i in range(2):  # 2 files of 13 row groups of 750 rows and one of 250
        pq.write_table(table.slice(i * 10_000, 10_000), folder / f"part-{i}.parquet",
                       row_group_size=750)  # fmt: skip
    dataset = pads.dataset(folder)
    one, two = plan_partitions(dataset, 3_000), plan_partitions(dataset, 3_000, workers=2)
    assert len(two) % 2 == 0 and max(_rows(two)) <= 3_000
    assert busiest_rows(_rows(two), 2) <= busiest_rows(_rows(one), 2)
    read = [read_partition(spec, ["dep_delay"], frame=dataset) for spec in two]
    assert pa.concat_tables(read).equals(dataset.to_table(columns=["dep_delay"]))
