"""Memory pre-flight: cheap facts about a source, checked against a memory budget *before*
anything is loaded, and what the planner does about them.

Facts: the row count (Parquet footers; a file-size estimate for CSV; ``len`` of a
DataFrame), the in-memory bytes per row of the columns the plan reads (Parquet: the column
chunks' uncompressed sizes; CSV: a head sample; DataFrame: its buffers), and — with
``sketch=True`` — each categorical input's cardinality from a mergeable HyperLogLog
(:mod:`fastprep.planning.sketch`) over the Parquet row groups' dictionaries, the whole column of a
DataFrame (chunked ``unique``), or the head of a CSV file (a lower bound, marked ``≥``).

From them: the predicted peak of an in-memory run (``memory_working_copies`` × the input
bytes + the output matrix), the output's size dense vs CSR, and each exact vocabulary's size,
against the budget (``memory_budget=`` > ``$FASTPREP_MEMORY_BUDGET`` > available memory
less ``memory_headroom``). What it decides:

- a source whose in-memory run would not fit goes to Dask partitions (never loaded whole);
- ``OneHot(sparse=None)`` with many categories is CSR (the dense size is shown);
  ``OneHot(sparse=False)`` whose dense block would not fit is an error naming the fix —
  the layout the user declared is never changed behind their back;
- an exact vocabulary that would not fit is an error recommending ``fp.Hash`` — replacing
  a one-hot by hashing changes the features, so it is never automatic;
- an output matrix larger than the budget, when the whole X is asked for, is an error
  recommending ``write_shards`` / ``batches`` / ``transform(output_dir=...)``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fastprep.api.schema import Category, Schema
from fastprep.data import arrow_compute
from fastprep.data.csv_chunks import why_not_cut
from fastprep.data.pandas_objects import is_pandas_frame
from fastprep.data.partitions import (
    ROWS_PER_PARTITION,
    in_memory_rows,
    plan_partitions,
    source_size,
)
from fastprep.data.sources import (
    Source,
    format_of,
    is_path,
    read_in_memory,
    resolve_files,
    source_kind,
)
from fastprep.errors import FastprepError, MemoryBudgetError, PipelineDefinitionError, SourceError
from fastprep.plan.dtypes import LType
from fastprep.plan.expr import Col
from fastprep.plan.nodes import LogicalPlan
from fastprep.plan.steps import Categorify, Hash, OneHot, PowerTransform, Vectorize
from fastprep.planning.planner import (
    NUMBA_JOB_ROW_SAVING,
    CostProfile,
    dask_job_seconds,
    load_profile,
)
from fastprep.planning.sketch import HyperLogLog
from fastprep.runtime import kept_values
from fastprep.runtime.aggregates import partial_kind
from fastprep.runtime.cluster.local import local_workers

if TYPE_CHECKING:
    import pandas as pd

#: rows of a CSV file's head read for bytes per row and the cardinality sketch
CSV_SAMPLE_ROWS = 100_000
#: rows per chunk when sketching a DataFrame column (bounded temporary memory)
FRAME_CHUNK_ROWS = 1_000_000
#: bytes of one exact vocabulary entry beyond its text: value object, count, dict slot
VOCABULARY_ENTRY_BYTES = 96
#: as in :mod:`fastprep.emit.layout`: above this many categories ``OneHot()`` emits CSR
SPARSE_ONEHOT_MIN_CATEGORIES = 64
# as dask.utils.parse_bytes reads them (memory_limit="2G", Kubernetes' "8Gi"): a letter
# alone is decimal, with "i" binary, "B" optional
_UNITS = {"": 1, "b": 1} | {
    unit: base**power
    for power, letter in enumerate("kmgt", start=1)
    for unit, base in ((letter, 1000), (f"{letter}b", 1000), (f"{letter}i", 1024),
                       (f"{letter}ib", 1024))
}  # fmt: skip


def parse_bytes(value: int | float | str) -> int:
    """``2_000_000_000``, ``"2GB"``, ``"512 MiB"`` → bytes."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or value < 1:
            raise PipelineDefinitionError(
                f"memory budget {value!r}: must be a finite number of bytes, at least 1"
            )
        return int(value)
    number = r"(?:[0-9]+(?:_[0-9]+)*\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    match = re.fullmatch(rf"\s*({number})\s*([a-zA-Z]*)\s*", str(value))
    if not match or match.group(2).lower() not in _UNITS:
        raise PipelineDefinitionError(
            f"memory budget {value!r}: give bytes or a size such as '2GB', '2G', '512MiB' or '8Gi'"
        )
    size = float(match.group(1).replace("_", "")) * _UNITS[match.group(2).lower()]
    if not math.isfinite(size):
        raise PipelineDefinitionError(f"memory budget {value!r}: must be a finite size")
    if size < 1:
        raise PipelineDefinitionError(f"memory budget {value!r}: must be at least 1 byte")
    return int(size)


def format_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def available_memory() -> int:
    """Bytes the OS says are available now (psutil), or 4 GB if it cannot tell. On Linux
    read from ``/proc/meminfo`` as psutil does (``MemAvailable``), without importing it."""
    try:
        with open("/proc/meminfo", "rb") as handle:
            for line in handle:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except (ImportError, OSError):
        return 4 * 10**9


def memory_budget(
    explicit: int | float | str | None = None, profile: CostProfile | None = None
) -> tuple[int, str]:
    """The budget in bytes and where it came from."""
    if explicit is not None:
        return parse_bytes(explicit), "memory_budget="
    env = os.environ.get("FASTPREP_MEMORY_BUDGET")
    if env:
        return parse_bytes(env), "$FASTPREP_MEMORY_BUDGET"
    headroom = (profile or load_profile()).memory_headroom
    free = available_memory()
    return int(free * (1 - headroom)), f"available {format_bytes(free)} less {headroom:.0%}"


@dataclass(frozen=True)
class Cardinality:
    """Distinct values of one column: the estimate, how it was got, and its accuracy."""

    column: str
    estimate: int
    method: str
    #: the estimate is a lower bound (a CSV head sample)
    lower_bound: bool = False
    relative_error: float = 0.0

    def describe(self) -> str:
        sign = "≥" if self.lower_bound else "~"
        return f"{sign}{self.estimate:,} distinct ({self.method})"


@dataclass(frozen=True)
class Decision:
    """One thing the pre-flight decided, for one subject, with the numbers in words."""

    subject: str
    choice: str
    reason: str
    #: an error: the run is refused before loading anything
    refuse: bool = False

    def describe(self) -> str:
        return f"{self.subject}: {self.reason} → {self.choice}"


