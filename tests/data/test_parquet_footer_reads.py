"""Reading a Parquet source opens each file's footer once: the schema check, the
column-pruned read, the source's column names (unexpected-column findings) and, at
transform, whether the target is there share it."""

from __future__ import annotations

import pyarrow.parquet as pq
import pyarrow.parquet.core as pq_core
import pytest

from fastprep.errors import SchemaError
from fastprep.runtime import execute


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """Paths of every ParquetFile opened (pq.read_schema opens one too)."""
    paths: list[str] = []
    original = pq.ParquetFile

    class Counting(original):
        def __init__(self, source, *args, **kwargs):
            paths.append(str(source))
            super().__init__(source, *args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", Counting)
    monkeypatch.setattr(pq_core, "ParquetFile", Counting)  # what pq.read_schema opens
    return paths


@pytest.mark.parametrize("phase", ["fit", "transform"])
def test_prepare_reads_a_parquet_footer_once(flights_pipeline, flights_parquet, opened, phase):
    plan, schema = flights_pipeline.optimized, flights_pipeline.schema
    prepared = execute.prepare(plan, schema, flights_parquet, phase=phase, backend="auto")
    assert prepared.report.rows_in == 20_000
    assert prepared.y is not None  # the target was read
    assert opened == [str(flights_parquet)]


def test_a_parquet_file_without_the_target_is_transformed_without_y(
    flights_pipeline, flights_parquet, tmp_path, opened
):
    plan, schema = flights_pipeline.optimized, flights_pipeline.schema
    target_only = set(plan.target.columns) - {c for f in plan.features for c in f.columns}
    path = tmp_path / "no_target.parquet"
    pq.write_table(pq.read_table(flights_parquet).drop_columns(sorted(target_only)), path)
    opened.clear()
    prepared = execute.prepare(plan, schema, path, phase="transform", backend="auto")
    assert "the source has no target column(s): transformed without y" in prepared.report.notes
    assert not target_only & set(prepared.raw.column_names)
    assert opened == [str(path)]
    with pytest.raises(SchemaError, match="arr_delay"):  # fit needs the target
        execute.prepare(plan, schema, path, phase="fit", backend="auto")
