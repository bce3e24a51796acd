"""Shards on disk: one set of files per partition, each with its own record; one manifest.

A cluster job writes the output format every producer writes
(:mod:`fastprep.storage.output_format`), one shard per partition::

    part-00000.<token>.X.data.npy ...  .y.npy  .row_ids.npy  .quarantine.parquet
    part-00000.<token>.json            the partition's record, written after its files
    manifest.json                      the job's manifest, published by the client last

Each task run writes under a fresh token, so two runs of one task (a worker lost, a
speculative copy) never write the same file. A partition counts as done when a record
names the same fitted state (``fingerprint``) and partition and every file it names is
there with its size: a re-run skips it. ``fp.open_output`` (and :func:`load_shards`)
read the folder; publishing the manifest removes the files it does not name.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fastprep.data.partitions import PartitionSpec
from fastprep.errors import FastprepError, JobError, StateFormatError
from fastprep.runtime import execute
from fastprep.runtime.report import Report
from fastprep.storage import output_format as fmt
from fastprep.storage.shards import check_files, mapped_csr, open_output
from fastprep.validate import drift
from fastprep.validate.findings import Finding, merge_findings


@dataclass
class Manifest:
    """What a sharded transform wrote: per partition its files and row counts."""

    folder: Path
    partitions: list[dict[str, Any]]
    feature_names: Sequence[str]
    report: Report

    def load(self) -> execute.Output:
        """Concatenate the shards in partition order into one :class:`Output`."""
        return load_shards(self.folder)


def write_partition(
    folder: Path, entry: dict[str, Any], output: execute.Output, codec: str | None
) -> dict[str, Any]:
    """One partition's files, then its record (temp name, then renamed); its entry."""
    batch = ShardBatch(folder, codec)
    try:
        written = batch.add(entry, output)
    except BaseException:
        batch.abandon()
        raise
    batch.close()
    return written


class ShardBatch:
    """The shards of a task's partitions, written one after the other into one folder.

    A partition's files are written when it is added; then, on a thread of the batch,
    its files' fsyncs are waited for and its record is written (fsynced, renamed), while
    the next partition is transformed. So a record never names a file that is not yet
    synced, and at most :data:`UNRECORDED` partitions of an interrupted task are written
    without a record (a resumed job runs them again): adding a partition first waits for
    the record of the one before the last.
    Why not wait in the task: its compute then waited for each partition's syncs, and
    the record's own fsync, a journal commit serialized with every other writer's (the
    files' ~15-20 ms a 500,000-row partition, then the record's; with the files' wait
    moved after the next partition, the record's fsync took those 15 ms instead, as the
    journal then held the next partition's writes). Why not sync the whole batch at the
    end: a task of many partitions interrupted late would leave them all to redo.
    """

    #: partitions whose files are written and whose records may not be yet
    UNRECORDED = 1

    def __init__(self, folder: Path, codec: str | None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.codec = folder, codec
        # waits on the disk, not on a core: outside the task's compute budget
        self._recorder = ThreadPoolExecutor(1)
        self._records: deque[tuple[str, Future[None]]] = deque()

    def add(
        self, entry: dict[str, Any], output: execute.Output, label: str | None = None
    ) -> dict[str, Any]:
        """Write one partition's files; returns its entry, which gets its ``"record"``
        (in place) once the record is written (at the latest by :meth:`close`).
        ``label`` names the partition in an error of its syncs or record (raised later,
        while another partition is added: it must not be taken for that one's)."""
        token = fmt.new_token()
        files = fmt.FileWriter(self.folder, self.codec)
        try:
            # X as the run made it (a pending CSR is streamed to its files block by block)
            entry = entry | fmt.write_shard(files, entry["index"], token, output.matrix,
                                            output.y, output.row_ids,
                                            output.quarantine_to_write())  # fmt: skip
        except BaseException:
            files.close()
            raise
        label = label or f"partition {entry['index']}"
        self._records.append((label, self._recorder.submit(self._record, files, entry, token)))
        while len(self._records) > self.UNRECORDED:
            _raise_named(*self._records.popleft())
        return entry

    def close(self) -> None:
        """Wait for every record (each partition's own: one failing does not stop the
        others'); the first error is raised."""
        errors = []
        try:
            while self._records:
                try:
                    _raise_named(*self._records.popleft())
                except Exception as error:
                    errors.append(error)
        finally:
            self._recorder.shutdown()
        if errors:
            raise errors[0]

    def abandon(self) -> None:
        """After a failure: the records of the partitions whose files are complete, as
        their syncs allow; errors of this are dropped (the failure is what is raised)."""
        with contextlib.suppress(Exception):
            self.close()

    def _record(self, files: fmt.FileWriter, entry: dict[str, Any], token: str) -> None:
        try:
            files.finish()  # every file the record names is synced from here
        finally:
            files.close()
        entry["record"] = write_record(self.folder, entry, token)


def _raise_named(label: str, record: Future[None]) -> None:
    """The error of a partition's syncs or record, if any, naming the partition."""
    error = record.exception()
    if error is None:
        return
    if isinstance(error, FastprepError):
        raise error
    raise JobError(
        f"{label}: its shard's files could not be synced or its record written "
        f"({type(error).__name__}: {error}); rerun the job to write it again"
    ) from error


def write_record(folder: Path, entry: dict[str, Any], token: str) -> dict[str, Any]:
    """A partition's record (temp name, fsynced, then renamed): call it once every file
    the entry names is synced. Returns the record's own entry."""
    name = f"part-{entry['index']:05d}.{token}.json"
    data = json.dumps(entry, default=str).encode()
    temp = f".{name}.{secrets.token_hex(4)}.tmp"
    fmt.write_bytes(folder, temp, data)
    (folder / temp).replace(folder / name)
    return {"file": name, "bytes": len(data)}


def completed(folder: Path, specs: list[PartitionSpec], fingerprint: str) -> dict[int, dict]:
    """Partitions already written by a run with the same fitted state (to skip)."""
    done: dict[int, dict[str, Any]] = {}
    if not folder.is_dir():
        return done
    for spec in specs:
        records = sorted(folder.glob(f"part-{spec.index:05d}.*.json"),
                         key=lambda p: p.stat().st_mtime, reverse=True)  # fmt: skip
        for path in records:
            entry = _record(folder, path, fingerprint, spec)
            if entry is not None:
                done[spec.index] = entry
                break
    return done


def _record(
    folder: Path, path: Path, fingerprint: str, spec: PartitionSpec
) -> dict[str, Any] | None:
    try:
        data = path.read_bytes()
        entry = json.loads(data)
        if entry.get("fingerprint") != fingerprint or entry.get("partition") != spec.describe():
            return None
        check_files(folder, entry)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, StateFormatError):
        return None  # half-written, another job's, or its files are gone: run it again
    return entry | {"record": {"file": path.name, "bytes": len(data)}}


