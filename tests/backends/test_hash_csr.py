"""The paths of one hashing call: shared source encoding, gathered vs per-row features, the
two-pass CSR kernels' block boundaries and fallback rows — each bit-identical to sklearn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from test_hashing import _flights, check  # the sklearn reference of the hashing tests

from fastprep.backends.numba import hash_csr, hashing
from fastprep.data import text_encode

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")


def _count_encodes(monkeypatch) -> list[int]:
    """Record the length of every column the call dictionary-encodes."""
    calls: list[int] = []
    real = text_encode.try_encode

    def counting(values, **kwargs):
        calls.append(len(values))
        return real(values, **kwargs)

    monkeypatch.setattr(text_encode, "try_encode", counting)
    return calls


def test_a_column_used_alone_and_in_a_cross_is_encoded_once(monkeypatch) -> None:
    flights = _flights()
    calls = _count_encodes(monkeypatch)
    dest = flights["dest"]
    check(
        [("tailnum", flights["tailnum"]), ("dest", dest)],
        2**18,
        crosses=[
            [("origin", flights["origin"]), ("dest", dest)],
            [("dest", dest), ("tailnum", flights["tailnum"])],
        ],
    )
    assert len(calls) == 3  # tailnum, dest, origin: once each
    # equal values in distinct buffers are distinct sources (encoded apart, still right)
    calls.clear()
    copy = pd.Series(dest.tolist(), dtype="str")
    check([("dest", dest)], 2**10, crosses=[[("origin", flights["origin"]), ("dest", copy)]])
    assert len(calls) == 3


def test_features_are_gathered_or_hashed_per_row() -> None:
    """Repeating columns and their crosses are looked up by code; row IDs are hashed."""
    flights = _flights()
    ids = pd.Series([f"id-{i}" for i in range(len(flights))], dtype="str")
    feats = [
        (["dest"], [hashing._to_arrow("dest", flights["dest"])[1]]),
        (["id"], [hashing._to_arrow("id", ids)[1]]),
        (["origin", "dest"], [hashing._to_arrow(c, flights[c])[1] for c in ("origin", "dest")]),
    ]
    from fastprep.backends.numba import murmur as mm

    fm = np.array([0, 8, 0, 1])
    m, imin = mm.fastmod_params(8)
    fm[0], fm[2] = np.int64(m.view(np.int64)), imin
    strings = hashing._Strings(mm, feats, fm, len(flights))
    assert [k for k, _ in strings.kinds] == [hash_csr.GATHERED, hash_csr.DIRECT, hash_csr.GATHERED]
    check(
        [("dest", flights["dest"]), ("id", ids)],
        2**20,
        crosses=[[("origin", flights["origin"]), ("dest", flights["dest"])]],
    )


def test_first_rows_with_many_distinct_values_fall_back_to_per_row(monkeypatch) -> None:
    """A column whose encoder finds many distinct values in its first rows (here: distinct
    first rows, then repeats) is hashed per row instead."""
    monkeypatch.setattr(text_encode, "PROBE_ROWS", 4096)
    n = 40_000
    values = [f"v{i}" for i in range(4096)] + [f"r{i % 50}" for i in range(n - 4096)]
    col = pd.Series(values, dtype="str")
    assert text_encode.try_encode(pa.chunked_array([pa.array(values, pa.large_string())])) is None
    feats = [(["c"], [hashing._to_arrow("c", col)[1]])]
    from fastprep.backends.numba import murmur as mm

    m, imin = mm.fastmod_params(2**10)
    fm = np.array([np.int64(m.view(np.int64)), 2**10, imin, 1])
    assert hashing._Strings(mm, feats, fm, n).kinds == [(hash_csr.DIRECT, 0)]
    check([("c", col)], 2**10, crosses=[[("c", col), ("d", col.str.slice(0, 2))]])


@pytest.mark.parametrize("all_combinations", [True, False], ids=["all", "present"])
def test_cross_tables_of_all_or_present_combinations(monkeypatch, all_combinations) -> None:
    if not all_combinations:
        monkeypatch.setattr(hashing, "_HASH_ALL_COMBINATIONS", 0)
    flights = _flights()
    check(
        [],
        2**16,
        crosses=[
            [("origin", flights["origin"]), ("tailnum", flights["tailnum"])],
            [
                ("carrier", flights["carrier"]),
                ("origin", flights["origin"]),
                ("dest", flights["dest"]),
            ],
        ],
    )


def test_collisions_numbers_and_long_rows() -> None:
    """n_features small enough that rows collide (the merge path), numbers (values not 1),
    more than 3 entries per row, rows of 1-3 entries with distinct indices (registers)."""
    flights = _flights().iloc[:3001].copy()
    flights.loc[flights.index[::7], "tailnum"] = None
    flights.loc[flights.index[6::7], "dep_delay"] = 0.0
    cols = [
        ("tailnum", flights["tailnum"]),
        ("dest", flights["dest"]),
        ("dep_delay", flights["dep_delay"].to_numpy()),
        ("distance", flights["distance"].to_numpy(dtype=np.float64) / 3),
    ]
    crosses = [[("origin", flights["origin"]), ("dest", flights["dest"])]]
    for n_features in (1, 3, 17, 2**18):
        for alternate_sign in (True, False):
            check(cols, n_features, crosses=crosses, alternate_sign=alternate_sign)
    check(cols[:2], 5, crosses=crosses, dtype=np.float64)


def test_kernels_directly_on_block_edges() -> None:
    """Row counts straddling ``BLOCK``: every row written exactly where indptr says."""
    n = 3 * hash_csr.BLOCK + 5
    rng = np.random.default_rng(0)
    vals = rng.choice(["a", "b", "c", None], n).tolist()
    nums = rng.choice([0.0, np.nan, 1.5, -2.0], n)
    s = pd.Series(vals, dtype="str")
    check(
        [("s", s), ("x", nums)], 4, crosses=[[("s", s), ("t", pd.Series(vals[::-1], dtype="str"))]]
    )


@pytest.mark.parametrize("n_features", [1, 2, 7, 64, 2**20])
def test_sign_only_rows_keep_their_sorted_codes(monkeypatch, n_features) -> None:
    """String features only: the first pass keeps each row's sorted codes and the second
    expands them; rows whose entries collide (small n_features) are merged again, in
    sklearn's order, across block edges, with missing members and per-row hashed rows."""
    passes: list[str] = []
    for name in ("sort_rows", "fill_sorted", "count_rows", "fill_rows"):
        real = getattr(hash_csr, name)
        monkeypatch.setattr(
            hash_csr, name, lambda *a, _real=real, _name=name: (passes.append(_name), _real(*a))
        )
    flights = _flights().iloc[: 2 * hash_csr.BLOCK + 11].copy()
    flights.loc[flights.index[::5], "tailnum"] = None
    ids = pd.Series([f"id-{i % 4000}-{i}" for i in range(len(flights))], dtype="str")
    for alternate_sign in (True, False):
        check(
            [("tailnum", flights["tailnum"]), ("dest", flights["dest"]), ("id", ids)],
            n_features,
            crosses=[[("origin", flights["origin"]), ("dest", flights["dest"])]],
            alternate_sign=alternate_sign,
        )
    assert set(passes) == {"sort_rows", "fill_sorted"}


