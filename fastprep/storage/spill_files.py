"""One byte buffer in a file of its own, read back whole and as written or not at all.

A worker spills a kept partition's packed buffer here when its memory cap is reached, and
reads it back for the transform: one sequential read into fresh memory, instead of reading
and validating the partition's Parquet again. The file is a cache, never the only copy, so
anything unexpected about it (missing, short, another entry's, changed bytes) makes
:func:`read` return None and the caller reads the partition from its source.

Layout: a fixed header (magic, the payload's length and CRC-32, a token naming the one
entry that wrote it, the key's length), the key in UTF-8, the CRC-32 of those header bytes,
then the payload. No pickle: the payload is the buffer's bytes; what they mean stays with
the caller. Why a CRC of the payload too: a header and size check catch a truncated or
replaced file, not bytes changed in place, and the CRC costs ~4 ms per 13.5 MB (~3.5 GB/s
on the benchmark machine; each piece checked as it is read, while in the CPU's cache),
against ~0.2-0.4 s to read and validate the partition again.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np

from fastprep.native.arena import ARENA
from fastprep.storage.direct_io import write_all

MAGIC = b"FPSPILL1"
#: magic, payload length, payload CRC-32, token (16 bytes), key length
_FIXED = struct.Struct("<8sQI16sI")
_CRC = struct.Struct("<I")
#: a key longer than this is not a key this module wrote
MAX_KEY = 4096
#: bytes read back per call, and checked right after, while they are in the CPU's cache
PIECE = 1 << 19


def memory_for(nbytes: int) -> np.ndarray:
    """``nbytes`` bytes to fill (a kept partition's buffer, a spill file read back): from
    the memory this process retains and reuses (:data:`fastprep.native.arena.ARENA`),
    not fresh pages. On the benchmark VM a fresh page's first touch costs what the host
    takes to hand it back (a 13.5 MB buffer: 8-40 ms of page faults, against ~1.5 ms to
    fill memory the process holds); a buffer let go is free for the next one once
    nothing views it, so a worker keeping partition after partition reuses the same few
    chunks, which stay whole (no hole in the heap) until the arena's limit drops them."""
    return ARENA.empty(max(nbytes, 1), np.uint8)[:nbytes]


def header(key: str, token: bytes, payload: np.ndarray | memoryview, crc: int) -> bytes:
    """The header of a file holding ``payload`` for ``key`` (``token``: 16 bytes naming
    the writing entry)."""
    raw_key = key.encode()
    fixed = _FIXED.pack(MAGIC, memoryview(payload).nbytes, crc, token, len(raw_key)) + raw_key
    return fixed + _CRC.pack(zlib.crc32(fixed))


def write(path: Path, key: str, token: bytes, buffer: np.ndarray) -> int:
    """Write ``buffer`` (C-contiguous) under ``key`` to ``path``; the file's size. A
    failure (a full disk) removes what was written and raises ``OSError``."""
    data = memoryview(buffer).cast("B")
    head = header(key, token, data, zlib.crc32(data))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, memoryview(head))
            write_all(fd, data)
        finally:
            os.close(fd)
    except OSError:
        remove(path)
        raise
    return len(head) + data.nbytes


def read(path: Path, key: str, token: bytes) -> np.ndarray | None:
    """The buffer written to ``path`` for ``key`` by the entry ``token``, in memory of its
    own (:func:`memory_for`), or None when the file is not exactly that (missing, short
    or longer, another key's or entry's, changed bytes)."""
    try:
        with open(path, "rb", buffering=0) as file:
            size = os.fstat(file.fileno()).st_size
            fixed = file.read(_FIXED.size)
            if len(fixed) != _FIXED.size:
                return None
            magic, length, crc, written_by, key_length = _FIXED.unpack(fixed)
            if magic != MAGIC or written_by != token or key_length > MAX_KEY:
                return None
            rest = file.read(key_length + _CRC.size)
            if len(rest) != key_length + _CRC.size:
                return None
            (head_crc,) = _CRC.unpack(rest[key_length:])
            if (
                head_crc != zlib.crc32(fixed + rest[:key_length])
                or rest[:key_length] != key.encode()
            ):
                return None
            if size != _FIXED.size + key_length + _CRC.size + length:
                return None
            buffer = memory_for(length)
            view = memoryview(buffer)
            done = check = 0
            while done < length:  # sequential reads, each piece checked while in the cache
                got = file.readinto(view[done : done + PIECE])
                if not got:
                    return None
                check = zlib.crc32(view[done : done + got], check)
                done += got
    except OSError:
        return None
    if check != crc:
        return None
    view.release()
    return buffer


def remove(path: Path) -> None:
    """Remove ``path`` if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:
        pass  # its directory went with the worker: nothing left to remove