def write_manifest(
    folder: Path, specs: list[PartitionSpec], entries: dict[int, dict[str, Any]],
    names: Sequence[str], notes: list[str], source: str, fingerprint: str, *,
    out_dtype: str = "float32", codec: str | None = None, pipeline: Any = None,
    writing: fmt.Writing | None = None, whole_source: Sequence[Finding] = (),
    drift_against: tuple[dict[str, Any] | None, dict[str, float] | None] = (None, None),
) -> Manifest:  # fmt: skip
    """Check the row accounting over all partitions, then publish ``manifest.json`` (last;
    ``writing``: the job's claim on the folder, see ``fmt.Writing``; ``whole_source``: as
    :func:`combine_reports`; ``drift_against``: the fit's profile and the thresholds the entries'
    measures are judged by, :func:`add_drift`)."""
    missing = [s.describe() for s in specs if s.index not in entries]
    if missing:
        raise JobError(f"no shard for {len(missing)} partition(s): {missing[:3]}")
    ordered = [entries[s.index] for s in specs]
    report = combine_reports([e["report"] for e in ordered], notes, source, whole_source)
    profile, thresholds = drift_against
    add_drift(report, profile, [e.get("drift") for e in ordered], thresholds)
    expected = sum(s.n_rows or 0 for s in specs)
    if report.rows_in != expected:
        raise JobError(f"shards hold {report.rows_in:,} input rows; the source has {expected:,}")
    width = ordered[0]["shape"][1] if ordered else len(names)
    report.output = {
        "shape": [report.rows_out, width],
        "layout": ordered[0]["layout"] if ordered else "dense",
        "nnz": sum(e.get("nnz", 0) for e in ordered),
        "shards": len(ordered),
        "dtype": out_dtype,
    }
    token = fmt.new_token()
    # the report's fsync runs while the fitted pipeline and the manifest are written
    # and the manifest fsynced; the manifest replaces the old one only after both
    data = json.dumps(report.to_dict(), indent=1, default=str).encode()
    files: dict[str, Any] = {}
    files["report"], syncing = fmt.write_bytes_soon(folder, f"report.{token}.json", data)
    if pipeline is not None:
        files["pipeline"] = fmt.write_file(folder, f"pipeline.{token}.fastprep", pipeline.save)
    partitions = [{k: v for k, v in e.items() if k != "report"} for e in ordered]
    doc = fmt.manifest_doc(partitions, names, out_dtype, codec, files,
                           fingerprint=fingerprint, source=source)  # fmt: skip
    fmt.publish(folder, doc, writing, syncing=[syncing])
    return Manifest(folder, partitions, names, report)


