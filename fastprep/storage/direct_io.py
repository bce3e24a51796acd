"""Large ``.npy`` files written past the page cache (``O_DIRECT``), where the system has it.

Why: a buffered write first copies the array into page-cache pages the kernel allocates for
it. On VMs with free-page reporting (the machines fastprep is benchmarked on, many cloud
hosts) those are fresh pages for the host, and the first touch of each one is slow: writing
a 250 MB CSR output took 0.16-0.84 s buffered, mostly page faults (0.06-0.64 s of system
time), and 0.15-0.19 s with ``O_DIRECT`` (no system time to speak of); it also leaves
the page cache to the data the machine is still using. The file is the same ``.npy``: its
header is padded to 4,096 bytes (the format allows any multiple of 64) so the array starts
on a block boundary, the array goes through a small page-aligned buffer in block-sized
writes (or, when the array itself starts on a block boundary, as the emit arena's arrays
do, straight from its memory: no copy), and the last partial block is written buffered.

Anything this does not cover (no ``O_DIRECT``, a file system that refuses it such as tmpfs,
a non-contiguous array) returns False and the caller writes the file the ordinary way.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from pathlib import Path

import numpy as np

#: arrays below this size are written buffered (the page cache costs them little)
MIN_BYTES = 32 << 20
#: block alignment of offsets, lengths and buffer addresses (covers 512-byte devices too)
BLOCK = 4096
#: the bounce buffer: arrays are copied through it in pieces of this size
PIECE = 4 << 20
#: an aligned array is written from its own memory in pieces of this size
ALIGNED_PIECE = 32 << 20
#: header length of format 1.0 (a 16-bit field), padded so the data starts at BLOCK
HEADER_BYTES = BLOCK


def npy_header(array: np.ndarray) -> bytes:
    """An ``.npy`` format 1.0 header for ``array``, padded to :data:`HEADER_BYTES`."""
    return npy_header_for(array.dtype, tuple(array.shape))


def npy_header_for(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """An ``.npy`` format 1.0 header for an array of ``dtype`` and ``shape``, padded to
    :data:`HEADER_BYTES`."""
    descr = np.lib.format.dtype_to_descr(np.dtype(dtype))
    text = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    prefix = np.lib.format.MAGIC_PREFIX + bytes([1, 0])
    body = HEADER_BYTES - len(prefix) - 2
    encoded = text.encode("latin1")
    if len(encoded) + 1 > body:
        raise ValueError("array header too long for a padded header")
    padded = encoded + b" " * (body - len(encoded) - 1) + b"\n"
    return prefix + body.to_bytes(2, "little") + padded


def write_npy(path: Path, array: np.ndarray) -> int | None:
    """Write ``array`` as ``path`` (.npy) with ``O_DIRECT``; returns the open descriptor
    (the caller fsyncs and closes it), or None when this path does not apply (nothing
    is left behind then; write the file the ordinary way)."""
    direct = getattr(os, "O_DIRECT", 0)
    if (
        not direct
        or array.nbytes < MIN_BYTES
        or not array.flags.c_contiguous
        or array.dtype.hasobject
    ):
        return None
    try:
        header = npy_header(array)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | direct, 0o666)
    except (OSError, ValueError):
        return None
    try:
        aligned = array.ctypes.data % BLOCK == 0  # e.g. the emit arena's arrays
        _write(fd, header, memoryview(array.reshape(-1).view(np.uint8)), aligned)
    except (OSError, BufferError):  # refused mid-way (EINVAL on some file systems): buffered
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write(fd: int, header: bytes, raw: memoryview, aligned: bool = False) -> None:
    """``aligned``: ``raw`` starts on a block boundary and is written from where it is
    (no copy through the bounce buffer)."""
    bounce = mmap.mmap(-1, PIECE)  # page-aligned, as O_DIRECT needs
    try:
        view = memoryview(bounce)
        view[: len(header)] = header
        write_all(fd, view[: len(header)])
        whole = len(raw) - len(raw) % BLOCK
        step = ALIGNED_PIECE if aligned else PIECE
        for start in range(0, whole, step):
            stop = min(start + step, whole)
            if aligned:
                write_all(fd, raw[start:stop])
                continue
            view[: stop - start] = raw[start:stop]
            write_all(fd, view[: stop - start])
        view.release()
    finally:
        # after a failed write the traceback still holds slices of the bounce buffer: the
        # map is then freed with them, and the OSError (not a BufferError) reaches the caller
        with contextlib.suppress(BufferError):
            bounce.close()
    if whole < len(raw):  # the last partial block: buffered, on the same descriptor
        drop_direct(fd)
        write_all(fd, raw[whole:])


def drop_direct(fd: int) -> None:
    """Clear ``O_DIRECT`` on an open descriptor: its later writes go through the page
    cache (a partial last block, or a file system refusing direct writes)."""
    import fcntl  # POSIX only, like O_DIRECT itself

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_DIRECT)


def write_all(fd: int, data: memoryview) -> None:
    """Write all of ``data`` to ``fd`` (a write may take less than it is given)."""
    while len(data):
        written = os.write(fd, data)
        data = data[written:]


class NpyStream:
    """An ``.npy`` file of a known dtype and shape written piece by piece, in order:
    with ``O_DIRECT`` while the pieces allow it (each starts on a block boundary and is a
    whole number of blocks long, except the last), buffered otherwise (from the first
    piece that does not, or on a file system refusing ``O_DIRECT``). :meth:`detach` hands
    the open descriptor to the caller, who fsyncs and closes it."""

    def __init__(self, path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        header = npy_header_for(dtype, shape)
        direct = getattr(os, "O_DIRECT", 0)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        try:
            self.fd = os.open(path, flags | direct, 0o666)
        except OSError:  # refused at open (tmpfs): buffered
            direct = 0
            self.fd = os.open(path, flags, 0o666)
        self.direct = bool(direct)
        try:
            self._write_header(header)
        except BaseException:
            os.close(self.fd)
            raise

    @property
    def unit(self) -> int:
        """Pieces a multiple of this many bytes stay on the ``O_DIRECT`` path."""
        return BLOCK if self.direct else 1

    def _write_header(self, header: bytes) -> None:
        if self.direct:
            bounce = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
            try:
                with memoryview(bounce) as view:
                    view[: len(header)] = header
                    write_all(self.fd, view[: len(header)])
                return
            except OSError:  # refused (EINVAL on tmpfs and some others): buffered
                self._buffered()
                os.lseek(self.fd, 0, os.SEEK_SET)
            finally:
                with contextlib.suppress(BufferError):
                    bounce.close()
        write_all(self.fd, memoryview(header))

    def write(self, piece: np.ndarray) -> None:
        """Append ``piece``'s bytes (a contiguous array)."""
        raw = memoryview(piece.reshape(-1).view(np.uint8))
        if self.direct and (len(raw) % BLOCK or piece.ctypes.data % BLOCK):
            self._buffered()  # the last piece's partial block, or pieces from elsewhere
        while len(raw):
            try:
                written = os.write(self.fd, raw)
            except OSError as error:
                if not self.direct or error.errno != errno.EINVAL:
                    raise
                self._buffered()  # refused mid-way: what is left goes buffered
                continue
            raw = raw[written:]

    def _buffered(self) -> None:
        drop_direct(self.fd)
        self.direct = False

    def detach(self) -> int:
        fd, self.fd = self.fd, -1
        return fd

    def close(self) -> None:
        """Close without syncing (after a failure); a detached stream has nothing to close."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
