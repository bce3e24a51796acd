"""fp.Dict: a column of dicts hashed or vectorized, against sklearn itself, bit for bit.

Real rows: dicts built from the flights sample (carrier, dest, tailnum, distance,
dep_delay), plus adversarial keys/values. Both backends run every case.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction import DictVectorizer, FeatureHasher

import fastprep as fp
from fastprep.errors import DataValidationError, PipelineDefinitionError, SchemaError

BACKENDS = ("pandas", "numba")
N_HASH = 2**18


def flights_dicts(frame: pd.DataFrame) -> list[dict]:
    """One dict per flight; a missing tailnum/dep_delay leaves its key out."""
    rows = []
    for c, d, t, dist, delay in zip(frame.carrier, frame.dest, frame.tailnum, frame.distance,
                                    frame.dep_delay):  # fmt: skip
        row = {"carrier": c, "dest": d, "distance": float(dist)}
        if isinstance(t, str):
            row["tailnum"] = t
        if delay == delay:
            row["dep_delay"] = float(delay)
        rows.append(row)
    return rows


ADVERSARIAL = [
    {"": "empty key", "e": ""},
    {"ключ": "значение", "emoji": "🛫✈️", "ñ": 1.5},
    {"long": "x" * 5000, "k" * 3000: 2.0},
    {"a=b": 3.0, "a": "b"},  # both give the token/name "a=b"
    {"eq": "v=w=", "=": "="},
    {"zero": 0.0, "neg": -7.25, "flag": True, "big": 1e30},
    {},
    {"a": "b", "c": 1},
]


def same_csr(a: sp.csr_matrix, b: sp.csr_matrix) -> None:
    assert a.shape == b.shape
    assert a.dtype == b.dtype == np.float32
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data.view(np.uint32), b.data.view(np.uint32))


def run(rows: list, features, backend: str, fit_rows: list | None = None, **schema_kw):
    schema = fp.Schema({"extras": fp.DictOf(**schema_kw)})
    pipe = fp.Pipeline(schema=schema, features=features)
    fit_frame = pd.DataFrame({"extras": fit_rows if fit_rows is not None else rows})
    fitted = pipe.fit(fit_frame, backend=backend)
    return fitted, fitted.transform(pd.DataFrame({"extras": rows}), backend=backend)


@pytest.fixture
def flight_rows(flights_sample: pd.DataFrame) -> list[dict]:
    return flights_dicts(flights_sample)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("alternate_sign", [True, False])
def test_hash_equals_feature_hasher_on_flights(flight_rows, backend, alternate_sign):
    _, out = run(flight_rows, [fp.Dict("extras") >> fp.Hash(N_HASH, alternate_sign)], backend)
    ref = FeatureHasher(N_HASH, input_type="dict", alternate_sign=alternate_sign,
                        dtype=np.float32).transform(flight_rows)  # fmt: skip
    same_csr(out.X, sp.csr_matrix(ref))
    assert out.X.nnz > 4 * len(flight_rows)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vectorize_equals_dict_vectorizer_with_unseen_keys(flight_rows, backend):
    fit_rows = flight_rows[:12000]
    _, out = run(flight_rows, [fp.Dict("extras") >> fp.Vectorize()], backend, fit_rows)
    dv = DictVectorizer(dtype=np.float32, sparse=True).fit(fit_rows)
    same_csr(out.X, dv.transform(flight_rows))
    names = [n.removeprefix("extras:") for n in out.feature_names]
    assert names == dv.get_feature_names_out().tolist()
    unseen = {r["tailnum"] for r in flight_rows[12000:] if "tailnum" in r} - {
        r.get("tailnum") for r in fit_rows
    }
    assert unseen and not any(f"tailnum={t}" in names for t in unseen)


@pytest.mark.parametrize("backend", BACKENDS)
def test_adversarial_keys_and_values(backend):
    rows = ADVERSARIAL * 3
    _, out = run(rows, [fp.Dict("extras") >> fp.Hash(2**12), fp.Dict("extras") >> fp.Vectorize()],
                 backend)  # fmt: skip
    ref = FeatureHasher(2**12, input_type="dict", dtype=np.float32).transform(rows)
    same_csr(out.X[:, : 2**12], sp.csr_matrix(ref))
    dv = DictVectorizer(dtype=np.float32).fit(rows)
    expected = dv.transform(rows)
    expected.sum_duplicates()  # {"a=b": 3, "a": "b"}: DictVectorizer keeps both entries
    same_csr(out.X[:, 2**12 :], sp.csr_matrix(expected))
    assert [n.removeprefix("extras:") for n in out.feature_names[2**12 :]] == (
        dv.get_feature_names_out().tolist()
    )


def test_backends_identical_and_collisions_summed(flight_rows):
    outs = [run(flight_rows[:3000], [fp.Dict("extras") >> fp.Hash(7)], b)[1].X for b in BACKENDS]
    same_csr(outs[0], outs[1])
    ref = FeatureHasher(7, input_type="dict", dtype=np.float32).transform(flight_rows[:3000])
    same_csr(outs[1], sp.csr_matrix(ref))  # duplicates summed, cancelled entries kept as 0


BAD = [
    {"carrier": "UA", "distance": 1400.0},  # 0 ok
    "UA",  # 1 not a dict
    {3: 1.0},  # 2 non-string key
    {"carrier": 7.0},  # 3 carrier is a string elsewhere: mixed types
    {"distance": float("inf")},  # 4 not finite
    {"distance": float("nan")},  # 5 not finite
    {"carrier": ["UA", "AA"]},  # 6 value of an unsupported type
    None,  # 7 missing row
    {"carrier": "AA", "distance": None},  # 8 ok: a None value means the key is absent
    {"carrier": "B6", "x\ud800": 1.0},  # 9 a key that is not valid Unicode
    {"carrier": "DL"},  # 10 ok
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_rows_quarantined_with_findings(backend):
    _, out = run(BAD, [fp.Dict("extras") >> fp.Vectorize()], backend)
    rules = {f.rule: list(f.first_rows) for f in out.report.findings if f.column == "extras"}
    assert rules == {
        "type": [1], "dict_key_type": [2], "dict_mixed_types": [3], "not_finite": [4, 5],
        "dict_value_type": [6], "null": [7], "encoding": [9],
    }  # fmt: skip
    assert out.row_ids.tolist() == [0, 8, 10]
    assert sorted(out.quarantine["row_id"].unique().tolist()) == [1, 2, 3, 4, 5, 6, 7, 9]
    good = [BAD[0], {"carrier": "AA"}, BAD[10]]
    same_csr(out.X, DictVectorizer(dtype=np.float32).fit(good).transform(good))


def test_raise_policy_names_column_rule_and_rows():
    with pytest.raises(DataValidationError, match=r"'extras'.*'type'.*first rows 1"):
        run(BAD, [fp.Dict("extras") >> fp.Hash(64)], "numba", on_invalid="raise")


@pytest.mark.parametrize("backend", BACKENDS)
def test_nullable_missing_rows_are_empty_and_declared_value_type(backend):
    rows = [{"a": 1.0}, None, {"a": "x"}, {"b": "y"}]
    _, out = run(rows, [fp.Dict("extras") >> fp.Hash(64)], backend, nullable=True,
                 values="number")  # fmt: skip
    assert out.row_ids.tolist() == [0, 1]  # row 2: "x" is not a number; row 3 neither
    same_csr(out.X, sp.csr_matrix(
        FeatureHasher(64, input_type="dict", dtype=np.float32).transform([{"a": 1.0}, {}])
    ))  # fmt: skip


def test_warn_keeps_rows_without_the_bad_entries():
    rows = [{"a": 1.0, "b": float("inf")}, {"a": 2.0}]
    _, out = run(rows, [fp.Dict("extras") >> fp.Hash(64)], "numba", on_invalid="warn")
    assert out.row_ids.tolist() == [0, 1]
    ref = FeatureHasher(64, input_type="dict", dtype=np.float32).transform([{"a": 1.0}, {"a": 2.0}])
    same_csr(out.X, sp.csr_matrix(ref))


def test_column_without_any_dict_is_a_schema_error():
    with pytest.raises(SchemaError, match="'extras' is declared DictOf"):
        run(["a", "b"], [fp.Dict("extras") >> fp.Hash(64)], "pandas")


def test_definition_errors():
    schema = fp.Schema({"extras": fp.DictOf(), "dest": fp.Category()})
    with pytest.raises(PipelineDefinitionError, match=r"Vectorize.*'dest' is category"):
        fp.Pipeline(schema=schema, features=[fp.col("dest") >> fp.Vectorize()])
    with pytest.raises(PipelineDefinitionError, match="column of dicts"):
        fp.Pipeline(schema=schema, features=[fp.Dict("extras") >> fp.OneHot()])
    with pytest.raises(PipelineDefinitionError, match="encoded alone"):
        fp.Pipeline(schema=schema, features=[fp.cols("extras", "dest") >> fp.Hash(8)])
    with pytest.raises(PipelineDefinitionError, match="DictOf\\(values="):
        fp.DictOf(values="text")


def test_vocabulary_saved_and_loaded(tmp_path, flight_rows):
    fitted, out = run(flight_rows[:2000], [fp.Dict("extras") >> fp.Vectorize()], "numba")
    fitted.save(tmp_path / "state")
    again = fp.load(tmp_path / "state").transform(pd.DataFrame({"extras": flight_rows[:2000]}))
    same_csr(again.X, out.X)
    assert list(again.feature_names) == list(out.feature_names)


def _parquet_frames(flight_rows: list[dict]):
    """The flights dicts as map<string, double> and list<struct<key, value>> columns."""
    numeric = [{k: v for k, v in r.items() if not isinstance(v, str)} for r in flight_rows]
    pairs = [list(r.items()) for r in numeric]
    as_map = pa.array(pairs, type=pa.map_(pa.string(), pa.float64()))
    structs = [[{"key": k, "value": v} for k, v in r.items()] for r in flight_rows]
    as_list = pa.array(
        [[{"key": s["key"], "value": str(s["value"])} for s in row] for row in structs],
        type=pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])),
    )
    texts = [{k: str(v) for k, v in r.items()} for r in flight_rows]
    return numeric, as_map, texts, as_list


@pytest.mark.parametrize("backend", BACKENDS)
def test_parquet_map_and_list_of_structs(tmp_path, flight_rows, backend):
    numeric, as_map, texts, as_list = _parquet_frames(flight_rows[:4000])
    for rows, column in ((numeric, as_map), (texts, as_list)):
        path = tmp_path / "dicts.parquet"
        pq.write_table(pa.table({"extras": column}), path)
        pipe = fp.Pipeline(
            schema=fp.Schema({"extras": fp.DictOf()}),
            features=[fp.Dict("extras") >> fp.Hash(N_HASH), fp.Dict("extras") >> fp.Vectorize()],
        )
        out = pipe.fit(str(path), backend=backend).transform(str(path), backend=backend)
        ref = FeatureHasher(N_HASH, input_type="dict", dtype=np.float32).transform(rows)
        same_csr(out.X[:, :N_HASH], sp.csr_matrix(ref))
        same_csr(out.X[:, N_HASH:], DictVectorizer(dtype=np.float32).fit_transform(rows))


def test_parquet_struct_column(tmp_path, flights_sample):
    frame = flights_sample.head(3000)
    table = pa.table({"extras": pa.StructArray.from_arrays(
        [pa.array(frame.carrier), pa.array(frame.distance.astype(float))], ["carrier", "distance"]
    )})  # fmt: skip
    pq.write_table(table, tmp_path / "s.parquet")
    rows = [{"carrier": c, "distance": float(d)} for c, d in zip(frame.carrier, frame.distance)]
    pipe = fp.Pipeline(schema=fp.Schema({"extras": fp.DictOf()}),
                       features=[fp.Dict("extras") >> fp.Vectorize()])  # fmt: skip
    out = pipe.fit(str(tmp_path / "s.parquet")).transform(str(tmp_path / "s.parquet"))
    same_csr(out.X, DictVectorizer(dtype=np.float32).fit_transform(rows))


def test_duplicate_map_keys_and_declared_string_values(tmp_path):
    column = pa.array(
        [[("a", 1.0), ("a", 2.0)], [("b", 3.0)]], type=pa.map_(pa.string(), pa.float64())
    )
    pq.write_table(pa.table({"extras": column}), tmp_path / "m.parquet")
    pipe = fp.Pipeline(schema=fp.Schema({"extras": fp.DictOf()}),
                       features=[fp.Dict("extras") >> fp.Hash(64)])  # fmt: skip
    out = pipe.fit(str(tmp_path / "m.parquet")).transform(str(tmp_path / "m.parquet"))
    assert [(f.rule, list(f.first_rows)) for f in out.report.findings if f.column == "extras"] == [
        ("dict_duplicate_key", [0])
    ]
    _, out = run([{"a": "x"}, {"a": 1.0}, {"b": "y"}], [fp.Dict("extras") >> fp.Hash(64)],
                 "numba", values="string")  # fmt: skip
    assert out.row_ids.tolist() == [0, 2]


def test_schema_infer_finds_dict_columns(flight_rows):
    frame = pd.DataFrame({"extras": flight_rows[:100] + [None]})
    assert fp.Schema.infer(frame)["extras"] == fp.DictOf(nullable=True)
