"""Shards on disk: one set of files per partition, a manifest per partition, one job manifest.

Layout of ``output_dir``::

    part-00000.npz | part-00000.npy      X of partition 0 (CSR / dense)
    part-00000.y.npy  part-00000.row_ids.npy  part-00000.quarantine.parquet
    part-00000.json                      the partition's manifest, written after its files
    manifest.json                        the job's manifest, written last

Every file is written to a temp name and renamed into place, so a crash leaves either
the old file or the new one, never half of one. A partition counts as done only when its
manifest exists, names the same fitted state (``fingerprint``) and partition, and its
files exist: a re-run skips it, and never writes a partition twice under two names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fastprep import execute
from fastprep.errors import JobError
from fastprep.partitions import PartitionSpec
from fastprep.report import Report
from fastprep.validate.findings import Finding, merge_findings

MANIFEST = "manifest.json"


@dataclass
class Manifest:
    """What a sharded transform wrote: per partition its files and row counts."""

    folder: Path
    partitions: list[dict[str, Any]]
    feature_names: list[str]
    report: Report

    def load(self) -> execute.Output:
        """Concatenate the shards in partition order into one :class:`Output`."""
        return load_shards(self.folder)


def completed(folder: Path, specs: list[PartitionSpec], fingerprint: str) -> dict[int, dict]:
    """Partitions already written by a run with the same fitted state (to skip)."""
    done: dict[int, dict[str, Any]] = {}
    for spec in specs:
        path = folder / f"part-{spec.index:05d}.json"
        if not path.exists():
            continue
        entry = json.loads(path.read_text())
        same = entry.get("fingerprint") == fingerprint and entry.get("partition") == spec.describe()
        files = entry.get("files", {}).values()
        if same and all((folder / name).exists() for name in files):
            done[spec.index] = entry
    return done


def write_manifest(
    folder: Path, specs: list[PartitionSpec], entries: dict[int, dict[str, Any]],
    names: list[str], notes: list[str], source: str, fingerprint: str,
) -> Manifest:  # fmt: skip
    """Check the row accounting over all partitions, then write ``manifest.json`` (last)."""
    missing = [s.describe() for s in specs if s.index not in entries]
    if missing:
        raise JobError(f"no shard for {len(missing)} partition(s): {missing[:3]}")
    ordered = [entries[s.index] for s in specs]
    report = combine_reports([e["report"] for e in ordered], notes, source)
    expected = sum(s.n_rows or 0 for s in specs)
    if report.rows_in != expected:
        raise JobError(f"shards hold {report.rows_in:,} input rows; the source has {expected:,}")
    width = ordered[0]["shape"][1] if ordered else len(names)
    report.output = {
        "shape": [report.rows_out, width],
        "layout": ordered[0]["layout"] if ordered else "dense",
        "nnz": sum(e.get("nnz", 0) for e in ordered),
        "shards": len(ordered),
    }
    doc = {
        "fingerprint": fingerprint,
        "source": source,
        "feature_names": list(names),
        "partitions": [{k: v for k, v in e.items() if k != "report"} for e in ordered],
        "report": report.to_dict(),
    }
    temp = folder / f".{MANIFEST}.tmp"
    temp.write_text(json.dumps(doc, indent=1, default=str))
    temp.replace(folder / MANIFEST)
    return Manifest(folder, doc["partitions"], list(names), report)


def combine_reports(reports: list[dict[str, Any]], notes: list[str], source: str) -> Report:
    """One report over all partitions: counts summed; a rule broken in several partitions
    is one finding with the summed count (``merge_findings``), repairs likewise."""
    total = Report(source=source, backend="distributed")
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
    """Read a finished sharded output back as one :class:`Output` (partition order)."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.exists():
        raise JobError(f"{folder}: no {MANIFEST}; the job did not finish (re-run it to resume)")
    doc = json.loads(path.read_text())
    parts = doc["partitions"]
    Xs, ys, ids, quarantined = [], [], [], []
    for entry in parts:
        files = entry["files"]
        name = folder / files["X"]
        Xs.append(sp.load_npz(name).tocsr() if name.suffix == ".npz" else np.load(name))
        ys.append(np.load(folder / files["y"]) if "y" in files else None)
        ids.append(np.load(folder / files["row_ids"]))
        quarantined.append(pd.read_parquet(folder / files["quarantine"]))
    sparse = bool(Xs) and sp.issparse(Xs[0])
    X = sp.vstack(Xs, format="csr") if sparse else np.concatenate(Xs)
    y = None if any(v is None for v in ys) else np.concatenate(ys)
    report = Report(
        source=doc["report"]["source"], backend="distributed",
        rows_in=doc["report"]["rows_in"], rows_out=doc["report"]["rows_out"],
        rows_quarantined=doc["report"]["rows_quarantined"],
        notes=list(doc["report"]["notes"]),
        findings=[_finding(f) for f in doc["report"].get("findings", ())],
    )  # fmt: skip
    report.output = execute._describe(X)
    quarantine = pd.concat(quarantined, ignore_index=True)
    return execute.Output(X, y, doc["feature_names"], report, quarantine, np.concatenate(ids))