@dataclass
class Preflight:
    """What the planner knew before running, and what it decided."""

    n_rows: int
    rows_exact: bool
    source_kind: str
    input_bytes: int
    peak_bytes: int
    output_bytes: int
    output_layout: str
    budget: int
    budget_source: str
    execution: str = "in-memory"
    #: with ``execution="dask"``: rows per partition so that one worker's share of the
    #: budget holds a partition's working copies
    rows_per_partition: int = ROWS_PER_PARTITION
    cardinalities: dict[str, Cardinality] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    #: the ways to run it that were weighed (peak of all the job's processes, time)
    options: list[Option] = field(default_factory=list)
    chosen: Option | None = None
    #: full passes over the source the fit needs (the transform is one more)
    passes: int = 1
    #: when nothing fits: the smallest budget that would
    minimum_budget: int | None = None

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.budget

    def lines(self) -> list[str]:
        rows = f"{self.n_rows:,}" if self.rows_exact else f"~{self.n_rows:,} (estimated)"
        # the whole process's peak when the options were weighed (the data's otherwise)
        peak = self.options[0].peak_bytes if self.options else self.peak_bytes
        out = [
            f"pre-flight: {rows} rows ({self.source_kind}); used columns "
            f"{format_bytes(self.input_bytes)} in memory; in-memory peak "
            f"~{format_bytes(peak)} vs budget {format_bytes(self.budget)} "
            f"({self.budget_source}, the sum over the job's processes)"
        ]
        out += [f"  {c.column}: {c.describe()}" for c in self.cardinalities.values()]
        out += [f"  {d.describe()}" for d in self.decisions]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_rows": self.n_rows,
            "rows_exact": self.rows_exact,
            "input_bytes": self.input_bytes,
            "peak_bytes": self.peak_bytes,
            "output_bytes": self.output_bytes,
            "output_layout": self.output_layout,
            "budget": self.budget,
            "budget_source": self.budget_source,
            "execution": self.execution,
            "rows_per_partition": self.rows_per_partition,
            "passes": self.passes,
            "minimum_budget": self.minimum_budget,
            "options": [vars(o) for o in self.options],
            "cardinalities": {k: vars(v) for k, v in self.cardinalities.items()},
            "decisions": [vars(d) for d in self.decisions],
        }

    def refuse_if_needed(self) -> None:
        refused = [d for d in self.decisions if d.refuse]
        if refused:
            raise MemoryBudgetError(
                "memory pre-flight: " + "; ".join(d.describe() for d in refused)
            )


def run_preflight(
    plan: LogicalPlan,
    schema: Schema,
    source: Source,
    *,
    budget: int | float | str | None = None,
    sketch: bool | str = True,
    whole_output: bool = True,
    distributable: bool = True,
    profile: CostProfile | None = None,
    fit_only: bool = False,
    cluster: str | None = None,
    passes: int | None = None,
    order_statistics: int = 0,
    transform_only: bool = False,
    value_bytes: int = 4,
) -> Preflight:
    """Facts and decisions for running ``plan`` on ``source`` (reads no data rows except
    for the sketches and a CSV head). ``whole_output``: the caller wants X in memory;
    ``distributable``: Dask partitions are an option (installed and not opted out).
    ``sketch="needed"``: sketch only the columns whose cardinality could break the budget
    (inputs of ``OneHot(sparse=False)``; every vocabulary when even one entry per row would
    not fit), so a routine run reads no column data. ``transform_only``: a fitted
    pipeline's transform (no fit: nothing gathered for a fit on all values).
    ``value_bytes``: a value of X as it is made (4 for float32 and narrower output, whose
    values are made as float32; 8 for float64)."""
    profile = profile or load_profile()
    limit, where = memory_budget(budget, profile)
    n_rows, exact, kind = _rows(source)
    per_row = _bytes_per_row(plan, schema, source)
    input_bytes = int(sum(per_row.values()) * n_rows)
    read = set(schema.read_columns(plan.columns))
    # a lookup column is joined, not read: its distinct values are at most its side table's
    wanted = {c: k for c, k in _categorical_inputs(plan).items() if c in read}
    if sketch == "needed":
        wanted = _needed(plan, wanted, n_rows, limit)
    cards = _cardinalities(wanted, schema, source) if sketch else {}
    tags = _tags_per_row(plan, schema, source)
    decisions, layout, out_bytes = _output_decisions(plan, n_rows, cards, limit, whole_output,
                                                     value_bytes, tags)  # fmt: skip
    decisions += _vocabulary_decisions(plan, schema, source, cards, limit)
    peak = int(input_bytes * profile.memory_working_copies + (out_bytes if whole_output else 0))
    result = Preflight(n_rows, exact, kind, input_bytes, peak, out_bytes, layout, limit, where,
                       cardinalities=cards, decisions=decisions)  # fmt: skip
    gathered = (0, 0) if transform_only else gathered_bytes(plan, n_rows, cross_fit=not fit_only)
    side_tables = lookup_bytes(plan, schema, read=not transform_only)
    passes = DEFAULT_PASSES if passes is None else passes  # 0: a fitted pipeline's transform
    _execution_decision(result, source, profile, distributable, passes,
                        whole_output, fit_only, cluster, 8.0 * order_statistics,
                        gathered, side_tables)  # fmt: skip
    return result


def _rows(source: Source) -> tuple[int, bool, str]:
    size = source_size(source)
    if not is_path(source):
        return size.n_rows, True, type(source).__name__
    files = resolve_files(source)
    fmt = format_of(files[0]) or "csv"
    return (
        size.n_rows,
        size.exact,
        f"{len(files)} {fmt} file(s), {format_bytes(size.bytes_on_disk)}",
    )


def _bytes_per_row(plan: LogicalPlan, schema: Schema, source: Source) -> dict[str, float]:
    """In-memory bytes per row of each column the plan reads (a lookup column: 8 bytes
    joined onto every row; its key columns are read instead)."""
    columns = list(plan.columns)
    read = schema.read_columns(columns)
    joined = [c for c in columns if c not in read]
    if joined:
        keys = [c for c in read if c not in columns and c not in schema.keys_]
        return {
            **_source_bytes([c for c in columns if c in read] + keys, schema, source),
            **dict.fromkeys(joined, 8.0),
        }
    return _source_bytes(columns, schema, source)


