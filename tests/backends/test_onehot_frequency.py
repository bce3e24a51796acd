"""``OneHot(min_frequency=, max_categories=)`` against sklearn's ``OneHotEncoder(
handle_unknown="infrequent_if_exist")`` on real flights columns, compared exactly (CSR arrays,
never densified: some of these blocks are thousands of columns wide).

Column order: kept categories (sorted), ``col=<missing>`` if missing was seen at fit, then
``col=<infrequent>`` if some category was infrequent at fit — sklearn's order, where missing
is its last category and the infrequent column comes last. Differences (docs/decisions.md):
our ``max_categories=k`` is sklearn's ``k + 1`` (sklearn counts its infrequent column), count
ties at the cut keep the smaller value, and missing is never infrequent here (sklearn's
OneHotEncoder ranks missing like a category).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import OneHotEncoder

import fastprep as fp

SCHEMA = fp.Schema(
    {
        "tailnum": fp.String(nullable=True),
        "dest": fp.String(),
        "carrier": fp.Category(),
        "hour": fp.Int(),
    }
)


def sklearn_onehot(fit: pd.Series, apply: pd.Series, min_frequency=1, max_categories=None):
    """sklearn's matrix (CSR float32) and names rewritten to fastprep's spelling."""
    encoder = OneHotEncoder(
        handle_unknown="infrequent_if_exist",
        min_frequency=min_frequency,
        max_categories=None if max_categories is None else max_categories + 1,
        sparse_output=True,
        dtype=np.float32,
    )
    as_object = lambda s: s.astype(object).where(s.notna(), np.nan).to_frame()  # noqa: E731
    if pd.api.types.is_integer_dtype(fit.dtype):
        as_object = lambda s: s.to_frame()  # noqa: E731
    encoder.fit(as_object(fit))
    matrix = sp.csr_matrix(encoder.transform(as_object(apply)))
    name = fit.name
    labels = [str(n)[len(name) + 1 :] for n in encoder.get_feature_names_out()]
    spelled = {"nan": "<missing>", "infrequent_sklearn": "<infrequent>"}
    return matrix, [f"{name}={spelled.get(label, label)}" for label in labels]


def ours(frame, column, fit_frame=None, backend="pandas", **kwargs):
    step = fp.OneHot(sparse=True, **kwargs)
    fitted = fp.Pipeline(SCHEMA, [fp.col(column) >> step]).fit(
        frame if fit_frame is None else fit_frame, backend=backend
    )
    return fitted, fitted.transform(frame, backend=backend)


def assert_same_csr(a, b) -> None:
    a, b = sp.csr_matrix(a), sp.csr_matrix(b)
    a.sort_indices()
    b.sort_indices()
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    assert np.array_equal(a.indptr, b.indptr)
    assert np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.data, b.data)


def untied_cut(series: pd.Series, wanted: int) -> int:
    counts = series.dropna().value_counts().to_numpy()
    for k in range(wanted, len(counts) - 1):
        if counts[k - 1] != counts[k]:
            return k
    raise AssertionError("no untied cut")


@pytest.mark.parametrize(
    ("column", "min_frequency"),
    [("tailnum", 5), ("tailnum", 40), ("dest", 100), ("carrier", 500), ("hour", 900)],
)
def test_min_frequency_equals_sklearn(flights_sample, column, min_frequency):
    # tailnum's 156 missing values are frequent at these thresholds, as sklearn needs
    fit_rows = flights_sample.iloc[:14000]
    _, out = ours(flights_sample, column, fit_frame=fit_rows, min_frequency=min_frequency)
    matrix, names = sklearn_onehot(fit_rows[column], flights_sample[column], min_frequency)
    assert list(out.feature_names) == names
    assert names[-1] == f"{column}=<infrequent>"
    assert_same_csr(out.X, matrix)


@pytest.mark.parametrize(("column", "wanted"), [("dest", 20), ("carrier", 6), ("hour", 8)])
def test_max_categories_equals_sklearn_plus_one(flights_sample, column, wanted):
    k = untied_cut(flights_sample[column], wanted)
    fit_rows = flights_sample.iloc[:14000]
    k = untied_cut(fit_rows[column], k)
    _, out = ours(flights_sample, column, fit_frame=fit_rows, max_categories=k)
    matrix, names = sklearn_onehot(fit_rows[column], flights_sample[column], max_categories=k)
    assert len(names) == k + 1
    assert list(out.feature_names) == names
    assert_same_csr(out.X, matrix)


def test_both_limits_with_missing_values(flights_sample):
    fit_rows = flights_sample.iloc[:14000]
    _, out = ours(flights_sample, "tailnum", fit_frame=fit_rows, min_frequency=10)
    matrix, names = sklearn_onehot(fit_rows["tailnum"], flights_sample["tailnum"], 10)
    assert names[-2:] == ["tailnum=<missing>", "tailnum=<infrequent>"]
    assert list(out.feature_names) == names
    assert_same_csr(out.X, matrix)
    # every row has exactly one 1: a category, <missing> or <infrequent>
    assert np.array_equal(out.X.indptr, np.arange(len(flights_sample) + 1))


def test_without_rare_categories_unseen_is_all_zeros(flights_sample):
    fit_rows = flights_sample.iloc[:3000]
    fitted, out = ours(flights_sample, "dest", fit_frame=fit_rows, min_frequency=1)
    assert fitted.params[0]["dest"][-1]["infrequent"] == 0
    assert not any(n.endswith("<infrequent>") for n in out.feature_names)
    unseen = ~flights_sample["dest"].isin(set(fit_rows["dest"])).to_numpy()
    assert unseen.any() and (out.X.getnnz(axis=1)[unseen] == 0).all()


def test_default_is_unchanged(flights_sample):
    _, out = ours(flights_sample, "dest")
    assert fp.OneHot() == fp.OneHot(min_frequency=1, max_categories=None, sparse=None)
    encoder = OneHotEncoder(handle_unknown="ignore", dtype=np.float32).fit(
        flights_sample[["dest"]].astype(object)
    )
    assert list(out.feature_names) == [f"dest={c}" for c in encoder.categories_[0]]
    assert_same_csr(out.X, encoder.transform(flights_sample[["dest"]].astype(object)))


def test_missing_not_seen_at_fit_goes_where_unseen_values_go():
    schema = fp.Schema({"s": fp.String(nullable=True)})
    fit = pd.DataFrame({"s": ["a", "a", "b", "c", "c"]})
    apply = pd.DataFrame({"s": pd.Series(["a", None, "zz", "b", "c"], dtype=object)})
    rare = fp.Pipeline(schema, [fp.col("s") >> fp.OneHot(min_frequency=2)]).fit(fit)
    out = rare.transform(apply)
    assert list(out.feature_names) == ["s=a", "s=c", "s=<infrequent>"]
    expected = [[1, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 1], [0, 1, 0]]
    assert out.X.tolist() == expected
    encoder = OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=2).fit(
        fit.astype(object)
    )
    sk = encoder.transform(apply.astype(object).where(apply.notna(), np.nan)).toarray()
    assert sk.tolist() == expected
    plain = fp.Pipeline(schema, [fp.col("s") >> fp.OneHot()]).fit(fit).transform(apply)
    assert plain.X[1].tolist() == [0, 0, 0] and plain.X[2].tolist() == [0, 0, 0]


def test_missing_is_never_infrequent_unlike_sklearn():
    schema = fp.Schema({"s": fp.String(nullable=True)})
    frame = pd.DataFrame({"s": pd.Series(["a", "a", None, "b"], dtype=object)})
    out = fp.Pipeline(schema, [fp.col("s") >> fp.OneHot(min_frequency=2)]).fit_transform(frame)
    assert list(out.feature_names) == ["s=a", "s=<missing>", "s=<infrequent>"]
    assert out.X.tolist() == [[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    # sklearn's OneHotEncoder counts the single missing value as infrequent
    encoder = OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=2)
    sk = encoder.fit_transform(frame.astype(object).where(frame.notna(), np.nan))
    assert list(encoder.get_feature_names_out()) == ["s_a", "s_infrequent_sklearn"]
    assert sk.toarray()[2].tolist() == [0, 1]


def test_numba_backend_and_dense_output_agree(flights_sample):
    features = [
        fp.col("tailnum") >> fp.OneHot(min_frequency=8),
        fp.cols("carrier", "hour") >> fp.OneHot(max_categories=5, sparse=False),
    ]
    pipeline = fp.Pipeline(SCHEMA, features)
    reference = pipeline.fit_transform(flights_sample, backend="pandas")
    numba = pipeline.fit_transform(flights_sample, backend="numba")
    assert list(numba.feature_names) == list(reference.feature_names)
    assert_same_csr(numba.X, reference.X)
    dense = fp.Pipeline(SCHEMA, features[1:]).fit_transform(flights_sample)
    assert isinstance(dense.X, np.ndarray) and dense.X.shape[1] == 12
    assert np.array_equal(dense.X.sum(axis=1), np.full(len(flights_sample), 2.0))


def test_save_load_transform_identical(flights_sample, tmp_path):
    pipeline = fp.Pipeline(
        SCHEMA, [fp.cols("tailnum", "dest") >> fp.OneHot(min_frequency=3, max_categories=300)]
    )
    fitted = pipeline.fit(flights_sample.iloc[:9000])
    fitted.save(tmp_path / "oh.fastprep")
    again = fp.load(tmp_path / "oh.fastprep")
    assert again.plan.features[0].steps == pipeline.plan.features[0].steps
    assert_same_csr(again.transform(flights_sample).X, fitted.transform(flights_sample).X)
    assert list(again.transform(flights_sample).feature_names) == list(
        fitted.transform(flights_sample).feature_names
    )


def test_state_from_before_the_frequency_options_still_loads(flights_sample, tmp_path):
    """A OneHot saved without ``counts``/``infrequent`` keys means: nothing infrequent."""
    import hashlib
    import json
    import zipfile

    pipeline = fp.Pipeline(SCHEMA, [fp.col("dest") >> fp.OneHot()])
    fitted = pipeline.fit(flights_sample)
    path = tmp_path / "old.fastprep"
    fitted.save(path)
    with zipfile.ZipFile(path) as archive:
        envelope = json.loads(archive.read("state.json"))
        arrays = archive.read("arrays.npz")
    step = envelope["body"]["plan"]["features"][0]["steps"][0]
    envelope["body"]["plan"]["features"][0]["steps"][0] = {"op": "OneHot", "sparse": step["sparse"]}
    vocabulary = envelope["body"]["params"][0]["dest"][0]
    del vocabulary["counts"], vocabulary["infrequent"]
    body = json.dumps(envelope["body"], sort_keys=True, allow_nan=False)
    envelope["body_sha256"] = hashlib.sha256(body.encode()).hexdigest()
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("state.json", json.dumps(envelope))
        archive.writestr("arrays.npz", arrays)
    assert_same_csr(fp.load(path).transform(flights_sample).X, fitted.transform(flights_sample).X)


@pytest.mark.parametrize(
    "kwargs", [{"min_frequency": 0}, {"max_categories": -1}, {"max_categories": 2.0}]
)
def test_bad_arguments(kwargs):
    with pytest.raises(fp.PipelineDefinitionError, match="OneHot"):
        fp.OneHot(**kwargs)


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_steps_before_onehot_are_applied_at_transform(backend):
    """Fit saw the filled values; transform must encode the filled values too."""
    frame = pd.DataFrame({"h": [1.0, np.nan, 2.0, 1.0]})
    schema = fp.Schema({"h": fp.Int(nullable=True)})
    pipeline = fp.Pipeline(schema, [fp.col("h") >> fp.FillMissing(0) >> fp.OneHot()])
    out = pipeline.fit_transform(frame, backend=backend)
    assert list(out.feature_names) == ["h=0", "h=1", "h=2"]
    assert out.X.tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0]]
