"""Write an output folder shard by shard (:class:`ShardWriter`), and map one back
(``fp.open_output(folder)``). The layout is :mod:`fastprep.storage.output_format`'s.

``open_output`` checks the manifest (format, version, every named file's size) and maps
each plain ``.npy`` array read-only (``mmap_mode="r"``); a CSR X is rebuilt over its three
mapped arrays without copying them. Compressed arrays are decompressed when first used;
the report, the quarantine and the feature names are read or expanded only when asked for.
bfloat16 outputs hold uint16 bit patterns; ``out_dtype`` says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fastprep.emit.names import FeatureNames
from fastprep.errors import SourceError, StateFormatError
from fastprep.native import threads
from fastprep.storage import output_format as fmt
from fastprep.storage.output_format import check_files, check_size


class Shard:
    """One shard's arrays: ``X`` (ndarray, or scipy CSR over mapped arrays), ``y``,
    ``row_ids``; ``quarantine`` (its rejected rows) is read when asked for."""

    def __init__(self, root: Path | None, entry: dict[str, Any], width: int) -> None:
        self._root, self.entry, self._width = root, entry, width
        self._cache: dict[str, Any] = {}
        if root is not None:
            for name, array in entry["arrays"].items():
                if "codec" not in array or array["codec"] is None:
                    self._cache[name] = _load_npy(root, array)

    @classmethod
    def of(cls, X: Any, y: np.ndarray | None, row_ids: np.ndarray) -> Shard:
        """A shard over arrays already in memory."""
        shard = cls(None, {"arrays": {}, "rows": X.shape[0]}, X.shape[1])
        shard._cache.update({"X": X, "y": y, "row_ids": row_ids})
        return shard

    def _array(self, name: str) -> np.ndarray:
        if name not in self._cache:
            assert self._root is not None
            self._cache[name] = _decompress(self._root, self.entry["arrays"][name])
        return self._cache[name]

    @property
    def rows(self) -> int:
        return int(self.entry["rows"])

    @property
    def X(self) -> Any:
        if "X" not in self._cache:
            if self.entry.get("layout") == "csr":
                self._cache["X"] = mapped_csr(
                    self._array("X.data"), self._array("X.indices"), self._array("X.indptr"),
                    (self.rows, self._width),
                )  # fmt: skip
            else:
                self._cache["X"] = self._array("X")
        return self._cache["X"]

    @property
    def y(self) -> np.ndarray | None:
        return self._array("y") if "y" in self.entry["arrays"] or "y" in self._cache else None

    @property
    def row_ids(self) -> np.ndarray:
        """Read-only, as ``Output.row_ids``: also when decompressed or stacked in memory."""
        ids = self._array("row_ids")
        if ids.flags.writeable:
            ids = ids.view()
            ids.flags.writeable = False
        return ids

    @property
    def quarantine(self) -> Any:
        """The shard's rejected rows (a pandas DataFrame), or None if none were written."""
        if "quarantine" not in self._cache:
            table = self.quarantine_table()
            self._cache["quarantine"] = None if table is None else table.to_pandas()
        return self._cache["quarantine"]

    def quarantine_table(self) -> Any:
        """The shard's rejected rows as written (an Arrow table), or None."""
        info = self.entry.get("quarantine")
        if info is None or self._root is None:
            return None
        import pyarrow.parquet as pq

        path = self._root / info["file"]
        if not path.exists():
            raise _gone(self._root, info["file"])
        return pq.read_table(path)


def concat_rejected(parts: Sequence[Any]) -> Any:
    """Several parts' rejected rows (Arrow tables or pandas frames) as one pandas frame.
    Arrow tables are joined first, their types promoted as one read of the whole source
    promotes them: a part whose column is all missing has no type of its own, and its
    rows' NaN beside another part's timestamps made an object column in pandas. Frames,
    or tables that do not promote, are joined by pandas."""
    import pandas as pd
    import pyarrow as pa

    if parts and all(isinstance(p, pa.Table) for p in parts):
        try:
            return pa.concat_tables(parts, promote_options="permissive").to_pandas()
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            pass
    frames = [p.to_pandas() if isinstance(p, pa.Table) else p for p in parts]
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


