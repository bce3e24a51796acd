"""A partition packed to be kept until its transform: its arrays in their narrowest exact
types, in one buffer of its own, unpacked to the very values and types validated; only
the quarantined rows as read; a transform that quarantines other rows reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import fastprep as fp
from fastprep.cli import load_pipeline_file
from fastprep.data.columns import TextColumn
from fastprep.data.partitions import plan_partitions
from fastprep.runtime import kept_rows, kept_values
from fastprep.runtime.levels import fit_levels, later_chains
from fastprep.runtime.partition_tasks import Job, fit_partials, load_prepared, transform_partition
from fastprep.storage import spill_files

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data_samples" / "flights.parquet"


@pytest.fixture(autouse=True)
def _empty_store():
    kept_values.clear()  # an in-process cluster test may have left a fit's partitions
    yield
    kept_values.clear()


@pytest.fixture
def source(tmp_path) -> Path:
    """The sample in 5,000-row row groups, the delays with a fraction (not float16) or
    missing in flights that arrived."""
    frame = pd.read_parquet(SAMPLE)
    frame.loc[::7, "dep_delay"] += 0.1
    frame.loc[3::97, "dep_delay"] = np.nan
    path = tmp_path / "flights.parquet"
    frame.to_parquet(path, row_group_size=5_000)
    return path


def test_narrowest_holds_every_value_exactly():
    assert kept_rows.narrowest(np.array([0, 24, -3], np.int64)) == np.int8
    assert kept_rows.narrowest(np.array([0, 40_000], np.int64)) == np.int32
    assert kept_rows.narrowest(np.array([0, 2**40], np.int64)) == np.int64
    whole = np.array([1.0, -0.0, np.nan, -1300.0, np.inf])
    assert kept_rows.narrowest(whole) == np.float16
    assert kept_rows.narrowest(np.array([1.0, 4097.0])) == np.float32  # float16: 4096
    assert kept_rows.narrowest(np.array([0.1, np.nan])) == np.float64
    assert kept_rows.narrowest(np.array([1e-300])) == np.float64
    assert kept_rows.narrowest(np.array([0.5], np.float32)) == np.float16
    assert kept_rows.narrowest(np.array([True])) == np.bool_


def test_packed_partition_unpacks_to_the_validated_one(source):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(source, 5_000)[1]
    prepared, _ = load_prepared(job, spec, "fit")
    assert len(prepared.quarantine)  # rows without a target
    packed = kept_rows.pack(prepared)
    before = kept_values.size_of((prepared.raw, prepared.table, prepared.quarantine, prepared.y))
    assert packed.size() < before / 2
    assert packed.buffer.flags.c_contiguous and packed.buffer.dtype == np.uint8  # one buffer
    assert kept_values.size_of(packed.buffer) <= packed.size()
    assert packed.raw.num_rows == len(prepared.quarantine) + 1  # + the types' row
    again = packed.unpack()
    table, other = prepared.table, again.table
    assert table.columns.keys() == other.columns.keys()
    for name, column in table.columns.items():
        if isinstance(column, TextColumn):
            assert other.columns[name].codes.dtype == column.codes.dtype
            assert other.columns[name].codes.flags.writeable == column.codes.flags.writeable
            np.testing.assert_array_equal(other.columns[name].codes, column.codes)
            assert list(other.columns[name].uniques) == list(column.uniques)
        else:
            assert other.columns[name].dtype == column.dtype
            assert other.columns[name].flags.writeable == column.flags.writeable  # Numba types
            np.testing.assert_array_equal(other.columns[name], column)  # NaN where NaN
    np.testing.assert_array_equal(other.selection, table.selection)  # kept as a bit mask
    np.testing.assert_array_equal(other.row_ids, table.row_ids)
    assert other.selection.dtype == table.selection.dtype and again.y.dtype == prepared.y.dtype
    np.testing.assert_array_equal(again.y, prepared.y)
    assert {k for k, _, _ in other.remembered()} == {k for k, _, _ in table.remembered()}


def _fit(job: Job, spec, key: str):
    def run_pass(learned, targets, stage):
        result = fit_partials(job, spec, learned, targets, keep_as=key, reuse=key,
                              inputs=later_chains(job.plan), whole="fit")  # fmt: skip
        return [result]

    return fit_levels(job.plan, str(spec.path), run_pass, spec.n_rows)[0]


def test_a_transform_quarantining_rows_the_fit_kept_not_reads_them(source, tmp_path):
    """Missing delays are left missing (no fill): the transform quarantines their rows,
    which the fit did not: their values as read come from reading the partition."""
    schema = fp.Schema({"dep_delay": fp.Float(nullable=True), "arr_delay": fp.Float(),
                        "carrier": fp.Category()})  # fmt: skip
    pipeline = fp.Pipeline(
        schema=schema,
        features=[fp.col("dep_delay") >> fp.Standardize(), fp.col("carrier") >> fp.OneHot()],
        target=fp.expr("late = arr_delay > 15"),
    )
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(source, 5_000)[2]
    params = _fit(job, spec, "q")
    assert kept_values.partition_bytes() > 0
    out = [str(tmp_path / "a"), str(tmp_path / "b")]
    kept = transform_partition(job, spec, params, "fp", out[0], reuse="q")
    assert not kept.get("reused") and kept_values.partition_bytes() == 0
    read = transform_partition(job, spec, params, "fp", out[1])
    a, b = kept["entry"], read["entry"]
    assert a["rows_quarantined"] == b["rows_quarantined"] > 0
    assert pq.read_table(Path(out[0]) / a["quarantine"]["file"]).equals(
        pq.read_table(Path(out[1]) / b["quarantine"]["file"]))  # fmt: skip
    for name, written in a["arrays"].items():
        np.testing.assert_array_equal(np.load(Path(out[0]) / written["file"]),
                                      np.load(Path(out[1]) / b["arrays"][name]["file"]))  # fmt: skip


def test_quarantine_file_types_follow_the_whole_column(tmp_path):
    """An integer column with a missing value only in rows not quarantined is float64 in
    the quarantine's file, as when the whole partition is at hand."""
    frame = pd.read_parquet(SAMPLE).head(5_000)
    frame["hour"] = frame["hour"].astype("Int64")
    frame.loc[10, ["hour", "arr_delay"]] = [None, 5.0]  # kept: hour is nullable
    path = tmp_path / "f.parquet"
    frame.to_parquet(path)
    schema = fp.Schema({"hour": fp.Int(nullable=True, min=0, max=24), "arr_delay": fp.Float(),
                        "tailnum": fp.String(nullable=True)})  # fmt: skip
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.col("hour") >> fp.FillMissing(0) >> fp.Standardize(),
            fp.col("tailnum") >> fp.Hash(n_features=64),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )
    job = Job(pipeline.optimized, pipeline._fit_schema())
    prepared, _ = load_prepared(job, plan_partitions(path, 5_000)[0], "fit")
    assert len(prepared.quarantine) and prepared.raw.column("hour").null_count
    assert 10 not in set(prepared.quarantine.row_ids())
    kept = kept_rows.pack(prepared).unpack()
    whole = prepared.quarantine.to_arrow(prepared.raw, prepared.row_offset)
    part = kept.quarantine.to_arrow(kept.raw, kept.row_offset, kept.raw_ids)
    assert part.equals(whole) and part.schema.field("hour").type == "double"
    pd.testing.assert_frame_equal(
        kept.quarantine.to_frame(kept.raw, kept.row_offset, kept.raw_ids),
        prepared.quarantine.to_frame(prepared.raw, prepared.row_offset),
    )


