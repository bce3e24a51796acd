"""Random tag rows (any text, separators inside values, empties, repeats, missing rows):
both backends give exactly ``MultiLabelBinarizer`` and ``FeatureHasher`` on the rows' tags,
for a delimited text column and for the same tags as a list<string> column."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction import FeatureHasher
from sklearn.preprocessing import MultiLabelBinarizer

import fastprep as fp

TAG = st.one_of(st.sampled_from(["a", "b", "AA", "", "é", "x y", "ß", "🛫"]), st.text(max_size=4))
ROW = st.one_of(st.none(), st.lists(TAG, max_size=6))
SEPARATORS = ["|", ";", "::", "."]


def peer_rows(rows: list) -> list[list[str]]:
    return [[] if r is None else list(dict.fromkeys(t for t in r if t)) for r in rows]


@settings(max_examples=25, deadline=None)
@given(fit_rows=st.lists(ROW, min_size=1, max_size=30), rows=st.lists(ROW, min_size=1, max_size=30),
       sep=st.sampled_from(SEPARATORS))  # fmt: skip
@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_random_tags_equal_the_peers(backend, fit_rows, rows, sep) -> None:
    def text(values: list) -> list:  # a tag holding the separator splits into pieces
        return [None if r is None else sep.join(r) for r in values]

    def tags_of(values: list) -> list:
        return peer_rows([None if r is None else r.split(sep) for r in text(values)])

    schema = fp.Schema({"t": fp.String(nullable=True), "l": fp.ListOf(nullable=True)})
    pipe = fp.Pipeline(
        schema,
        [
            fp.Tags("t", sep=sep) >> fp.OneHot(sparse=True),
            fp.cols("l") >> fp.OneHot(sparse=True),
            fp.Tags("t", sep=sep) >> fp.Hash(64),
        ],
    )

    def frame(values: list) -> pa.Table:
        return pa.table({"t": pa.array(text(values), pa.string()),
                         "l": pa.array(values, pa.list_(pa.string()))})  # fmt: skip

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = pipe.fit(frame(fit_rows), backend=backend)
        X = sp.csr_matrix(fitted.transform(frame(rows), backend=backend).X)
        mlb_t = MultiLabelBinarizer().fit(tags_of(fit_rows))
        mlb_l = MultiLabelBinarizer().fit(peer_rows(fit_rows))
        expected = [mlb_t.transform(tags_of(rows)), mlb_l.transform(peer_rows(rows))]
    tokens = [[f"t={t}" for t in r] for r in tags_of(rows)]
    hashed = FeatureHasher(64, input_type="string", dtype=np.float32).transform(tokens)
    np.testing.assert_array_equal(X.toarray(), np.hstack([*expected, hashed.toarray()]))
    names = list(fitted.transform(frame(rows[:1]), backend=backend).feature_names)
    assert names[: len(mlb_t.classes_)] == [f"t={c}" for c in mlb_t.classes_]
