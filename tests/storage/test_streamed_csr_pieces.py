"""A streamed CSR's files (``FileWriter.csr_entries``, pieces of ``STREAM_ENTRIES``) hold
the CSR made at once, bit for bit, for any size (no rows, one row, fewer entries than a
block, entries not a multiple of a piece or a block) and piece size; on a file system
taking ``O_DIRECT`` every piece but the last stays on it (a multiple of 4,096 bytes from an
aligned buffer), on tmpfs the buffered fallback writes the same bytes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from fastprep.emit.csr_kernels import CountedCsr, count_csr
from fastprep.emit.csr_stream import PendingCsr
from fastprep.storage import direct_io, output_format


def _counted(n_rows: int, monkeypatch) -> CountedCsr:
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numba")
    rng = np.random.default_rng(n_rows + 1)
    dense = rng.normal(size=(n_rows, 5)).astype(np.float32)
    dense[rng.random(dense.shape) < 0.3] = 0.0
    codes = [rng.integers(-1, 4, n_rows).astype(np.int32)]
    hashed = sp.random(n_rows, 40, density=0.05, format="csr", dtype=np.float32, random_state=5)
    hashed.sort_indices()
    blocks = [("dense", 0, 0, 5), ("codes", 5, codes, [4]), ("sparse", 9, hashed)]
    counted = count_csr(blocks, None, 49, dense, np.dtype(np.float32))
    assert isinstance(counted, CountedCsr)
    return counted


def _folder(kind: str, tmp_path: Path) -> Path:
    if kind == "tmpfs":
        shm = Path("/dev/shm")
        if not shm.is_dir():
            pytest.skip("no /dev/shm")
        # a folder of its own: two suites running at once share /dev/shm and test names
        return Path(tempfile.mkdtemp(prefix="fastprep-review-", dir=shm))
    return tmp_path


@pytest.mark.parametrize("kind", ["disk", "tmpfs"])
@pytest.mark.parametrize("n_rows", [0, 1, 30, 1_000, 40_000, 400_000])
@pytest.mark.parametrize("entries", [None, 1024, 3000, 1 << 16])
def test_streamed_files_equal_the_whole_csr(kind, n_rows, entries, tmp_path, monkeypatch):
    import shutil

    if n_rows == 400_000 and entries is not None:
        pytest.skip("the default piece size's several pieces (~2.5M entries) only")
    if entries is not None:
        monkeypatch.setattr(output_format, "STREAM_ENTRIES", entries)
    data, indices, indptr = _counted(n_rows, monkeypatch).fill_all()
    writes: dict[str, list[tuple[int, bool, bool]]] = {}
    real_write = direct_io.NpyStream.write

    def write(self, piece):
        raw = piece.reshape(-1).view(np.uint8)
        aligned = len(raw) % direct_io.BLOCK == 0 and piece.ctypes.data % direct_io.BLOCK == 0
        writes.setdefault(str(self.fd), []).append((len(raw), aligned, self.direct))
        return real_write(self, piece)

    monkeypatch.setattr(direct_io.NpyStream, "write", write)
    folder = _folder(kind, tmp_path)
    try:
        files = output_format.FileWriter(folder)
        try:
            entries_ = files.csr_entries("part-00000.abcdefabcdef", PendingCsr(
                _counted(n_rows, monkeypatch)))  # fmt: skip
            files.finish()
        finally:
            files.close()
        got = {part: np.load(folder / entries_[f"X.{part}"]["file"])
               for part in ("data", "indices", "indptr")}  # fmt: skip
        assert got["data"].tobytes() == data.tobytes()
        assert got["indices"].tobytes() == indices.tobytes()
        assert np.array_equal(got["indptr"], indptr)
        for part in ("data", "indices"):
            assert (
                entries_[f"X.{part}"]["bytes"]
                == (folder / entries_[f"X.{part}"]["file"]).stat().st_size
            )
        probe = direct_io.NpyStream(folder / "probe.npy", np.dtype("f4"), (0,))
        probe.close()
        if kind == "disk" and probe.direct:
            if len(data) > 2 * max(entries or output_format.STREAM_ENTRIES, 1024):
                assert min(len(s) for s in writes.values()) > 1  # several pieces
            for stream in writes.values():
                # every piece but the last whole blocks from an aligned buffer: on O_DIRECT
                assert all(aligned and direct for _, aligned, direct in stream[:-1]), stream
    finally:
        if kind == "tmpfs":
            shutil.rmtree(folder, ignore_errors=True)