class OpenedOutput:
    """An output folder mapped back: iterate (or index ``.shards``) for each shard;
    ``X``/``y``/``row_ids`` when there is one shard; ``stacked_X`` for every shard's X as
    one lazily stacked matrix; :meth:`whole` for all of them in memory."""

    def __init__(self, folder: Path, manifest: dict[str, Any], shards: list[Shard]) -> None:
        self.folder, self.manifest, self.shards = folder, manifest, shards
        self.out_dtype: str = manifest["out_dtype"]
        self.codec: str | None = manifest.get("codec")
        self.notes: list[str] = []
        self._names: FeatureNames | None = None
        self._report: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.shards)

    def __repr__(self) -> str:
        m = self.manifest
        codec = f", {self.codec}" if self.codec else ""
        return (f"OpenedOutput({os.fspath(self.folder)!r}: {len(self)} shard(s), "
                f"{m['rows']:,} x {m['width']:,} {m['layout']} {self.out_dtype}{codec})")  # fmt: skip

    def __iter__(self) -> Iterator[Shard]:
        return iter(self.shards)

    @property
    def n_rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def feature_names(self) -> FeatureNames:
        """One name per column of X (hashed blocks expand only when read)."""
        if self._names is None:
            self._names = fmt.decode_names(self.manifest["feature_names"])
        return self._names

    @property
    def report(self) -> dict[str, Any]:
        """The run's report (as ``Report.to_dict()``), read on first access."""
        if self._report is None:
            info = self.manifest["files"].get("report")
            self._report = {} if info is None else _read_json(self.folder / info["file"])
        return self._report

    @property
    def quarantine(self) -> Any:
        """Every shard's rejected rows as one pandas DataFrame (read on access)."""
        import pandas as pd

        tables = [t for t in (s.quarantine_table() for s in self.shards) if t is not None]
        if not tables:
            return pd.DataFrame({"row_id": pd.Series([], dtype="int64"),
                                 "reason": pd.Series([], dtype="str")})  # fmt: skip
        return concat_rejected(tables)

    @property
    def pipeline_path(self) -> Path | None:
        """The fitted pipeline published with this output (``fp.load`` it), if any."""
        info = self.manifest["files"].get("pipeline")
        return None if info is None else self.folder / info["file"]

    def _single(self) -> Shard:
        if len(self.shards) != 1:
            raise ValueError(
                f"this output has {len(self.shards)} shards: iterate over it (or use "
                ".shards[i]), or .whole() for all of them in memory"
            )
        return self.shards[0]

    @property
    def X(self) -> Any:
        return self._single().X

    @property
    def y(self) -> np.ndarray | None:
        return self._single().y

    @property
    def row_ids(self) -> np.ndarray:
        return self._single().row_ids

    @property
    def stacked_X(self) -> StackedX:
        """Every shard's X as one matrix of ``n_rows`` rows, stacked lazily: indexing it
        reads only the shards holding the rows asked for (no copy of the rest)."""
        shards = self.shards
        return StackedX([lambda s=s: s.X for s in shards], self.manifest["width"],
                        rows=[s.rows for s in shards], dtype=self._x_dtype(),
                        sparse=self.manifest["layout"] == "csr")  # fmt: skip

    def _x_dtype(self) -> np.dtype:
        """X's stored dtype, from the manifest (bfloat16 is uint16 bits)."""
        if not self.shards:
            return np.dtype(np.float32)
        arrays = self.shards[0].entry["arrays"]
        return np.dtype((arrays.get("X") or arrays["X.data"])["dtype"])

    def batches(
        self, batch_size: int = 1024, *, shuffle: bool = False, seed: int = 0, epoch: int = 0,
        drop_last: bool = False,
    ) -> Iterator[tuple[Any, np.ndarray | None]]:  # fmt: skip
        """``(X_batch, y_batch)`` read from the mapped shards, never all of X in memory:
        rows in order, or with ``shuffle`` in the order of
        ``numpy.random.default_rng([seed, epoch]).permutation`` (the same seed and epoch,
        the same batches), each batch gathered from the shards that hold its rows.
        ``drop_last`` drops a last batch shorter than ``batch_size``. For training on an
        output written because it did not fit in memory; a torch ``IterableDataset`` is
        a loop over this."""
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}: must be at least 1")
        X = self.stacked_X
        ys = [s.y for s in self.shards]
        y = None if any(v is None for v in ys) or not ys else StackedX(
            [v.reshape(-1, 1) for v in ys], 1)  # fmt: skip
        n = X.shape[0]
        order = (np.random.default_rng([seed, epoch]).permutation(n) if shuffle
                 else np.arange(n))  # fmt: skip
        stop = n - n % batch_size if drop_last else n
        for start in range(0, stop, batch_size):
            rows = order[start : start + batch_size]
            yield X[rows], None if y is None else y[rows].reshape(-1)

    def whole(self) -> Shard:
        """All rows as one shard: the mapped arrays for one shard; for several, their
        concatenation in memory (one copy)."""
        if len(self.shards) == 1:
            return self.shards[0]
        if not self.shards:
            raise ValueError("this output has no shards")
        X = self.stacked_X.materialize()
        ys = [s.y for s in self.shards]
        y = None if any(v is None for v in ys) else np.concatenate(ys)
        return Shard.of(X, y, np.concatenate([s.row_ids for s in self.shards]))

    def to_pandas(self, target: str | None = None, *, sparse: bool = False) -> Any:
        """All rows (:meth:`whole`) as a pandas DataFrame, as ``Output.to_pandas`` gives."""
        from fastprep.emit import frames

        s = self.whole()
        return frames.to_pandas(s.X, s.y, self.feature_names, s.row_ids,
                                out_dtype=self.out_dtype, target=target, sparse=sparse)  # fmt: skip

    def to_polars(self, target: str | None = None, *, row_ids: bool = False) -> Any:
        """All rows (:meth:`whole`) as a Polars DataFrame, as ``Output.to_polars`` gives."""
        from fastprep.emit import frames

        s = self.whole()
        return frames.to_polars(s.X, s.y, self.feature_names, s.row_ids,
                                out_dtype=self.out_dtype, target=target, row_ids_column=row_ids)  # fmt: skip


