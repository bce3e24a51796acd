"""Large arrays written past the page cache: the same .npy, read back bit for bit."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fastprep.storage import direct_io
from fastprep.storage.output_format import FileWriter


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 1025, 5 * 1024 * 1024 // 4 + 7])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint16])
def test_direct_npy_reads_back_identical(tmp_path, monkeypatch, n, dtype) -> None:
    monkeypatch.setattr(direct_io, "MIN_BYTES", 0)  # small arrays take the direct path too
    monkeypatch.setattr(direct_io, "PIECE", 1 << 20)  # several pieces, then a tail
    array = np.random.default_rng(n).integers(0, 60_000, n).astype(dtype)
    descriptor = direct_io.write_npy(tmp_path / "a.npy", array)
    if descriptor is None:
        pytest.skip("no O_DIRECT on this file system")
    os.fsync(descriptor)
    os.close(descriptor)
    assert os.path.getsize(tmp_path / "a.npy") == direct_io.HEADER_BYTES + array.nbytes
    back = np.load(tmp_path / "a.npy", mmap_mode="r")
    assert back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back, array)


def test_file_writer_entry_and_bytes(tmp_path, monkeypatch) -> None:
    """FileWriter takes the direct path for large arrays; its manifest entry is the same
    shape as the buffered one's and names the real file size."""
    monkeypatch.setattr(direct_io, "MIN_BYTES", 1 << 20)
    big = np.arange(400_003, dtype=np.float32)
    small = np.arange(10, dtype=np.int32)
    writer = FileWriter(tmp_path)
    try:
        entries = {name: writer.array(name, a) for name, a in (("big", big), ("small", small))}
        writer.finish()
    finally:
        writer.close()
    for name, array in (("big", big), ("small", small)):
        entry = entries[name]
        assert entry["file"] == f"{name}.npy" and entry["dtype"] == array.dtype.str
        assert entry["bytes"] == os.path.getsize(tmp_path / entry["file"])
        assert np.array_equal(np.load(tmp_path / entry["file"]), array)


def test_non_contiguous_or_object_arrays_are_left_to_the_buffered_path(tmp_path) -> None:
    assert direct_io.write_npy(tmp_path / "a.npy", np.zeros((4, 4))[:, 1]) is None
    assert not (tmp_path / "a.npy").exists()


def test_a_write_refused_midway_leaves_nothing_and_falls_back(tmp_path, monkeypatch) -> None:
    """A file system that takes the O_DIRECT open but refuses a later write: no partial
    file is left and the caller is told to write the ordinary way (None), not a BufferError
    from the bounce buffer still referenced by the failed write."""
    array = np.arange(direct_io.MIN_BYTES // 8 + 4096, dtype=np.float64)
    calls = {"n": 0}
    real = os.write

    def refuse_third(fd, data):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(22, "Invalid argument")
        return real(fd, data)

    monkeypatch.setattr(direct_io.os, "write", refuse_third)
    path = tmp_path / "x.npy"
    if not getattr(os, "O_DIRECT", 0):
        pytest.skip("no O_DIRECT here")
    assert direct_io.write_npy(path, array) is None
    assert not path.exists()


def test_an_aligned_array_is_written_from_its_own_memory(tmp_path, monkeypatch) -> None:
    """The emit arena's arrays start on a page: written without the bounce buffer's copy,
    the same file as a copied one."""
    from fastprep.native.arena import Arena

    monkeypatch.setattr(direct_io, "MIN_BYTES", 0)
    monkeypatch.setattr(direct_io, "ALIGNED_PIECE", 1 << 20)  # several pieces, then a tail
    aligned = Arena(limit_bytes=1 << 30).empty(5 * (1 << 18) + 5, np.float32)  # 5 MiB
    assert aligned.ctypes.data % direct_io.BLOCK == 0
    aligned[:] = np.arange(len(aligned), dtype=np.float32)
    copies = {"n": 0}
    real = direct_io._write

    def counting(fd, header, raw, is_aligned=False):
        copies["n"] += not is_aligned
        return real(fd, header, raw, is_aligned)

    monkeypatch.setattr(direct_io, "_write", counting)
    descriptor = direct_io.write_npy(tmp_path / "a.npy", aligned)
    if descriptor is None:
        pytest.skip("no O_DIRECT on this file system")
    os.close(descriptor)
    assert copies["n"] == 0
    assert np.array_equal(np.load(tmp_path / "a.npy"), aligned)


@pytest.mark.parametrize("sizes", [[0], [1024, 1024, 5], [3, 1024], [2048, 2048, 2048]])
def test_npy_stream_reads_back_identical(tmp_path, sizes) -> None:
    """Pieces from a page-aligned buffer (O_DIRECT while whole blocks), then anything
    else (buffered from there on): the same .npy as np.save's, read back bit for bit."""
    raw = np.empty(4 * 4096 + direct_io.BLOCK, np.uint8)
    start = -raw.ctypes.data % direct_io.BLOCK
    buffer = raw[start : start + 4 * 4096].view(np.float32)
    total = sum(sizes)
    expected = np.arange(total, dtype=np.float32)
    stream = direct_io.NpyStream(tmp_path / "a.npy", np.dtype(np.float32), (total,))
    at = 0
    for size in sizes:
        buffer[:size] = expected[at : at + size]
        stream.write(buffer[:size])
        at += size
    descriptor = stream.detach()
    os.fsync(descriptor)
    os.close(descriptor)
    assert os.path.getsize(tmp_path / "a.npy") == direct_io.HEADER_BYTES + expected.nbytes
    assert np.array_equal(np.load(tmp_path / "a.npy", mmap_mode="r"), expected)
