"""Training batches streamed over a source's partitions: ``fitted.batches(source, ...)``.

Why: a training loop needs ``(X_batch, y_batch)`` of a fixed size, in a shuffled order that
is reproducible, over sources larger than memory. So the whole matrix is never built: one
partition at a time (:mod:`fastprep.data.partitions`) is read, validated and transformed exactly
as ``transform`` would (same fitted state, same row ids, same quarantine), and its rows are
copied into batches; the partition is released before the next one is read. Memory is
bounded by one partition's output plus ``pool_size`` batch buffers.

Order: with ``shuffle=True`` the partition order and the rows inside each partition are
permuted by ``numpy.random.default_rng([seed, epoch])``: the same seed and epoch give the same
batches, another epoch another order. Rows left over at the end of a partition start the
next batch, so every batch but the last has ``batch_size`` rows; ``drop_last=True`` drops
that last short batch and counts its rows in ``stats.rows_dropped`` (never silently).

Dense batches are copied straight into a small pool of preallocated buffers
(``np.take(..., out=)``); a buffer is reused only once nothing outside the pool refers to it
any more (its reference count is back to the pool's own), so keeping a batch — e.g. in a
list, or as a tensor made by ``torch.from_numpy`` — is always safe: the pool then allocates
a fresh buffer. ``stats.allocations_avoided`` counts the batches served without one.
CSR batches are gathered from the partition's arrays (one new matrix per batch).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.data.partitions import (
    ROWS_PER_PARTITION,
    PartitionSpec,
    plan_partitions,
    read_partition,
)
from fastprep.data.sources import Source, collect_once, is_path
from fastprep.emit.precision import Precision, merge_info
from fastprep.errors import PipelineDefinitionError
from fastprep.plan.dtypes import LType
from fastprep.runtime import execute
from fastprep.runtime.report import Report
from fastprep.validate.alerts import AlertCallback
from fastprep.validate.alerts import send as send_alerts
from fastprep.validate.findings import Finding, merge_findings

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp

    from fastprep.runtime.fitted import FittedState

#: buffers kept for dense batches: one being filled while the consumer uses the other
POOL_SIZE = 2


@dataclass
class BatchStats:
    """What one pass over the source did: row accounting, batches, buffer reuse, precision."""

    partitions: int = 0
    rows_in: int = 0
    rows_out: int = 0
    rows_quarantined: int = 0
    #: emitted rows not yielded because ``drop_last`` dropped the last short batch
    rows_dropped: int = 0
    batches: int = 0
    buffers_allocated: int = 0
    allocations_avoided: int = 0
    #: bytes of the pooled batch buffers (high-water mark)
    peak_buffer_bytes: int = 0
    #: most rows of any one partition (what bounds the streaming memory, with the buffers)
    peak_partition_rows: int = 0
    precision: dict[str, Any] = field(default_factory=dict)
    quarantine: list[pd.DataFrame] = field(default_factory=list)
    #: the pass's findings, one per rule, totalled over the partitions
    findings: list[Finding] = field(default_factory=list)
    #: alerts sent at the end of the pass (once per rule; see ``fastprep.validate.alerts``)
    alerts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("quarantine", "findings")}
        out["quarantine_rows"] = int(sum(len(q) for q in self.quarantine))
        out["findings"] = [f.to_dict() for f in self.findings]
        return out


class BatchStream:
    """An iterable of ``(X_batch, y_batch)`` (or ``(X, y, row_ids)``); see the module doc."""

    def __init__(
        self,
        fitted: FittedState,
        source: Source,
        *,
        batch_size: int = 1024,
        shuffle: bool = False,
        seed: int = 0,
        drop_last: bool = False,
        epoch: int = 0,
        rows_per_partition: int = ROWS_PER_PARTITION,
        out_dtype: str = "float32",
        on_overflow: str = "raise",
        backend: str | None = None,
        pool_size: int = POOL_SIZE,
        return_row_ids: bool = False,
        shard: tuple[int, int] | None = None,
        pass_seed: int | None = None,
        on_alert: AlertCallback | None = None,
        alerts_seen: set[tuple[str, str, str]] | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise PipelineDefinitionError(f"batch_size={batch_size!r}: a positive integer")
        if pool_size < 1:
            raise PipelineDefinitionError(f"pool_size={pool_size!r}: at least 1")
        self.fitted, self.source = fitted, source
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.drop_last, self.epoch = drop_last, epoch
        self.rows_per_partition = rows_per_partition
        self.precision = Precision(out_dtype, on_overflow)
        self.backend = backend or fitted.backend
        self.pool_size, self.return_row_ids = pool_size, return_row_ids
        #: ``(k, n)``: stream only every n-th partition from the k-th (a DataLoader worker)
        self.shard = shard
        #: mixed into the shuffle when given: a seed the caller draws once per pass and
        #: shares among the streams that split it (a DataLoader's workers)
        self.pass_seed = pass_seed
        self.on_alert = on_alert
        #: alert keys already sent by this stream's passes (or the epochs sharing the set):
        #: each pass re-reads the same source, so it alerts on what is new only
        self.alerts_seen = set() if alerts_seen is None else alerts_seen
        self.stats = BatchStats()

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        self.stats = stats = BatchStats()
        key = [self.seed, self.epoch] + ([] if self.pass_seed is None else [self.pass_seed])
        rng = np.random.default_rng(key) if self.shuffle else None
        assembler = _Assembler(self.batch_size, self.pool_size, stats, self.return_row_ids)
        for output in self.partition_outputs(rng):
            order = np.arange(len(output.row_ids))
            if rng is not None:
                order = rng.permutation(len(order))
            yield from assembler.add(output.X, output.y, output.row_ids, order)
            del output  # release the partition before the next one is read
        yield from assembler.finish(self.drop_last)

    def partition_outputs(self, rng: np.random.Generator | None = None) -> Iterator[execute.Output]:
        """Each partition transformed on its own, in order (or ``rng``'s shuffled order);
        the counts go to ``self.stats``."""
        fitted, stats = self.fitted, self.stats
        plan, schema = fitted.plan, fitted.schema
        plan = execute.without_absent_target(plan, schema, self.source)  # rows to predict on
        columns = schema.read_columns(plan.columns)  # + key columns
        text = [c for c in columns if schema[c].ltype in (LType.CATEGORY, LType.STRING)]
        # a LazyFrame's query (a filtered Dataset's scan) runs once per pass, not per partition
        source = collect_once(self.source, columns)
        frame = None if is_path(source) else source  # what "frame"/"dataset" specs read
        specs = plan_partitions(source, self.rows_per_partition)
        if rng is not None:
            specs = _with_offsets(specs, columns, text, frame)
            specs = [specs[i] for i in rng.permutation(len(specs))]
        if self.shard is not None:
            specs = specs[self.shard[0] :: self.shard[1]]
        offset = 0
        for spec in specs:
            data = read_partition(spec, columns, text, frame)
            start = spec.row_offset if spec.row_offset is not None else offset
            offset = start + len(data)
            prepared = execute.prepare(
                plan, schema, data, phase="transform", backend=self.backend, row_offset=start
            )
            del data
            output = execute.transform_prepared(
                plan, fitted.params, prepared, self.precision.compute_dtype, self.backend
            )
            del prepared
            execute.apply_precision(output, self.precision, fitted.quantization)
            _account(stats, output)
            yield output
            del output
        # the whole pass is one run: its findings, totalled, alert once
        report = Report(source=_describe(self.source, stats.rows_in), findings=stats.findings)
        send_alerts(fitted, report, self.on_alert, "transform", self.alerts_seen)
        stats.alerts = report.alerts


def _account(stats: BatchStats, output: execute.Output) -> None:
    report = output.report
    stats.partitions += 1
    stats.rows_in += report.rows_in
    stats.rows_out += report.rows_out
    stats.rows_quarantined += report.rows_quarantined
    stats.peak_partition_rows = max(stats.peak_partition_rows, report.rows_in)
    if report.precision:
        stats.precision = merge_info(stats.precision, report.precision)
    if len(output.quarantine):
        stats.quarantine.append(output.quarantine)
    if report.findings:
        stats.findings = merge_findings([*stats.findings, *report.findings])


def _describe(source: Source, rows: int) -> str:
    """The source, with the ``rows`` the pass read (counting them again would re-run a
    LazyFrame's query)."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return f"{type(source).__name__} ({rows:,} rows)"


def _with_offsets(
    specs: list[PartitionSpec], columns: list[str], text: list[str], frame: pd.DataFrame | None
) -> list[PartitionSpec]:
    """Every partition's row offset, so they can be read in any order (CSV files are
    counted by reading one column each; Parquet and DataFrames already know theirs)."""
    if all(s.row_offset is not None for s in specs):
        return specs
    out, offset = [], 0
    for spec in specs:
        rows = spec.n_rows
        if rows is None:
            rows = len(read_partition(spec, columns[:1], text[:1], frame))
        out.append(replace(spec, n_rows=rows, row_offset=offset))
        offset += rows
    return out


class _Assembler:
    """Fills batches of ``batch_size`` rows from partition outputs, in the given row order."""

    def __init__(
        self, batch_size: int, pool_size: int, stats: BatchStats, return_row_ids: bool
    ) -> None:
        self.batch_size, self.pool_size = batch_size, pool_size
        self.stats, self.return_row_ids = stats, return_row_ids
        self.pool: list[tuple[np.ndarray, ...]] = []
        self.base: list[list[int]] = []
        self.slot: tuple[np.ndarray, ...] | None = None  # dense buffers being filled
        self.pieces: list[tuple[Any, np.ndarray | None, np.ndarray]] = []  # sparse pieces
        self.fill = 0

    def add(
        self, X: Any, y: np.ndarray | None, ids: np.ndarray, order: np.ndarray
    ) -> Iterator[tuple[Any, ...]]:
        import scipy.sparse as sp

        pos = 0
        while pos < len(order):
            take = min(self.batch_size - self.fill, len(order) - pos)
            rows = order[pos : pos + take]
            if sp.issparse(X):
                self.pieces.append((_gather_csr(X, rows), _take(y, rows), ids[rows]))
            else:
                self._copy_dense(X, y, ids, rows)
            pos += take
            self.fill += take
            if self.fill == self.batch_size:
                yield self._emit()

    def finish(self, drop_last: bool) -> Iterator[tuple[Any, ...]]:
        if self.fill == 0:
            return
        if drop_last:
            self.stats.rows_dropped += self.fill
            self.fill, self.slot, self.pieces = 0, None, []
            return
        yield self._emit()

    def _copy_dense(
        self, X: np.ndarray, y: np.ndarray | None, ids: np.ndarray, rows: np.ndarray
    ) -> None:
        if self.slot is None:
            self.slot = self._acquire(X, y is not None)
        end = self.fill + len(rows)
        np.take(X, rows, axis=0, out=self.slot[0][self.fill : end])
        np.take(ids, rows, out=self.slot[1][self.fill : end])
        if y is not None:
            np.take(y, rows, out=self.slot[2][self.fill : end])

    def _acquire(self, X: np.ndarray, with_y: bool) -> tuple[np.ndarray, ...]:
        """A pooled buffer nothing outside the pool refers to, else a new one."""
        for slot, base in zip(self.pool, self.base):
            if _refcounts(slot) == base and slot[0].dtype == X.dtype and len(slot) == 2 + with_y:
                self.stats.allocations_avoided += 1
                return slot
        shape = (self.batch_size, X.shape[1])
        slot = (np.empty(shape, X.dtype), np.empty(self.batch_size, np.int64))
        if with_y:
            slot = (*slot, np.empty(self.batch_size, np.float32))
        self.stats.buffers_allocated += 1
        if len(self.pool) == self.pool_size:  # every pooled buffer is still held: replace one
            self.pool.pop(0)
            self.base.pop(0)
        self.pool.append(slot)
        self.base.append(_refcounts(slot))
        size = sum(a.nbytes for s in self.pool for a in s)
        self.stats.peak_buffer_bytes = max(self.stats.peak_buffer_bytes, size)
        return slot

    def _emit(self) -> tuple[Any, ...]:
        n, self.fill = self.fill, 0
        self.stats.batches += 1
        if self.slot is not None:
            slot, self.slot = self.slot, None
            X, ids = slot[0][:n], slot[1][:n]
            y = slot[2][:n] if len(slot) == 3 else None
        else:
            pieces, self.pieces = self.pieces, []
            X = _stack_csr([p[0] for p in pieces])
            y = None if pieces[0][1] is None else np.concatenate([p[1] for p in pieces])
            ids = np.concatenate([p[2] for p in pieces])
        return (X, y, ids) if self.return_row_ids else (X, y)


def _refcounts(slot: tuple[np.ndarray, ...]) -> list[int]:
    return [sys.getrefcount(array) for array in slot]


def _take(y: np.ndarray | None, rows: np.ndarray) -> np.ndarray | None:
    return None if y is None else y[rows]


def _gather_csr(X: sp.csr_matrix, rows: np.ndarray) -> sp.csr_matrix:
    """``X[rows]`` for any value dtype (scipy's own indexing rejects float16)."""
    lengths = np.diff(X.indptr)[rows]
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    source = np.repeat(X.indptr[rows].astype(np.int64) - indptr[:-1], lengths)
    source += np.arange(indptr[-1], dtype=np.int64)
    return _csr(X.data[source], X.indices[source], indptr, X.shape[1])


def _stack_csr(parts: list[sp.csr_matrix]) -> sp.csr_matrix:
    if len(parts) == 1:
        return parts[0]
    offsets = np.cumsum([0] + [p.indptr[-1] for p in parts[:-1]])
    indptr = np.concatenate(
        [parts[0].indptr[:1]] + [p.indptr[1:] + o for p, o in zip(parts, offsets)]
    )
    data = np.concatenate([p.data for p in parts])
    indices = np.concatenate([p.indices for p in parts])
    return _csr(data, indices, indptr, parts[0].shape[1])


def _csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, width: int) -> sp.csr_matrix:
    import scipy.sparse as sp

    index = np.int32 if indptr[-1] < 2**31 and width < 2**31 else np.int64
    matrix = sp.csr_matrix((len(indptr) - 1, width), dtype=data.dtype)
    matrix.data = data
    matrix.indices = indices.astype(index, copy=False)
    matrix.indptr = indptr.astype(index, copy=False)
    matrix.has_sorted_indices = True
    return matrix
