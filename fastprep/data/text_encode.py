"""Dictionary-encode an Arrow string column in parallel: int32 codes + distinct values.

pandas' ``factorize`` (Arrow's ``dictionary_encode``) took ~30 ns per value on this machine
— 0.1 s per 3.4M-row column, the largest part of validating the flights data. This encoder
reads the Arrow buffers directly and never builds Python strings:

- the rows are cut into one contiguous *part* per thread (a part spans Arrow chunks); each
  part encodes its rows, chunk by chunk, with its own open-addressing hash table in Numba
  ``nogil`` functions on a thread pool. The table key of a string of up to 7 bytes is the
  bytes packed with the length (exact: equal keys mean equal strings); a longer string's
  key is an FNV-1a hash with the top bit set, confirmed byte for byte against the part's
  copy of its distinct values (which become the uniques: no gather at the end);
- part 0's codes are final (first appearance in row order is ``pd.factorize``'s order);
  each later part's distinct values are looked up in, or appended to, the merged table in
  order, and its rows' codes mapped in one parallel pass.

Why parts and not many small tasks: one task per 32k-row Arrow chunk (110 chunks at 3.4M
rows) spent more time merging 110 dictionaries and handing tasks between threads than
encoding — the parallel run was slower than one thread (39 vs 26 ms for ``origin``).

A part that finds many distinct values (more than ``HIGH_CARDINALITY`` of its first
``PROBE_ROWS`` rows or more) stops early: :func:`try_encode` then gives up (a hashing
caller hashes each row's bytes instead) and :func:`encode` encodes the column in one serial
pass (merging would redo the whole work).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from fastprep.data import arrow_compute as ac
from fastprep.data import reuse
from fastprep.data.arrow_arrays import numeric_array
from fastprep.data.columns import TextColumn
from fastprep.native import threads
from fastprep.native.arena import ARENA
from fastprep.native.kernel_files import jit as njit  # made on first use: no numba import
from fastprep.native.kernel_files import numba_cached, numba_loaded, prange
from fastprep.planning.planner import PATHS, kernel_path

#: a column is cut into parts of at least this many rows (one part per thread at most)
TASK_ROWS = 1 << 16
#: parts per column at most (None: the machine's cores, up to 8)
PARTS: int | None = None
#: a part gives up once it has read at least this many rows (or a quarter of its rows, if
#: that is fewer but at least ``MIN_PROBE_ROWS``), more than ``HIGH_CARDINALITY`` of them
#: distinct (checked when its table grows)
PROBE_ROWS = 1 << 16
MIN_PROBE_ROWS = 4096
HIGH_CARDINALITY = 0.25
#: slots of the largest table kept at a low load (see ``_limit``)
SMALL_TABLE = 1 << 17
_LONG = np.uint64(1) << np.uint64(63)
#: ``_encode_until_full`` stopped because: the rows are done, the table is half full, the
#: next new value does not fit the distinct values' byte buffer
_DONE, _TABLE_FULL, _BYTES_FULL = 0, 1, 2


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False  # one numba signature for Arrow's read-only buffers
    return view


_NO_BITMAP = _read_only(np.ones(1, dtype=np.uint8))
_NO_DATA = _read_only(np.zeros(1, dtype=np.uint8))
_NO_WORDS = _read_only(np.zeros(0, dtype=np.uint64))


def _workers() -> int:
    return min(threads.workers(), 8)


@njit(cache=True, nogil=True)
def _key_bytes(data, s0, s1):  # pragma: no cover - compiled
    """Table key of ``data[s0:s1]``: up to 7 bytes packed with the length (exact), else an
    FNV-1a hash with the top bit set. (The row loop cuts short values out of 8-byte words
    instead; this is its fallback and the merge's key.)"""
    n = s1 - s0
    if n <= 7:
        k = np.uint64(n) << np.uint64(56)
        for t in range(n):
            k |= np.uint64(data[s0 + t]) << np.uint64(8 * t)
        return k
    h = np.uint64(14695981039346656037)
    for p in range(s0, s1):
        h = (h ^ np.uint64(data[p])) * np.uint64(1099511628211)
    return h | _LONG


@njit(cache=True, inline="always")
def _mix(k):  # pragma: no cover - compiled
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True, inline="always")
def _same(data, s0, s1, vbytes, voffs, c):  # pragma: no cover - compiled
    """Bytes ``data[s0:s1]`` equal distinct value ``c``."""
    v0 = voffs[c]
    if voffs[c + 1] - v0 != s1 - s0:
        return False
    for t in range(s1 - s0):  # noqa: SIM110 - numba compiles no generators
        if data[s0 + t] != vbytes[v0 + t]:
            return False
    return True