class StackedX:
    """Several shards' X (mapped CSR or dense arrays) seen as one ``(rows, width)`` matrix.

    ``X[i]``, ``X[a:b]`` and ``X[row_array]`` gather just those rows from the shards that
    hold them (a CSR X gives CSR rows, a dense one an ndarray, in the order asked);
    :meth:`blocks` yields each shard's ``(first_row, X)``; :meth:`materialize` stacks all
    of it in memory (one copy) when that is really wanted.

    A block is an array or a function returning one (with ``rows=`` its row counts): such a
    block is opened only when a row of it is asked for (a compressed shard is decompressed
    then, not when the view is made)."""

    ndim = 2

    def __init__(
        self, blocks: Sequence[Any], width: int, *, rows: Sequence[int] | None = None,
        dtype: Any = None, sparse: bool | None = None,
    ) -> None:  # fmt: skip
        self._blocks = list(blocks)
        sizes = [int(n) for n in rows] if rows is not None else [
            int(b.shape[0]) for b in self._blocks]  # fmt: skip
        if len(sizes) != len(self._blocks):
            raise ValueError(f"{len(self._blocks)} blocks, {len(sizes)} row counts")
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.shape = (int(self._starts[-1]), int(width))
        first = self._block(0) if self._blocks and (dtype is None or sparse is None) else None
        self.dtype = np.dtype(dtype if dtype is not None else (
            first.dtype if first is not None else np.float32))  # fmt: skip
        self.sparse = bool(sparse) if sparse is not None else hasattr(first, "indptr")

    def _block(self, b: int) -> Any:
        block = self._blocks[b]
        if callable(block):
            block = self._blocks[b] = block()  # opened once, kept (mapped: no copy)
        return block

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        kind = "CSR" if self.sparse else "dense"
        return (f"StackedX({self.shape[0]:,} x {self.shape[1]:,} {kind} {self.dtype}, "
                f"{len(self._blocks)} shard(s))")  # fmt: skip

    @property
    def nnz(self) -> int:
        blocks = (self._block(b) for b in range(len(self._blocks)))
        if self.sparse:
            return int(sum(b.nnz for b in blocks))
        return int(sum(np.count_nonzero(b) for b in blocks))

    def blocks(self) -> Iterator[tuple[int, Any]]:
        for b, start in enumerate(self._starts[:-1]):
            yield int(start), self._block(b)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, tuple):
            raise TypeError("index rows only (X[rows]); select columns on the result")
        if isinstance(key, (int, np.integer)):
            return self._rows(np.array([int(key)]))
        if isinstance(key, slice):
            return self._rows(np.arange(*key.indices(self.shape[0])))
        return self._rows(np.asarray(key))

    def _rows(self, rows: np.ndarray) -> Any:
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64, copy=False)
        rows = np.where(rows < 0, rows + self.shape[0], rows)
        if rows.size and (rows.min() < 0 or rows.max() >= self.shape[0]):
            raise IndexError(f"row index out of range for {self.shape[0]:,} rows")
        which = np.searchsorted(self._starts, rows, side="right") - 1
        order = np.argsort(which, kind="stable")
        # each block's rows are one run of the sorted block numbers: O(rows) in all, not a
        # full-length mask per block
        bounds = np.searchsorted(which[order], np.arange(len(self._blocks) + 1))
        parts = []
        for b in np.flatnonzero(np.diff(bounds)):
            picked = order[bounds[b] : bounds[b + 1]]
            parts.append(self._block(b)[rows[picked] - self._starts[b]])
        stacked = self._stack(parts)
        if np.all(order[1:] > order[:-1]):  # asked in block order: already in place
            return stacked
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        return stacked[inverse]

    def _stack(self, parts: list[Any]) -> Any:
        """Blocks (or pieces of them) one under the other, in memory: the one place rows
        of several shards are joined (:meth:`materialize`, row gathers, ``whole()``)."""
        if self.sparse:
            import scipy.sparse as sp

            if not parts:
                return sp.csr_matrix((0, self.shape[1]), dtype=self.dtype)
            return sp.vstack(parts, format="csr") if len(parts) > 1 else parts[0]
        if not parts:
            return np.empty((0, self.shape[1]), self.dtype)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def materialize(self) -> Any:
        """All rows in memory, one matrix (one copy; a single block is returned as it is)."""
        return self._stack([self._block(b) for b in range(len(self._blocks))])


