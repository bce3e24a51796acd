"""A source as independently readable partitions, and cheap facts about its size.

Streaming (``batches``), out-of-core runs and Dask tasks never hold a whole source: each
reads one :class:`PartitionSpec` at a time (column-pruned, like :func:`fastprep.data.sources.read_source`).

- Parquet: consecutive row groups of one file, grouped up to ``rows_per_partition``; row
  counts and offsets come from the footer, so every partition knows its row ids up front.
  For ``workers`` parallel workers (a Dask job) the groups are cut into a multiple of
  ``workers`` partitions of equal rows where the row groups allow (:func:`balanced_count`).
- CSV: one partition per file (files of a glob in sorted order); an uncompressed file of
  more than ``rows_per_partition`` rows (estimated from a few probes) is cut into chunks of
  whole lines of about that many rows (:mod:`fastprep.data.csv_chunks`). The row count of a
  CSV file or chunk is only known once read, so ``n_rows`` / ``row_offset`` are None until
  then; :func:`iter_partitions` fills the offsets in as it streams.
- A table in memory (pandas or Polars DataFrame, Polars LazyFrame, pyarrow Table): slices
  of ``rows_per_partition`` rows (a LazyFrame slices and selects before it collects).
- A ``pyarrow.dataset.Dataset``: its fragments in order; a Parquet fragment's row groups
  grouped like a Parquet file's, any other fragment whole.
- A :class:`fastprep.data.sources.CollectedQuery` (a LazyFrame or filtered Dataset computed once):
  slices of its table, like a table in memory.

Row ids are the same as the in-memory path's: positions in the concatenation of the
source's files in sorted order (``partition.row_offset + local position``).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import numbers
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from fastprep.data.csv_chunks import cut_csv, is_compressed
from fastprep.data.sources import (
    Raw,
    Source,
    _filtered,
    _read_file,
    _require,
    _without_views,
    format_of,
    open_parquet,
    read_csv_range,
    read_in_memory,
    resolve_files,
    source_kind,
    text_dictionaries_only,
)
from fastprep.errors import SourceError

if TYPE_CHECKING:
    import pandas as pd

#: default partition size: large enough to amortize per-partition overhead, small enough
#: that a partition's columns stay well inside a worker's memory
ROWS_PER_PARTITION = 1_000_000
#: a partition task's fixed cost on its worker, in rows of work (~7 ms at ~0.35 us a
#: row: the gaps measured between a worker's tasks), so that of two packings as balanced
#: the one with fewer tasks wins
TASK_ROWS = 20_000
#: balanced packings tried: ``balanced_count`` partitions and the next few multiples of the
#: workers (coarse row groups can balance better cut finer)
BALANCE_TRIES = 4
#: bytes read from the head of a CSV file to estimate its bytes per row
_CSV_PROBE_BYTES = 1 << 16
#: places of a large CSV file probed for its bytes per row (its head and evenly after it)
_CSV_PROBES = 4


@dataclass(frozen=True)
class PartitionSpec:
    """One piece of a source that can be read on its own (e.g. inside a Dask task).

    ``kind`` is ``"parquet"`` (``row_groups`` of ``path``), ``"csv"`` (the file at
    ``path``: whole, or the lines in its ``byte_range`` after its ``header_bytes``),
    ``"frame"`` (rows ``start:stop`` of a table in memory) or ``"dataset"`` (``row_groups``
    of fragment number ``fragment`` of a pyarrow Dataset; all of it when empty).
    """

    index: int
    kind: str
    path: str | None = None
    row_groups: tuple[int, ...] = ()
    start: int = 0
    stop: int | None = None
    #: rows in this partition, when known without reading it (Parquet footer, DataFrame)
    n_rows: int | None = None
    #: row id of this partition's first row, when every earlier partition's size is known
    row_offset: int | None = None
    #: a ``"dataset"`` partition's fragment, by position in ``Dataset.get_fragments()``
    fragment: int = -1
    #: that fragment itself, kept from planning: listing every fragment again for each
    #: partition made a pass quadratic in the number of fragments
    fragment_object: Any = field(default=None, compare=False, repr=False)
    #: a chunk of a CSV file: the bytes ``(start, stop)`` of its lines (empty: all of it)
    byte_range: tuple[int, ...] = ()
    #: a chunk's header: the file's first bytes, read in front of the chunk's
    header_bytes: int = 0
    #: a chunk's rows as estimated from probes of the file (``n_rows``: known once read)
    rows_estimate: int | None = None

    def describe(self) -> str:
        if self.kind == "parquet":
            groups = self.row_groups
            span = (
                f"row group {groups[0]}"
                if len(groups) == 1
                else (f"row groups {groups[0]}-{groups[-1]}")
            )
            return f"partition {self.index} ({self.path}, {span})"
        if self.kind == "csv" and self.byte_range:
            start, stop = self.byte_range
            return f"partition {self.index} ({self.path}, bytes {start:,}-{stop:,})"
        if self.kind == "csv":
            return f"partition {self.index} ({self.path})"
        if self.kind == "dataset":
            groups = f", row groups {list(self.row_groups)}" if self.row_groups else ""
            return f"partition {self.index} (Dataset fragment {self.fragment}{groups})"
        return f"partition {self.index} (in-memory rows {self.start}:{self.stop})"


@dataclass(frozen=True)
class SourceSize:
    """What the planner knows about a source before reading its data."""

    n_rows: int
    #: True when ``n_rows`` is exact (Parquet metadata, a table); False for a CSV estimate
    exact: bool
    n_files: int
    #: bytes on disk (0 for a DataFrame)
    bytes_on_disk: int


def plan_partitions(
    source: Source, rows_per_partition: int = ROWS_PER_PARTITION, workers: int = 1
) -> list[PartitionSpec]:
    """Split ``source`` into partitions of at most about ``rows_per_partition`` rows (see
    module doc). ``workers``: the parallel workers that will run them (a Dask cluster's
    threads): their count is made a multiple of it, of equal rows where the row groups
    allow, so no worker idles through a pass's last round while another finishes it."""
    rows_per_partition = _whole_rows(rows_per_partition)
    workers = max(1, int(workers))
    kind = source_kind(source)
    if kind == "dataset":
        return _dataset_partitions(source, rows_per_partition, workers)
    if kind != "path":
        n = in_memory_rows(source)
        size = rows_per_partition  # one worker: full partitions, the rest in the last
        if workers > 1:
            size = max(1, -(-n // balanced_count(n, rows_per_partition, workers)))
        starts = range(0, max(n, 1), size)
        return [
            PartitionSpec(i, "frame", start=s, stop=min(n, s + size),
                          n_rows=min(n, s + size) - s, row_offset=s)
            for i, s in enumerate(starts)
        ]  # fmt: skip
    files = resolve_files(source)
    sizes = {p: _row_group_sizes(p) for p in files if format_of(p) == "parquet"}
    packs = _packs([sizes[p] for p in files if p in sizes], rows_per_partition, workers)
    by_file = dict(zip([p for p in files if p in sizes], packs))
    specs: list[PartitionSpec] = []
    offset: int | None = 0
    for path in files:
        if path in by_file:
            for groups, rows in by_file[path]:
                specs.append(PartitionSpec(len(specs), "parquet", path, tuple(groups),
                                           n_rows=rows, row_offset=offset))  # fmt: skip
                offset = None if offset is None else offset + rows
        else:
            for chunk in csv_partitions(path, rows_per_partition, workers):
                specs.append(replace(chunk, index=len(specs), row_offset=offset))
                offset = None  # unknown until this file (chunk) has been read
    return specs


def csv_partitions(path: str, rows_per_partition: int, workers: int = 1) -> list[PartitionSpec]:
    """A CSV file as one partition, or (uncompressed, more than ``rows_per_partition``
    rows by :func:`_estimate_csv_rows`) as chunks of about that many rows, as many as
    :func:`balanced_count` gives for ``workers``, cut at line ends."""
    whole = [PartitionSpec(0, "csv", path)]
    rows = _estimate_csv_rows(path)
    if rows <= rows_per_partition:
        return whole
    cut = cut_csv(path, balanced_count(rows, rows_per_partition, workers))
    if cut is None:
        return whole
    size = os.path.getsize(path) - cut.header_bytes
    return [
        PartitionSpec(0, "csv", path, byte_range=(a, b), header_bytes=cut.header_bytes,
                      rows_estimate=round(rows * (b - a) / max(size, 1)))
        for a, b in cut.ranges
    ]  # fmt: skip


def _whole_rows(rows_per_partition: Any) -> int:
    """``rows_per_partition`` as an int (``1e6`` is one), or a ``SourceError`` naming it."""
    value = rows_per_partition
    whole = isinstance(value, numbers.Integral) or (
        isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer()
    )
    if isinstance(value, bool) or not whole:
        raise SourceError(f"rows_per_partition={value!r}: must be a whole number of rows")
    if value < 1:
        raise SourceError(f"rows_per_partition={value}: must be at least 1")
    return int(value)


def balanced_count(rows: int, rows_per_partition: int, workers: int) -> int:
    """Partitions for ``rows`` rows on ``workers`` workers: the fewest that keep each at
    most ``rows_per_partition`` rows, rounded up to a multiple of ``workers`` (7 equal
    tasks on 2 workers take 4 rounds, the last with one worker idle: at most 1.75x of one
    worker's speed instead of 2x; 8 tasks of 7/8 the size take 4 full rounds)."""
    needed = max(1, -(-rows // max(1, rows_per_partition)))
    workers = max(1, workers)
    return -(-needed // workers) * workers


def _dataset_partitions(
    dataset: Any, rows_per_partition: int, workers: int = 1
) -> list[PartitionSpec]:
    """A Dataset's fragments in order: a Parquet fragment's row groups packed like a
    Parquet file's, any other fragment as one partition."""
    if _filtered(dataset):
        raise SourceError(
            "a filtered pyarrow Dataset has no fragments to split by: read it with "
            "fastprep.data.sources.collect_once(dataset, columns) first (batches do), or pass a table"
        )
    specs: list[PartitionSpec] = []
    offset = 0
    fragments = list(dataset.get_fragments())
    groups_of: dict[int, tuple[list[int], list[int]]] = {}  # Parquet fragments: ids, sizes
    for number, fragment in enumerate(fragments):
        if hasattr(fragment, "row_groups"):  # a Parquet fragment: sizes from its footer
            fragment.ensure_complete_metadata()
            groups_of[number] = ([g.id for g in fragment.row_groups],
                                 [g.num_rows for g in fragment.row_groups])  # fmt: skip
    packed = dict(zip(groups_of, _packs([sizes for _, sizes in groups_of.values()],
                                        rows_per_partition, workers)))  # fmt: skip
    for number, fragment in enumerate(fragments):
        if number in groups_of:
            ids = groups_of[number][0]
            pieces = [(tuple(ids[i] for i in pack), rows) for pack, rows in packed[number]]
        else:
            pieces = [((), fragment.count_rows())]
        for groups, rows in pieces:
            specs.append(PartitionSpec(len(specs), "dataset", fragment.path, groups,
                                       n_rows=rows, row_offset=offset, fragment=number,
                                       fragment_object=fragment))  # fmt: skip
            offset += rows
    if not specs:  # no fragment: one empty partition (the schema's columns, no rows)
        specs.append(PartitionSpec(0, "frame", start=0, stop=0, n_rows=0, row_offset=0))
    return specs


def _row_group_sizes(path: str) -> list[int]:
    """Rows of each row group of ``path`` (its footer)."""
    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowInvalid, OSError) as exc:
        raise SourceError(f"cannot read {path!r}: {exc}") from exc
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def _packs(
    files: list[list[int]], rows_per_partition: int, workers: int
) -> list[list[tuple[list[int], int]]]:
    """Each file's row groups (``files``: their sizes) packed into partitions.

    One worker: greedily, up to ``rows_per_partition`` rows each (a single larger row
    group is a partition on its own). Several: the packing whose busiest worker has the
    fewest rows (:func:`busiest_rows`) among the greedy one and cuts into a multiple of
    ``workers`` partitions of equal rows (:func:`balanced_count` and a few more), a file
    cut at the row-group boundary nearest each multiple of the equal size; no partition
    spans two files or grows past ``rows_per_partition`` unless one row group does."""
    total = sum(sum(sizes) for sizes in files)
    greedy = [_pack(sizes, rows_per_partition) for sizes in files]
    if workers <= 1 or total == 0:
        return greedy
    candidates = [greedy]
    first = balanced_count(total, rows_per_partition, workers)
    for count in range(first, first + BALANCE_TRIES * workers, workers):
        share, base, packed = total / count, 0, []
        for sizes in files:
            packed.append(_pack_at_cuts(sizes, base, share, rows_per_partition))
            base += sum(sizes)
        candidates.append(packed)

    def cost(packed: list[list[tuple[list[int], int]]]) -> tuple[int, int]:
        rows = [n for file in packed for _, n in file]
        return busiest_rows(rows, workers), len(rows)

    return min(candidates, key=cost)


def busiest_rows(sizes: list[int], workers: int) -> int:
    """The rows (plus :data:`TASK_ROWS` per task) of the busiest of ``workers`` workers
    when the partitions ``sizes`` are run largest first, each by the first free worker
    (the order a Dask job submits them in)."""
    loads = [0] * max(1, workers)
    for size in sorted(sizes, reverse=True):
        heapq.heapreplace(loads, loads[0] + size + TASK_ROWS)
    return max(loads)


def _pack_at_cuts(
    sizes: list[int], base: int, share: float, rows_per_partition: int
) -> list[tuple[list[int], int]]:
    """Row groups ``sizes`` (the first at global row ``base``) cut at the boundary nearest
    each global multiple of ``share`` that keeps the part within ``rows_per_partition``
    (a part still over it, where row groups are coarse, is packed greedily again)."""
    ends = [0, *itertools.accumulate(sizes)]  # boundaries, local: ends[j] after j groups
    cuts = [0]
    k = math.floor(base / share) + 1
    while k * share < base + ends[-1]:
        at = k * share - base
        i = bisect.bisect_left(ends, at)  # the boundaries around the cut: i - 1 and i
        around = [j for j in (i - 1, i) if cuts[-1] < j < len(ends) - 1]
        fits = [j for j in around if ends[j] - ends[cuts[-1]] <= rows_per_partition]
        if fits or around:
            cuts.append(min(fits or around, key=lambda j: abs(ends[j] - at)))
        k += 1
    cuts.append(len(sizes))
    out: list[tuple[list[int], int]] = []
    for a, b in itertools.pairwise(cuts):
        if a == b:
            continue
        rows = ends[b] - ends[a]
        if rows > rows_per_partition and b - a > 1:
            out += [([a + g for g in pack], n) for pack, n in _pack(sizes[a:b], rows_per_partition)]
        else:
            out.append((list(range(a, b)), rows))
    return out or [([], 0)]


def _pack(sizes: list[int], rows_per_partition: int) -> list[tuple[list[int], int]]:
    """Positions of consecutive ``sizes`` packed up to ``rows_per_partition`` rows each."""
    out: list[tuple[list[int], int]] = []
    groups: list[int] = []
    rows = 0
    for g, size in enumerate(sizes):
        if groups and rows + size > rows_per_partition:
            out.append((groups, rows))
            groups, rows = [], 0
        groups.append(g)
        rows += size
    if groups or not out:
        out.append((groups, rows))
    return out


def read_partition(
    spec: PartitionSpec,
    columns: Iterable[str],
    text_columns: Iterable[str] = (),
    frame: Any = None,
) -> Raw:
    """Read one partition's ``columns``: a pyarrow Table (a pandas DataFrame for a slice of
    one). ``frame``: the table in memory a ``"frame"`` spec slices, or the Dataset of a
    ``"dataset"`` spec."""
    columns = list(columns)
    if spec.kind in ("frame", "dataset") and frame is None:
        raise SourceError(f"{spec.describe()} needs the source it reads from")
    if spec.kind == "frame":
        return _slice(frame, spec.start, spec.stop, columns)
    if spec.kind == "dataset":
        return _read_fragment(frame, spec, columns)
    assert spec.path is not None
    if spec.kind == "csv" and spec.byte_range:
        start, stop = spec.byte_range
        return read_csv_range(spec.path, spec.header_bytes, start, stop, columns,
                              set(text_columns))  # fmt: skip
    if spec.kind == "csv":
        return _read_file(spec.path, columns, set(text_columns))
    try:
        handle = open_parquet(spec.path, [c for c in columns if c in set(text_columns)])
        _require(columns, handle.schema_arrow.names, spec.path)
        if not spec.row_groups:  # a file without row groups: its (empty) schema
            return handle.schema_arrow.empty_table().select(columns)
        return text_dictionaries_only(
            handle.read_row_groups(list(spec.row_groups), columns=columns), handle
        )
    except (pa.ArrowInvalid, OSError) as exc:
        raise SourceError(f"cannot read {spec.describe()}: {exc}") from exc


def path_identity(path: str) -> tuple[int, int]:
    """Size and modification time (ns) of a file (``OSError`` when it is gone): what was
    planned or read from it holds while these are unchanged."""
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def file_identity(spec: PartitionSpec) -> tuple[int, int] | None:
    """:func:`path_identity` of the file a partition reads, None when it reads no file or
    the file is gone: rows kept from an earlier read of the partition are its rows only
    while this is unchanged."""
    if spec.kind not in ("parquet", "csv") or spec.path is None:
        return None
    try:
        return path_identity(spec.path)
    except OSError:
        return None


def _slice(source: Any, start: int, stop: int | None, columns: list[str]) -> Raw:
    """Rows ``start:stop`` of a table in memory (a LazyFrame: sliced before collecting)."""
    kind = source_kind(source)
    if kind == "pandas":
        return source.iloc[start:stop].loc[:, columns].reset_index(drop=True)
    if kind == "dataset":  # the empty partition of a Dataset without fragments
        return source.schema.empty_table().select(columns)
    length = None if stop is None else stop - start
    if kind == "collected":  # zero-copy slices of the one result
        return read_in_memory(source, kind, columns).slice(start, length)
    return _without_views(read_in_memory(source.slice(start, length), kind, columns))


def _read_fragment(dataset: Any, spec: PartitionSpec, columns: list[str]) -> pa.Table:
    fragment = spec.fragment_object
    if fragment is None:  # a spec built by hand: find its fragment by position
        fragments = list(dataset.get_fragments())
        if not 0 <= spec.fragment < len(fragments):
            raise SourceError(f"{spec.describe()}: the Dataset has {len(fragments)} fragment(s)")
        fragment = fragments[spec.fragment]
    _require(columns, list(dataset.schema.names), "the pyarrow Dataset")
    if spec.row_groups:
        fragment = fragment.subset(row_group_ids=list(spec.row_groups))
    try:
        return fragment.to_table(schema=dataset.schema, columns=columns)
    except (pa.ArrowInvalid, OSError) as exc:
        raise SourceError(f"cannot read {spec.describe()}: {exc}") from exc


def in_memory_rows(source: Any) -> int:
    """Rows of a table in memory or a Dataset (a LazyFrame counts them without its columns)."""
    kind = source_kind(source)
    if kind == "pandas":
        return len(source)
    if kind == "arrow":
        return source.num_rows
    if kind == "dataset":
        return int(source.count_rows())
    if kind == "polars":
        return int(source.height)
    if kind == "collected":
        return source.table.num_rows
    import polars as pl

    return int(source.select(pl.len()).collect().item())


def iter_partitions(
    source: Source,
    columns: Iterable[str],
    text_columns: Iterable[str] = (),
    rows_per_partition: int = ROWS_PER_PARTITION,
) -> Iterator[tuple[PartitionSpec, pd.DataFrame]]:
    """Read the partitions one after the other; each spec comes back with its exact
    ``n_rows`` and ``row_offset`` (known for CSV once the earlier files are read)."""
    columns, text = list(columns), list(text_columns)
    frame = None if source_kind(source) == "path" else source
    offset = 0
    for spec in plan_partitions(source, rows_per_partition):
        data = read_partition(spec, columns, text, frame)
        yield replace(spec, n_rows=len(data), row_offset=offset), data
        offset += len(data)


def source_size(source: Source) -> SourceSize:
    """Row count (exact for Parquet and tables, estimated for CSV) and bytes on disk."""
    if source_kind(source) != "path":
        return SourceSize(in_memory_rows(source), True, 0, 0)
    files = resolve_files(source)
    rows, exact, size = 0, True, 0
    for path in files:
        size += os.path.getsize(path)
        if format_of(path) == "parquet":
            try:
                rows += pq.ParquetFile(path).metadata.num_rows
            except (pa.ArrowInvalid, OSError) as exc:
                raise SourceError(f"cannot read {path!r}: {exc}") from exc
        else:
            rows += _estimate_csv_rows(path)
            exact = False
    return SourceSize(rows, exact, len(files), size)


def _estimate_csv_rows(path: str) -> int:
    """File size over the mean bytes per line of its head and of a few places further on
    (compressed files: x4 guess)."""
    size = os.path.getsize(path)
    if is_compressed(path):
        size *= 4  # typical text compression ratio; only an estimate for the planner
        return max(size // 100, 0)
    with open(path, "rb") as handle:
        head = handle.read(_CSV_PROBE_BYTES)
        lines = head.count(b"\n") + (0 if head.endswith(b"\n") or not head else 1)
        if len(head) == size:  # the whole file was read: count its lines (minus the header)
            return max(lines - 1, 0)
        # a file's first rows can be unlike the rest (the flights file's first day: 101
        # bytes a line, the whole file's 167), so a few more places are probed
        probed = len(head)
        if size > _CSV_PROBES * _CSV_PROBE_BYTES:
            for k in range(1, _CSV_PROBES):
                handle.seek(size * k // _CSV_PROBES)
                probe = handle.read(_CSV_PROBE_BYTES)
                probed, lines = probed + len(probe), lines + probe.count(b"\n")
    return max(int(size / (probed / max(lines, 1))) - 1, 0)
