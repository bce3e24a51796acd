"""Output as memory-mappable ``.npy`` shards, and ``fp.open_output(dir)`` to map them back.

Why not ``X.npz``: a compressed (or even stored) ``.npz`` member cannot be memory-mapped —
``np.load`` must read it whole. A training job over a large output wants to map it and let
the OS page in what it touches. So each shard is a folder of plain ``.npy`` files:

    output.json                     manifest: format, shards, rows, width, dtype, names
    shard-00000/X.npy               dense X (C order), or for CSR:
    shard-00000/X.data.npy, X.indices.npy, X.indptr.npy
    shard-00000/y.npy, row_ids.npy

``open_output`` maps every array read-only (``mmap_mode="r"``) and rebuilds CSR matrices over
the mapped arrays without copying them. A folder written by ``Output.save`` (no manifest)
opens too: ``X.npy`` is mapped, a compressed ``X.npz`` is read into memory (noted).
bfloat16 shards hold uint16 bit patterns; the manifest's ``out_dtype`` says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from fastprep.errors import SourceError, StateFormatError

MANIFEST = "output.json"
FORMAT = "fastprep-shards"
VERSION = 1


@dataclass
class Shard:
    """One shard's arrays (memory-mapped when opened)."""

    X: np.ndarray | sp.csr_matrix
    y: np.ndarray | None
    row_ids: np.ndarray


@dataclass
class OpenedOutput:
    """Shards of an output mapped back from a folder; ``X``/``y`` when there is one shard."""

    shards: list[Shard]
    feature_names: list[str]
    out_dtype: str = "float32"
    report: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.shards)

    def __iter__(self) -> Iterator[Shard]:
        return iter(self.shards)

    @property
    def n_rows(self) -> int:
        return sum(s.X.shape[0] for s in self.shards)

    def _single(self) -> Shard:
        if len(self.shards) != 1:
            raise ValueError(
                f"this output has {len(self.shards)} shards: iterate over it (or use .shards[i])"
            )
        return self.shards[0]

    @property
    def X(self) -> np.ndarray | sp.csr_matrix:
        return self._single().X

    @property
    def y(self) -> np.ndarray | None:
        return self._single().y

    @property
    def row_ids(self) -> np.ndarray:
        return self._single().row_ids


class ShardWriter:
    """Writes shards one at a time (e.g. one per partition), then the manifest."""

    def __init__(
        self, folder: str | os.PathLike[str], feature_names: Sequence[str], out_dtype: str
    ) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / MANIFEST).unlink(missing_ok=True)  # incomplete until close()
        self.feature_names = [str(n) for n in feature_names]
        self.out_dtype = out_dtype
        self.entries: list[dict[str, Any]] = []

    def add(self, X: np.ndarray | sp.csr_matrix, y: np.ndarray | None, row_ids: np.ndarray) -> None:
        name = f"shard-{len(self.entries):05d}"
        where = self.folder / name
        where.mkdir(exist_ok=True)
        if sp.issparse(X):
            for part in ("data", "indices", "indptr"):
                np.save(where / f"X.{part}.npy", getattr(X, part), allow_pickle=False)
            layout = "csr"
        else:
            np.save(where / "X.npy", np.ascontiguousarray(X), allow_pickle=False)
            layout = "dense"
        if y is not None:
            np.save(where / "y.npy", y, allow_pickle=False)
        np.save(where / "row_ids.npy", row_ids, allow_pickle=False)
        self.entries.append(
            {"name": name, "rows": int(X.shape[0]), "layout": layout, "has_y": y is not None}
        )

    def close(self, report: dict[str, Any] | None = None) -> Path:
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "out_dtype": self.out_dtype,
            "width": len(self.feature_names),
            "rows": sum(e["rows"] for e in self.entries),
            "shards": self.entries,
            "feature_names": self.feature_names,
            "report": report or {},
        }
        path = self.folder / MANIFEST
        path.write_text(json.dumps(manifest, indent=1, default=str))
        return path


def open_output(folder: str | os.PathLike[str]) -> OpenedOutput:
    """Map an output folder back (shards from ``save_shards``/``write_shards``, or ``save``)."""
    root = Path(folder)
    if not root.is_dir():
        raise SourceError(f"{os.fspath(folder)!r}: no such output folder")
    if not (root / MANIFEST).exists():
        return _open_saved(root)
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise StateFormatError(f"{root}: not a fastprep shard folder of version {VERSION}")
        width = int(manifest["width"])
        shards = [_open_shard(root / e["name"], e, width) for e in manifest["shards"]]
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise StateFormatError(f"{root}: malformed shard folder: {exc}") from None
    return OpenedOutput(
        shards, list(manifest["feature_names"]), manifest["out_dtype"], manifest.get("report", {})
    )


def _open_shard(where: Path, entry: dict[str, Any], width: int) -> Shard:
    def load(name: str) -> np.ndarray:
        return np.load(where / name, mmap_mode="r", allow_pickle=False)

    if entry["layout"] == "csr":
        X: Any = _mapped_csr(load("X.data.npy"), load("X.indices.npy"), load("X.indptr.npy"),
                             (entry["rows"], width))  # fmt: skip
    else:
        X = load("X.npy")
    if X.shape != (entry["rows"], width):
        raise StateFormatError(f"{where}: X has shape {X.shape}, the manifest says "
                               f"{(entry['rows'], width)}")  # fmt: skip
    y = load("y.npy") if entry["has_y"] else None
    return Shard(X, y, load("row_ids.npy"))


def _mapped_csr(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A CSR matrix over the given (mapped) arrays: set directly, so scipy copies nothing."""
    matrix = sp.csr_matrix(shape, dtype=data.dtype)
    matrix.data, matrix.indices, matrix.indptr = data, indices, indptr
    matrix.has_sorted_indices = True
    return matrix


def _open_saved(root: Path) -> OpenedOutput:
    """A folder written by ``Output.save`` (X.npy is mapped; X.npz must be read)."""
    notes = []
    if (root / "X.npy").exists():
        X: Any = np.load(root / "X.npy", mmap_mode="r", allow_pickle=False)
    elif (root / "X.npz").exists():
        X = sp.load_npz(root / "X.npz").tocsr()
        notes.append("X.npz is compressed: read into memory (save_shards writes mappable CSR)")
    else:
        raise SourceError(f"{root}: no {MANIFEST}, X.npy or X.npz: not a fastprep output folder")
    y = np.load(root / "y.npy", mmap_mode="r") if (root / "y.npy").exists() else None
    row_ids = np.load(root / "row_ids.npy", mmap_mode="r", allow_pickle=False)
    names_file = root / "feature_names.json"
    names = json.loads(names_file.read_text()) if names_file.exists() else []
    report_file = root / "report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    out_dtype = str(report.get("output", {}).get("dtype", X.dtype))
    return OpenedOutput([Shard(X, y, row_ids)], names, out_dtype, report, notes)
