"""Work reused for the same Arrow buffers while the source lives (``data/reuse.py``): a
fitted pipeline transforming the table it was fit on encodes nothing again, and nothing
is ever reused for other data (new buffers, a replaced column, a dead source)."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import REPO

import fastprep as fp
from fastprep.data import reuse, text_encode

SAMPLE = REPO / "data_samples" / "flights.parquet"


def copied(table: pa.Table) -> pa.Table:
    """The same values in new buffers."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_stream(sink.getvalue()).read_all()


@pytest.fixture
def table() -> pa.Table:
    return pq.read_table(SAMPLE, columns=["carrier", "tailnum", "dep_delay"])


def counting(monkeypatch) -> list[int]:
    """Calls of the text encoder's work (not of its cache)."""
    calls: list[int] = []
    real = text_encode._encode_any

    def spy(values, out=None):
        calls.append(len(values))
        return real(values, out)

    monkeypatch.setattr(text_encode, "_encode_any", spy)
    return calls


def test_same_buffers_reuse_within_the_owners_scope(table, monkeypatch):
    calls = counting(monkeypatch)
    column = table.column("tailnum")
    with reuse.scope(table):
        first = text_encode.encode(column)
        again = text_encode.encode(table.column("tailnum"))  # a new wrapper, same buffers
    assert again[0] is first[0] and again[1] is first[1] and len(calls) == 1
    assert not first[0].flags.writeable  # shared: nobody may write to it
    with reuse.scope(table):
        other = text_encode.encode(copied(table).column("tailnum"))  # equal values, new buffers
    assert len(calls) == 2 and other[0] is not first[0]
    np.testing.assert_array_equal(other[0], first[0])
    text_encode.encode(column)  # outside a scope: computed, not kept
    assert len(calls) == 3


def test_a_slice_or_other_chunks_of_the_same_buffers_is_not_the_same_column(table, monkeypatch):
    calls = counting(monkeypatch)
    column = table.column("carrier")
    with reuse.scope(table):
        whole = text_encode.encode(column)
        part = text_encode.encode(column.slice(5, 100))
    assert len(calls) == 2
    np.testing.assert_array_equal(
        np.asarray(part[1].to_pylist(), dtype=object)[part[0]],
        np.asarray(whole[1].to_pylist(), dtype=object)[whole[0][5:105]],
    )


def test_entries_die_with_their_owner(table):
    owner = copied(table)
    with reuse.scope(owner):
        text_encode.encode(owner.column("carrier"))
    key = id(owner)
    assert reuse._OWNERS[key]
    del owner
    gc.collect()
    assert key not in reuse._OWNERS


def test_an_owner_that_cannot_be_weakly_referenced_keeps_nothing(table, monkeypatch):
    calls = counting(monkeypatch)
    with reuse.scope(("a", "tuple")):
        assert not reuse.active()
        text_encode.encode(table.column("carrier"))
        text_encode.encode(table.column("carrier"))
    assert len(calls) == 2


def pipeline() -> fp.Pipeline:
    schema = fp.Schema({"carrier": fp.Category(), "tailnum": fp.String(nullable=True),
                        "dep_delay": fp.Float(nullable=True)})  # fmt: skip
    return fp.Pipeline(schema, [
        fp.cols("carrier", "tailnum") >> fp.GroupStats("dep_delay", stats=("mean", "median")),
        fp.col("tailnum") >> fp.CountEncode(),
        fp.col("dep_delay") >> fp.FillMissing(0) >> fp.Standardize(),
    ])  # fmt: skip


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_fit_then_transform_of_one_table_encodes_once_and_equals_a_fresh_run(
    table, backend, monkeypatch
):
    calls = counting(monkeypatch)
    fitted = pipeline().fit(table, backend=backend)
    out = fitted.transform(table, backend=backend)
    assert len(calls) == 2  # carrier and tailnum, at fit only
    fresh = fitted.transform(copied(table), backend=backend)
    np.testing.assert_array_equal(out.X, fresh.X)
    # other values, same schema: their own encoding, their own output
    other = table.take(np.arange(table.num_rows)[::-1].copy())
    reversed_out = fitted.transform(other, backend=backend)
    np.testing.assert_array_equal(reversed_out.X, out.X[::-1])


def test_a_pandas_column_replaced_is_encoded_again(monkeypatch):
    frame = pd.read_parquet(SAMPLE, columns=["carrier", "tailnum", "dep_delay"])
    fitted = pipeline().fit(frame)
    before = fitted.transform(frame).X
    frame["tailnum"] = frame["tailnum"].iloc[::-1].to_numpy()  # same frame, new column
    after = fitted.transform(frame).X
    expected = fitted.transform(frame.copy(deep=True)).X
    np.testing.assert_array_equal(after, expected)
    assert not np.array_equal(after, before)


def test_dictionary_typed_columns_give_what_their_strings_give(table):
    as_dictionary = pa.table({
        "carrier": table.column("carrier").dictionary_encode(),
        "tailnum": table.column("tailnum").dictionary_encode(),
        "dep_delay": table.column("dep_delay"),
    })  # fmt: skip
    fitted = pipeline().fit(table)
    fitted_dict = pipeline().fit(as_dictionary)
    np.testing.assert_array_equal(fitted.transform(table).X, fitted_dict.transform(as_dictionary).X)
    np.testing.assert_array_equal(fitted.transform(table).X, fitted.transform(as_dictionary).X)


def test_number_checks_are_never_reused_a_numpy_array_under_arrow_may_change():
    # pa.table over a numpy array is zero-copy: the caller writing to the array changes
    # the table's values in the same buffers, so the transform must check them again
    values = np.arange(1_000, dtype=np.float64)
    source = pa.table({"x": values, "y": np.arange(1_000) % 2 == 0})
    schema = fp.Schema({"x": fp.Float(min=0), "y": fp.Bool()})
    pipe = fp.Pipeline(schema, [fp.col("x") >> fp.Standardize()], target=fp.col("y"))
    fitted = pipe.fit(source)
    values[0] = -5.0  # breaks min=0, in the table's own buffer
    out = fitted.transform(source)
    assert out.X.shape[0] == 999 and len(out.quarantine) == 1