def test_later_fit_passes_from_the_packed_partition_learn_the_same(source):
    """Target encoding (the fit's target values kept), group statistics and a median
    (passes after the first) fitted from the packed partition equal a reading fit."""
    schema = fp.Schema({"arr_delay": fp.Float(nullable=True), "carrier": fp.Category(),
                        "dest": fp.String(), "hour": fp.Int(),
                        "dep_delay": fp.Float(nullable=True)})  # fmt: skip
    pipeline = fp.Pipeline(
        schema,
        [
            fp.cols("carrier", "hour") >> fp.TargetEncode(),
            fp.cols("dest") >> fp.GroupStats("dep_delay", stats=("mean", "median")),
            fp.col("dep_delay") >> fp.FillMissing("median") >> fp.Standardize(),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(source, 5_000)[1]
    reused = []

    def read_pass(learned, targets, stage):
        return [fit_partials(job, spec, learned, targets)]

    def kept_pass(learned, targets, stage):
        result = fit_partials(job, spec, learned, targets, keep_as="t", reuse="t", whole="fit")
        reused.append(bool(result.get("reused")))
        return [result]

    read = fit_levels(job.plan, str(spec.path), read_pass, spec.n_rows)[0]
    kept = fit_levels(job.plan, str(spec.path), kept_pass, spec.n_rows)[0]
    assert reused[0] is False and all(reused[1:]) and len(reused) > 1
    assert repr(kept) == repr(read)


def test_drift_of_a_kept_partition_measures_the_columns_left_out(source):
    """The target's column is not kept (``y`` is); its drift measures, taken when packing,
    stand in its place: the same measures as a reading transform's."""
    from fastprep.validate import drift

    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    spec = plan_partitions(source, 5_000)[3]
    fitted = drift.profile(load_prepared(job, plan_partitions(source, 5_000)[0], "fit")[0].table)
    assert "arr_delay" in fitted
    params = _fit(job, spec, "d")
    kept = transform_partition(job, spec, params, "fp", None, profile=fitted, reuse="d")
    read = transform_partition(job, spec, params, "fp", None, profile=fitted)
    assert kept.get("reused") and not read.get("reused")
    assert list(kept["entry"]["drift"]) == list(read["entry"]["drift"])
    assert repr(kept["entry"]["drift"]) == repr(read["entry"]["drift"])


def test_a_large_partition_counts_its_buffers_bytes(source):
    """A buffer cut from a retained chunk counts its own bytes against the memory budget,
    not the chunk's (rounded up to a size class): as many partitions stay in memory."""
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    job = Job(pipeline.optimized, pipeline._fit_schema())
    prepared, _ = load_prepared(job, plan_partitions(source, 5_000)[1], "fit")
    packed = kept_rows.pack(prepared)
    rest = packed.size() - packed.buffer.nbytes
    big = packed.with_buffer(spill_files.memory_for(5_000_001))
    assert kept_values.size_of(big.buffer) > 5_000_001  # the chunk
    assert big.size() == 5_000_001 + rest
    assert big.without_buffer().size() == rest


def test_narrowest_looks_past_a_columns_first_values() -> None:
    """A file's first rows can be unlike the rest (whole minutes, then jittered ones):
    the probe is spread over the column, and the answer is always the full check's."""
    whole = np.arange(100_000, dtype=np.float64) % 1000
    jittered = whole.copy()
    jittered[50_000:] += 0.1
    assert kept_rows.narrowest(jittered) == np.float64
    late = whole.copy()
    late[-1] = 4097.0  # float16 holds every value but this one
    assert kept_rows.narrowest(late) == np.float32
    assert kept_rows.narrowest(whole) == np.float16
    one_off = whole.copy()
    one_off[12_345] = 0.1  # not on the probe: found by the full check
    assert kept_rows.narrowest(one_off) == np.float64
