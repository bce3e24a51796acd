"""Reading a Parquet source opens each file's footer once: the schema check, the
column-pruned read and the source's column names (unexpected-column findings) share it."""

from __future__ import annotations

import pyarrow.parquet as pq
import pyarrow.parquet.core as pq_core

from fastprep import execute


def test_prepare_reads_a_parquet_footer_once(flights_pipeline, flights_parquet, monkeypatch):
    opened: list[str] = []
    original = pq.ParquetFile

    class Counting(original):
        def __init__(self, source, *args, **kwargs):
            opened.append(str(source))
            super().__init__(source, *args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", Counting)
    monkeypatch.setattr(pq_core, "ParquetFile", Counting)  # what pq.read_schema opens
    plan, schema = flights_pipeline.optimized, flights_pipeline.schema
    prepared = execute.prepare(plan, schema, flights_parquet, phase="fit", backend="auto")
    assert prepared.report.rows_in == 20_000
    assert opened == [str(flights_parquet)]
