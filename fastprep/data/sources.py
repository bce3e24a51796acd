"""Read a source — a file, a directory, a glob, or a table in memory — column-pruned.

Files (CSV/Parquet, a directory of them, a glob) and the in-memory tables users have — a
pandas DataFrame, a pyarrow Table or ``pyarrow.dataset.Dataset``, a Polars DataFrame or
LazyFrame — are read into one *raw* table: a pyarrow Table (files and every Arrow-backed
source: no detour through pandas, validation reads the Arrow buffers) or the caller's
pandas DataFrame. Only the columns the plan uses are read (a LazyFrame selects them before
it is collected). Text columns of a CSV are read as strings so codes like ``"007"`` are not
parsed as numbers. Files of a glob are read in sorted order; row ids are positions in that
concatenation (for a table in memory: its row positions).
"""

from __future__ import annotations

import contextlib
import glob as globlib
import io
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fastprep.data import arrow_compute as ac
from fastprep.data.arrow_arrays import numeric_array
from fastprep.data.pandas_objects import is_pandas_frame
from fastprep.errors import SchemaError, SourceError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow.csv as pacsv

#: a path/glob, a pandas DataFrame, a pyarrow Table or Dataset, a Polars DataFrame/LazyFrame
Source: TypeAlias = "pd.DataFrame | pa.Table | str | os.PathLike[str] | Any"
#: what a read gives validation: a pyarrow Table, or the caller's pandas DataFrame
Raw: TypeAlias = "pd.DataFrame | pa.Table"
PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".tsv")


@dataclass(frozen=True)
class SourceInfo:
    """What was read, for the report."""

    description: str
    files: tuple[str, ...] = ()
    #: every column of the source (of its first file), as seen by the read; None: not kept
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True, eq=False)
class CollectedQuery:
    """The columns a run reads of a source that recomputes a query on every read (a Polars
    LazyFrame, a filtered pyarrow Dataset), computed once by :func:`collect_once`: the
    pre-flight's row count, the read and each partition's slice then use this table."""

    table: pa.Table
    #: every column of the source (unexpected-column findings; a target absent at transform)
    names: tuple[str, ...]
    #: the source's own kind (``"polars_lazy"`` or ``"dataset"``), for descriptions
    kind: str


def source_kind(source: Source) -> str:
    """``"path"``, ``"pandas"``, ``"arrow"`` (a pyarrow Table), ``"dataset"`` (a
    ``pyarrow.dataset.Dataset``), ``"polars"``, ``"polars_lazy"`` or ``"collected"`` (a
    :class:`CollectedQuery`); else a SourceError.
    (Polars is recognized by its module name: nothing here imports it.)"""
    if isinstance(source, (str, os.PathLike)):
        return "path"
    if isinstance(source, CollectedQuery):
        return "collected"
    if is_pandas_frame(source):
        return "pandas"
    if isinstance(source, pa.Table):
        return "arrow"
    module = type(source).__module__ or ""
    if module.startswith("polars"):
        import polars as pl

        if isinstance(source, pl.DataFrame):
            return "polars"
        if isinstance(source, pl.LazyFrame):
            return "polars_lazy"
    if module.startswith("pyarrow") and hasattr(source, "get_fragments"):
        import pyarrow.dataset as pads

        if isinstance(source, pads.Dataset):
            return "dataset"
    raise SourceError(
        "source must be a CSV/Parquet path, directory or glob, a pandas or Polars "
        "DataFrame, a Polars LazyFrame, or a pyarrow Table or Dataset; "
        f"got {type(source).__name__}"
    )


def is_path(source: Source) -> bool:
    return isinstance(source, (str, os.PathLike))


def collect_once(source: Source, columns: Iterable[str]) -> Source:
    """A LazyFrame or a filtered Dataset as a :class:`CollectedQuery` of ``columns`` (those
    it has: a missing one is the read's error to name); any other source as it is.

    Each read of such a source re-runs its query (a row count, the read, every partition's
    slice), so a run computes it once up front and works on the result; its columns are
    then all in memory at once, as a table's would be. A filtered Dataset also cannot list
    its fragments, so its partitions are slices of the result (row ids: positions in it)."""
    kind = source_kind(source)
    if isinstance(source, CollectedQuery) or kind not in ("polars_lazy", "dataset"):
        return source
    if kind == "dataset" and not _filtered(source):
        return source  # its fragments are read one at a time; counting reads no data
    names = source_columns(source) or []
    wanted = [c for c in dict.fromkeys(columns) if c in names]
    return CollectedQuery(_without_views(read_in_memory(source, kind, wanted)), tuple(names), kind)


