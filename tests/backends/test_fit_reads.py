"""A feature whose steps learn nothing (``Hash``, ``Clip``, ``Log1p``) is fitted without
gathering its input's selected rows; one that learns still is."""

from __future__ import annotations

import numpy as np

import fastprep as fp
from fastprep.backends.reference import backend as reference
from fastprep.data.columns import RowRange, Table, TextColumn


def table_with_selection() -> Table:
    codes = np.array([0, 1, -1, 2, 0, 1], dtype=np.int32)
    text = TextColumn(codes, np.array(["a", "b", "c"], dtype=object))
    numbers = np.array([1.0, 5.0, np.nan, 2.0, 8.0, 3.0])
    table = Table(RowRange(0, 6), {"t": text, "x": numbers})
    return table.take(np.array([0, 1, 3, 5]))


def fitted(feature, table: Table):
    plan = fp.Pipeline(fp.Schema({"t": fp.String(nullable=True), "x": fp.Float(nullable=True)}),
                       [feature]).plan  # fmt: skip
    return reference.fit_feature(plan.features[0], table)


def test_steps_that_learn_nothing_gather_nothing():
    table = table_with_selection()
    params = fitted(fp.col("t") >> fp.Hash(n_features=16), table)
    assert params == {"t": [{}]}
    params = fitted(fp.col("x") >> fp.Clip(0, 4) >> fp.Log1p(), table)
    assert params == {"x": [{}, {}]}
    assert table._cache == {}  # no selected-rows copy was made


def test_a_step_that_learns_still_sees_the_selected_rows_after_the_earlier_steps():
    table = table_with_selection()
    params = fitted(fp.col("x") >> fp.Clip(0, 4) >> fp.Standardize(), table)
    assert params["x"][0] == {}
    assert np.isclose(params["x"][1]["mean"], np.mean([1.0, 4.0, 2.0, 3.0]))
