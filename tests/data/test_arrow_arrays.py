"""``numeric_array`` is ``pa.array`` for 1-d numeric arrays (values, type, a cast to the
asked type, views and slices), and refuses what it does not cover."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from fastprep.data.arrow_arrays import numeric_array


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float32, np.float64])
def test_same_as_pa_array(dtype) -> None:
    values = (np.arange(-5, 20) % 7).astype(dtype)
    assert numeric_array(values).equals(pa.array(values))
    strided = values[::3]  # not contiguous: copied, same values
    assert numeric_array(strided).equals(pa.array(strided))


def test_cast_to_the_asked_type() -> None:
    ids = np.array([3, 0, 7], dtype=np.int32)
    got = numeric_array(ids, pa.int64())
    assert got.type == pa.int64()
    assert got.equals(pa.array(ids, type=pa.int64()))
    table = pa.table({"x": ["a", "b", "c", "d", "e", "f", "g", "h"]})
    assert table.take(numeric_array(ids)).column("x").to_pylist() == ["d", "a", "h"]


def test_refuses_other_arrays() -> None:
    for values in (np.array([True, False]), np.array(["a"], dtype=object), np.zeros((2, 2))):
        with pytest.raises(TypeError):
            numeric_array(values)