@njit(cache=True, inline="always")
def _limit(capacity):  # pragma: no cover - compiled
    """Entries a table holds before it grows: a load of 1/8 while it fits the L2 cache
    (tailnum's 4,043 values: 39 vs 59 ms at 3.4M rows against a load of 1/2), 1/2 above."""
    return capacity // 8 if capacity <= SMALL_TABLE else capacity // 2


@njit(cache=True, nogil=True)
def _grow_table(slots, slot_keys):  # pragma: no cover - compiled
    """Twice the slots, every entry re-inserted."""
    capacity = 2 * len(slots)
    mask = capacity - 1
    new_slots = np.full(capacity, -1, dtype=np.int32)
    new_keys = np.zeros(capacity, dtype=np.uint64)
    for old in range(len(slots)):
        c = slots[old]
        if c >= 0:
            s = np.int64(_mix(slot_keys[old]) & np.uint64(mask))
            while new_slots[s] >= 0:
                s = (s + 1) & mask
            new_slots[s] = c
            new_keys[s] = slot_keys[old]
    return new_slots, new_keys


@njit(cache=True, nogil=True)
def _grown(a, size):  # pragma: no cover - compiled
    out = np.empty(max(size, 2 * len(a)), a.dtype)
    out[: len(a)] = a
    return out


@njit(cache=True, nogil=True)
def _grown_zeros(a, size):  # pragma: no cover - compiled
    out = np.zeros(max(size, len(a)), a.dtype)
    out[: len(a)] = a
    return out


@njit(cache=True, inline="always")
def _lookup(data, s0, s1, slots, slot_keys, vbytes, voffs):  # pragma: no cover - compiled
    """(slot, code or -1) of ``data[s0:s1]``: its code, or the free slot it would take."""
    k = _key_bytes(data, s0, s1)
    mask = len(slots) - 1
    slot = np.int64(_mix(k) & np.uint64(mask))
    while slots[slot] >= 0:
        c = slots[slot]
        if slot_keys[slot] == k and ((k & _LONG) == 0 or _same(data, s0, s1, vbytes, voffs, c)):
            return slot, k, c
        slot = (slot + 1) & mask
    return slot, k, -1


@njit(cache=True, nogil=True)
def _encode_until_full(data, words, offsets, bitmap, bit_offset, i, hi, codes, slots,
                       slot_keys, vbytes, voffs, used, part, nparts, counts):  # fmt: skip  # pragma: no cover - compiled
    """Rows ``i:hi`` until the table is half full or a new value's bytes do not fit;
    returns (next row, distinct so far, why it stopped). (The caller grows the arrays:
    rebinding arrays inside this loop made it 10× slower.) ``counts[c]``: rows of local
    code c so far (a separate counting pass over the codes cost 3-4x more).

    ``nparts`` > 1: only the values whose hash falls to ``part`` are encoded (the others'
    rows are skipped), with codes ``local code * nparts + part`` (see ``_encode_by_hash``).

    The key of a value of up to 7 bytes is cut out of two aligned 8-byte ``words`` (the
    data as uint64; empty when unaligned) instead of a byte loop, and key and probe are
    written out here, not called: with numba-inlined helpers (``_lookup``) the loop ran
    2-3x slower (tailnum at 3.4M rows, one thread: 45 -> ~20 ms)."""
    limit = _limit(len(slots))
    mask = np.uint64(len(slots) - 1)
    nwords = len(words)
    one = np.uint64(1)
    while i < hi:
        # unsigned indices: a signed one is tested for a negative value (Python's
        # wraparound) at every access
        row = np.uint64(i)
        if bit_offset >= 0:
            bit = np.uint64(i + bit_offset)
            if not (bitmap[bit >> np.uint64(3)] >> (bit & np.uint64(7))) & one:
                codes[row] = -1
                i += 1
                continue
        s0, s1 = offsets[row], offsets[row + one]
        n = s1 - s0
        q = s0 >> 3
        if (n <= 7) & (q + 1 < nwords):
            r = np.uint64((s0 & 7) * 8)
            uq = np.uint64(q)
            w = (words[uq] >> r) | ((words[uq + one] << one) << (np.uint64(63) - r))
            k = (w & ((one << np.uint64(8 * n)) - one)) | (np.uint64(n) << np.uint64(56))
        else:
            k = _key_bytes(data, s0, s1)
        m = _mix(k)
        if nparts > 1 and np.int64(m >> np.uint64(40)) % nparts != part:
            i += 1
            continue
        slot = m & mask
        code = -1
        while slots[slot] >= 0:
            c = slots[slot]
            if slot_keys[slot] == k and ((k & _LONG) == 0 or _same(data, s0, s1, vbytes, voffs, c)):
                code = c
                break
            slot = (slot + one) & mask
        if code < 0:
            if used >= limit:
                return i, used, _TABLE_FULL
            v0 = voffs[used]
            if v0 + (s1 - s0) > len(vbytes):
                return i, used, _BYTES_FULL
            vbytes[v0 : v0 + (s1 - s0)] = data[s0:s1]
            voffs[used + 1] = v0 + (s1 - s0)
            code = used
            slots[slot] = code
            slot_keys[slot] = k
            used += 1
        codes[row] = code * nparts + part
        counts[np.uint64(code)] += 1
        i += 1
    return i, used, _DONE