def _filtered(dataset: Any) -> bool:
    """A Dataset with a filter (pyarrow refuses to list its fragments)."""
    try:
        dataset.get_fragments()
    except ValueError:
        return True
    return False


def read_source(
    source: Source,
    columns: Iterable[str],
    text_columns: Iterable[str] = (),
    optional: Iterable[str] = (),
) -> tuple[Raw, SourceInfo]:
    """Read ``columns`` of ``source``: a pyarrow Table, or (for a pandas source) a
    DataFrame sharing the caller's columns, with a fresh RangeIndex. Those of ``optional``
    (e.g. a target at transform) are read only if the source (its first file) has them."""
    columns = list(columns)
    optional = set(optional)
    kind = source_kind(source)
    if optional and kind != "path":
        present = source_columns(source) or []
        columns = [c for c in columns if c in present or c not in optional]
    if kind == "pandas":
        missing = [c for c in columns if c not in source.columns]
        if missing:
            raise SchemaError(_missing_message(missing, list(source.columns), "the DataFrame"))
        return _select_columns(source, columns), SourceInfo(
            f"DataFrame ({len(source):,} rows × {source.shape[1]} columns)"
        )
    if kind != "path":
        table = _without_views(read_in_memory(source, kind, columns))
        return table, SourceInfo(f"{_kind_name(source)} ({table.num_rows:,} rows)")
    files = resolve_files(source)
    text = set(text_columns)
    first, names = _read_file_and_names(files[0], columns, text, optional)
    columns = [c for c in columns if c in first.column_names]  # every later file needs them
    tables = [first] + [_read_file_and_names(path, columns, text)[0] for path in files[1:]]
    if len({tuple(t.schema.types) for t in tables}) > 1:  # e.g. Parquet and CSV files
        tables = [decoded(t) for t in tables]  # text as strings everywhere, then promoted
    table = tables[0] if len(tables) == 1 else _concat(tables, files)
    return table, SourceInfo(
        f"{source} ({len(files)} file(s), {table.num_rows:,} rows)", tuple(files),
        columns=tuple(names),
    )  # fmt: skip


def _concat(tables: list[pa.Table], files: list[str]) -> pa.Table:
    """The files' tables as one, their types promoted (int to float, string to large).
    A column of numbers or bools in some files and text in others is taken as text in
    every file: validation then converts it to the declared type as it converts a file of
    text alone (the rows each file gives alone, as a partitioned run reads them). Other
    types that do not combine (timestamps with and without a zone...) are a SchemaError. Text
    one file holds as a dictionary (a pandas categorical) is decoded first: it combines
    with plain text."""
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        pass
    tables = [_held_text_decoded(t) for t in tables]
    clash = [
        n for n in tables[0].column_names if not _promotes([t.schema.field(n) for t in tables])
    ]
    for name in clash:
        types = [t.schema.field(name).type for t in tables]
        if not all(_as_text_exactly(t) for t in types):
            kinds = "; ".join(f"{t} in {os.path.basename(f)}" for t, f in
                              dict(zip(types, files)).items())  # fmt: skip
            raise SchemaError(
                f"column {name!r} has types that do not combine in the source's files "
                f"({kinds}); write the files with one type for it"
            )
    as_text = []
    for table in tables:
        for name in clash:
            i = table.schema.get_field_index(name)
            if not pa.types.is_large_string(table.schema.field(i).type):
                table = table.set_column(i, name, _validation_text(table.column(i)))
        as_text.append(table)
    try:
        return pa.concat_tables(as_text, promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid) as exc:  # types that combine, values not
        failed = exc
    for name in as_text[0].column_names:  # (an int beyond 2**53 beside floats)
        try:
            pa.concat_tables([t.select([name]) for t in as_text], promote_options="permissive")
        except (pa.ArrowTypeError, pa.ArrowInvalid) as exc:
            kinds = "; ".join(f"{t.schema.field(name).type} in {os.path.basename(f)}"
                              for t, f in zip(as_text, files))  # fmt: skip
            raise SchemaError(
                f"column {name!r} cannot be read as one column from the source's files "
                f"({kinds}: {exc}); write the files with one type for it"
            ) from None
    raise SchemaError(f"the source's files cannot be read as one table: {failed}")