def _source_bytes(columns: list[str], schema: Schema, source: Source) -> dict[str, float]:
    text = {c for c in columns if schema[c].ltype in (LType.CATEGORY, LType.STRING)}
    if is_pandas_frame(source):
        return {c: _frame_column_bytes(source[c]) for c in columns}
    if not is_path(source):
        return _arrow_column_bytes(source, columns, text)
    files = resolve_files(source)
    if format_of(files[0]) == "parquet":
        meta = pq.ParquetFile(files[0]).metadata
        names = pq.read_schema(files[0]).names
        sizes = dict.fromkeys(columns, 0)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for j in range(group.num_columns):
                name = names[j] if j < len(names) else None
                if name in sizes:
                    sizes[name] += group.column(j).total_uncompressed_size
        rows = max(meta.num_rows, 1)
        # numbers are float64 once validated; text keeps its bytes (+ int32 codes)
        return {c: (sizes[c] / rows + 4 if c in text else 8.0) for c in columns}
    head = _csv_head(files[0], columns, text)
    n = max(head.num_rows, 1)  # Arrow's buffers as read: numbers at least float64
    return {c: head.column(c).nbytes / n + 4 if c in text else max(head.column(c).nbytes / n, 8.0)
            for c in columns}  # fmt: skip


#: values read from the head of a multi-valued column for its mean tags a row
TAG_SAMPLE_ROWS = 10_000


def _tags_per_row(plan: LogicalPlan, schema: Schema, source: Source) -> dict[str, float]:
    """Each multi-valued input's (``fp.Tags`` text, a list column, a dict column: its keys)
    mean tags a row, from the head of the column (at least 1; 1 when it cannot be read:
    the run itself says why)."""
    out: dict[str, float] = {}
    for feature in plan.features:
        for item in feature.inputs:
            listed = item.name in schema and schema[item.name].ltype in (LType.LIST, LType.DICT)
            if feature.tags is None and not listed:
                continue
            try:
                head = _column_head(source, item.name)
            except (FastprepError, OSError, ValueError, KeyError, TypeError, pa.ArrowException):
                continue
            counts = [_tag_count(v, feature.tags) for v in head if v is not None]
            out[item.name] = max(1.0, sum(counts) / len(counts)) if counts else 1.0
    return out


def _tag_count(value: Any, sep: str | None) -> int:
    """Tags in one value: pieces of text split on ``sep``, or a list's (array's) items, or
    a dict's keys."""
    if isinstance(value, (str, bytes)):
        return value.count(sep if isinstance(value, str) else sep.encode()) + 1 if sep else 1
    return len(value) if hasattr(value, "__len__") else 1


def _column_head(source: Source, column: str) -> list[Any]:
    """About the first :data:`TAG_SAMPLE_ROWS` values of one column, as Python values."""
    if is_pandas_frame(source):
        return source[column].head(TAG_SAMPLE_ROWS).tolist()
    if not is_path(source):
        if source_kind(source) == "arrow":
            return source.column(column).slice(0, TAG_SAMPLE_ROWS).to_pylist()
        return []
    first = resolve_files(source)[0]
    if format_of(first) == "parquet":
        batches = pq.ParquetFile(first).iter_batches(batch_size=TAG_SAMPLE_ROWS, columns=[column])
        return next(batches, pa.record_batch([pa.array([])], names=[column])).column(0).to_pylist()
    return _csv_head_text(first, column, TAG_SAMPLE_ROWS).to_pylist()


def _csv_head(path: str, columns: list[str], text: set[str]) -> pa.Table:
    """About the first ``CSV_SAMPLE_ROWS`` rows of ``columns`` (text as bytes), read by
    Arrow's streaming reader: no pandas CSV parser (its first use cost 0.14-0.22 s of a
    fresh process) and no whole-file read."""
    import pyarrow.csv as pacsv

    delimiter = "\t" if path.lower().endswith(".tsv") else ","
    batches, rows = [], 0
    try:
        # the file closed on every exit (the reader's close leaves it open): an error's
        # traceback would otherwise keep it open
        with pa.input_stream(path) as stream, pacsv.open_csv(
            stream,
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(
                # text as bytes: their size is what matters here, and text that is not UTF-8
                # is validation's to flag, not a reason to fail the pre-flight
                include_columns=columns, column_types={c: pa.binary() for c in text},
                strings_can_be_null=True,
            ),
        ) as reader:  # fmt: skip
            schema = reader.schema
            for batch in reader:
                batches.append(batch)
                rows += batch.num_rows
                if rows >= CSV_SAMPLE_ROWS:
                    break
    except (pa.ArrowInvalid, OSError) as exc:
        raise SourceError(f"cannot read {path!r}: {exc}") from exc
    return pa.Table.from_batches(batches, schema=schema).slice(0, CSV_SAMPLE_ROWS)


def _arrow_column_bytes(source: Any, columns: list[str], text: set[str]) -> dict[str, float]:
    """Bytes per row of an Arrow-backed source's columns: a table's own buffers; for a
    LazyFrame or Dataset (not read here) the types' widths, text guessed at 16 bytes."""
    kind = source_kind(source)
    if isinstance(source, pa.Table) or kind in ("polars", "collected"):
        if kind == "collected":  # measured on the table it was collected into
            table = source.table
        else:
            table = source if isinstance(source, pa.Table) else source.select(columns).to_arrow()
        n = max(table.num_rows, 1)
        return {c: max(table.column(c).nbytes / n, 8.0) + (4 if c in text else 0)
                for c in columns}  # fmt: skip
    return {c: (16.0 + 4 if c in text else 8.0) for c in columns}


def _frame_column_bytes(series: pd.Series) -> float:
    """Bytes per row: the buffers, plus for object strings their mean length in a sample."""
    import pandas as pd

    n = max(len(series), 1)
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.dtype.itemsize + 4
    if series.dtype == object:  # Python strings: pointers only in memory_usage(deep=False)
        positions = np.unique(np.linspace(0, n - 1, min(len(series), 1000)).astype(int))
        sample = series.take(positions).dropna().astype(str)
        mean = float(sample.str.len().mean()) if len(sample) else 0.0
        return mean + 8 + 4  # text + pointer + int32 code once validated
    if pd.api.types.is_string_dtype(series.dtype):  # Arrow-backed: its buffers, + codes
        return float(series.memory_usage(index=False, deep=False)) / n + 4
    return max(float(series.memory_usage(index=False, deep=False)) / n, 8.0)


def _categorical_inputs(plan: LogicalPlan) -> dict[str, str]:
    """Column → the encoder that needs its distinct values (plain column inputs only)."""
    out: dict[str, str] = {}
    for feature in plan.features:
        if feature.tags is not None:  # tags: their vocabulary is not the column's values
            continue
        if isinstance(feature.encoder, (OneHot, Categorify, Hash)):
            for item in feature.inputs:
                if isinstance(item.expr, Col):
                    out.setdefault(item.expr.name, type(feature.encoder).__name__)
    return out


