"""A table's row ids over its selection, and its text counts over the selected rows."""

from __future__ import annotations

import numpy as np
import pytest

from fastprep.data.columns import RowRange, Table


def test_row_ids_of_a_selection_from_the_first_row_are_the_positions_not_a_copy():
    table = Table(RowRange(0, 10), {}, np.array([1, 4, 5, 9], dtype=np.int64))
    ids = table.row_ids
    assert np.array_equal(ids, [1, 4, 5, 9])
    assert np.shares_memory(ids, table.selection)
    assert not ids.flags.writeable  # writing through it would move the selection
    with pytest.raises(ValueError):
        ids[0] = 3


@pytest.mark.parametrize(
    ("ids", "selection", "expected"),
    [
        (RowRange(100, 10), [1, 4], [101, 104]),  # a partition's range: offset added
        (RowRange(0, 10), [-1, 2], [9, 2]),  # a negative position counts from the end
        (np.arange(20, 30), [0, 9], [20, 29]),  # ids as an array
    ],
)
def test_row_ids_of_other_selections_are_gathered(ids, selection, expected):
    table = Table(ids, {}, np.array(selection, dtype=np.int64))
    assert np.array_equal(table.row_ids, expected)