def _validation_text(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column`` as the text validation gives its values when it reads the file alone
    (``True``, ``7`` for 7.0, the digits of 1e20, NaN missing), not Arrow's cast (``true``,
    ``1e+20``, ``nan``): the whole source then reads as its files one by one."""
    kind = column.type
    if not (pa.types.is_boolean(kind) or pa.types.is_floating(kind)):
        return ac.cast(column, pa.large_string())  # integers: Arrow's digits are Python's
    # Python's text of each value, as validation's (a rare path: files that disagree)
    text = [None if v is None or v != v else str(v) if isinstance(v, bool)
            else str(int(v)) if v.is_integer() else str(v)
            for v in column.to_pylist()]  # fmt: skip
    return pa.chunked_array([pa.array(text, pa.large_string())])


def _as_text_exactly(kind: pa.DataType) -> bool:
    """Text, or a type whose text form validation reads back as the same value (a file
    whose column is all missing has the null type: missing as text too)."""
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)
            or pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_boolean(kind))  # fmt: skip


def _promotes(fields: list[pa.Field]) -> bool:
    """Whether the files' types of one column promote to one (int and float do)."""
    try:
        pa.unify_schemas([pa.schema([f]) for f in fields], promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return False
    return True


def _held_text_decoded(table: pa.Table) -> pa.Table:
    """``table`` with the text dictionaries its file held (not only those this module read
    as dictionaries) decoded to plain text, which promotes with any other text type."""
    for i, field in enumerate(table.schema):
        kind = field.type
        if pa.types.is_dictionary(kind) and (
            pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)
        ):
            decoded_values = ac.cast(table.column(i), kind.value_type)
            table = table.set_column(i, field.with_type(kind.value_type), decoded_values)
    return table


_KIND_NAMES = {
    "arrow": "pyarrow Table",
    "dataset": "pyarrow Dataset",
    "polars": "Polars DataFrame",
    "polars_lazy": "Polars LazyFrame",
}


def _kind_name(source: Any) -> str:
    """What an in-memory source is, in words (a collected one: what it was collected from)."""
    if isinstance(source, CollectedQuery):
        return _KIND_NAMES[source.kind]
    return _KIND_NAMES[source_kind(source)]


def read_in_memory(source: Any, kind: str, columns: list[str]) -> pa.Table:
    """The columns of an Arrow-backed source as a pyarrow Table: a Table's own columns, a
    Polars frame's Arrow export (zero-copy), a LazyFrame with only ``columns`` selected
    before it is collected, a Dataset scanned for ``columns`` in fragment order, a
    :class:`CollectedQuery`'s own columns."""
    present = source_columns(source) or []
    _require(columns, present, f"the {_kind_name(source)}")
    if kind == "collected":
        return source.table.select(columns) if columns else _no_columns(source.table.num_rows)
    try:
        if kind == "arrow":
            return source.select(columns) if columns else _no_columns(source.num_rows)
        if kind == "dataset":
            if not columns:
                return _no_columns(source.count_rows())
            return source.to_table(columns=columns)
        frame = source.select(columns) if columns else None
        if kind == "polars_lazy":
            if frame is None:
                import polars as pl

                return _no_columns(int(source.select(pl.len()).collect().item()))
            frame = frame.collect()
        if frame is None:
            return _no_columns(source.height)
        return frame.to_arrow()
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise SourceError(f"cannot read the {_kind_name(source)}: {exc}") from exc
    except Exception as exc:  # Polars' own errors (a failing lazy query) name no builtin
        if type(exc).__module__.startswith("polars"):
            raise SourceError(f"cannot read the {_kind_name(source)}: {exc}") from exc
        raise


def _without_views(table: pa.Table) -> pa.Table:
    """String/binary *view* columns as large_string/large_binary (a copy of those columns
    only): Arrow's ``take`` and the encoder read the offset layout."""
    for i, kind in enumerate(table.schema.types):
        if pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
            wide = pa.large_string() if pa.types.is_string_view(kind) else pa.large_binary()
            table = table.set_column(i, table.schema.names[i], ac.cast(table.column(i), wide))
    return table


