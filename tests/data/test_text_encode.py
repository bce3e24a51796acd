"""The parallel Arrow string encoder gives exactly ``pd.factorize``'s codes and uniques."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastprep.data import text_encode


@pytest.fixture(autouse=True)
def numba_encoder(monkeypatch):
    """These tests are about the Numba encoder: use it even on a cold kernel cache."""
    monkeypatch.setattr(text_encode, "_use_numba", lambda n: True)


def factorize(values: list[str | None]) -> tuple[np.ndarray, list[str]]:
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return codes.astype(np.int32), list(uniques)


def check(array: pa.Array | pa.ChunkedArray, expected: list[str | None]) -> None:
    codes, uniques, counts = text_encode.encode_counted(array)
    want_codes, want_uniques = factorize(expected)
    np.testing.assert_array_equal(codes, want_codes)
    assert uniques.to_pylist() == want_uniques
    assert uniques.null_count == 0 and pa.types.is_large_string(uniques.type)
    if counts is not None:  # counted by the hash pass: the rows of each code
        want = np.bincount(want_codes[want_codes >= 0], minlength=len(want_uniques))
        np.testing.assert_array_equal(counts, want)


def test_the_hash_pass_counts_each_code_on_one_part_or_many(monkeypatch):
    """Counts merged over parts whose tables met the values in other orders (remapped),
    and over tables that grew, equal the codes' bincount; the same on one part."""
    rng = np.random.default_rng(5)
    values = [None if i % 97 == 0 else f"v{v}" for i, v in enumerate(rng.zipf(1.3, 30_011))]
    pieces = [values[:7], values[7:20_000], values[20_000:]]
    array = pa.chunked_array([pa.array(p, pa.string()) for p in pieces])
    for rows, parts in ((1 << 20, 1), (1000, 2), (1000, 5)):
        monkeypatch.setattr(text_encode, "TASK_ROWS", rows)
        monkeypatch.setattr(text_encode, "PARTS", parts)
        assert text_encode.encode_counted(array)[2] is not None
        check(array, values)


@pytest.fixture(params=[1 << 18, 7], ids=["one-part", "many-parts"])
def task_rows(request, monkeypatch):
    """Run each case as one part and split into up to 5 tiny parts (the merge path)."""
    monkeypatch.setattr(text_encode, "TASK_ROWS", request.param)
    monkeypatch.setattr(text_encode, "PARTS", 5)
    return request.param


texts = st.one_of(
    st.none(),
    st.sampled_from(["", "=", "a", "JFK", "N12345", "1234567", "12345678", "é", "日本語"]),
    st.text(max_size=12),
    st.text(min_size=20, max_size=60),
)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(texts, max_size=80), cut=st.integers(0, 80))
def test_matches_factorize(values, cut):
    for rows in (1 << 18, 5):  # one part, and the merge of many
        text_encode.TASK_ROWS, text_encode.PARTS = rows, 7
        try:
            check(pa.array(values, type=pa.string()), values)
            cut_at = min(cut, len(values))
            chunked = pa.chunked_array(
                [pa.array(values[:cut_at], pa.string()), pa.array(values[cut_at:], pa.string())]
            )
            check(chunked, values)
        finally:
            text_encode.TASK_ROWS, text_encode.PARTS = 1 << 16, None


def test_sliced_arrays_with_nulls(task_rows):
    values = ["x", None, "y", "x", None, "a long value well past seven bytes", "y", "ü"] * 5
    array = pa.array(values, type=pa.large_string())
    check(array.slice(3, 29), values[3:32])  # a bitmap that starts mid-byte


def test_keys_of_seven_and_eight_bytes_stay_distinct(task_rows):
    # packed keys hold up to 7 bytes; these differ only in a trailing byte or in length
    values = ["abcdefg", "abcdefg\x00", "abcdef", "abcdefgh", "abcdefgi", "\x00", "", "\x00\x00"]
    check(pa.array(values * 3), values * 3)


def test_real_flights_columns(flights_sample, task_rows):
    for name in ("origin", "carrier", "tailnum", "dest"):
        arrow = flights_sample[name].array.__arrow_array__()
        check(
            arrow,
            flights_sample[name].astype(object).where(flights_sample[name].notna(), None).tolist(),
        )


def test_every_value_distinct_takes_the_serial_path(monkeypatch):
    monkeypatch.setattr(text_encode, "PROBE_ROWS", 1000)
    monkeypatch.setattr(text_encode, "_by_hash_pays", lambda n: False)
    values = [f"row-{i:07d}" for i in range(20_000)]
    calls = []
    serial = text_encode._encode_serially
    monkeypatch.setattr(text_encode, "_encode_serially", lambda *a: calls.append(1) or serial(*a))
    check(pa.array(values), values)
    assert calls == [1]


def test_empty_and_all_null():
    check(pa.array([], type=pa.string()), [])
    check(pa.array([None, None], type=pa.string()), [None, None])
    check(pa.chunked_array([], type=pa.string()), [])