@njit(cache=True, nogil=True)
def _encode_chunk(data, words, offsets, bitmap, bit_offset, lo, hi, codes, slots, slot_keys,
                  vbytes, voffs, used, rows_before, probe_rows, high, part, nparts, counts):  # fmt: skip  # pragma: no cover
    """Rows ``lo:hi`` of one chunk (``codes`` is the chunk's view) into a part's table,
    growing it as needed. ``rows_before``: the part's rows in earlier chunks. Returns the
    (possibly new) arrays and the distinct count, -1 when the part gives up (``probe_rows``
    > 0 and more than ``high`` of at least ``probe_rows`` rows distinct)."""
    i = lo
    while True:
        i, used, why = _encode_until_full(data, words, offsets, bitmap, bit_offset, i, hi,
                                          codes, slots, slot_keys, vbytes, voffs, used,
                                          part, nparts, counts)  # fmt: skip
        if why == _DONE:
            return slots, slot_keys, vbytes, voffs, used, counts
        if why == _BYTES_FULL:
            vbytes = _grown(vbytes, voffs[used] + offsets[i + 1] - offsets[i])
            continue
        rows = rows_before + i - lo
        if probe_rows > 0 and rows >= probe_rows and used > high * rows:
            return slots, slot_keys, vbytes, voffs, -1, counts
        slots, slot_keys = _grow_table(slots, slot_keys)
        voffs = _grown(voffs, _limit(len(slots)) + 1)
        counts = _grown_zeros(counts, len(voffs))


@njit(cache=True, nogil=True)
def _merge(vbytes, voffs, used, slots, slot_keys, gbytes, goffs, gused, mapping):
    """Look part values ``0:used`` up in (or append them to) the merged table;
    ``mapping[d]`` = merged code of part code d. Returns the merged arrays and count."""  # pragma: no cover
    for d in range(used):
        s0, s1 = voffs[d], voffs[d + 1]
        slot, k, code = _lookup(vbytes, s0, s1, slots, slot_keys, gbytes, goffs)
        if code < 0:
            if gused >= _limit(len(slots)):
                slots, slot_keys = _grow_table(slots, slot_keys)
                goffs = _grown(goffs, _limit(len(slots)) + 1)
                slot, k, code = _lookup(vbytes, s0, s1, slots, slot_keys, gbytes, goffs)
            v0 = goffs[gused]
            if v0 + (s1 - s0) > len(gbytes):
                gbytes = _grown(gbytes, v0 + (s1 - s0))
            gbytes[v0 : v0 + (s1 - s0)] = vbytes[s0:s1]
            goffs[gused + 1] = v0 + (s1 - s0)
            code = gused
            slots[slot] = code
            slot_keys[slot] = k
            gused += 1
        mapping[d] = code
    return slots, slot_keys, gbytes, goffs, gused


@njit(parallel=True, cache=True)
def _remap(codes, mapping):  # pragma: no cover - compiled
    for i in prange(len(codes)):
        c = codes[i]
        if c >= 0:
            codes[i] = mapping[np.uint64(c)]


def arrow_uniques(text: TextColumn) -> pa.Array:
    """A text column's distinct values as an Arrow string array: the encoder's own array,
    or one built from the Python strings when the column was made from them."""
    uniques = text.arrow_uniques
    return uniques if uniques is not None else pa.array(text.uniques.tolist(), pa.large_string())


#: below this many rows, or above this many distinct values (a histogram per lane would
#: be large), codes are counted on one thread
COUNT_PARALLEL_MIN_ROWS = 1 << 19
COUNT_PARALLEL_MAX_UNIQUE = 1 << 16