class ShardWriter:
    """Writes an output shard by shard (e.g. one per partition) under fresh names, then
    publishes it with :meth:`close`; until then the folder's earlier output is untouched."""

    def __init__(
        self, folder: str | os.PathLike[str], feature_names: Sequence[str], out_dtype: str,
        *, compress: str | bool | None = None,
    ) -> None:  # fmt: skip
        fmt.check_folder(folder)  # every way to write an output comes here: out.save("") too
        self.folder = Path(folder)
        self.feature_names = feature_names
        self.out_dtype = out_dtype
        self.codec = fmt.check_codec(compress)
        self.token = fmt.new_token()
        self.entries: list[dict[str, Any]] = []
        self.files: dict[str, dict[str, Any]] = {}
        self._published = False
        self._earlier = (self.folder / fmt.MANIFEST).is_file()
        with self._errors():
            self.folder.mkdir(parents=True, exist_ok=True)
            self._writing = fmt.Writing(self.folder)  # before its first file: see fmt.Writing
        self._writer = fmt.FileWriter(self.folder, self.codec)

    def _errors(self) -> Any:
        """The operating system's errors while writing, as an OutputError naming the folder."""
        return fmt.write_errors(self.folder, lambda: self._published, self._earlier)

    def add(
        self, X: Any, y: np.ndarray | None, row_ids: np.ndarray, quarantine: Any = None
    ) -> None:
        with self._errors():
            self.entries.append(fmt.write_shard(self._writer, len(self.entries), self.token,
                                                X, y, row_ids, quarantine))  # fmt: skip

    def close(self, report: dict[str, Any] | None = None, pipeline: Any = None) -> Path:
        """Write the report (and ``pipeline``, anything with ``.save(path)``), wait until
        every file is on disk, then publish."""
        try:
            with self._errors():
                data = json.dumps(report or {}, indent=1, default=str).encode()
                self.files["report"] = self._writer.small_file(f"report.{self.token}.json", data)
                if pipeline is not None:
                    self.files["pipeline"] = self._writer.saved_file(
                        f"pipeline.{self.token}.fastprep", pipeline.save
                    )
                self._writer.finish()  # every file above is on disk before the manifest names it
                doc = fmt.manifest_doc(self.entries, self.feature_names, self.out_dtype, self.codec,
                                       self.files)  # fmt: skip
                return fmt.publish(self.folder, doc, self._writing, self._mark_published)
        finally:
            self._writer.close()

    def _mark_published(self) -> None:
        self._published = True  # from here on a failure keeps the files: they are the output

    def discard(self) -> None:
        """Remove what this writer wrote, unless it was published."""
        self._writer.close()
        try:
            if not self._published:
                for path in self.folder.glob(f"*.{self.token}.*"):
                    path.unlink(missing_ok=True)
        finally:
            self._writing.release()

    def written(self) -> dict[str, str]:
        """Name -> path of every file of the published output (``X.data``, ``y``, ...)."""
        out = {"manifest": str(self.folder / fmt.MANIFEST)}
        many = len(self.entries) > 1
        for entry in self.entries:
            for name, info in entry["arrays"].items():
                out[f"{entry['index']}.{name}" if many else name] = str(self.folder / info["file"])
            if "quarantine" in entry and not many:
                out["quarantine"] = str(self.folder / entry["quarantine"]["file"])
        out.update({k: str(self.folder / v["file"]) for k, v in self.files.items()})
        return out