def test_parts_span_chunks_and_share_long_values(monkeypatch):
    """Parts cut across chunk boundaries; a long value first seen in a later part or chunk
    is merged by its bytes, and a byte buffer too small for the next value grows."""
    monkeypatch.setattr(text_encode, "TASK_ROWS", 3)
    monkeypatch.setattr(text_encode, "PARTS", 4)
    long_a, long_b = "x" * 5000, "y" * 9000  # longer than the 4096-byte start buffer
    values = ["a", long_a, None, "b", long_b, "a", long_a, "é" * 10, None, long_b, "b", "c"]
    chunks = [values[:2], values[2:3], values[3:8], values[8:]]
    check(pa.chunked_array([pa.array(c, pa.string()) for c in chunks]), values)


def test_many_distinct_values_in_a_later_part_give_up_only_in_try_encode(monkeypatch):
    monkeypatch.setattr(text_encode, "TASK_ROWS", 1000)
    monkeypatch.setattr(text_encode, "PARTS", 2)
    monkeypatch.setattr(text_encode, "PROBE_ROWS", 1000)
    values = ["r"] * 5000 + [f"id-{i}" for i in range(5000)]  # part 1 is all distinct
    array = pa.array(values, pa.large_string())
    assert text_encode.try_encode(array) is None
    check(array, values)


def invalid_utf8() -> pa.Array:
    """A string array holding bytes that are not UTF-8 (as an unvalidated reader may give)."""
    pieces = [b"\xff\xfe", b"ok", b"", b"\xc3", b"\xff\xfe", b"ok", b"\x80" * 9]
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64)
    data = b"".join(pieces)
    return pa.Array.from_buffers(
        pa.large_string(), len(pieces), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


ARROW_CASES = {
    "nulls": pa.chunked_array([pa.array(["x", None, "y"]), pa.array([None, "x", "z", None])]),
    "invalid_utf8": pa.chunked_array([invalid_utf8()]),
    "empty_strings": pa.chunked_array([pa.array(["", None, "", "a", ""], pa.large_string())]),
    "all_distinct": pa.chunked_array(
        [pa.array([f"id-{i}" for i in range(k, k + 3000)]) for k in (0, 3000, 6000)]
    ),
    "single_value": pa.chunked_array([pa.array(["JFK"] * 5000)]),
    "sliced_with_nulls": pa.chunked_array(
        [pa.array(["a", None, "bb", "a"] * 50, pa.large_string()).slice(3, 150)]
    ),
}


@pytest.mark.parametrize("name", sorted(ARROW_CASES))
def test_arrow_path_gives_the_numba_codes_bit_for_bit(name, task_rows, monkeypatch):
    """The no-compile path (Arrow's dictionary_encode, used on a cold kernel cache) and the
    Numba encoder give identical codes and identical distinct-value arrays."""
    column = ARROW_CASES[name]
    numba_codes, numba_uniques = text_encode.encode(column)
    numba_codes = numba_codes.copy()
    monkeypatch.setattr(text_encode, "_use_numba", lambda n: False)
    arrow_codes, arrow_uniques = text_encode.encode(column)
    assert arrow_codes.dtype == numba_codes.dtype == np.int32
    np.testing.assert_array_equal(arrow_codes, numba_codes)
    assert arrow_uniques.equals(numba_uniques)
    assert arrow_uniques.type == numba_uniques.type == pa.large_string()
    assert arrow_uniques.null_count == 0 and arrow_uniques.buffers()[0] is None


def test_cold_cache_encodes_a_small_column_without_numba(monkeypatch):
    called = []
    monkeypatch.undo()  # the real choice: kernels neither loaded nor cached, few rows
    monkeypatch.setattr(text_encode, "numba_loaded", lambda kernel: False)
    monkeypatch.setattr(text_encode, "numba_cached", lambda kernel: False)
    monkeypatch.setattr(text_encode, "_run", lambda *a: called.append(1))
    values = ["b", None, "a", "b"]
    check(pa.array(values), values)
    assert called == []


@pytest.mark.parametrize("owners", [2, 3])
def test_mostly_distinct_by_hash_on_every_core_matches_the_serial_encoder(owners, monkeypatch):
    """Each thread encodes the values whose hash falls to it; renumbered by first
    appearance, the codes and distinct values are the serial encoder's."""
    monkeypatch.setattr(text_encode, "PROBE_ROWS", 1000)
    monkeypatch.setattr(text_encode, "TASK_ROWS", 500)
    monkeypatch.setattr(text_encode, "_workers", lambda: owners)
    monkeypatch.setattr(text_encode, "_by_hash_pays", lambda n: True)
    rng = np.random.default_rng(3)
    values = [None if v % 97 == 0 else f"row-{v}" * (1 + v % 3) for v in rng.permutation(20_000)]
    values += values[:3000]  # repeats of earlier values, and an empty string
    values[5] = ""
    column = pa.chunked_array([pa.array(values[:7000]), pa.array(values[7000:])])
    calls = []
    by_hash = text_encode._encode_by_hash
    monkeypatch.setattr(
        text_encode, "_encode_by_hash", lambda *a: calls.append(a[2]) or by_hash(*a)
    )
    check(column, values)
    assert calls == [owners]


def test_which_encoder(monkeypatch):
    """The planner's helper decision: loaded kernels for any column; cached ones for a
    column that repays loading them; Arrow for a small column on a fresh install (and
    FASTPREP_KERNEL_PATH forces either); a process that sent enough rows through Arrow
    counts the load as repaid."""
    monkeypatch.undo()
    monkeypatch.delenv("FASTPREP_KERNEL_PATH", raising=False)
    monkeypatch.setattr(text_encode, "_ARROW_ROWS", 0)
    loaded, cached = [True], [True]
    monkeypatch.setattr(text_encode, "numba_loaded", lambda kernel: loaded[0])
    monkeypatch.setattr(text_encode, "numba_cached", lambda kernel: cached[0])
    monkeypatch.setattr("fastprep.planning.planner.numba_imported", lambda: True)
    assert text_encode._use_numba(1000)
    loaded[0] = False
    assert not text_encode._use_numba(1000) and text_encode._use_numba(10_000_000)
    cached[0] = False
    assert not text_encode._use_numba(10_000_000)
    cached[0] = True
    monkeypatch.setattr(text_encode, "_ARROW_ROWS", text_encode.ENCODER_AMORTIZED_ROWS - 1000)
    assert not text_encode._use_numba(1000)
    assert text_encode._use_numba(1000)
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", "numpy")
    assert not text_encode._use_numba(10_000_000)


def test_count_codes_without_the_kernel_is_bincount(monkeypatch):
    codes = np.array([2, -1, 0, 2, 1, -1, 2], dtype=np.int32)
    want = np.bincount(codes + 1, minlength=4)
    monkeypatch.setattr(text_encode, "numba_loaded", lambda kernel: False)
    np.testing.assert_array_equal(text_encode.count_codes(codes, 3), want)
    monkeypatch.setattr(text_encode, "numba_loaded", lambda kernel: True)
    np.testing.assert_array_equal(text_encode.count_codes(codes, 3), want)


def dictionary_cases() -> dict[str, pa.ChunkedArray]:
    """Dictionary-typed columns: chunks with their own dictionaries, null indices, null
    and duplicate dictionary entries, entries no row uses, sliced chunks."""
    dup = pa.array(["x", None, "y", "x", "unused"])
    return {
        "two dictionaries": pa.chunked_array(
            [
                pa.array(["b", "a", None, "b"]).dictionary_encode(),
                pa.array(["c", "a", "d"]).dictionary_encode(),
            ]
        ),
        "null and duplicate entries": pa.chunked_array(
            [
                pa.DictionaryArray.from_arrays(pa.array([2, 3, None, 1, 0, 2], pa.int8()), dup),
                pa.DictionaryArray.from_arrays(pa.array([4, 0], pa.int8()), dup),
            ]
        ),
        "sliced": pa.chunked_array(
            [
                pa.array(["p", "q", "r", None, "q", "s"]).dictionary_encode().slice(2, 3),
            ]
        ),
        "empty": pa.chunked_array([], pa.dictionary(pa.int32(), pa.string())),
        "all null": pa.chunked_array(
            [pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()), pa.array(["a"]))]
        ),
    }