def count_codes(codes: np.ndarray, n_unique: int) -> np.ndarray:
    """Rows per code with the missing ones (code -1) in slot 0, as ``np.bincount(codes +
    1)`` gives — without its two int64 temporaries, on two lanes for a large column."""
    if len(codes) < ENCODER_LOAD_ROWS and not numba_loaded(_count_lanes):
        return np.bincount(codes + 1, minlength=n_unique + 1)  # loading the kernel costs more
    lanes = _workers()
    if len(codes) < COUNT_PARALLEL_MIN_ROWS or n_unique > COUNT_PARALLEL_MAX_UNIQUE:
        lanes = 1
    counts = np.zeros((lanes, n_unique + 1), dtype=np.int64)
    _count_lanes(codes, counts)
    return counts[0] if lanes == 1 else counts.sum(axis=0)


@njit(parallel=True, cache=True)
def _count_lanes(codes, counts):  # pragma: no cover - compiled
    """Lane ``t`` counts rows ``t/L .. (t+1)/L`` of the column into ``counts[t]``."""
    n = codes.shape[0]
    lanes = counts.shape[0]
    size = (n + lanes - 1) // lanes
    for t in prange(lanes):
        row = counts[t]
        for i in range(np.uint64(t * size), np.uint64(min(n, t * size + size))):
            row[np.uint64(codes[i] + 1)] += 1  # unsigned: no negative-index test


