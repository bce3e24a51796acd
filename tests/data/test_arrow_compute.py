"""``data/arrow_compute.py`` gives what pyarrow.compute (and pyarrow's array methods)
give, for the functions a job calls."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from fastprep.data import arrow_compute as ac


def test_same_as_pyarrow_compute() -> None:
    text = pa.array(["b", "a", None, "b", ""])
    chunked = pa.chunked_array([text, text.slice(1)])
    assert ac.cast(text, pa.large_string()).equals(text.cast(pa.large_string()))
    assert ac.cast(chunked, pa.large_string()).equals(chunked.cast(pa.large_string()))
    numbers = pa.array([1, None, 3], pa.int32())
    assert ac.cast(numbers, pa.float64(), safe=False).equals(numbers.cast(pa.float64(), safe=False))
    assert ac.fill_null(numbers, -1).equals(numbers.fill_null(-1))
    indices = pa.array([4, 0, 0], pa.int64())
    assert ac.take(text, indices).equals(text.take(indices))
    table = pa.table({"t": text, "n": pa.array([1, 2, 3, 4, 5])})
    assert ac.take(table, indices).equals(table.take(indices))
    assert ac.unique(text).equals(pc.unique(text))
    assert ac.dictionary_encode(chunked).equals(chunked.dictionary_encode())
    allowed = pa.array(["a", None])
    assert ac.is_in(text, allowed).equals(pc.is_in(text, value_set=allowed))
    assert ac.count_distinct(chunked) == pc.count_distinct(chunked).as_py()


def test_errors_as_pyarrow_raises_them() -> None:
    with pytest.raises(pa.ArrowInvalid):
        ac.cast(pa.array([300]), pa.int8())  # safe: an overflow raises
    with pytest.raises(IndexError):
        ac.take(pa.array([1, 2]), pa.array([5]))