@pytest.fixture(params=[True, False], ids=["fused", "gather-then-rank"])
def fused(request, monkeypatch):
    """Dictionary indices mapped and renumbered in one kernel pass, or gathered by numpy
    and renumbered after (the path when that kernel is not cached): the same codes."""
    wanted = request.param
    monkeypatch.setattr(
        text_encode, "numba_cached", lambda kernel: wanted or kernel is not text_encode._map_rank
    )
    return wanted


@pytest.mark.parametrize("name", sorted(dictionary_cases()))
def test_dictionary_input_is_coded_as_its_strings(name, fused):
    column = dictionary_cases()[name]
    check(column, [v for chunk in column.chunks for v in chunk.to_pylist()])


def test_dictionary_flights_columns_equal_their_strings(flights_sample, fused):
    for name in ("carrier", "tailnum", "dest"):
        strings = pa.chunked_array([pa.Array.from_pandas(flights_sample[name])])
        codes, uniques = text_encode.encode(strings)
        got_codes, got_uniques = text_encode.encode(strings.dictionary_encode())
        np.testing.assert_array_equal(got_codes, codes)
        assert got_uniques.equals(uniques)


def test_a_one_part_column_needs_no_merge_kernel_to_be_ready(monkeypatch):
    """A column encoded as one part never runs the merge: whether its kernel is cached does
    not decide the path of such a column (else small jobs never leave Arrow's encoder)."""
    monkeypatch.setattr(text_encode, "numba_cached", lambda k: k is not text_encode._merge)
    monkeypatch.setattr(text_encode, "PARTS", 2)
    one_part = text_encode.TASK_ROWS  # fewer than two parts' rows
    assert text_encode.kernels_ready(one_part)
    assert not text_encode.kernels_ready(4 * text_encode.TASK_ROWS)
    assert not text_encode.kernels_ready()