def _buffers(chunk: pa.Array) -> tuple[np.ndarray, ...]:
    """(bytes, the bytes as aligned uint64 words, int64 offsets over the chunk's rows,
    validity bitmap, bit offset or -1), all read-only."""
    if not pa.types.is_large_string(chunk.type):
        chunk = ac.cast(chunk, pa.large_string())
    validity, offset_buf, data_buf = chunk.buffers()
    start = chunk.offset
    offsets = _read_only(np.frombuffer(offset_buf, dtype=np.int64)[start : start + len(chunk) + 1])
    data, words = _NO_DATA, _NO_WORDS
    if data_buf is not None and data_buf.size:
        data = _read_only(np.frombuffer(data_buf, dtype=np.uint8))
        if data_buf.address % 8 == 0:  # Arrow aligns buffers to 64 bytes; else bytewise
            words = data[: len(data) // 8 * 8].view(np.uint64)
    if chunk.null_count and validity is not None:
        bitmap = _read_only(np.frombuffer(validity, dtype=np.uint8))
        return data, words, offsets, bitmap, start
    return data, words, offsets, _NO_BITMAP, -1


def encode(
    values: pa.Array | pa.ChunkedArray, *, out: np.ndarray | None = None
) -> tuple[np.ndarray, pa.Array]:
    """``(codes, uniques)``: int32 codes (-1 = null) in order of first appearance, and the
    distinct values as an Arrow large_string array (``uniques[codes[i]]`` is row i).
    ``out``: an int32 array of the column's length to write the codes to.

    A dictionary-typed column (Parquet read with ``read_dictionary``, a pandas categorical
    or a Polars categorical exported to Arrow) is coded from its indices: only its
    dictionary is hashed. Inside a :func:`fastprep.data.reuse.scope`, the same buffers
    encoded again give the first encoding (read-only codes) without the work."""
    codes, uniques, _ = encode_counted(values, out=out)
    return codes, uniques


#: codes, distinct values, and the rows of each code (None: not counted)
Encoded = tuple[np.ndarray, pa.Array, np.ndarray | None]


def encode_counted(values: pa.Array | pa.ChunkedArray, *, out: np.ndarray | None = None) -> Encoded:
    """:func:`encode`, and ``counts``: ``counts[c]`` rows have code c (the missing ones
    not counted), when the encoder's hash pass counted them on the way; None when the
    column took another path (Arrow's encoder, a dictionary column, mostly distinct
    values hashed on every core): count the codes then."""
    if out is not None:
        return _encode_any(values, out)
    return reuse.reuse(values, ("text_encode",), lambda: _read_only_codes(_encode_any(values)))


def _encode_any(values: pa.Array | pa.ChunkedArray, out: np.ndarray | None = None) -> Encoded:
    if pa.types.is_dictionary(values.type):
        return (*_encode_dictionary(values, out), None)
    encoded = _encode(values, out, give_up=False)
    assert encoded is not None
    return encoded


def _read_only_codes(encoded: Encoded) -> Encoded:
    """Kept codes are shared by later jobs: no consumer may write to them."""
    codes, uniques, counts = encoded
    if reuse.active():
        codes = codes.view()
        codes.flags.writeable = False
    return codes, uniques, counts


def _encode_dictionary(
    values: pa.Array | pa.ChunkedArray, out: np.ndarray | None
) -> tuple[np.ndarray, pa.Array]:
    """Codes of a dictionary-typed column from its indices: its chunks' dictionaries
    (each distinct one once) encoded together, so a duplicate or null entry gets its
    value's code; each row's index mapped through its chunk's table; then the codes
    renumbered by first appearance in the rows, unused entries dropped — what encoding the
    decoded strings gives, with a hash pass over small integers instead of every string.
    (Not Arrow's ``unify_dictionaries``: it refuses dictionaries holding a null.)"""
    chunks = list(values.chunks) if isinstance(values, pa.ChunkedArray) else [values]
    chunks = [c for c in chunks if len(c)]
    n = sum(len(c) for c in chunks)
    codes = ARENA.empty(n, np.int32) if out is None else out
    if not chunks:
        return codes, pa.array([], type=pa.large_string())
    first_entry: dict[tuple, int] = {}  # a dictionary (by its buffers) -> its first entry
    dictionaries: list[pa.Array] = []
    at_entry = 0
    for chunk in chunks:
        key = _dictionary_key(chunk.dictionary)
        if key not in first_entry:
            first_entry[key] = at_entry
            dictionaries.append(ac.cast(chunk.dictionary, pa.large_string()))
            at_entry += len(chunk.dictionary)
    entry_codes, entry_uniques, _ = _encode_any(pa.chunked_array(dictionaries, pa.large_string()))
    fused = _use_numba(n) and (numba_cached(_map_rank) or n >= BY_HASH_COMPILE_ROWS)
    if fused:  # each row mapped and renumbered in one pass, chunk after chunk
        rank = np.full(len(entry_uniques), -1, dtype=np.int32)
        order = np.empty(len(entry_uniques), dtype=np.int64)
        seen = 0
    at = 0
    for chunk in chunks:
        first = first_entry[_dictionary_key(chunk.dictionary)]
        lut = np.append(entry_codes[first : first + len(chunk.dictionary)], np.int32(-1))
        indices = chunk.indices
        if indices.null_count:
            indices = ac.fill_null(indices, len(chunk.dictionary))  # the lut's last slot: -1
        if fused:
            seen = _map_rank(_int32_indices(indices), lut, codes, at, rank, order, seen)
        else:
            codes[at : at + len(chunk)] = lut[indices.to_numpy()]
        at += len(chunk)
    if fused:
        order = order[:seen]
    elif _use_numba(n) and (numba_cached(_rank_codes) or n >= BY_HASH_COMPILE_ROWS):
        rank = np.full(len(entry_uniques), -1, dtype=np.int32)
        order = np.empty(len(entry_uniques), dtype=np.int64)
        order = order[: _rank_codes(codes, rank, order)]  # renumbered in the same pass
    else:
        order = ac.unique(numeric_array(codes)).to_numpy()  # by first appearance
        order = order[order >= 0]
        if not np.array_equal(order, np.arange(len(entry_uniques))):
            rank = np.full(len(entry_uniques) + 1, -1, dtype=np.int32)  # last slot: code -1
            rank[order] = np.arange(len(order), dtype=np.int32)
            codes[...] = rank[codes]
    return codes, _plain(ac.take(entry_uniques, numeric_array(order)))


def _int32_indices(indices: pa.Array) -> np.ndarray:
    """A chunk's dictionary indices as read-only int32 (zero-copy when they are int32, as
    Parquet's are): the one signature :func:`_map_rank` is compiled for."""
    values = indices.to_numpy(zero_copy_only=False)
    if values.dtype != np.int32:
        values = values.astype(np.int32)
    return _read_only(values)


def _dictionary_key(dictionary: pa.Array) -> tuple:
    buffers = tuple(0 if b is None else (b.address, b.size) for b in dictionary.buffers())
    return (str(dictionary.type), dictionary.offset, len(dictionary), buffers)


def try_encode(
    values: pa.Array | pa.ChunkedArray, *, out: np.ndarray | None = None
) -> tuple[np.ndarray, pa.Array] | None:
    """:func:`encode`, or None when a part finds many distinct values (more than
    ``HIGH_CARDINALITY`` of at least ``PROBE_ROWS`` rows): a caller that can do without
    codes (hashing each row's bytes) is spared the serial encoding such a column needs."""
    encoded = _encode(values, out, give_up=True)
    return None if encoded is None else encoded[:2]


def _encode(values, out, give_up: bool) -> Encoded | None:
    chunks = [
        c if pa.types.is_large_string(c.type) else ac.cast(c, pa.large_string())
        for c in (values.chunks if isinstance(values, pa.ChunkedArray) else [values])
    ]
    chunks = [c for c in chunks if len(c)]
    n = sum(len(c) for c in chunks)
    codes = ARENA.empty(n, np.int32) if out is None else out  # warm memory: emit.arena
    if not n:
        return codes, pa.array([], type=pa.large_string()), np.zeros(0, np.int64)
    if not _use_numba(n):
        if give_up and _mostly_distinct(chunks, n):
            return None
        return (*_encode_with_arrow(chunks, codes), None)
    pieces = _pieces(chunks, _parts(n))
    tables = _run(pieces, codes, PROBE_ROWS)
    if any(t[4] < 0 for t in tables):
        if give_up:
            return None
        if _by_hash_pays(n):
            return (*_encode_by_hash(chunks, codes, _workers()), None)
        return _encode_serially(chunks, codes)
    return (codes, *_merged(tables, pieces, codes))


#: which encoder a column gets (same codes either way) is the planner's helper-kernel
#: decision (``planner.kernel_path("text", ...)``: Arrow's ``dictionary_encode`` is the
#: no-compile twin): a small job on a fresh install neither compiles nor imports Numba, and
#: loading cached kernels (50-400 ms measured in a fresh process) is paid only where a
#: column repays it. A process that has sent this many rows through Arrow counts import and
#: load as repaid: a long-lived process running many small jobs then gets the Numba paths
#: (the flights pipeline at 336k rows in a warm process: ~0.17 against ~0.22 s a run)
ENCODER_AMORTIZED_ROWS = 1 << 22
_ARROW_ROWS = 0
#: ``count_codes`` counts with ``np.bincount`` below this many rows unless its kernel is in
#: the process already
ENCODER_LOAD_ROWS = 1 << 20
#: a mostly distinct column of at least this many rows is encoded by hash on every core
#: even if that path's two small kernels must be compiled first (~0.5 s, repaid at once)
BY_HASH_COMPILE_ROWS = 1 << 20


def _encoder_kernels(n: int | None = None) -> tuple:
    """The kernels a Numba encoding of ``n`` rows runs (None: of any size). ``_remap`` is
    left out: it runs only when a later part met the values in another order than the
    first, which a column with few distinct values never does, so it may never be
    compiled: counting it kept the 3.4M-row flights job on Arrow's encoder even after every
    kernel it runs was compiled (a small kernel, compiled on the rare first call that needs
    it). ``_merge`` runs only for a column cut into parts: counting it for a one-part column
    kept a user of small jobs on Arrow's encoder in every new process (the kernel that
    column runs was cached, the merge never compiled)."""
    if n is not None and _parts(n) == 1:
        return (_encode_chunk,)
    return (_encode_chunk, _merge)


def _use_numba(n: int) -> bool:
    global _ARROW_ROWS
    cached = kernels_ready(n)
    if (
        cached
        and _ARROW_ROWS >= ENCODER_AMORTIZED_ROWS
        and os.environ.get("FASTPREP_KERNEL_PATH") != "numpy"
    ):  # repaid in this process: importing Numba here also puts later jobs' helpers on it
        PATHS["text"] = f"numba: {_ARROW_ROWS:,} rows through Arrow in this process"
        return True
    if kernel_path("text", n, cached=cached, loaded=numba_loaded(_encode_chunk)) == "numba":
        return True
    _ARROW_ROWS += n
    return False


def _by_hash_pays(n: int) -> bool:
    if _workers() < 2 or n < 2 * TASK_ROWS:
        return False
    return n >= BY_HASH_COMPILE_ROWS or all(numba_cached(k) for k in (_rank_codes, _gather_values))


def kernels_ready(n: int | None = None) -> bool:
    """Whether the encoder's kernels (for a column of ``n`` rows; None: any) run without
    compiling (compiled in this process, or in Numba's disk cache)."""
    return all(numba_cached(kernel) for kernel in _encoder_kernels(n))


def _mostly_distinct(chunks: list[pa.Array], n: int) -> bool:
    """The Arrow path's twin of the kernel's early give-up: many distinct values among the
    first ``PROBE_ROWS`` rows (a hashing caller then hashes each row's bytes instead)."""
    probe = min(n, PROBE_ROWS)
    if probe < MIN_PROBE_ROWS:
        return False
    head = pa.chunked_array(chunks, type=pa.large_string()).slice(0, probe)
    return ac.count_distinct(head) > HIGH_CARDINALITY * probe


def _encode_with_arrow(chunks: list[pa.Array], codes: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Arrow's hash kernel: one dictionary over all chunks, in order of first appearance
    (as this module's encoder); missing rows get code -1."""
    encoded = ac.dictionary_encode(pa.chunked_array(chunks, type=pa.large_string()))
    at = 0
    for chunk in encoded.chunks:
        indices = ac.fill_null(ac.cast(chunk.indices, pa.int32()), -1)
        codes[at : at + len(chunk)] = indices.to_numpy()
        at += len(chunk)
    if encoded.num_chunks:
        dictionary = encoded.chunk(encoded.num_chunks - 1).dictionary
    else:
        dictionary = pa.array([], pa.large_string())
    return codes, _plain(dictionary)


def _plain(uniques: pa.Array) -> pa.Array:
    """The distinct values as a large_string array without a validity bitmap (as
    :func:`_merged` builds them), so both encoders give equal arrays."""
    uniques = ac.cast(uniques, pa.large_string())
    _, offsets, data = uniques.buffers()
    return pa.Array.from_buffers(
        pa.large_string(), len(uniques), [None, offsets, data], offset=uniques.offset
    )


def _encode_by_hash(
    chunks: list[pa.Array], codes: np.ndarray, owners: int
) -> tuple[np.ndarray, pa.Array]:
    """Mostly distinct values on every core: each thread reads every row but encodes only
    the values whose hash falls to it (its table holds 1/owners of the values, so fewer
    cache misses), writing ``local code * owners + owner``; one pass in row order then
    numbers the values by first appearance (what the serial encoder gives) and the
    distinct bytes are gathered in that order. Merging per-range tables instead would redo
    the whole work serially, as every value is new to the merged table."""
    pieces = _pieces(chunks, 1)[0]
    tables = threads.map_all(lambda o: _run_part(pieces, codes, 0, o, owners), range(owners))
    used = [t[4] for t in tables]
    rank = np.full(max(used) * owners, -1, dtype=np.int32)
    order = np.empty(sum(used), dtype=np.int64)
    distinct = _rank_codes(codes, rank, order)
    starts = np.zeros(len(rank), dtype=np.int64)
    lengths = np.zeros(len(rank), dtype=np.int64)
    blocks, base = [], 0
    for owner, (_, _, vbytes, voffs, count, _) in enumerate(tables):
        starts[owner::owners][:count] = voffs[:count] + base
        lengths[owner::owners][:count] = np.diff(voffs[: count + 1])
        blocks.append(vbytes[: voffs[count]])
        base += int(voffs[count])
    order = order[:distinct]
    offsets = np.zeros(distinct + 1, dtype=np.int64)
    np.cumsum(lengths[order], out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    _gather_values(np.concatenate(blocks) if blocks else data, starts[order], offsets, data)
    return codes, pa.Array.from_buffers(
        pa.large_string(), distinct, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


@njit(cache=True, nogil=True)
def _rank_codes(codes, rank, order):  # pragma: no cover - compiled
    """Number the composite codes by first appearance, in place; ``order[g]`` = the
    composite code of value g. Returns the distinct count."""
    g = 0
    for i in range(np.uint64(codes.shape[0])):  # unsigned: no negative-index test per row
        c = codes[i]
        if c >= 0:
            r = rank[np.uint64(c)]
            if r < 0:
                r = g
                rank[np.uint64(c)] = g
                order[g] = c
                g += 1
            codes[i] = r
    return g


@njit(cache=True, nogil=True)
def _map_rank(indices, lut, codes, start, rank, order, seen):  # pragma: no cover - compiled
    """One chunk of a dictionary column: row ``i``'s entry code ``lut[indices[i]]``,
    numbered by first appearance over the chunks so far (``rank``/``order`` as in
    :func:`_rank_codes`, ``seen`` values met before), into ``codes[start + i]``.
    Returns the new ``seen``. The lut gather and :func:`_rank_codes` in one pass."""
    at = np.uint64(start)  # unsigned indices: no negative-index test per row
    for i in range(np.uint64(indices.shape[0])):
        c = lut[np.uint64(indices[i])]
        if c >= 0:
            r = rank[np.uint64(c)]
            if r < 0:
                r = seen
                rank[np.uint64(c)] = seen
                order[seen] = c
                seen += 1
            c = r
        codes[at + i] = c
    return seen


@njit(parallel=True, cache=True)
def _gather_values(source, starts, offsets, out):  # pragma: no cover - compiled
    for g in prange(starts.shape[0]):
        s = starts[g]
        o = offsets[g]
        for t in range(offsets[g + 1] - o):
            out[o + t] = source[s + t]


def _parts(n: int) -> int:
    return max(1, min(PARTS or _workers(), n // max(TASK_ROWS, 1)))


def _pieces(chunks: list[pa.Array], parts: int) -> list[list[tuple]]:
    """Per part, its (chunk buffers, first row, end row, chunk's first row in the column)."""
    cuts = np.linspace(0, sum(len(c) for c in chunks), parts + 1).astype(np.int64)
    out: list[list[tuple]] = [[] for _ in range(parts)]
    at = 0
    for chunk in chunks:
        bufs = _buffers(chunk)
        for p in range(parts):
            lo, hi = max(cuts[p], at), min(cuts[p + 1], at + len(chunk))
            if hi > lo:
                out[p].append((bufs, int(lo - at), int(hi - at), at))
        at += len(chunk)
    return out


def _run(pieces: list[list[tuple]], codes: np.ndarray, probe_rows: int) -> list[tuple]:
    """Each part's table (slots, keys, distinct bytes, offsets, count or -1, rows per
    code), in parallel."""
    if len(pieces) == 1:
        return [_run_part(pieces[0], codes, probe_rows)]
    return threads.map_all(lambda part: _run_part(part, codes, probe_rows), pieces)


def _run_part(
    part: list[tuple], codes: np.ndarray, probe_rows: int, owner: int = 0, owners: int = 1
) -> tuple:
    """One part's rows into its own table; ``owners`` > 1: only the values whose hash
    falls to ``owner`` (``_encode_by_hash``)."""
    slots = np.full(1024, -1, dtype=np.int32)
    slot_keys = np.zeros(1024, dtype=np.uint64)
    vbytes = np.empty(4096, dtype=np.uint8)
    voffs = np.zeros(_limit(len(slots)) + 1, dtype=np.int64)
    # int32: a part has fewer than 2**31 rows (codes are int32); half an int64 table's
    # cache lines beside the hash table's (tailnum's 4,044 values: ~1 ms less at 3.4M rows)
    counts = np.zeros(len(voffs), dtype=np.int32)
    used, rows = 0, 0
    if probe_rows > 0:
        probe_rows = min(
            probe_rows, max(MIN_PROBE_ROWS, sum(hi - lo for _, lo, hi, _ in part) // 4)
        )
    for (data, words, offsets, bitmap, bit_offset), lo, hi, at in part:
        view = codes[at : at + len(offsets) - 1]
        slots, slot_keys, vbytes, voffs, used, counts = _encode_chunk(
            data, words, offsets, bitmap, bit_offset, lo, hi, view, slots, slot_keys, vbytes, voffs,
            used, rows, probe_rows, HIGH_CARDINALITY, owner, owners, counts,
        )  # fmt: skip
        if used < 0:
            break
        rows += hi - lo
    return slots, slot_keys, vbytes, voffs, used, counts


def _merged(
    tables: list[tuple], pieces: list[list[tuple]], codes: np.ndarray
) -> tuple[pa.Array, np.ndarray]:
    """Merge the parts' tables into part 0's, remap later parts' codes; the uniques and
    the rows per merged code."""
    slots, slot_keys, gbytes, goffs, gused, first_counts = tables[0]
    moved = []  # (a part's codes in the merged table, its rows per code)
    for (_, _, vbytes, voffs, used, part_counts), part in zip(tables[1:], pieces[1:]):
        mapping = np.empty(max(used, 1), dtype=np.int32)
        slots, slot_keys, gbytes, goffs, gused = _merge(
            vbytes, voffs, used, slots, slot_keys, gbytes, goffs, gused, mapping
        )
        moved.append((mapping[:used], part_counts[:used]))
        if not np.array_equal(mapping[:used], np.arange(used)):
            first = part[0][3] + part[0][1]
            last = part[-1][3] + part[-1][2]
            _remap(codes[first:last], mapping)
    counts = np.zeros(gused, dtype=np.int64)
    counts[: tables[0][4]] = first_counts[: tables[0][4]]
    for mapping, part_counts in moved:
        counts[mapping] += part_counts  # one part's codes are distinct: no lost adds
    return _uniques_array(gused, goffs, gbytes), counts


def _uniques_array(gused: int, goffs: np.ndarray, gbytes: np.ndarray) -> pa.Array:
    """The merged table's distinct values as an Arrow large_string array (copied out)."""
    return pa.Array.from_buffers(
        pa.large_string(),
        gused,
        [
            None,
            pa.py_buffer(goffs[: gused + 1].copy()),
            pa.py_buffer(gbytes[: goffs[gused]].copy()),
        ],
    )


def _encode_serially(chunks: list[pa.Array], codes: np.ndarray) -> Encoded:
    """One pass over the whole column (many distinct values: nothing to merge)."""
    pieces = _pieces(chunks, 1)
    return (codes, *_merged(_run(pieces, codes, 0), pieces, codes))
