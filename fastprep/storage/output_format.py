"""The one on-disk output format: arrays under fresh names, published by one manifest.

Layout of an output folder (every producer writes it; ``fp.open_output`` reads it)::

    manifest.json                               the output: format, version, shards, names
    part-00000.<token>.X.npy                    dense X, or for CSR X.data/X.indices/X.indptr
    part-00000.<token>.y.npy  .row_ids.npy      the target and the source row of each row
    part-00000.<token>.quarantine.parquet       the rejected rows (as read + row_id, reason)
    part-00000.<token>.json                     a cluster partition's own record (resuming)
    report.<token>.json  pipeline.<token>.fastprep
    pipeline.fastprep                           a hard link to the published fitted pipeline
    .fastprep.lock  .fastprep.writing           empty lock files (see :class:`Writing`)

Every data file is written once under a name no manifest names yet (``<token>`` is fresh
per writer), flushed and fsynced; then ``manifest.json`` is replaced in one
``os.replace`` (its folder fsynced) and only then are the previous output's files removed.
So whatever instant a writer dies, ``manifest.json`` names either the complete earlier
output or the complete new one. Several writers may share a folder: each holds a shared
flock on ``.fastprep.writing`` while it writes (:class:`Writing`), publishes under an
exclusive one on ``.fastprep.lock``, and removes files no manifest names (a killed writer's)
only when it is the one writer there; otherwise only the files the replaced manifest named. The manifest records each file's size: a file that is
missing or truncated is reported as such, never read half.

Arrays are plain ``.npy`` (memory-mapped when opened), or with ``compress="zstd"|"lz4"``
raw bytes compressed in independent chunks (compressed and decompressed on threads);
their chunk sizes are in the manifest. Feature names are stored as a list whose hashed
blocks are ranges (``{"prefix": "hash:tailnum,dest", "n": 262144}``), not 262,144 strings.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fastprep.emit.csr_stream import PendingCsr
from fastprep.emit.names import FeatureNames, HashedNames
from fastprep.errors import FastprepError, OutputError, PipelineDefinitionError, StateFormatError
from fastprep.native import threads
from fastprep.storage.direct_io import NpyStream, write_npy

try:
    import fcntl
except ImportError:  # Windows: no flock
    fcntl = None  # type: ignore[assignment]

FORMAT = "fastprep-output"
VERSION = 2
MANIFEST = "manifest.json"
PIPELINE_ALIAS = "pipeline.fastprep"
CODECS = ("zstd", "lz4")
CHUNK_BYTES = 8 << 20  # compressed independently: threads can share one array
#: entries per piece of a streamed CSR (4 MiB of float32 data, 4 of int32 indices): a
#: 500,000-row partition (~3.9M entries) is several pieces, so its writes overlap its
#: fill, where the fill's default (4M entries) made it one piece written after it was made
STREAM_ENTRIES = 1 << 20
#: held (shared) by every writer while it writes; held exclusively by a publisher that
#: removes unnamed files as a killed writer's (no other writer is writing then)
WRITING_LOCK = ".fastprep.writing"
#: held exclusively around each publish (check, replace, alias, removal): one at a time
PUBLISH_LOCK = ".fastprep.lock"
LOCK_FILES = (WRITING_LOCK, PUBLISH_LOCK)  # never removed: a lock file must outlive its users
#: temp files written only while the publish lock is held: the lock's holder knows any it
#: finds are a killed publisher's
PUBLISH_TEMP = re.compile(r"^\.(?:manifest\.json|pipeline\.fastprep)\.[0-9a-f]+\.tmp$")
#: files this format writes (``<stem>.<12 hex>.<rest>``) and its temp files; a publish by
#: the one writer in the folder removes those the new manifest does not name (a killed
#: writer's leftovers)
OURS = re.compile(
    r"^(?:part-\d{5}|report|pipeline)\.[0-9a-f]{12}\.|^\.(?:manifest\.json|pipeline\.fastprep"
    r"|part-\d{5}\.[0-9a-f]{12}\.json)\.[0-9a-f]+\.tmp$"
)
#: what earlier fastprep versions wrote into an output folder: removed by a publish that
#: replaces such a layout (``Previous.legacy`` says which), never on a name alone
LEGACY_FILES = ("X.npz", "X.npy", "y.npy", "row_ids.npy", "feature_names.json", "report.json",
                "quarantine.parquet")  # fmt: skip
LEGACY_PARTS = re.compile(
    r"^\.?part-\d{5}\.(?:npz|npy|y\.npy|row_ids\.npy|quarantine\.parquet|json)(?:\..*\.tmp)?$"
)
LEGACY_SHARD_FILES = ("X.npy", "X.data.npy", "X.indices.npy", "X.indptr.npy", "y.npy",
                      "row_ids.npy")  # fmt: skip


def output_files(folder: str | os.PathLike[str]) -> set[str]:
    """The names of the files in ``folder`` that a fastprep output wrote there (none unless
    it holds an output's manifest, a writer's lock file or an earlier version's output): a
    reader of a folder of data files skips them, an output's quarantine being Parquet."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return set()
    if not names & {MANIFEST, *LOCK_FILES, "feature_names.json"}:
        return set()
    return {
        n for n in names
        if OURS.match(n) or LEGACY_PARTS.match(n) or n in LEGACY_FILES
        or n in (MANIFEST, PIPELINE_ALIAS, *LOCK_FILES)
    }  # fmt: skip


def new_token() -> str:
    """A fresh name component: files of two writers (or two runs) never share a name."""
    return secrets.token_hex(6)


def check_codec(compress: str | bool | None) -> str | None:
    """``None``/``False``: plain ``.npy``; ``True`` means zstd."""
    if compress is None or compress is False:
        return None
    codec = "zstd" if compress is True else str(compress).lower()
    if codec not in CODECS:
        raise PipelineDefinitionError(
            f"compress={compress!r}: use one of {', '.join(CODECS)} (or None for plain .npy)"
        )
    return codec


# ------------------------------------------------------------------------ writing


def check_folder(folder: str | os.PathLike[str]) -> None:
    """Refuse, before a run starts, an output path that cannot become a folder this process
    writes: it is a file, it lies under a file, or its nearest existing folder is not
    writable. Nothing is created (a run refused later leaves no empty folder behind)."""
    if not os.fspath(folder).strip():  # Path("") is ".": an unset variable, not a choice
        raise OutputError("the output folder is an empty path; name the folder to write")
    path = Path(folder)
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    what = "it" if existing == path else str(existing)
    if existing.exists() and not existing.is_dir():
        raise OutputError(f"{path}: cannot write the output there: {what} is a file, not a "
                          "folder; choose another output folder")  # fmt: skip
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write the output there: {what} is not writable "
                          "for this user; choose another output folder")  # fmt: skip