def _needed(plan: LogicalPlan, wanted: dict[str, str], n_rows: int, budget: int) -> dict:
    if n_rows * VOCABULARY_ENTRY_BYTES > budget / 4:
        return wanted
    dense = {i.name for f in plan.features if isinstance(f.encoder, OneHot)
             and f.encoder.sparse is False for i in f.inputs}  # fmt: skip
    return {c: k for c, k in wanted.items() if c in dense}


def _cardinalities(
    wanted: dict[str, str], schema: Schema, source: Source
) -> dict[str, Cardinality]:
    out: dict[str, Cardinality] = {}
    for column in wanted:
        spec = schema[column]
        if isinstance(spec, Category) and spec.categories is not None:
            out[column] = Cardinality(column, len(spec.categories), "declared in the schema")
            continue
        try:
            out[column] = cardinality(source, column)
        except (KeyError, TypeError, pa.ArrowException):  # e.g. a text column of lists
            continue  # (tags): no distinct values to sketch, no estimate
    return out


def cardinality(source: Source, column: str) -> Cardinality:
    """Distinct non-missing values of ``column`` from a HyperLogLog sketch (see module doc)."""
    sketch = HyperLogLog()
    lower = False
    if is_pandas_frame(source):
        import pandas as pd

        values = source[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            present = values.cat.categories[np.unique(values.cat.codes[values.cat.codes >= 0])]
            sketch.add(np.asarray(present))
        else:
            for start in range(0, len(values), FRAME_CHUNK_ROWS):
                chunk = values.iloc[start : start + FRAME_CHUNK_ROWS].dropna()
                sketch.add(np.asarray(pd.unique(chunk)))
        method = "HyperLogLog over the column"
    elif not is_path(source):
        kind = source_kind(source)
        column_data = read_in_memory(source, kind, [column]).column(0)
        for chunk in column_data.chunks:
            values = chunk.dictionary if isinstance(chunk, pa.DictionaryArray) else chunk
            sketch.add(np.asarray(arrow_compute.unique(values.drop_null()).to_pylist(), object))
        method = "HyperLogLog over the column"
    else:
        files = resolve_files(source)
        if format_of(files[0]) == "parquet":
            for path in files:
                _sketch_parquet(path, column, sketch)
            method = "HyperLogLog over the Parquet row groups' dictionaries"
        else:
            head = _csv_head_text(files[0], column, CSV_SAMPLE_ROWS)
            sketch.add(np.asarray(arrow_compute.unique(head.drop_null()).to_pylist(), object))
            lower = len(files) > 1 or len(head) == CSV_SAMPLE_ROWS
            method = f"HyperLogLog over the first {len(head):,} CSV rows"
    estimate = round(sketch.estimate())
    return Cardinality(column, estimate, method, lower, sketch.relative_error)


def _csv_head_text(path: str, column: str, n_rows: int) -> pa.ChunkedArray:
    """The first ``n_rows`` values of one CSV column, as text (missing: null); read in
    blocks by Arrow, so only the head of the file is parsed."""
    import pyarrow.csv as pacsv  # on use: a Parquet job needs none of it

    parse = pacsv.ParseOptions(delimiter="\t" if path.lower().endswith(".tsv") else ",")
    convert = pacsv.ConvertOptions(
        include_columns=[column], column_types={column: pa.string()}, strings_can_be_null=True
    )
    chunks: list[pa.Array] = []
    rows = 0
    with pacsv.open_csv(path, parse_options=parse, convert_options=convert) as reader:
        for batch in reader:
            chunks.append(batch.column(0))
            rows += batch.num_rows
            if rows >= n_rows:
                break
    return pa.chunked_array(chunks, type=pa.string()).slice(0, n_rows)


def _sketch_parquet(path: str, column: str, sketch: HyperLogLog) -> None:
    """One sketch per row group (its dictionary), merged: memory bounded by a row group."""
    try:
        handle = pq.ParquetFile(path, read_dictionary=[column])
        for g in range(handle.metadata.num_row_groups):
            array = handle.read_row_group(g, columns=[column]).column(0)
            part = HyperLogLog(sketch.p)
            for chunk in array.chunks:
                values = chunk.dictionary if isinstance(chunk, pa.DictionaryArray) else chunk
                part.add(np.asarray(arrow_compute.unique(values.drop_null()).to_pylist(), object))
            sketch.registers = sketch.merge(part).registers
    except (pa.ArrowInvalid, OSError) as exc:
        raise SourceError(f"cannot read {path!r} for the cardinality sketch: {exc}") from exc


def _output_decisions(
    plan: LogicalPlan, n_rows: int, cards: dict[str, Cardinality], budget: int, whole: bool,
    value_bytes: int = 4, tags: dict[str, float] | None = None,
) -> tuple[list[Decision], str, int]:  # fmt: skip
    """Per encoder: its width and layout; then the whole output's size against the budget
    (``value_bytes`` a value; ``tags``: a multi-valued input's mean tags a row, one entry
    of X each)."""
    tags = tags or {}
    decisions: list[Decision] = []
    dense_width, nnz_per_row, sparse, declared_dense = 0, 0, False, False
    for feature in plan.features:
        encoder = feature.encoder
        names = ", ".join(i.name for i in feature.inputs)
        if isinstance(encoder, OneHot):
            widths = [(cards[i.name].estimate + 1) if i.name in cards else None
                      for i in feature.inputs]  # fmt: skip
            known = [w for w in widths if w is not None]
            width = sum(known)
            dense = n_rows * width * value_bytes
            nnz_per_row += sum(tags.get(i.name, 1.0) for i in feature.inputs)
            many = bool(known) and max(known) > SPARSE_ONEHOT_MIN_CATEGORIES
            if encoder.sparse is True or (encoder.sparse is None and many):
                sparse = True
                if known:
                    decisions.append(Decision(
                        f"onehot({names})", "CSR",
                        f"~{width:,} categories × {n_rows:,} rows dense = "
                        f"{format_bytes(dense)}" + (f" > budget {format_bytes(budget)}"
                                                    if dense > budget else ""),
                    ))  # fmt: skip
            else:
                unknown = len(widths) - len(known)  # sparse=None: CSR above the threshold
                dense_width += width + unknown * (SPARSE_ONEHOT_MIN_CATEGORIES + 1)
                declared_dense = declared_dense or encoder.sparse is False
        elif isinstance(encoder, Vectorize):  # CSR: an entry per key of a row's dict
            sparse = True
            nnz_per_row += sum(tags.get(i.name, 1.0) for i in feature.inputs)
        elif isinstance(encoder, Hash):
            sparse = True
            nnz_per_row += sum(tags.get(i.name, 1.0) for i in feature.inputs)
            seen = [f"~{cards[i.name].estimate:,}" for i in feature.inputs if i.name in cards]
            decisions.append(Decision(
                f"hash({names})", "CSR",
                f"{' + '.join(seen) or 'the'} distinct values hashed into "
                f"{encoder.n_features:,} columns (declared)",
            ))  # fmt: skip
        else:
            dense_width += len(feature.inputs)
            nnz_per_row += len(feature.inputs)
    if sparse:  # every block goes into one CSR matrix: a value + a 4-byte index per entry
        out_bytes, layout = int(n_rows * (nnz_per_row * (value_bytes + 4) + 8)), "csr"
    else:
        out_bytes, layout = n_rows * dense_width * value_bytes, "dense"
    process = PROCESS_BASE_BYTES + RUN_FIXED_BYTES  # (when the process alone does not fit,
    # the execution decision says so, with the smallest budget that would)
    if whole and out_bytes + process > budget and process <= budget * (1 - BUDGET_MARGIN):
        decisions.append(Decision(
            "output", "refused",
            f"X ({layout}) ~{format_bytes(out_bytes)} + ~"
            f"{format_bytes(PROCESS_BASE_BYTES + RUN_FIXED_BYTES)} for the process > budget "
            f"{format_bytes(budget)}; write "
            "it in pieces: fit_transform(..., output_dir=) or transform(..., output_dir=) "
            "(written shard by shard, returned mapped), fitted.write_shards(source, folder), "
            "fitted.batches(source)"
            + ("; OneHot(sparse=False) was declared: sparse=None would give CSR"
               if declared_dense and not sparse else ""), refuse=True,
        ))  # fmt: skip
    return decisions, layout, out_bytes


def _vocabulary_decisions(
    plan: LogicalPlan, schema: Schema, source: Source, cards: dict[str, Cardinality],
    budget: int,
) -> list[Decision]:  # fmt: skip
    """An exact vocabulary larger than the budget is refused, with ``fp.Hash`` suggested."""
    out = []
    for feature in plan.features:
        if not isinstance(feature.encoder, (OneHot, Categorify)):
            continue
        for item in feature.inputs:
            card = cards.get(item.name)
            if card is None:
                continue
            size = card.estimate * VOCABULARY_ENTRY_BYTES
            if size > budget:
                bits = max(10, min(24, math.ceil(math.log2(max(card.estimate, 2)))))
                out.append(Decision(
                    f"vocabulary({item.name})", "refused",
                    f"~{card.estimate:,} categories × {VOCABULARY_ENTRY_BYTES} B = "
                    f"{format_bytes(size)} > budget {format_bytes(budget)}; hashing changes "
                    f"the features, so it is not automatic: use fp.Hash(n_features=2**{bits})",
                    refuse=True,
                ))  # fmt: skip
    return out


#: resident memory of a fastprep process before any data, without Numba: the interpreter,
#: numpy, pandas, pyarrow (measured 161 MB after a 20k-row flights run on numpy paths, 121 MB
#: after ``import fastprep``; 2-core VM, 2026-12-05)
PROCESS_BASE_BYTES = 170 * 10**6
#: Numba and the kernels it loads from the disk cache, resident once a job is large enough
#: to import it (measured 350 MB after the same run with every stage on Numba: +190 MB)
NUMBA_RESIDENT_BYTES = 190 * 10**6
#: working memory of a run beyond its rows: Arrow/NumPy pools, the prefetch thread, the
#: shard writer's buffer (the intercept of peak over partition rows: 246 MB less the base,
#: streamed partitions of 50k..1M flights rows; 184 MB less the base in memory)
RUN_FIXED_BYTES = 80 * 10**6
#: a lookup's side table at fit: the process reading it peaks at this many times its used
#: columns' bytes as stored (read, validated, the key's index built; measured with an int
#: key and three float columns at 1M and 4M rows: 208 and 220 B a row over 32 B stored)
LOOKUP_READ_COPIES = 7.0
#: a streamed partition's peak per row, in multiples of its used columns' in-memory bytes
#: plus its X bytes (read frame, validated table, step temporaries, X, its shard write;
#: measured 492 B per flights row = 3.1 x (68 + 72) + the prefetched 68, least squares
#: over 50k..1M-row partitions of 2M rows, peaks 278 / 305 / 359 / 475 / 748 MB)
STREAM_WORKING_COPIES = 3.1
#: an in-memory run whose kernels are Numba's holds fewer working copies than
#: ``memory_working_copies`` (numpy paths: measured 385 B per flights row at 336k-1M rows
#: = 4.7 x 67 + 72; Numba: 292 B per row at 2M and 10M = 3.3 x 67 + 72)
NUMBA_WORKING_COPIES_SAVED = 1.4
#: the next partition's columns, read ahead while the current one is computed
STREAM_PREFETCH_COPIES = 1.0
#: a fit on all of a column's values, per value, beyond the values it is given (the present
#: values' copy, numpy's percentile / scipy's likelihood search): measured with
#: tracemalloc on 2M log-normal values, 5% missing (2026-12-05, 2-core VM): quantile
#: 15.3 B (uniform or normal), Yeo-Johnson 52.8 B, Box-Cox 208 B (scipy's boxcox_normmax)
#: and on 20k / 200k / 1M values without missing: Yeo-Johnson 40-41 B, Box-Cox 219-228 B
GATHERED_FIT_BYTES = {
    "quantile": 16.0,
    "yeo-johnson": 56.0,
    "box-cox": 230.0,
    "group_median": 24.0,
}  # a group median: the sort by (group, value)
#: a power transform's fit imports scipy.stats (its likelihood search): 47 MB resident
#: measured on top of ``import fastprep``
GATHERED_FIT_IMPORT_BYTES = {"quantile": 0, "yeo-johnson": 50 * 10**6, "box-cox": 50 * 10**6}
#: plans keep this fraction of the budget free (allocator fragmentation, sampling noise)
BUDGET_MARGIN = 0.1
#: a Dask job's processes besides its workers: the scheduler, and per worker a nanny
DASK_SCHEDULER_BYTES = 150 * 10**6
DASK_NANNY_BYTES = 100 * 10**6
#: a streamed run's time per row and pass, as a fraction of ``run_row_seconds``: each
#: extra fit pass re-reads and re-validates its partitions
STREAM_PASS_FRACTION = 0.35
#: how much faster a local Dask cluster must be predicted than the best in-process option
#: to be started unasked (the cost model's largest error on the runs it was fitted to)
LOCAL_CLUSTER_MARGIN = 1.6
#: a partitioned fit's passes when the caller does not say (a level of moments + a median)
DEFAULT_PASSES = 2
#: partitions smaller than this cost more in per-partition overhead than they save
MIN_PARTITION_ROWS = 1_000


@dataclass(frozen=True)
class Option:
    """One way to run the job, with its predicted peak (all its processes) and time."""

    name: str
    peak_bytes: int
    seconds: float
    rows_per_partition: int = 0
    partitions: int = 1
    #: None when possible; else why not
    impossible: str | None = None
    #: bytes reserved for the values behind order statistics (a streamed fit keeps them)
    kept_bytes: int = 0
    #: bytes a fit on all values (quantile / power transforms) gathers and works in
    gathered_bytes: int = 0

    def describe(self, budget: int) -> str:
        size = (f"{self.partitions} partition(s) of ≤{self.rows_per_partition:,} rows, "
                if self.partitions > 1 or self.name != "in-memory" else "")  # fmt: skip
        over = " > budget" if self.peak_bytes > budget * (1 - BUDGET_MARGIN) else ""
        why = f" ({self.impossible})" if self.impossible else ""
        if self.kept_bytes:
            why += f" (keeping {format_bytes(self.kept_bytes)} of median values: one read fewer)"
        if self.gathered_bytes:
            why += (f" (incl. {format_bytes(self.gathered_bytes)} for the fit on all values "
                    "of its quantile/power transforms, target encodings or group medians)")  # fmt: skip
        return (f"{self.name}: {size}peak ~{format_bytes(self.peak_bytes)}{over}, "
                f"~{self.seconds:.3g} s{why}")  # fmt: skip


#: a partitioned target-encoding fit's working bytes a row beyond the gathered rows: the
#: concatenated codes and target (12), slots (8), a bincount temporary (8), the encoded
#: target (8) — an estimate from the arrays the fit allocates, not a measurement
TARGET_GATHER_ROW_BYTES = 36
#: a partitioned fit_transform's cross-fit beyond that, a row: the folds as drawn (8),
#: numpy's per-fold copies of one input's slots and target (16), plus a byte a row per
#: fold for the folds' training masks — an estimate from the arrays, not a measurement
CROSS_FIT_ROW_BYTES = 24


def lookup_bytes(plan: LogicalPlan, schema: Schema, *, read: bool = True) -> tuple[int, int]:
    """``(peak, held)``: the memory the lookups' side tables the plan uses take in the
    process that reads them (:data:`LOOKUP_READ_COPIES` times their used columns, as
    stored) and in each process that holds them to join. ``read=False``: a fitted
    pipeline's transform, whose tables are in memory already (both are their size)."""
    from fastprep.api.lookup import JoinedSchema

    if not isinstance(schema, JoinedSchema):
        return 0, 0
    peak = held = 0
    for name, columns in schema.used(plan.columns).items():
        lookup = schema.lookups[name]
        wanted = [*lookup.key_columns, *(c for c in columns if c not in lookup.key_columns)]
        stored = (schema.tables or {}).get(name)
        if stored is not None:  # 8 bytes a value: numbers as float64/int64, text as codes
            size = stored.n_rows * 8 * len(wanted)
        else:
            try:
                rows = source_size(lookup.source).n_rows
                size = int(rows * sum(_source_bytes(wanted, lookup.schema, lookup.source).values()))
            except (FastprepError, OSError, ValueError, KeyError, pa.ArrowException):
                continue  # an unreadable table: its read at fit says why
        peak += int(LOOKUP_READ_COPIES * size) if read else size
        held += size
    return peak, held


def gathered_bytes(plan: LogicalPlan, n_rows: int, cross_fit: bool = False) -> tuple[int, int]:
    """What the fit of the steps fitted on all values at once (``QuantileTransform``,
    ``PowerTransform``) needs over ``n_rows`` rows: ``(partitioned, in_memory)``. A
    partitioned fit gathers 8 bytes a row per such step (held from their pass to their
    fit) and concatenates each (8 more), then fits: the largest fit's working memory
    (:data:`GATHERED_FIT_BYTES`; :data:`GATHERED_FIT_IMPORT_BYTES` for what it imports)
    on top; an in-memory fit has its values already, and needs that working memory only.
    ``cross_fit``: the fit is a fit_transform's (a target encoding's folds are drawn over
    the gathered rows)."""
    # one fit per (input, step), as the fit's levels gather them (their "values" targets:
    # fitted on all values, neither by order statistics nor by moments)
    steps = [step for feature in plan.features for _ in feature.inputs for step in feature.steps
             if step.needs_fit and partial_kind(step) == "values"]  # fmt: skip
    # target encoding gathers each input's rows (a 4-byte code and the 8-byte target a row),
    # held through its pass, then concatenates one input's and fits on it (slots and
    # bincount temporaries): TARGET_GATHER_ROW_BYTES a row on top, for the largest
    encoded = sum(len(f.inputs) for f in plan.features for s in f.steps
                  if getattr(s, "needs_target", False))  # fmt: skip
    target = (12 * encoded + TARGET_GATHER_ROW_BYTES) * n_rows if encoded else 0
    folds = [getattr(s, "cv", 0) for f in plan.features for s in f.steps
             if getattr(s, "fit_transform_differs", False)]  # fmt: skip
    if cross_fit and folds:  # a fit_transform: the folds over all rows, drawn on the client
        target += (CROSS_FIT_ROW_BYTES + max(folds)) * n_rows
    # a group median gathers each present value with its group (16 bytes a row), then
    # concatenates them (16 more) and sorts them by (group, value)
    medians = group_medians(plan)
    grouped = 32 * len(medians) * n_rows
    grouped_fit = int(GATHERED_FIT_BYTES["group_median"] * n_rows) if medians else 0
    if not steps:
        return target + grouped + grouped_fit, grouped_fit
    kinds = [s.method if isinstance(s, PowerTransform) else "quantile" for s in steps]
    fitting = max(int(GATHERED_FIT_BYTES[k] * n_rows) for k in kinds) + max(
        GATHERED_FIT_IMPORT_BYTES[k] for k in kinds)  # fmt: skip
    fitting = max(fitting, grouped_fit)
    return 8 * (len(steps) + 1) * n_rows + fitting + target + grouped, fitting


def group_medians(plan: LogicalPlan) -> list[Any]:
    """The ``GroupStats`` steps with a median: their partitioned fit gathers every value
    (one per step, whatever its outputs)."""
    return [s for f in plan.features for s in f.steps
            if s.kind == "group" and "median" in getattr(s, "stats", ())]  # fmt: skip


def imports_numba(rows: int, profile: CostProfile) -> bool:
    """Whether a job over ``rows`` rows imports Numba (the planner's rule,
    :func:`fastprep.planning.planner.job_imports_numba`, for a fresh process: the
    pre-flight predicts the job's processes, not this one's state)."""
    return rows * NUMBA_JOB_ROW_SAVING > profile.numba_import_seconds


def _planned(source: Source, rows: int, workers: int = 1) -> tuple[int, int] | None:
    """The partitions a Parquet source is cut into for ``rows`` rows each on ``workers``
    workers (row groups are packed whole, so there can be more of them, smaller; balanced
    over several workers), and the largest one's rows; None where sizes are known only once
    read (CSV) or the source is not files."""
    if not is_path(source):
        return None
    try:
        specs = plan_partitions(source, rows, workers)
    except (SourceError, OSError, ValueError, pa.ArrowException):
        return None
    sizes = [s.n_rows for s in specs]
    if not sizes or any(n is None for n in sizes):
        return None
    return len(specs), max(int(n) for n in sizes if n is not None)


def smallest_partition_rows(source: Source) -> int:
    """The fewest rows a partition of ``source`` can have: its largest Parquet row group,
    a CSV file's (estimated) rows when it cannot be cut into chunks (compressed, or a quote
    inside an unquoted value: :func:`fastprep.data.csv_chunks.why_not_cut`), a
    DataFrame's minimum."""
    if not is_path(source):  # a table in memory is sliced; a Dataset's fragments vary
        kind = source_kind(source)
        return MIN_PARTITION_ROWS if kind == "dataset" else min(
            in_memory_rows(source), MIN_PARTITION_ROWS)  # fmt: skip
    largest = 0
    for path in resolve_files(source):
        if format_of(path) == "parquet":
            meta = pq.ParquetFile(path).metadata
            groups = (meta.row_group(g).num_rows for g in range(meta.num_row_groups))
            largest = max(largest, *groups, 0)
        else:
            rows = source_size(path).n_rows
            # a CSV file cut at its line ends: chunks as small as partitions are asked (a
            # small file is not checked: that reads it)
            cut = rows <= MIN_PARTITION_ROWS or not why_not_cut(path)
            largest = max(largest, min(rows, MIN_PARTITION_ROWS) if cut else rows)
    return largest


def uncut_files(source: Source) -> list[str]:
    """Why each CSV file of ``source`` that cannot be cut into chunks is read whole."""
    if not is_path(source):
        return []
    reasons = (why_not_cut(p) for p in resolve_files(source) if format_of(p) == "csv")
    return [r for r in reasons if r]


def _options(
    result: Preflight, source: Source, profile: CostProfile, distributable: bool, passes: int,
    fit_only: bool = False, cluster: str | None = None, kept_per_row: float = 0.0,
    gathered: tuple[int, int] = (0, 0), side_tables: tuple[int, int] = (0, 0),
) -> list[Option]:  # fmt: skip
    """In memory, streamed in this process, on a local Dask cluster: each one's predicted
    peak summed over every process of the job, and time. ``gathered``: what a fit on all
    values needs, partitioned and in memory (:func:`gathered_bytes`); ``side_tables``:
    the lookups' tables, read by this process and held by every worker
    (:func:`lookup_bytes`)."""
    n = max(result.n_rows, 1)
    # a partitioned fit holds the gathered values in this process (a cluster's client)
    # until it fits on them: that memory is there beside every partition's
    gather, fitting = gathered
    usable = result.budget * (1 - BUDGET_MARGIN)
    # a collected query (LazyFrame, filtered Dataset) is a table in memory by now, too
    resident = not is_path(source) and source_kind(source) in (
        "pandas", "polars", "arrow", "collected"
    )  # fmt: skip
    frame = result.input_bytes if resident else 0  # a table in memory: already resident
    per_row = (STREAM_WORKING_COPIES * (result.input_bytes + result.output_bytes)
               + STREAM_PREFETCH_COPIES * result.input_bytes) / n  # fmt: skip
    smallest = max(1, smallest_partition_rows(source))
    # Numba is counted in by the job's rows, for a partitioned job too: a streamed job
    # imports it by its own rows (``streamed.numba_for_the_job``), and a worker's partition
    # goes to Numba once the planner has learned that its kernels repay it
    numba = imports_numba(n, profile)
    process = PROCESS_BASE_BYTES + (NUMBA_RESIDENT_BYTES if numba else 0)
    read_tables, held_tables = side_tables
    base = process + read_tables  # this process reads the side tables
    copies = profile.memory_working_copies - (NUMBA_WORKING_COPIES_SAVED if numba else 0.0)
    working = int(result.input_bytes * max(copies, 1.0))
    x_bytes = 0 if fit_only else result.output_bytes  # an in-memory run builds all of X
    out = [Option("in-memory", base + RUN_FIXED_BYTES + working + x_bytes + fitting,
                  n * profile.run_row_seconds, gathered_bytes=fitting)]  # fmt: skip

    def partitioned(name: str, fixed: int, workers: int, seconds_of: Callable[[int], float],
                    impossible: str | None = None) -> Option:  # fmt: skip
        room = (usable - fixed - frame) / workers - RUN_FIXED_BYTES
        rows = int(min(ROWS_PER_PARTITION, max(room / max(per_row, 1), MIN_PARTITION_ROWS)))
        rows = max(rows, smallest)
        parts, largest = _planned(source, rows, workers) or (max(1, math.ceil(n / rows)), rows)
        peak = fixed + frame + workers * (RUN_FIXED_BYTES + int(min(largest, n) * per_row))
        return Option(name, int(peak), seconds_of(parts), rows, parts, impossible,
                      gathered_bytes=gather)  # fmt: skip

    stream_row = profile.run_row_seconds * (1 + STREAM_PASS_FRACTION * passes)
    streamed = partitioned("streamed in this process", base + gather, 1,
                           lambda parts: parts * 0.02 + n * stream_row)  # fmt: skip
    if kept_per_row and passes > 1:
        # the values behind the order statistics kept from the first pass (one read
        # fewer), when that leaves the partitions at least half their size
        kept = int(kept_per_row * n)
        faster = profile.run_row_seconds * (1 + STREAM_PASS_FRACTION * (passes - 1))
        keeping = partitioned("streamed in this process", base + gather + kept, 1,
                              lambda parts: parts * 0.02 + n * faster)  # fmt: skip
        if keeping.rows_per_partition >= streamed.rows_per_partition / 2:
            streamed = replace(keeping, kept_bytes=kept)
    out.append(streamed)
    workers = local_workers()
    why = None if distributable else "Dask partitions are off or not installed"
    if why is None and not is_path(source):
        why = f"a {type(source).__name__} is read by the calling process: pass a Parquet path"
    # the fit's passes and the transform's (the cost model of docs/distributed.md)

    def dask_seconds(parts: int, on: int, start: bool) -> float:
        # the fit's later passes run from the values its first pass kept on the workers
        # when a worker's share fits their store: a task per worker, no rows
        light = 0
        if passes > 1 and kept_per_row * n / on <= kept_values.KEPT_BYTES:
            light = passes - 1
        if fit_only:
            return dask_job_seconds(profile, n, parts, on, passes - light, start, light=light)
        if passes == 0:  # a fitted pipeline's transform: one pass reading its partitions
            return dask_job_seconds(profile, n, parts, on, 1, start)
        # the transform takes the partitions the fit kept on the workers, in memory or
        # in their spill files (packed: the input's bytes a row are an upper bound)
        per_worker = max(-(-parts // on), 1)
        placed = kept_values.placement(result.input_bytes / max(parts, 1), per_worker)
        return dask_job_seconds(profile, n, parts, on, passes - light, start, light=light,
                                kept=sum(placed) / per_worker)  # fmt: skip

    if cluster == "external":  # its processes are the cluster's machines', not this one's
        out.append(partitioned("Dask partitions on the scheduler named", base + gather, 1,
                               lambda parts: dask_seconds(parts, 1, False), why))  # fmt: skip
        return out
    dask_fixed = base + (process + held_tables) * workers + DASK_SCHEDULER_BYTES + (
        DASK_NANNY_BYTES * workers) + gather  # fmt: skip
    out.append(partitioned(f"local Dask cluster of {workers} worker(s)", dask_fixed, workers,
                           lambda parts: dask_seconds(parts, workers, True), why))  # fmt: skip
    return out


def _execution_decision(
    result: Preflight, source: Source, profile: CostProfile, distributable: bool,
    passes: int = 2, whole_output: bool = False, fit_only: bool = False,
    cluster: str | None = None, kept_per_row: float = 0.0,
    gathered: tuple[int, int] = (0, 0), side_tables: tuple[int, int] = (0, 0),
) -> None:  # fmt: skip
    """Memory first — every process of the job counted, against the budget — then
    predicted time: in memory, streamed partition by partition in this process, or Dask.
    ``cluster``: "local" or "external" when the caller named a scheduler: over the budget,
    the cluster is then preferred to streaming (if its peak fits)."""
    options = _options(result, source, profile, distributable, passes, fit_only, cluster,
                       kept_per_row, gathered, side_tables)  # fmt: skip
    result.options = options
    usable = result.budget * (1 - BUDGET_MARGIN)
    feasible = [o for o in options if o.impossible is None and o.peak_bytes <= usable]
    table = "; ".join(o.describe(result.budget) for o in options)
    if not feasible:
        possible = [o for o in options if o.impossible is None]
        least = min(o.peak_bytes for o in possible)
        result.minimum_budget = _round_up(least / (1 - BUDGET_MARGIN))
        hint = ""
        if isinstance(source, (str, os.PathLike)) and smallest_partition_rows(source) > \
                MIN_PARTITION_ROWS:  # fmt: skip
            hint = (
                f"; a partition is at least {smallest_partition_rows(source):,} rows "
                "(a Parquet row group, a CSV file that cannot be cut): smaller row groups "
                "or files lower it"
            )
            uncut = uncut_files(source)
            if uncut:
                hint += f" ({uncut[0]}{f'; and {len(uncut) - 1} more' if len(uncut) > 1 else ''})"
        gathering = max((o.gathered_bytes for o in possible[1:]), default=0)
        if gathering > least / 2:
            hint += (
                f"; the fit of its quantile/power transforms on all values holds "
                f"~{format_bytes(gathering)}: fit on a sample (pipeline.fit(sample)), then "
                "transform under the budget"
            )  # fmt: skip
        result.decisions.append(Decision(
            "execution", "refused",
            f"{table}: none fits the {format_bytes(result.budget)} budget (less "
            f"{BUDGET_MARGIN:.0%} margin); the smallest budget that would work is "
            f"memory_budget='{format_bytes(result.minimum_budget).replace(' ', '')}'"
            + hint, refuse=True))  # fmt: skip
        return
    memory = options[0]
    in_process = [o for o in feasible if not o.name.startswith("local Dask")]
    best = min(feasible, key=lambda o: o.seconds)
    if not cluster and in_process and best not in in_process:
        # a cluster started on this machine, unasked, must win by more than the Dask cost
        # model's error (fitted to 2 shared cores: up to 54% off), else one process does
        # the job with nothing started and nothing moved between processes
        fastest_here = min(in_process, key=lambda o: o.seconds)
        if best.seconds * LOCAL_CLUSTER_MARGIN > fastest_here.seconds:
            best = fastest_here
    if cluster and best is not memory and options[2] in feasible:
        best = options[2]
    result.chosen = best
    result.rows_per_partition = best.rows_per_partition or ROWS_PER_PARTITION
    result.passes = passes
    if best is memory:
        result.decisions.append(Decision("execution", "in-memory", table))
        return
    result.execution = "streamed" if best.name.startswith("streamed") else "dask"
    reason = (
        f"in-memory peak ~{format_bytes(memory.peak_bytes)} > {format_bytes(usable)} "
        f"({format_bytes(result.budget)} budget less {BUDGET_MARGIN:.0%}); "
        if memory not in feasible
        else ""
    ) + table
    if whole_output:
        result.decisions.append(Decision(
            "execution", "refused",
            f"{reason}; X is never gathered into memory over the budget: pass output_dir= "
            "(a folder: the result is written there shard by shard and returned mapped, "
            "fp.open_output), or use fitted.write_shards / fitted.batches", refuse=True))  # fmt: skip
        return
    choice = (f"{best.name.replace('local Dask cluster', 'Dask partitions')} "
              f"(~{best.partitions} of ≤{best.rows_per_partition:,} rows, "
              f"{f'{passes} fit pass(es) + transform' if passes else 'transform'}, "
              f"predicted peak ~{format_bytes(best.peak_bytes)}, "
              f"~{best.seconds:.3g} s)")  # fmt: skip
    result.decisions.append(Decision("execution", choice, reason + "; never loaded whole"))


def _round_up(n: float) -> int:
    """Up to two significant digits (10 MB steps for a budget of hundreds of MB)."""
    step = 10 ** max(0, int(math.log10(max(n, 1))) - 1)
    return int(math.ceil(n / step) * step)