@pytest.mark.parametrize("by_row", [False, True], ids=["gathered", "hashed-per-row"])
def test_text_columns_as_validation_encoded_them(monkeypatch, by_row) -> None:
    """A ``TextColumn`` (codes + distinct values from validation) hashes exactly like the
    strings it stands for, alone and in crosses — also when a cross is too large for a
    table and each row's bytes are hashed (the column goes back to Arrow then)."""
    from fastprep.backends.numba import hash_codes
    from fastprep.data.columns import TextColumn

    if by_row:
        monkeypatch.setattr(hash_codes, "MAX_COMBINATIONS", 0)
    flights = _flights()

    def encoded(name: str) -> TextColumn:
        codes, uniques = text_encode.encode(pa.chunked_array([pa.array(flights[name])]))
        return TextColumn(codes, uniques)

    tailnum, dest, origin = encoded("tailnum"), encoded("dest"), encoded("origin")
    got = hashing.hash_columns(
        [("tailnum", tailnum), ("dest", dest)], 2**18,
        crosses=[[("origin", origin), ("dest", dest)]],
    )  # fmt: skip
    want = check(
        [("tailnum", flights["tailnum"]), ("dest", flights["dest"])], 2**18,
        crosses=[[("origin", flights["origin"]), ("dest", flights["dest"])]],
    )  # fmt: skip
    assert (got != want).nnz == 0 and np.array_equal(got.indices, want.indices)