def _no_columns(n_rows: int) -> pa.Table:
    """A table with no column but the source's row count (e.g. a constant expression)."""
    return pa.table({"_": pa.nulls(n_rows)}).drop_columns(["_"])


def raw_columns(raw: Raw) -> list[str]:
    return list(raw.column_names) if isinstance(raw, pa.Table) else list(raw.columns)


def raw_len(raw: Raw) -> int:
    return raw.num_rows if isinstance(raw, pa.Table) else len(raw)


def as_pandas(raw: Raw) -> pd.DataFrame:
    """The raw table as pandas (what a pandas-only consumer, e.g. schema inference, reads)."""
    return decoded(raw).to_pandas() if isinstance(raw, pa.Table) else raw


def decoded(table: pa.Table) -> pa.Table:
    """``table`` with the text columns read from Parquet as dictionaries decoded to their
    values: what a conversion to pandas must see to give the file's own dtypes (strings,
    not categoricals). A dictionary the source itself holds stays one."""
    for i, field in enumerate(table.schema):
        if read_as_dictionary(field):  # to the file's own string type
            held = (
                pa.large_string()
                if field.metadata[READ_AS_DICTIONARY] == b"large_string"
                else pa.string()
            )
            table = table.set_column(i, field.name, ac.cast(table.column(i), held))
    return table


def read_as_dictionary(field: pa.Field) -> bool:
    """Whether ``field`` is a text column this module read as a dictionary (the file holds
    plain strings)."""
    return bool(field.metadata) and READ_AS_DICTIONARY in field.metadata


def take_rows(table: pa.Table, positions: np.ndarray) -> pa.Table:
    """Rows ``positions`` of ``table``, as ``table.take`` gives them (chunked otherwise).

    Ascending positions (a quarantine's rows) are taken chunk by chunk, each chunk's rows
    from that chunk: Arrow's take over a column of many chunks (a Parquet file read in
    batches) was 4-7x slower (~90 ms for 94,300 of 3.4M rows in 26 chunks, 10 columns)."""
    positions = np.asarray(positions, dtype=np.int64)
    ascending = len(positions) < 2 or bool((positions[1:] >= positions[:-1]).all())
    if not ascending or all(column.num_chunks < 2 for column in table.columns):
        return ac.take(table, numeric_array(positions))
    plans: dict[tuple[int, ...], list[tuple[int, pa.Array]]] = {}
    columns = []
    for column in table.columns:
        lengths = tuple(len(chunk) for chunk in column.chunks)
        if lengths not in plans:  # the columns of a file read share one chunk layout
            starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
            cuts = np.searchsorted(positions, starts)
            plans[lengths] = [
                (k, numeric_array(positions[cuts[k] : cuts[k + 1]] - starts[k]))
                for k in range(len(lengths)) if cuts[k + 1] > cuts[k]
            ]  # fmt: skip
        taken = [ac.take(column.chunk(k), local) for k, local in plans[lengths]]
        columns.append(pa.chunked_array(taken, column.type))
    return pa.Table.from_arrays(columns, schema=table.schema)


def rows_as_read(raw: Raw, positions: np.ndarray) -> pd.DataFrame:
    """Rows ``positions`` of the raw table as pandas, each column in the dtype the whole
    column converts to (an integer column with a missing value anywhere is float64, even
    if the rows taken have none), with a fresh RangeIndex."""
    if not isinstance(raw, pa.Table):
        return raw.iloc[positions].reset_index(drop=True).copy()
    taken = decoded(take_rows(raw, positions))
    if not raw.num_rows or not any(raw.column(i).null_count for i in range(raw.num_columns)):
        return taken.to_pandas()
    # one extra row, missing where the whole column has a missing value: the conversion then
    # picks the whole column's dtype; the row is dropped after
    extra = [
        pa.nulls(1, col.type) if col.null_count else col.slice(0, 1).combine_chunks()
        for col in raw.columns
    ]
    padded = pa.concat_tables([taken, decoded(pa.Table.from_arrays(extra, schema=raw.schema))])
    return padded.to_pandas().iloc[: len(positions)].reset_index(drop=True)


