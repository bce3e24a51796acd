"""The unsigned-index intrinsic: a signed code's -1 (and anything beyond the last slot)
reads the last slot, every other code itself; an unsigned code is only widened."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from fastprep.native.indexing import slot  # noqa: E402


@numba.njit
def _slots(codes, last):
    out = np.empty(len(codes), np.uint64)
    for i in range(len(codes)):
        out[i] = slot(codes[i], last)
    return out


@numba.njit
def _read(table, codes):
    out = np.empty(len(codes), table.dtype)
    last = np.uint64(len(table) - 1)
    for i in range(len(codes)):
        out[i] = table[slot(codes[i], last)]
    return out


@pytest.mark.parametrize("kind", [np.int8, np.int16, np.int32, np.int64])
def test_signed_minus_one_reads_the_last_slot(kind):
    codes = np.array([0, 1, -1, 5, 6, -1, 3], dtype=kind)
    np.testing.assert_array_equal(_slots(codes, np.uint64(6)), [0, 1, 6, 5, 6, 6, 3])
    table = np.arange(10, 17)
    np.testing.assert_array_equal(_read(table, codes), table[codes])  # numpy's wraparound


@pytest.mark.parametrize("kind", [np.int32, np.int64])
def test_signed_codes_past_the_last_slot_read_it(kind):
    codes = np.array([7, 100, np.iinfo(kind).min, np.iinfo(kind).max], dtype=kind)
    np.testing.assert_array_equal(_slots(codes, np.int64(6)), [6, 6, 6, 6])


@pytest.mark.parametrize("kind", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_unsigned_codes_are_only_widened(kind):
    codes = np.array([0, 1, np.iinfo(kind).max], dtype=kind)
    np.testing.assert_array_equal(_slots(codes, np.uint64(1)), codes.astype(np.uint64))


def test_no_codes():
    assert len(_slots(np.empty(0, np.int32), np.uint64(0))) == 0
