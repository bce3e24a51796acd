"""Streamed runs of the weather sample (sorted by airport, 3,000-row row groups).

A streamed fit warns about a whole column as an in-memory fit does: each partition sees
one ``origin``, which is no reason to log "constant" (the merged report already says
nothing of it); ``year`` is one value in every row, and is logged as in memory, not once
per partition and pass. A caller's ``rows_per_partition`` larger than the partitions the
budget allows does not break the budget: the partitions stay the pre-flight's."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO

import fastprep as fp
from fastprep.errors import MemoryBudgetError
from fastprep.runtime import route


@pytest.fixture(scope="module")
def grouped(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("weather") / "weather.parquet"
    table = pq.read_table(REPO / "data_samples" / "weather.parquet")
    pq.write_table(table, path, row_group_size=3000)
    return str(path)


def pipeline() -> fp.Pipeline:
    schema = fp.Schema({"origin": fp.Category(), "year": fp.Int(),
                        "temp": fp.Float(nullable=True)})  # fmt: skip
    return fp.Pipeline(schema, [
        fp.cols("origin") >> fp.OneHot(),
        fp.col("year") >> fp.Standardize(),
        fp.col("temp") >> fp.FillMissing("median") >> fp.Standardize(),
    ])  # fmt: skip


def streaming_budget(p: fp.Pipeline, source: str, fit_only: bool = False) -> int:
    """The largest budget (in MB steps) under which the pre-flight streams this small job
    (its in-memory and streamed peaks are a few MB apart: both mostly the interpreter)."""
    for mb in range(400, 100, -1):
        try:
            pre = route.check(p.optimized, p.schema, source, budget=mb * 10**6,
                              whole_output=False, fit_only=fit_only)  # fmt: skip
        except MemoryBudgetError:
            break
        if pre is not None and pre.execution == "streamed":
            return pre.budget
    raise AssertionError("no budget streams this job")


def warned(caplog) -> list[tuple[str, str]]:
    return [
        (rule, column)
        for record in caplog.records
        if record.levelno == logging.WARNING
        for rule in ("constant", "all_null")
        for column in ("origin", "year", "temp")
        if f"column {column!r}" in record.getMessage() and f"'{rule}'" in record.getMessage()
    ]


def test_a_streamed_fit_logs_whole_column_warnings_once(grouped, tmp_path, caplog):
    p = pipeline()
    with caplog.at_level(logging.WARNING, logger="fastprep"):
        p.fit_and_transform(grouped, memory_budget="100GB")
    in_memory = warned(caplog)
    assert set(in_memory) == {("constant", "year")}  # (by validation, and as an alert)
    caplog.clear()
    budget = streaming_budget(p, grouped)
    with caplog.at_level(logging.WARNING, logger="fastprep"):
        streamed, opened = p.fit_and_transform(grouped, memory_budget=budget,
                                               output_dir=tmp_path / "o")  # fmt: skip
    assert "streamed in this process" in opened.notes[-1]
    assert warned(caplog) == in_memory
    # the merged fit report says the same: only ``year`` is constant
    constant = [f.column for f in streamed.fit_report.findings if f.rule == "constant"]
    assert constant == ["year"]


def test_a_callers_partition_size_stays_within_the_budget(grouped, tmp_path):
    p = pipeline()
    budget = streaming_budget(p, grouped)
    planned = route.check(p.optimized, p.schema, grouped, budget=budget, whole_output=False)
    assert planned.execution == "streamed" and planned.rows_per_partition < 26_115
    _, opened = p.fit_and_transform(grouped, memory_budget=budget, output_dir=tmp_path / "o",
                                    rows_per_partition=10**9)  # fmt: skip
    expected = -(-26_115 // planned.rows_per_partition)
    assert len(opened) >= expected > 1  # not one partition of every row


def test_validation_over_the_budget_is_refused_before_reading(tmp_path):
    """Validation alone reads the source whole: over the memory budget it is refused
    (naming the streamed run that validates it partition by partition), never run. (The
    sample four times over: a fit without X streams only once its input weighs.)"""
    from fastprep.errors import MemoryBudgetError
    from fastprep.runtime import engine

    table = pq.read_table(REPO / "data_samples" / "weather.parquet")
    path = str(tmp_path / "weather4.parquet")
    pq.write_table(pa.concat_tables([table] * 4), path, row_group_size=3000)
    p = pipeline()
    budget = streaming_budget(p, path, fit_only=True)
    with pytest.raises(MemoryBudgetError, match="memory-budget"):
        engine.validate_only(p.optimized, p.schema, path, memory_budget=budget)
    report = engine.validate_only(p.optimized, p.schema, path, memory_budget="100GB")
    assert report.rows_in == 4 * 26_115