def _select_columns(source: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The caller's columns without copying them: ``df.loc[:, columns]`` copies every
    numeric block (150 MiB and ~12 ms for six columns at 3.4M rows); a frame built from
    the column Series with ``copy=False`` shares their memory (copy-on-write keeps the
    caller's frame safe). Duplicated names keep the copying path, so validation can name them."""
    import pandas as pd

    if source.columns.duplicated().any() or not isinstance(source.index, pd.RangeIndex):
        return source.loc[:, columns].reset_index(drop=True)
    if not columns:  # e.g. a constant expression: no column, but the source's row count
        return pd.DataFrame(index=pd.RangeIndex(len(source)))
    frame = pd.DataFrame({name: source[name] for name in columns}, copy=False)
    if source.index.start != 0 or source.index.step != 1:
        frame = frame.reset_index(drop=True)
    return frame


def source_columns(source: Source) -> list[str] | None:
    """Column names of a source without reading its data (None if it cannot be told)."""
    kind = source_kind(source)
    if kind == "pandas":
        return [str(c) for c in source.columns]
    if kind in ("arrow", "dataset"):
        return list(source.schema.names)
    if kind == "polars":
        return list(source.columns)
    if kind == "polars_lazy":
        return list(source.collect_schema().names())
    if kind == "collected":
        return list(source.names)
    try:
        files = resolve_files(source)
    except SourceError:
        return None
    first = files[0]
    try:
        if format_of(first) == "parquet":
            return list(pq.read_schema(first).names)
        return _csv_header(first)
    except (pa.ArrowInvalid, OSError):
        return None


def resolve_files(source: str | os.PathLike[str]) -> list[str]:
    """Expand a file, a directory (its CSV/Parquet files) or a glob into sorted paths."""
    text = os.fspath(source)
    # an existing path is that path, whatever its name holds ("flights[2013].parquet")
    pattern = not os.path.exists(text) and any(ch in text for ch in "*?[")
    if pattern:
        files = sorted(p for p in globlib.glob(text, recursive=True) if os.path.isfile(p))
    elif os.path.isdir(text):
        files = sorted(
            str(p) for p in Path(text).rglob("*") if p.is_file() and format_of(str(p)) is not None
        )
    elif os.path.isfile(text):
        files = [text]
    else:
        raise SourceError(f"source {text!r} does not exist")
    if pattern or os.path.isdir(text):
        found, files = files, _data_files(files)
        if found and not files:
            raise SourceError(
                f"source {text!r} holds a fastprep output, no input data: open it with "
                "fp.open_output"
            )
    if not files:
        raise SourceError(f"source {text!r} matched no CSV or Parquet files")
    unknown = [f for f in files if format_of(f) is None]
    if unknown:
        raise SourceError(
            f"cannot tell the format of {unknown[0]!r}: use a .csv(.gz) or .parquet file"
        )
    return files


def _data_files(files: list[str]) -> list[str]:
    """``files`` without those a fastprep output wrote into their folder (its quarantine is
    Parquet): an output written into the input's folder, or one under it, is not read back
    as input by the next run."""
    from fastprep.storage.output_format import output_files

    ours: dict[str, set[str]] = {}
    kept = []
    for path in files:
        folder, name = os.path.split(path)
        if folder not in ours:
            ours[folder] = output_files(folder or ".")
        if name not in ours[folder]:
            kept.append(path)
    return kept


def format_of(path: str) -> str | None:
    lower = path.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(CSV_SUFFIXES):
        return "csv"
    return None


def _read_file(path: str, columns: list[str], text_columns: set[str]) -> pa.Table:
    return _read_file_and_names(path, columns, text_columns)[0]


def _read_file_and_names(
    path: str, columns: list[str], text_columns: set[str], optional: set[str] = frozenset()
) -> tuple[pa.Table, list[str]]:
    """``columns`` of one file (those of ``optional`` only if it has them), and the names
    of all its columns."""
    try:
        if format_of(path) == "parquet":
            # one footer read for the names and the data; ParquetFile, not pq.read_table:
            # the latter imports pyarrow.dataset (~0.25 s of a fresh process) for the same
            # column-pruned read
            with open_parquet(path, [c for c in columns if c in text_columns]) as handle:
                present = handle.schema_arrow.names
                columns = [c for c in columns if c in present or c not in optional]
                _require(columns, present, path)
                return text_dictionaries_only(handle.read(columns=columns), handle), present
        header = _csv_header(path)
        columns = [c for c in columns if c in header or c not in optional]
        _require(columns, header, path)
        return _read_csv(path, path, columns, text_columns), header
    except (pa.ArrowInvalid, OSError) as exc:
        raise SourceError(f"cannot read {path!r}: {exc}") from exc


def read_csv_range(
    path: str, header_bytes: int, start: int, stop: int, columns: list[str],
    text_columns: set[str],
) -> pa.Table:  # fmt: skip
    """``columns`` of the lines in bytes ``start:stop`` of the CSV file ``path``, read as
    the whole file is (:func:`_read_file_and_names`) with its header (its first
    ``header_bytes`` bytes) in front: a chunk of a file too large to read at once."""
    try:
        header = _csv_header(path)
        _require(columns, header, path)
        return _read_csv(_FileRanges(path, [(0, header_bytes), (start, stop)]), path, columns,
                         text_columns)  # fmt: skip
    except (pa.ArrowInvalid, OSError) as exc:
        raise SourceError(f"cannot read {path!r} (bytes {start:,}-{stop:,}): {exc}") from exc


class _FileRanges:
    """Byte ranges of a file read one after the other, as one stream from the start each
    time it is opened (:meth:`open`): Arrow reads it block by block, so a chunk's bytes are
    never all in memory at once beside its table."""

    def __init__(self, path: str, ranges: list[tuple[int, int]]) -> None:
        self.path, self.ranges = path, ranges

    def open(self) -> io.RawIOBase:
        return _RangeStream(self.path, self.ranges)


class _RangeStream(io.RawIOBase):
    def __init__(self, path: str, ranges: list[tuple[int, int]]) -> None:
        self.handle = open(path, "rb")  # noqa: SIM115 -- closed with the stream
        self.ranges = [r for r in ranges if r[1] > r[0]]
        self.at = self.ranges[0][0] if self.ranges else 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self.ranges:
            stop = self.ranges[0][1]
            if self.at >= stop:
                self.ranges.pop(0)
                self.at = self.ranges[0][0] if self.ranges else 0
                continue
            self.handle.seek(self.at)
            view = memoryview(buffer)[: stop - self.at]
            got = self.handle.readinto(view)
            if not got:
                raise OSError(f"{self.path!r} ends before byte {stop:,}: it changed since planned")
            self.at += got
            return got
        return 0

    def close(self) -> None:
        self.handle.close()
        super().close()


def _read_csv(
    data: str | _FileRanges, path: str, columns: list[str], text_columns: set[str]
) -> pa.Table:
    """``columns`` of CSV ``data`` (the file ``path``, or byte ranges of it, its header first):
    text columns as strings, ``.tsv`` tab-delimited."""
    import pyarrow.csv as pacsv  # on use: a Parquet job needs none of it

    convert = pacsv.ConvertOptions(
        include_columns=columns,
        column_types={c: pa.string() for c in columns if c in text_columns},
        strings_can_be_null=True,
    )
    parse = pacsv.ParseOptions(delimiter=csv_delimiter(path))
    bad_text = False
    while True:
        try:
            if bad_text:
                text = text_columns & set(columns)
                return _read_csv_keeping_bad_text(data, parse, convert, text)
            with _csv_input(data) as opened:
                return pacsv.read_csv(opened, parse_options=parse, convert_options=convert)
        except pa.ArrowInvalid as exc:
            if "utf8" in str(exc).lower() and not bad_text:
                bad_text = True
            elif not parse.newlines_in_values:
                # a quoted value may hold a line end: Arrow's fast block split (at any line
                # end) then cuts through it, and the parse fails in one of several ways
                # (which one depends on its threads); read again with the slower split that
                # follows quotes: a file that still fails is malformed, and says how
                parse.newlines_in_values = True
            else:
                raise


def _csv_input(data: str | _FileRanges) -> Any:
    """What Arrow reads: the file's path, or a fresh stream of its byte ranges (a retry
    reads from the start), closed on leaving the ``with``."""
    return contextlib.nullcontext(data) if isinstance(data, str) else data.open()


def csv_delimiter(path: str) -> str:
    """The delimiter of the CSV file ``path``: a tab for ``.tsv``, else a comma."""
    return "\t" if path.lower().endswith(".tsv") else ","


def open_parquet(path: str, text_columns: list[str]) -> pq.ParquetFile:
    """The file, its text columns read as Arrow dictionaries: Parquet stores strings
    dictionary-encoded, so the reader hands over each row group's dictionary and indices
    instead of building every string (~4x faster to read), and validation codes them from
    the indices (``text_encode``). A named column the file lacks: opened plainly (the
    caller's check then names what is missing)."""
    if text_columns:
        try:
            return pq.ParquetFile(path, read_dictionary=text_columns)
        except KeyError:
            pass
    return pq.ParquetFile(path)


#: field metadata of a text column this module read as a dictionary (the file stores it as
#: plain strings): converted to pandas, it is decoded back to what the file holds
READ_AS_DICTIONARY = b"fastprep.read_as_dictionary"


def text_dictionaries_only(table: pa.Table, handle: pq.ParquetFile) -> pa.Table:
    """``table`` as read from ``handle`` with its text columns as dictionaries, those the
    file stores as plain values marked (see :func:`decoded`); a dictionary of anything
    but strings (a declared text column stored as numbers) decoded back at once: only
    string dictionaries have a fast path downstream."""
    stored = handle.schema.to_arrow_schema()
    for i, kind in enumerate(table.schema.types):
        name = table.schema.names[i]
        if not pa.types.is_dictionary(kind) or pa.types.is_dictionary(stored.field(name).type):
            continue
        if pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type):
            held = b"large_string" if pa.types.is_large_string(stored.field(name).type) else b""
            field = table.schema.field(i).with_metadata({READ_AS_DICTIONARY: held or b"string"})
            table = table.set_column(i, field, table.column(i))
        else:
            table = table.set_column(i, name, ac.cast(table.column(i), kind.value_type))
    return table


def _read_csv_keeping_bad_text(
    data: str | _FileRanges,
    parse: pacsv.ParseOptions,
    convert: pacsv.ConvertOptions,
    text_columns: set[str],
) -> pa.Table:
    """Text that is not valid UTF-8: read those columns as bytes, so validation can flag the
    rows (rule ``encoding``) and apply the column's policy instead of failing the file."""
    import pyarrow.csv as pacsv

    convert.column_types = {c: pa.binary() for c in text_columns}
    with _csv_input(data) as opened:
        table = pacsv.read_csv(opened, parse_options=parse, convert_options=convert)
    for name in text_columns:
        index = table.schema.get_field_index(name)
        with contextlib.suppress(pa.ArrowInvalid):  # else keep the bytes: to_text flags them
            table = table.set_column(index, name, ac.cast(table[name], pa.string()))
    return table


def _csv_header(path: str) -> list[str]:
    import pyarrow.csv as pacsv

    delimiter = csv_delimiter(path)
    # the file closed on every exit (the reader's close leaves it open)
    with (
        pa.input_stream(path) as stream,
        pacsv.open_csv(
            stream,
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            read_options=pacsv.ReadOptions(block_size=1 << 16),
        ) as reader,
    ):
        return list(reader.schema.names)


def _require(columns: list[str], present: list[str], where: str) -> None:
    missing = [c for c in columns if c not in present]
    if missing:
        raise SchemaError(_missing_message(missing, present, where))
    twice = sorted({c for c in columns if list(present).count(c) > 1})
    if twice:
        raise SchemaError(
            f"{where} has duplicated column name(s) {twice}: which one to read is ambiguous; "
            "rename or drop the copies"
        )


def _missing_message(missing: list[str], present: list[str], where: str) -> str:
    message = (
        f"{where} has no column(s) {missing} that the pipeline reads; "
        f"it has: {', '.join(map(str, present[:40]))}"
    )
    # a Hive-partitioned folder (``origin=EWR/part-0.parquet``) keeps those columns in the
    # folder names, which a file read does not see
    folders = Path(where).parts[:-1]
    hive = [c for c in missing if any(part.startswith(f"{c}=") for part in folders)]
    if hive:
        message += (
            f"; {hive} appear only in the folder names (Hive partitioning): pass the folder "
            "as pyarrow.dataset.dataset(folder, partitioning='hive')"
        )
    return message


def describe_dtypes(frame: Raw) -> Mapping[str, Any]:
    if isinstance(frame, pa.Table):
        return {name: str(t) for name, t in zip(frame.column_names, frame.schema.types)}
    return {str(k): str(v) for k, v in frame.dtypes.items()}
