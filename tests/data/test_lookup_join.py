"""The vectorized left join of ``fastprep.data.lookup_join`` equals ``pandas.merge(how=
"left")`` on every path: text keys (distinct values mapped, codes gathered), number keys on
a regular grid (one division) and off it (binary search), several keys combined, the dense
code space and the binary-searched one, missing and absent keys."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fastprep.data import lookup_join
from fastprep.data.columns import TextColumn
from fastprep.data.lookup_join import LookupTable


def text(values) -> TextColumn:
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return TextColumn(codes.astype(np.int32), np.asarray(uniques, dtype=object))


def column(values, is_text):
    return text(values) if is_text else np.asarray(values, dtype=np.float64)


def peer(left: pd.DataFrame, right: pd.DataFrame, keys: list[str]) -> pd.Series:
    merged = left.merge(right.assign(_row=np.arange(len(right))), on=keys, how="left")
    assert len(merged) == len(left)
    return merged["_row"].fillna(-1).to_numpy(np.int64)


@pytest.mark.parametrize("renumber", [False, True])
@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize(
    "kinds",
    [("text",), ("grid",), ("float",), ("text", "grid"), ("grid", "float", "text")],
)
def test_rows_equal_pandas_merge(kinds, dense, renumber, monkeypatch):
    if not dense:
        monkeypatch.setattr(lookup_join, "DENSE_CODES", 1)
    if renumber:  # every key column's prefix renumbered, as past an int64 code space
        monkeypatch.setattr(lookup_join, "CODE_SPACE", 1)
    rng = np.random.default_rng(7)
    n_side, n_rows = 400, 5_000
    pools = {
        "text": np.array([f"k{i}" for i in range(60)], dtype=object),
        "grid": 1_357_020_000.0 + 3600.0 * np.arange(60),
        "float": rng.normal(size=60).round(3),
    }
    side = pd.DataFrame({f"c{i}": rng.choice(pools[k], n_side) for i, k in enumerate(kinds)})
    side = side.drop_duplicates().reset_index(drop=True)
    keys = list(side.columns)
    left = pd.DataFrame({f"c{i}": rng.choice(pools[k], n_rows) for i, k in enumerate(kinds)})
    for name, kind in zip(keys, kinds, strict=True):  # absent, off-grid and missing values
        absent = "zz" if kind == "text" else pools[kind][0] + 0.5
        left.loc[rng.choice(n_rows, 200, replace=False), name] = absent
        left.loc[rng.choice(n_rows, 200, replace=False), name] = None if kind == "text" else np.nan
    table = LookupTable("t", tuple(keys),
                        tuple(column(side[k], kd == "text") for k, kd in zip(keys, kinds)),
                        {})  # fmt: skip
    table.check_unique(np.arange(len(side)))
    rows = table.rows_for([column(left[k], kd == "text") for k, kd in zip(keys, kinds)])
    missing = left.isna().any(axis=1).to_numpy()
    expected = peer(left, side, keys)
    expected[missing] = -1  # pandas matches NaN keys to NaN keys; a lookup never has them
    np.testing.assert_array_equal(rows, expected)


def test_gathered_values_and_round_trip():
    side = LookupTable("p", ("k",), (text(["a", "b", "c"]),),
                       {"n": np.array([1.0, np.nan, 3.0]), "s": text(["x", None, "z"])})  # fmt: skip
    joined = side.join([text(["c", None, "a", "q", "b"])], ["n", "s"])
    np.testing.assert_array_equal(joined["n"], [3.0, np.nan, 1.0, np.nan, np.nan])
    assert list(joined["s"].values()) == ["z", None, "x", None, None]
    again = LookupTable.from_dict(side.to_dict())
    np.testing.assert_array_equal(again.join([text(["b", "c"])], ["n"])["n"], [np.nan, 3.0])


def test_duplicates_are_named():
    side = LookupTable("p", ("k", "t"), (text(["a", "a", "b", "a"]), np.array([1.0, 2, 1, 1])), {})
    with pytest.raises(ValueError, match=r"k='a', t=1.0 at rows 10, 13"):
        side.check_unique(np.array([10, 11, 12, 13]))


def test_digest_follows_the_content():
    side = LookupTable("p", ("k",), (text(["a", "b"]),), {"n": np.array([1.0, 2.0])})
    again = LookupTable.from_dict(side.to_dict())
    assert again.digest() == side.digest()
    other = LookupTable("p", ("k",), (text(["a", "b"]),), {"n": np.array([1.0, 3.0])})
    assert other.digest() != side.digest()


def test_round_trip_keeps_every_text_value_whole():
    """Text keys and values that differ only by trailing NULs, and non-ASCII ones, are
    still distinct after the fitted state's round trip (a saved "a\\x00" is not "a")."""
    keys = ["a", "a\x00", "\x00", "", "😀", "ß", "a\x00\x00"]
    side = LookupTable("p", ("k",), (text(keys),),
                       {"s": text(["x\x00", "x", None, "y", "", "\x00", "z"])})  # fmt: skip
    again = LookupTable.from_dict(side.to_dict())
    probe = text(["a\x00", "a", "\x00", "", "a\x00\x00", "😀", "b"])
    assert list(again.join([probe], ["s"])["s"].values()) == ["x", "x\x00", None, "y", "z", "",
                                                              None]  # fmt: skip
    assert again.digest() == side.digest()


@pytest.mark.parametrize("dense", [True, False])
def test_a_key_space_beyond_int64_equals_pandas_merge(dense, monkeypatch):
    """Four key columns of 60,000 distinct values each: 60,000**4 combinations overflow an
    int64 code, which must not make two different keys one."""
    if not dense:
        monkeypatch.setattr(lookup_join, "DENSE_CODES", 1)
    rng = np.random.default_rng(3)
    n = 60_000
    keys = [f"c{j}" for j in range(4)]
    side = pd.DataFrame({k: rng.permutation(n) * 7.0 + j for j, k in enumerate(keys)})
    left = side.sample(frac=1.0, random_state=1).reset_index(drop=True)
    left.loc[: n // 3, "c3"] = rng.permutation(left["c3"].to_numpy()[: n // 3 + 1])  # mostly absent
    left.loc[rng.choice(n, 100, replace=False), "c1"] = np.nan
    table = LookupTable("t", tuple(keys), tuple(column(side[k], False) for k in keys), {})
    table.check_unique(np.arange(n))
    rows = table.rows_for([column(left[k], False) for k in keys])
    expected = peer(left, side, keys)
    expected[left.isna().any(axis=1).to_numpy()] = -1
    np.testing.assert_array_equal(rows, expected)


def test_a_state_saved_with_fixed_width_text_still_loads():
    saved = {"name": "p", "key": ["k"],
             "key_values": [{"codes": np.array([0, 1], np.int32), "uniques": np.array(["a", "b"])}],
             "values": {"n": {"numbers": np.array([1.0, 2.0])}}}  # fmt: skip
    table = LookupTable.from_dict(saved)
    np.testing.assert_array_equal(
        table.join([text(["b", "a", "c"])], ["n"])["n"], [2.0, 1.0, np.nan]
    )


def test_malformed_text_arrays_are_refused():
    state = LookupTable("p", ("k",), (text(["a", "b"]),), {"s": text(["x", "y"])}).to_dict()
    state["values"]["s"]["ends"] = np.array([1, 5])  # past the stored bytes
    with pytest.raises(ValueError, match="malformed lookup table"):
        LookupTable.from_dict(state)