_WRITE_CAUSES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "a file exceeded the file size limit",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a file is where a folder should be",
    errno.EEXIST: "a file is where a folder should be",
}


@contextlib.contextmanager
def write_errors(folder: Path, published: Callable[[], bool], earlier: bool) -> Iterator[None]:
    """An operating system's error while an output is written, as an :class:`OutputError`
    naming the folder, the cause and what the folder now holds (``published()``: the new
    output was already published; ``earlier``: the folder held an output before)."""
    try:
        yield
    except FastprepError:
        raise
    except OSError as exc:
        cause = _WRITE_CAUSES.get(exc.errno or -1) or exc.strerror or str(exc)
        if exc.errno is None:  # a short write (numpy names only the byte counts)
            cause = f"a write was cut short ({exc}): is the disk full?"
        if exc.filename is not None:
            cause = f"{cause}: {exc.filename}"
        if published():
            kept = "the new output was published; removing the earlier one's files failed"
        elif earlier:
            kept = "nothing was published: the folder keeps its earlier output"
        else:
            kept = "nothing was published"
        raise OutputError(f"{folder}: the output could not be written ({cause}); {kept}") from exc


class FileWriter:
    """Writes one output's files into ``folder``: arrays with one large write each (or
    compressed, chunks on a thread pool), while two background threads do the slow file
    work beside them — each file's fsync overlaps the next array's write, and the
    quarantine's Parquet file is written meanwhile. :meth:`finish` waits for all of it (call it before
    publishing anything that names these files)."""

    def __init__(self, folder: Path, codec: str | None = None) -> None:
        self.folder, self.codec = folder, codec
        # threads for the file work (fsync, the quarantine), apart from the shared pool:
        # they must start at once, not queue behind the compute they are meant to overlap.
        # Two: fsyncs in flight together share the file system's journal commits (the
        # job's seven files: 28-56 ms with two, 37-80 ms one after the other, measured)
        self._background = ThreadPoolExecutor(2)
        self._pending: list[Future[Any]] = []

    def array(self, name: str, array: np.ndarray) -> dict[str, Any]:
        """Write one array as ``name``.npy (or compressed); returns its manifest entry."""
        array = np.asarray(array)
        entry: dict[str, Any] = {"dtype": array.dtype.str, "shape": list(array.shape)}
        if self.codec is not None:
            entry.update(file=f"{name}.{self.codec}", codec=self.codec, chunk_bytes=CHUNK_BYTES)
        else:
            entry["file"] = f"{name}.npy"
        if self.codec is None:  # a large array past the page cache, where possible
            descriptor = write_npy(self.folder / entry["file"], array)
            if descriptor is not None:
                entry["bytes"] = os.fstat(descriptor).st_size
                self.later(_sync_descriptor, descriptor)
                return entry
        handle = open(self.folder / entry["file"], "wb")  # noqa: SIM115 (closed by _sync)
        try:
            if self.codec is None:
                # the header, then the array's own buffer in one write: no copy of the data
                np.lib.format.write_array(handle, array, allow_pickle=False)
            else:
                entry["chunks"] = self._write_compressed(handle, array)
            handle.flush()
        except BaseException:
            handle.close()
            raise
        entry["bytes"] = os.path.getsize(self.folder / entry["file"])
        self.later(_sync, handle)
        return entry

    def csr_entries(self, stem: str, X: PendingCsr) -> dict[str, dict[str, Any]]:
        """Write ``X.data`` and ``X.indices`` as their blocks of rows are made (each file
        written by a thread of its own while the next block is filled: two requests in
        flight keep the disk busier than one), then ``X.indptr``; returns their manifest
        entries. Plain ``.npy`` only (a codec takes the whole arrays, see :meth:`array`)."""
        nnz, parts = X.nnz, {"data": X.dtype, "indices": X.index_dtype}
        names = {part: f"{stem}.X.{part}.npy" for part in parts}
        streams: dict[str, NpyStream] = {}
        # I/O that must start at once, like ``_background``; one thread per file keeps
        # each file's pieces in order
        writers = {part: ThreadPoolExecutor(1) for part in parts}
        pending: deque[list[Future[Any]]] = deque()
        try:
            for part, dtype in parts.items():
                streams[part] = NpyStream(self.folder / names[part], dtype, (nnz,))
            block = max(s.unit for s in streams.values())
            unit = max(block // min(dtype.itemsize for dtype in parts.values()), 1)
            for data, indices in X.pieces(unit, STREAM_ENTRIES):
                pending.append(
                    [
                        writers["data"].submit(streams["data"].write, data),
                        writers["indices"].submit(streams["indices"].write, indices),
                    ]
                )
                if len(pending) > 1:  # the next block is filled into these buffers
                    for future in pending.popleft():
                        future.result()
            while pending:
                for future in pending.popleft():
                    future.result()
        except BaseException:
            for futures in pending:
                for future in futures:
                    future.cancel()
            for writer in writers.values():
                writer.shutdown(wait=True)
            for stream in streams.values():
                stream.close()
            raise
        for writer in writers.values():
            writer.shutdown(wait=True)
        entries = {}
        for part, stream in streams.items():
            descriptor = stream.detach()
            entries[f"X.{part}"] = {
                "dtype": parts[part].str, "shape": [nnz], "file": names[part],
                "bytes": os.fstat(descriptor).st_size,
            }  # fmt: skip
            self.later(_sync_descriptor, descriptor)
        entries["X.indptr"] = self.array(f"{stem}.X.indptr", X.indptr)
        return entries

    def _write_compressed(self, handle: Any, array: np.ndarray) -> list[int]:
        import pyarrow as pa

        raw = memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
        pieces = [raw[i : i + CHUNK_BYTES] for i in range(0, len(raw), CHUNK_BYTES)]

        def compress(piece: memoryview) -> Any:
            return pa.compress(piece, codec=self.codec, asbytes=False)

        sizes = []
        for block in threads.imap(compress, pieces):
            handle.write(block)  # written in order while later chunks compress
            sizes.append(block.size)
        return sizes

    def small_file(self, name: str, data: bytes) -> dict[str, Any]:
        """A small file (the report) written now; its fsync on a background thread (an
        fsync of its own on this thread waited for the arrays': 5-9 ms measured)."""
        handle = open(self.folder / name, "wb")  # noqa: SIM115 (closed by _sync)
        try:
            handle.write(data)
            handle.flush()
        except BaseException:
            handle.close()
            raise
        self.later(_sync, handle)
        return {"file": name, "bytes": len(data)}

    def saved_file(self, name: str, save: Callable[[str], Any]) -> dict[str, Any]:
        """A file written now by ``save(path)`` (the fitted pipeline), fsynced in the
        background like :meth:`small_file`."""
        path = self.folder / name
        save(str(path))
        self.later(_sync, open(path, "rb"))  # noqa: SIM115 (closed by _sync)
        return {"file": name, "bytes": os.path.getsize(path)}

    def later(self, work: Callable[..., Any], *args: Any) -> None:
        """Run ``work(*args)`` on a background thread (started in submission order)."""
        self._pending.append(self._background.submit(work, *args))

    def finish(self) -> None:
        """Wait for the background work; its first error is raised here."""
        pending, self._pending = self._pending, []
        errors = [f.exception() for f in pending]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first

    def close(self) -> None:
        """Wait for everything (errors are :meth:`finish`'s to raise) and stop the threads."""
        for future in self._pending:
            future.exception()
        self._background.shutdown()


def _sync(handle: Any) -> None:
    try:
        handle.flush()
        os.fsync(handle.fileno())
    finally:
        handle.close()


def _sync_descriptor(descriptor: int) -> None:
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_bytes(folder: Path, name: str, data: bytes) -> dict[str, Any]:
    """A small file (a report, a partition's record), fsynced; returns its entry."""
    with open(folder / name, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return {"file": name, "bytes": len(data)}


def write_bytes_soon(folder: Path, name: str, data: bytes) -> tuple[dict[str, Any], Future]:
    """A small file written now, its fsync on the process's pool: its entry, and the
    fsync's future for :func:`publish` (``syncing``) to wait for. The fsyncs of a publish's
    files then run at the same time as the manifest's, in one journal commit where the
    file system shares them (two small files and the manifest one after another: 16 ms
    median on this VM's ext4, 12 ms with the first two in flight together)."""
    path = folder / name
    with open(path, "wb") as handle:
        handle.write(data)
    return {"file": name, "bytes": len(data)}, threads.submit(_sync_path, path)


def _sync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    _sync_descriptor(descriptor)


def write_file(folder: Path, name: str, save: Callable[[str], Any]) -> dict[str, Any]:
    """A file written by ``save(path)`` (a parquet table, a fitted pipeline), fsynced."""
    path = folder / name
    save(str(path))
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
    return {"file": name, "bytes": os.path.getsize(path)}


def _write_rows(rows: Any, path: str) -> None:
    """The quarantine's rows to Parquet: an Arrow table as it is, a pandas frame without
    its index."""
    if hasattr(rows, "to_parquet"):
        rows.to_parquet(path, index=False)
    else:
        import pyarrow.parquet as pq

        pq.write_table(rows, path)


def write_shard(
    files: FileWriter, index: int, token: str, X: Any, y: np.ndarray | None,
    row_ids: np.ndarray, quarantine: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """One shard's files (X as one array, or CSR as data/indices/indptr); its entry, complete
    once ``files.finish()`` has returned."""
    stem = f"part-{index:05d}.{token}"
    entry: dict[str, Any] = {
        "index": index, "rows": int(X.shape[0]), "shape": [int(n) for n in X.shape],
        "layout": "csr" if hasattr(X, "indptr") else "dense", "arrays": {},
    }  # fmt: skip
    if quarantine is not None:  # written on a background thread, beside the arrays
        info = entry["quarantine"] = {}

        def save_quarantine() -> None:
            # a function builds the rejected rows there too (gathering them from the
            # source's columns overlaps the arrays' writes)
            rows = quarantine() if callable(quarantine) else quarantine
            info["rows"] = len(rows)
            save = lambda path: _write_rows(rows, path)  # noqa: E731
            info.update(write_file(files.folder, f"{stem}.quarantine.parquet", save))

        files.later(save_quarantine)
    arrays = entry["arrays"]
    rest = {"y": y, "row_ids": row_ids} if y is not None else {"row_ids": row_ids}
    if isinstance(X, PendingCsr) and X.pending and files.codec is None:
        # y and the row ids are written on a thread of their own while X's blocks are
        # made and written (made block by block, see FileWriter.csr_entries)
        with ThreadPoolExecutor(1) as side:
            written = {
                name: side.submit(files.array, f"{stem}.{name}", array)
                for name, array in rest.items()
            }
            arrays.update(files.csr_entries(stem, X))
            arrays.update({name: future.result() for name, future in written.items()})
        entry["nnz"] = int(X.nnz)
        return entry
    if entry["layout"] == "csr":  # scipy CSR: its three arrays as they are
        for part in ("data", "indices", "indptr"):
            arrays[f"X.{part}"] = files.array(f"{stem}.X.{part}", getattr(X, part))
        entry["nnz"] = int(X.nnz)
    else:
        arrays["X"] = files.array(f"{stem}.X", X)
    for name, array in rest.items():
        arrays[name] = files.array(f"{stem}.{name}", array)
    return entry


def manifest_doc(
    shards: list[dict[str, Any]], feature_names: Sequence[str], out_dtype: str,
    codec: str | None, files: dict[str, dict[str, Any]], **extra: Any,
) -> dict[str, Any]:  # fmt: skip
    width = shards[0]["shape"][1] if shards else len(feature_names)
    return {
        "format": FORMAT, "version": VERSION, "codec": codec, "out_dtype": out_dtype,
        "layout": shards[0]["layout"] if shards else "dense",
        "rows": sum(s["rows"] for s in shards), "width": int(width),
        "feature_names": encode_names(feature_names),
        "shards": shards, "files": files, **extra,
    }  # fmt: skip


@dataclass
class Previous:
    """What a folder held before a publish: the files its manifest named, or which earlier
    fastprep version's layout it is (``"save"``, ``"shards"``, ``"cluster"``; None)."""

    names: set[str] = field(default_factory=set)
    legacy: str | None = None


def previous_output(folder: Path) -> Previous:
    """Read before the manifest is replaced: what the publish may remove afterwards."""
    try:
        doc = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        doc = None
    except (OSError, UnicodeDecodeError, ValueError):
        return Previous()  # not ours to judge: nothing of it is removed
    if isinstance(doc, dict) and doc.get("format") == FORMAT:
        try:
            return Previous(named_files(doc))
        except (AttributeError, KeyError, TypeError):
            return Previous()
    if isinstance(doc, dict) and "partitions" in doc and "fingerprint" in doc:
        return Previous(legacy="cluster")
    if doc is not None:
        return Previous()
    if (folder / "output.json").is_file() and any(
        p.is_dir() and re.fullmatch(r"shard-\d{5}", p.name) for p in folder.iterdir()
    ):
        return Previous(legacy="shards")
    if (folder / "feature_names.json").is_file() and any(
        (folder / n).is_file() for n in ("X.npz", "X.npy")
    ):
        return Previous(legacy="save")
    return Previous()


def publish(
    folder: Path, doc: dict[str, Any], writing: Writing | None = None,
    on_replaced: Callable[[], Any] | None = None, syncing: Sequence[Future] = (),
) -> Path:  # fmt: skip
    """Make ``doc`` the folder's output, under the publish lock: check that every file it
    names is there, replace the manifest (then ``on_replaced()``), :func:`tidy`.
    ``writing`` is the claim its writer held while writing those files (taken here if
    None); it is released afterwards. ``syncing``: fsyncs of files ``doc`` names still
    running (:func:`write_bytes_soon`), waited for before the manifest is replaced."""
    writing = writing or Writing(folder)
    try:
        with _locked(folder / PUBLISH_LOCK):
            _check_named(folder, doc)
            previous = previous_output(folder)
            path = replace_manifest(folder, doc, syncing)
            if on_replaced is not None:
                on_replaced()
            tidy(folder, doc, previous, writing.alone())
        return path
    finally:
        writing.release()


def _check_named(folder: Path, doc: dict[str, Any]) -> None:
    """Every file ``doc`` names is there with its size (never publish a manifest naming a
    file that another writer's publish removed, e.g. a re-used partition of its output)."""
    try:
        for entry in doc["shards"]:
            check_files(folder, entry)
        for info in doc["files"].values():
            check_size(folder, info)
    except StateFormatError as exc:
        raise StateFormatError(f"not published: {exc}") from None


def check_files(root: Path, entry: dict[str, Any]) -> None:
    """Every file a shard entry names is there with the size written."""
    for info in entry["arrays"].values():
        check_size(root, info)
    if entry.get("quarantine"):
        check_size(root, entry["quarantine"])


def check_size(root: Path, info: dict[str, Any]) -> None:
    name = info["file"]
    if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", ".."):
        raise StateFormatError(f"{root}: the manifest names {name!r}, not a file of this folder")
    path = root / name
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise StateFormatError(
            f"{root}: incomplete output: the manifest names {info['file']}, which is missing "
            "(removed, or the folder was copied in part); write the output again"
        ) from None
    if size != info["bytes"]:
        raise StateFormatError(
            f"{root}: corrupt output: {info['file']} has {size:,} bytes, the manifest says "
            f"{info['bytes']:,} (truncated or overwritten); write the output again"
        )


class Writing:
    """A writer's claim on a folder, from before its first file until its publish is done:
    a shared flock on ``.fastprep.writing`` (released by :meth:`release`, or by the OS when
    the process dies). While another writer holds one, no publish can tell that writer's
    unnamed files from a killed one's, so it leaves them. Without flock (Windows, a file
    system refusing locks) every publish counts as the only writer's."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = _lock(folder / WRITING_LOCK, shared=True)
        self._locking = fcntl is not None and self._fd is not None

    def alone(self) -> bool:
        """Whether no other writer holds a claim; if so, writers starting now wait until
        :meth:`release` (the caller is about to remove leftovers)."""
        if not self._locking or self._fd is None:
            return not self._locking
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _lock(path: Path, *, shared: bool = False) -> int | None:
    """An open descriptor of ``path`` holding a flock (waits for it); None without flock."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # another user's lock file: reading is enough to lock it
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    except OSError:  # a file system without locks: one writer per folder, as documented
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = _lock(path)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def replace_manifest(
    folder: Path, doc: dict[str, Any], syncing: Sequence[Future] = ()
) -> Path:  # fmt: skip
    """Replace ``manifest.json`` atomically (call it once every file it names is on disk,
    or is being fsynced by ``syncing``: waited for, after the new manifest's own fsync
    and before the replace): from here on the folder is the new output."""
    data = json.dumps(doc, indent=1, default=str).encode()
    temp = folder / f".{MANIFEST}.{secrets.token_hex(4)}.tmp"
    write_bytes(folder, temp.name, data)
    for future in syncing:
        future.result()  # a failed fsync: not published (the temp is a leftover)
    os.replace(temp, folder / MANIFEST)
    _sync_folder(folder)
    return folder / MANIFEST


def tidy(folder: Path, doc: dict[str, Any], previous: Previous, alone: bool) -> None:
    """After a publish: point the pipeline alias at ``doc``'s, and remove what no longer
    belongs (the previous output's files; leftovers of killed writers when ``alone``)."""
    _update_alias(folder, doc.get("files", {}).get("pipeline"))
    remove_unnamed(folder, doc, previous, alone)


def _sync_folder(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform without directory handles (Windows): rename is enough
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _update_alias(folder: Path, pipeline: dict[str, Any] | None) -> None:
    """``pipeline.fastprep`` names the published fitted pipeline (a hard link: no copy),
    so that ``fastprep transform out/pipeline.fastprep`` keeps working; without one, a
    stale alias is removed (it would describe another output)."""
    alias = folder / PIPELINE_ALIAS
    if pipeline is None:
        alias.unlink(missing_ok=True)
        return
    temp = folder / f".{PIPELINE_ALIAS}.{secrets.token_hex(4)}.tmp"
    try:
        os.link(folder / pipeline["file"], temp)
    except OSError:  # no hard links here: a copy
        temp.write_bytes((folder / pipeline["file"]).read_bytes())
    os.replace(temp, alias)


def published_pipeline(path: str | os.PathLike[str]) -> Path:
    """The fitted pipeline to load for ``path``: for an output folder's ``pipeline.fastprep``,
    the one its manifest names. The alias is re-pointed just after the manifest is
    replaced, so a writer killed between the two leaves it on the previous run's pipeline;
    it is only the fallback (no manifest, or one naming no pipeline)."""
    path = Path(path)
    if path.name != PIPELINE_ALIAS:
        return path
    try:
        doc = json.loads((path.parent / MANIFEST).read_text())
        name = doc["files"]["pipeline"]["file"] if doc.get("format") == FORMAT else None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return path
    if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", ".."):
        return path
    named = path.parent / name
    return named if named.is_file() else path


def named_files(doc: dict[str, Any]) -> set[str]:
    names = {f["file"] for f in doc.get("files", {}).values()}
    for shard in doc.get("shards", []):
        names.update(a["file"] for a in shard.get("arrays", {}).values())
        for key in ("quarantine", "record"):
            if shard.get(key):
                names.add(shard[key]["file"])
    return names


def remove_unnamed(folder: Path, doc: dict[str, Any], previous: Previous, alone: bool) -> None:
    """Delete what the replaced manifest named and ``doc`` does not, a killed publisher's
    temp files, the earlier version's layout it replaced (only that: a user's own
    ``report.json`` or ``X.npy`` stays) and, ``alone`` (no other writer writing), every
    other file of ours ``doc`` does not name."""
    keep = named_files(doc)
    for entry in os.scandir(folder):
        name = entry.name
        if entry.is_dir(follow_symlinks=False):
            if previous.legacy == "shards" and re.fullmatch(r"shard-\d{5}", name):
                _remove_legacy_shard(Path(entry.path))
            continue
        if name in keep:
            continue
        ours = alone and OURS.match(name) is not None
        if ours or name in previous.names or PUBLISH_TEMP.match(name) or _legacy(name,
                                                                            previous.legacy):  # fmt: skip
            Path(entry.path).unlink(missing_ok=True)


def _legacy(name: str, layout: str | None) -> bool:
    if layout == "save":
        return name in LEGACY_FILES
    if layout == "shards":
        return name == "output.json"
    return layout == "cluster" and LEGACY_PARTS.match(name) is not None


def _remove_legacy_shard(where: Path) -> None:
    for name in LEGACY_SHARD_FILES:
        (where / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not ours alone: left alone
        where.rmdir()


# ------------------------------------------------------------------------ names


def encode_names(names: Sequence[str]) -> list[Any]:
    """Strings as they are; each lazily generated hashed block as one range."""
    parts = names.parts if isinstance(names, FeatureNames) else [names]
    out: list[Any] = []
    for part in parts:
        if isinstance(part, HashedNames):
            out.append({"prefix": part.prefix, "n": part.width})
        else:
            out.extend(str(n) for n in part)
    return out


def decode_names(spec: list[Any]) -> FeatureNames:
    """Inverse of :func:`encode_names` (a hashed block expands only when read)."""
    parts: list[Sequence[str]] = []
    run: list[str] = []
    for item in spec:
        if isinstance(item, str):
            run.append(item)
            continue
        if not (isinstance(item, dict) and isinstance(item.get("prefix"), str)
                and isinstance(item.get("n"), int) and item["n"] >= 0):  # fmt: skip
            raise ValueError(f"bad feature-name entry {item!r}")
        if run:
            parts.append(run)
            run = []
        parts.append(HashedNames(item["prefix"], item["n"]))
    if run:
        parts.append(run)
    return FeatureNames(parts)
