"""Tag columns built from Arrow: list<string> flattened and text split, with empty pieces,
null elements and repeats dropped the same way on the Numba pass and its numpy twin."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from fastprep.data.tag_split import from_lists, split_text

ROWS = [["b", "a", "b"], None, [], ["", None, "c"], ["a"], ["c", "c", "c", "a", "c"], ["é", "É"]]
EXPECTED = [["b", "a"], [], [], ["c"], ["a"], ["c", "a"], ["é", "É"]]


@pytest.mark.parametrize("path", ["numba", "numpy"])
def test_from_lists_drops_empties_and_repeats(path, monkeypatch) -> None:
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", path)
    for kind in (pa.list_(pa.string()), pa.large_list(pa.large_string())):
        column = from_lists(pa.chunked_array([pa.array(ROWS[:3], kind), pa.array(ROWS[3:], kind)]))
        assert column.to_lists() == EXPECTED
        assert column.offsets.dtype == np.int64 and column.codes.dtype == np.int32
        counts = dict(zip(column.uniques.to_pylist(), column.counts().tolist()))
        assert counts == {"b": 1, "a": 3, "c": 2, "é": 1, "É": 1}


@pytest.mark.parametrize("path", ["numba", "numpy"])
def test_split_text_and_take(path, monkeypatch) -> None:
    monkeypatch.setenv("FASTPREP_KERNEL_PATH", path)
    column = split_text(pa.array(["a|b|a", "", "|x||", "a.b"]), "|")
    assert column.to_lists() == [["a", "b"], [], ["x"], ["a.b"]]
    taken = column.take(np.array([3, -1, 0, 0, 2]))
    assert taken.to_lists() == [["a.b"], [], ["a", "b"], ["a", "b"], ["x"]]
    assert split_text(pa.array(["a::b:c"]), "::").to_lists() == [["a", "b:c"]]


@pytest.mark.parametrize(
    "kind",
    [
        pa.list_(pa.dictionary(pa.int32(), pa.string())),
        pa.large_list(pa.string()),
        pa.list_(pa.string(), 2),
        pa.list_view(pa.string()),
        pa.list_(pa.string_view()),
    ],
    ids=["list<dictionary>", "large_list", "fixed_size_list", "list_view", "list<string_view>"],
)
def test_every_arrow_list_layout(kind) -> None:
    """A null row's slots (kept by a fixed-size list) are never read as tags."""
    rows = [["b", "a"], None, ["c", "c"], ["a", ""]]
    column = from_lists(pa.array(rows, kind))
    assert column.to_lists() == [["b", "a"], [], ["c"], ["a"]]