def add_drift(
    report: Report, profile: dict[str, Any] | None, measures: list[dict[str, Any] | None],
    thresholds: dict[str, float] | None,
) -> None:  # fmt: skip
    """The partitions' drift measures merged and compared with the fit's profile (none
    without one, as in memory) into ``report.drift``; a profiled column no partition
    could measure is named in the notes."""
    if profile is None:
        return
    merged = drift.merge_profiles([m for m in measures if m])
    report.drift = drift.judge(profile, merged, thresholds)
    unmeasured = [name for name in profile if name not in merged]
    if unmeasured:
        report.notes.append(f"drift not measured for {', '.join(map(repr, unmeasured))}: "
                            "no partition held a measurable column of that name")  # fmt: skip


def combine_reports(
    reports: list[dict[str, Any]], notes: list[str], source: str,
    whole_source: Sequence[Finding] = (),
) -> Report:  # fmt: skip
    """One report over all partitions: counts summed; a rule broken in several partitions
    is one finding with the summed count (``merge_findings``), repairs likewise.
    ``whole_source``: findings about the source as a whole (its undeclared columns, which
    a partition reading only the plan's columns never sees), first, as in memory."""
    total = Report(source=source, backend="distributed")
    total.findings.extend(whole_source)
    repairs: dict[tuple[str, str], int] = {}
    for part in reports:
        total.rows_in += part["rows_in"]
        total.rows_out += part["rows_out"]
        total.rows_quarantined += part["rows_quarantined"]
        total.findings.extend(_finding(f) for f in part["findings"])
        for repair in part["repairs"]:
            key = (repair["output"], repair["rule"])
            repairs[key] = repairs.get(key, 0) + repair["count"]
        for stage, seconds in part["stages_seconds"].items():
            total.stages[stage] = total.stages.get(stage, 0.0) + seconds
        for note in part["notes"]:
            if note not in total.notes:
                total.notes.append(note)
    total.repairs = [
        {"output": o, "rule": r, "count": n, "action": "set_missing"}
        for (o, r), n in repairs.items()
    ]
    total.findings = merge_findings(total.findings)
    total.notes.extend(notes)
    total.check_accounting()
    return total


def _finding(data: dict[str, Any]) -> Finding:
    data = dict(data)
    data["first_rows"] = tuple(data.get("first_rows", ()))
    data["examples"] = tuple(data.get("examples", ()))
    return Finding(**data)


def load_shards(folder: str | Path) -> execute.Output:
    """Read a finished output back as one :class:`Output` (partition order), through
    ``fp.open_output``: the arrays are read (concatenated) into memory."""
    folder = Path(folder)
    if not (folder / fmt.MANIFEST).exists():
        raise JobError(f"{folder}: no {fmt.MANIFEST}; the job did not finish (re-run it to resume)")
    opened = open_output(folder)
    whole = opened.whole()
    saved = opened.report
    report = Report(
        source=saved.get("source", ""), backend=saved.get("backend", "distributed"),
        rows_in=saved.get("rows_in", 0), rows_out=saved.get("rows_out", 0),
        rows_quarantined=saved.get("rows_quarantined", 0), notes=list(saved.get("notes", [])),
        findings=[_finding(f) for f in saved.get("findings", ())],
        repairs=list(saved.get("repairs", ())), drift=dict(saved.get("drift", {})),
    )  # fmt: skip
    # in memory and writable, as a load always gave (one shard's arrays are otherwise mapped)
    # (several shards were concatenated into new arrays by whole(): used as they are)
    X, y, row_ids = whole.X, whole.y, whole.row_ids
    if len(opened) == 1:
        X = (mapped_csr(*(np.array(getattr(X, p)) for p in ("data", "indices", "indptr")),
                        X.shape) if hasattr(X, "indptr") else np.array(X))  # fmt: skip
        y = None if y is None else np.array(y)
        row_ids = np.array(row_ids)
    report.output = execute.describe_output(X)
    return execute.Output(X, y, opened.feature_names, report, opened.quarantine, row_ids,
                          out_dtype=opened.out_dtype)  # fmt: skip
