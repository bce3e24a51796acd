"""A spill file gives back the buffer written for its key by its entry, byte for byte, or
nothing: a missing, short, longer, another entry's or changed file is a miss."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fastprep.native.arena import ARENA
from fastprep.storage import spill_files

TOKEN = bytes(range(16))


@pytest.fixture
def written(tmp_path):
    buffer = np.random.default_rng(7).integers(0, 256, 100_003, dtype=np.uint8)
    path = tmp_path / "a.kept"
    size = spill_files.write(path, "fit-1-part-3", TOKEN, buffer)
    assert size == path.stat().st_size > buffer.nbytes
    return path, buffer


def test_read_back_is_the_buffer_in_memory_of_its_own(written):
    path, buffer = written
    back = spill_files.read(path, "fit-1-part-3", TOKEN)
    np.testing.assert_array_equal(back, buffer)
    assert back.flags.writeable and back.flags.c_contiguous and back.dtype == np.uint8


def test_another_key_or_entry_is_a_miss(written):
    path, _ = written
    assert spill_files.read(path, "fit-1-part-4", TOKEN) is None
    assert spill_files.read(path, "fit-1-part-3", bytes(16)) is None


@pytest.mark.parametrize("change", ["missing", "short", "longer", "flipped", "header", "empty"])
def test_a_damaged_file_is_a_miss(written, change):
    path, _ = written
    size = path.stat().st_size
    if change == "missing":
        os.unlink(path)
    elif change == "short":
        os.truncate(path, size - 1)
    elif change == "longer":
        with open(path, "ab") as out:
            out.write(b"\0")
    elif change == "empty":
        os.truncate(path, 0)
    else:
        with open(path, "r+b") as out:
            out.seek(size - 500 if change == "flipped" else 10)
            byte = out.read(1)
            out.seek(-1, os.SEEK_CUR)
            out.write(bytes([byte[0] ^ 0x40]))
    assert spill_files.read(path, "fit-1-part-3", TOKEN) is None


def test_an_empty_buffer_and_remove(tmp_path):
    path = tmp_path / "e.kept"
    spill_files.write(path, "k", TOKEN, np.empty(0, np.uint8))
    assert len(spill_files.read(path, "k", TOKEN)) == 0
    spill_files.remove(path)
    spill_files.remove(path)  # already gone: nothing to do
    assert not path.exists()


def test_a_failed_write_leaves_no_file(tmp_path):
    path = tmp_path / "missing-folder" / "x.kept"
    with pytest.raises(OSError):
        spill_files.write(path, "k", TOKEN, np.zeros(10, np.uint8))
    assert not path.exists()


@pytest.mark.parametrize("at", [0, 1, 2, 3, -1])
def test_a_changed_byte_in_any_piece_read_is_a_miss(tmp_path, at):
    """The payload is read back and checked a piece at a time: a byte changed in the
    first, a middle (at a piece's edge) or the last, short, piece is a miss."""
    piece = spill_files.PIECE
    buffer = np.random.default_rng(3).integers(0, 256, 3 * piece + 17, dtype=np.uint8)
    path = tmp_path / "big.kept"
    spill_files.write(path, "k", TOKEN, buffer)
    np.testing.assert_array_equal(spill_files.read(path, "k", TOKEN), buffer)
    offset = path.stat().st_size - buffer.nbytes  # the header's bytes
    position = {0: 0, 1: piece - 1, 2: piece, 3: 2 * piece + 5, -1: buffer.nbytes - 1}[at]
    with open(path, "r+b") as out:
        out.seek(offset + position)
        out.write(bytes([int(buffer[position]) ^ 0x01]))
    assert spill_files.read(path, "k", TOKEN) is None


def test_a_buffer_let_go_is_reused_by_the_next(tmp_path):
    """Read back into memory the process holds: once nothing views a buffer, the next
    read (or kept partition) fills the same memory instead of faulting in fresh pages."""
    buffer = np.random.default_rng(5).integers(0, 256, 6 << 20, dtype=np.uint8)
    path = tmp_path / "r.kept"
    spill_files.write(path, "k", TOKEN, buffer)
    back = spill_files.read(path, "k", TOKEN)
    held = spill_files.memory_for(buffer.nbytes)  # in use: not handed out again
    assert not np.shares_memory(held, back)
    del back
    reused = ARENA.stats["reused"]
    again = spill_files.read(path, "k", TOKEN)
    assert ARENA.stats["reused"] == reused + 1
    np.testing.assert_array_equal(again, buffer)
    assert not np.shares_memory(held, again)
