"""The retained-memory arena: a chunk is reused only when nothing views it any more."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fastprep.native.arena import MIN_BYTES, Arena

BIG = MIN_BYTES // 4 * 2  # float32 elements: twice the arena's threshold


def test_a_dropped_array_is_reused_and_a_live_view_blocks_reuse():
    arena = Arena(limit_bytes=1 << 30)
    first = arena.empty(BIG, np.float32)
    first[:] = 7
    tail = first[-10:]  # a user keeping a slice keeps the whole chunk busy
    del first
    second = arena.empty(BIG, np.float32)
    assert not np.shares_memory(second, tail)
    assert (tail == 7).all()
    del tail
    third = arena.empty(BIG, np.float32)
    assert arena.stats["reused"] == 1 and arena.stats["allocated"] == 2
    assert not np.shares_memory(third, second)


def test_arrays_inside_a_csr_matrix_stay_busy():
    arena = Arena(limit_bytes=1 << 30)
    n = BIG
    data, indices = arena.empty(n, np.float32), arena.empty(n, np.int32)
    data[:] = 1.5
    indices[:] = 0
    matrix = sp.csr_matrix((data, indices, np.arange(n + 1, dtype=np.int32)), shape=(n, 3))
    assert np.shares_memory(matrix.data, data)
    del data, indices
    assert arena.free_bytes() == 0
    other = arena.empty(n, np.float32)
    other[:] = -1
    assert (matrix.data == 1.5).all() and (matrix.indices == 0).all()
    del matrix
    assert arena.free_bytes() > 0


def test_shapes_dtypes_and_similar_sizes_share_chunks():
    arena = Arena(limit_bytes=1 << 30)
    a = arena.empty((BIG // 8, 8), np.float32)
    assert a.shape == (BIG // 8, 8) and a.flags.c_contiguous and a.dtype == np.float32
    del a
    b = arena.zeros(BIG // 2 - 1000, np.int64)  # a few KB less: same size class
    assert b.dtype == np.int64 and not b.any()
    assert arena.stats["reused"] == 1


def test_small_arrays_and_a_zero_limit_bypass_the_arena():
    arena = Arena(limit_bytes=1 << 30)
    arena.empty(10, np.float64)
    off = Arena(limit_bytes=0)
    big = off.empty(BIG, np.float32)
    assert big.base is None and off.retained_bytes() == 0
    assert arena.stats["bypassed"] == 1 and off.stats["bypassed"] == 1


def test_free_chunks_beyond_the_limit_are_released():
    chunk = BIG * 4
    arena = Arena(limit_bytes=chunk + chunk // 2)
    first = arena.empty(BIG, np.float32)
    second = arena.empty(BIG * 4, np.float32)  # a different size class: a second chunk
    del first, second
    arena.empty(BIG * 16, np.float32)  # needs a third: the free ones beyond the limit go
    assert arena.stats["released"] >= 1
    assert arena.retained_bytes() - BIG * 16 * 4 <= arena.limit_bytes + 4096
    arena.clear()


def test_a_request_never_gets_a_chunk_smaller_than_it_needs():
    # found on the full flights table: a chunk rounded up to whole pages fell in the next
    # size class and was handed to a larger request of that class
    arena = Arena(limit_bytes=1 << 30)
    rng = np.random.default_rng(2)
    held = []
    for n in rng.integers(BIG // 2, BIG * 4, 60):
        out = arena.empty(int(n), np.float32)
        assert out.shape == (n,)
        out[-1] = 1.0
        held.append(out)
        if rng.random() < 0.6:
            held.pop(int(rng.integers(len(held))))


def test_release_memory_drops_what_nothing_uses_and_keeps_what_a_caller_holds():
    """fp.release_memory(): the process arena's free chunks and the cached row-id range
    go; an output a caller still holds stays valid."""
    import fastprep as fp
    from fastprep.data.columns import row_range
    from fastprep.native.arena import ARENA

    held = ARENA.empty(BIG, np.float32)
    held[:] = 3.0
    dropped = ARENA.empty(BIG, np.float32)
    del dropped
    ids = row_range(0, 1_000_000)
    released = fp.release_memory()
    assert released["arena"] >= BIG * 4 and released["row_ids"] >= 8_000_000
    assert ARENA.free_bytes() == 0
    assert (held == 3.0).all() and ids[-1] == 999_999  # held arrays are untouched
    assert set(released) == {"arena", "row_ids", "heap_trimmed"}


def test_arrays_start_on_a_page_new_or_reused():
    # so an output array is written to its file straight from its memory (O_DIRECT)
    arena = Arena(limit_bytes=1 << 30)
    for size in (BIG, BIG - 7, BIG * 3 + 1):
        first = arena.empty(size, np.float32)
        assert first.ctypes.data % 4096 == 0
        del first
        again = arena.empty(size, np.int32)  # a reused chunk: the same alignment
        assert again.ctypes.data % 4096 == 0 and again.nbytes == 4 * size
        del again
    assert arena.stats["reused"] >= 3