def mapped_csr(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> Any:
    """A CSR matrix over the given (mapped) arrays: set directly, so scipy copies nothing."""
    import scipy.sparse as sp

    # built empty as float32 (scipy refuses to build float16 or bfloat16's uint16 bits…),
    # then given the arrays: its dtype is its data's
    matrix = sp.csr_matrix(shape, dtype=np.float32)
    matrix.data, matrix.indices, matrix.indptr = data, indices, indptr
    matrix.has_sorted_indices = True
    return matrix


# ------------------------------------------------------------------------ opening


def open_output(folder: str | os.PathLike[str]) -> OpenedOutput:
    """Map an output folder back (written by ``save``, ``save_shards``, ``write_shards``,
    ``fastprep run``/``transform``, or a cluster job)."""
    root = Path(folder)
    if not root.is_dir():
        raise SourceError(f"{os.fspath(folder)!r}: no such output folder")
    manifest = read_manifest(root)
    try:
        width = int(manifest["width"])
        shards = []
        for entry in manifest["shards"]:
            check_files(root, entry)
            shards.append(Shard(root, entry, width))
        for info in manifest["files"].values():
            check_size(root, info)
        names = sum(1 if isinstance(n, str) else int(n["n"]) for n in manifest["feature_names"])
        if names != width:
            raise StateFormatError(f"{root}: the manifest lists {names:,} feature names for "
                                   f"{width:,} columns; write the output again")  # fmt: skip
    except StateFormatError:
        raise
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise StateFormatError(
            f"{root}: malformed output folder ({type(exc).__name__}: {exc}); write it again"
        ) from None
    return OpenedOutput(root, manifest, shards)


def read_manifest(root: Path) -> dict[str, Any]:
    """The folder's manifest, checked; any other layout is a StateFormatError saying what."""
    path = root / fmt.MANIFEST
    if not path.exists():
        raise StateFormatError(f"{root}: {_what_instead(root)}")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StateFormatError(f"{path}: not a readable fastprep manifest ({exc}); write the "
                               "output again") from None  # fmt: skip
    if not isinstance(doc, dict) or doc.get("format") != fmt.FORMAT:
        if isinstance(doc, dict) and "partitions" in doc and "fingerprint" in doc:
            raise StateFormatError(
                f"{root}: a cluster output written by an earlier fastprep (part-NNNNN.npz + "
                "manifest.json); re-run the job with this version to write the current format"
            )
        raise StateFormatError(f"{path}: not a fastprep output manifest (format "
                               f"{doc.get('format') if isinstance(doc, dict) else None!r})")  # fmt: skip
    version = doc.get("version")
    if not isinstance(version, int) or version > fmt.VERSION:
        raise StateFormatError(
            f"{root}: output format version {version!r} is newer than this fastprep reads "
            f"(<= {fmt.VERSION}); upgrade fastprep to open it"
        )
    if version < fmt.VERSION:
        raise StateFormatError(f"{root}: output format version {version} is no longer read; "
                               "write the output again")  # fmt: skip
    return doc


def _what_instead(root: Path) -> str:
    if (root / "output.json").exists():
        return ("shards written by an earlier fastprep (output.json + shard-NNNNN/); write "
                "them again with this version (fitted.write_shards / out.save)")  # fmt: skip
    if (root / "X.npz").exists() or (root / "X.npy").exists():
        return ("an output written by an earlier fastprep (X.npz/X.npy + feature_names.json, "
                "no manifest.json); write it again with this version (out.save or fastprep "
                "run/transform)")  # fmt: skip
    if any(p.name.startswith("part-") or p.name in fmt.LOCK_FILES for p in root.iterdir()):
        return ("no manifest.json: an output was being written here but never published "
                "(the writer stopped); run it again (a cluster job resumes)")  # fmt: skip
    return "no manifest.json: not a fastprep output folder"


def _dtype_shape(info: dict[str, Any]) -> tuple[np.dtype, tuple[int, ...]]:
    dtype = np.dtype(info["dtype"])
    if dtype.kind not in "biuf":
        raise ValueError(f"array dtype {dtype} is not numeric")
    return dtype, tuple(int(n) for n in info["shape"])


def _load_npy(root: Path, info: dict[str, Any]) -> np.ndarray:
    dtype, shape = _dtype_shape(info)
    path = root / info["file"]
    empty = 0 in shape  # an empty file region cannot be mapped
    array = np.load(path, mmap_mode=None if empty else "r", allow_pickle=False)
    if array.dtype != dtype or array.shape != shape:
        raise StateFormatError(f"{path}: holds {array.dtype} {array.shape}, the manifest "
                               f"says {dtype} {shape}; write the output again")  # fmt: skip
    return array


def _decompress(root: Path, info: dict[str, Any]) -> np.ndarray:
    """A compressed array, its chunks decompressed on threads straight into the result."""
    import pyarrow as pa

    dtype, shape = _dtype_shape(info)
    out = np.empty(shape, dtype)
    raw = out.reshape(-1).view(np.uint8)
    step, sizes = int(info["chunk_bytes"]), [int(n) for n in info["chunks"]]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    path = root / info["file"]
    if len(sizes) != -(-raw.size // step) or starts[-1] != info["bytes"]:
        raise StateFormatError(f"{path}: its chunk table does not match its size")
    try:
        data = memoryview(path.read_bytes())
    except FileNotFoundError:
        raise _gone(root, info["file"]) from None

    def one(i: int) -> None:
        begin = i * step
        size = min(step, raw.size - begin)
        block = pa.decompress(data[starts[i] : starts[i + 1]], decompressed_size=size,
                              codec=info["codec"], asbytes=False)  # fmt: skip
        raw[begin : begin + size] = np.frombuffer(block, np.uint8)

    try:
        threads.map_all(one, range(len(sizes)))
    except (pa.ArrowException, ValueError) as exc:
        raise StateFormatError(f"{path}: cannot be decompressed ({exc}); write the output "
                               "again") from None  # fmt: skip
    return out


def _gone(root: Path, name: str) -> StateFormatError:
    """A file the opened output names, read on first use, is no longer there."""
    return StateFormatError(
        f"{root}: {name} is gone: the output was replaced or removed after it was opened "
        "(another run wrote this folder); open it again (fp.open_output) for what it holds now"
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise _gone(path.parent, path.name) from None
    except (OSError, ValueError) as exc:
        raise StateFormatError(f"{path}: unreadable ({exc}); write the output again") from None
