"""``fp.Categorify``: integer codes from a fitted vocabulary, on real flights columns.

Codes: 0 = missing, 1 = unseen or infrequent, 2.. = kept categories in sorted value order.
Checked against a plain pandas computation and against sklearn's ``OrdinalEncoder`` where
its semantics map exactly (see docs/decisions.md: ``max_categories=k`` here is sklearn's
``max_categories=k + 1``, and sklearn breaks count ties at the cut towards larger values).
"""

from __future__ import annotations

import hashlib
import json
import zipfile

import numpy as np
import pandas as pd
import pytest
from sklearn.preprocessing import OrdinalEncoder

import fastprep as fp

SCHEMA = fp.Schema(
    {
        "tailnum": fp.String(nullable=True),
        "dest": fp.String(),
        "carrier": fp.Category(),
        "origin": fp.Category(),
        "hour": fp.Int(),
        "flight": fp.Int(),
        "dep_delay": fp.Float(nullable=True),
    }
)


def expected_codes(fit: pd.Series, apply: pd.Series, min_frequency=1, max_categories=None):
    """The definition, computed with plain pandas (independent of fastprep's code)."""
    counts = fit.dropna().value_counts()
    counts = counts[counts >= min_frequency]
    if max_categories is not None and len(counts) > max_categories:
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_categories]
        counts = pd.Series(dict(ranked))
    vocabulary = {value: code for code, value in enumerate(sorted(counts.index), start=2)}
    out = apply.map(lambda v: 0 if pd.isna(v) else vocabulary.get(v, 1))
    return out.to_numpy(dtype=np.float32)


def sklearn_codes(fit, apply, min_frequency=1, max_categories=None):
    """``OrdinalEncoder`` codes mapped to ours: missing -> 0, unknown/infrequent -> 1, k -> k+2."""
    encoder = OrdinalEncoder(
        handle_unknown="use_encoded_value",
        unknown_value=-1,
        encoded_missing_value=-2,
        min_frequency=min_frequency,
        max_categories=None if max_categories is None else max_categories + 1,
    )
    as_object = lambda s: s.astype(object).where(s.notna(), np.nan).to_frame()  # noqa: E731
    encoder.fit(as_object(fit))
    raw = encoder.transform(as_object(apply)).ravel()
    n_frequent = len(encoder.categories_[0]) - fit.isna().any()
    if encoder.infrequent_categories_[0] is not None:
        n_frequent -= len(encoder.infrequent_categories_[0])
        raw[raw == n_frequent] = -1  # sklearn's single infrequent code
    return np.where(raw == -2, 0, np.where(raw == -1, 1, raw + 2)).astype(np.float32)


def categorify(frame, column, fit_frame=None, backend="pandas", **kwargs):
    pipeline = fp.Pipeline(SCHEMA, [fp.col(column) >> fp.Categorify(**kwargs)])
    fitted = pipeline.fit(frame if fit_frame is None else fit_frame, backend=backend)
    return fitted, fitted.transform(frame, backend=backend)


def untied_cut(series: pd.Series, wanted: int) -> int:
    """A ``max_categories`` near ``wanted`` whose cut does not fall between equal counts."""
    counts = series.dropna().value_counts().to_numpy()
    for k in range(wanted, len(counts) - 1):
        if counts[k - 1] != counts[k]:
            return k
    raise AssertionError("no untied cut")


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"min_frequency": 5}, {"max_categories": 100}, {"min_frequency": 3, "max_categories": 40}],
)
def test_tailnum_equals_plain_pandas(flights_sample, kwargs):
    _, out = categorify(flights_sample, "tailnum", **kwargs)
    assert isinstance(out.X, np.ndarray) and out.X.dtype == np.float32
    assert out.X.shape == (len(flights_sample), 1)
    assert list(out.feature_names) == ["tailnum"]
    expected = expected_codes(flights_sample["tailnum"], flights_sample["tailnum"], **kwargs)
    assert np.array_equal(out.X[:, 0], expected)
    assert np.array_equal(out.X, np.round(out.X))  # exact integers
    assert (out.X[flights_sample["tailnum"].isna().to_numpy(), 0] == 0).all()


def test_fitted_vocabulary_holds_counts(flights_sample):
    fitted, _ = categorify(flights_sample, "carrier", max_categories=5)
    vocabulary = fitted.params[0]["carrier"][-1]
    top = flights_sample["carrier"].value_counts().head(5)
    assert vocabulary["categories"] == sorted(top.index)
    assert vocabulary["counts"] == [int(top[c]) for c in sorted(top.index)]
    assert vocabulary["infrequent"] == flights_sample["carrier"].nunique() - 5
    assert vocabulary["missing"] is False


def test_unseen_values_get_code_one(flights_sample):
    fit_rows = flights_sample.iloc[:5000]
    _, out = categorify(flights_sample, "tailnum", fit_frame=fit_rows, min_frequency=2)
    expected = expected_codes(fit_rows["tailnum"], flights_sample["tailnum"], min_frequency=2)
    assert np.array_equal(out.X[:, 0], expected)
    unseen = ~flights_sample["tailnum"].isin(set(fit_rows["tailnum"].dropna()))
    unseen &= flights_sample["tailnum"].notna()
    assert unseen.sum() > 1000 and (out.X[unseen.to_numpy(), 0] == 1).all()


@pytest.mark.parametrize(
    ("column", "kwargs"),
    [
        ("tailnum", {}),
        ("tailnum", {"min_frequency": 10}),
        ("dest", {"min_frequency": 50}),
        ("carrier", {}),
        ("hour", {"min_frequency": 100}),
        ("flight", {"min_frequency": 20}),
    ],
)
def test_equals_sklearn_ordinal_encoder(flights_sample, column, kwargs):
    fit_rows = flights_sample.iloc[:12000]
    _, out = categorify(flights_sample, column, fit_frame=fit_rows, **kwargs)
    expected = sklearn_codes(fit_rows[column], flights_sample[column], **kwargs)
    assert np.array_equal(out.X[:, 0], expected)


@pytest.mark.parametrize(("column", "wanted"), [("dest", 30), ("tailnum", 200), ("flight", 50)])
def test_max_categories_equals_sklearn_plus_one(flights_sample, column, wanted):
    """Ours keeps ``k`` categories; sklearn's ``max_categories`` also counts its infrequent
    code, so ``k + 1`` there. The cut is chosen between different counts (ties differ)."""
    k = untied_cut(flights_sample[column], wanted)
    _, out = categorify(flights_sample, column, max_categories=k)
    expected = sklearn_codes(flights_sample[column], flights_sample[column], max_categories=k)
    assert np.array_equal(out.X[:, 0], expected)
    assert len(np.unique(out.X)) == k + 1 + flights_sample[column].isna().any()


def test_ties_at_the_cut_keep_the_smaller_value_unlike_sklearn():
    frame = pd.DataFrame({"dest": ["b", "a", "c", "c", "b", "a", "c"]})
    pipeline = fp.Pipeline(
        fp.Schema({"dest": fp.String()}), [fp.col("dest") >> fp.Categorify(max_categories=2)]
    )
    out = pipeline.fit_transform(frame)
    # c (3) is kept; a and b tie at 2: a (smaller) is kept -> a=2, c=3, b=1
    assert out.X[:, 0].tolist() == [1, 2, 3, 3, 1, 2, 3]
    # sklearn keeps the larger value of a tie (its stable ascending argsort): b, not a
    sk = sklearn_codes(frame["dest"], frame["dest"], max_categories=2)
    assert sk.tolist() == [2, 1, 3, 3, 2, 1, 3]


def test_full_table_tailnum(flights_full):
    frame = flights_full[["tailnum"]]
    assert frame["tailnum"].isna().sum() > 0 and frame["tailnum"].nunique() > 4000
    fit_rows = frame.iloc[: len(frame) // 2]
    schema = fp.Schema({"tailnum": fp.String(nullable=True)})
    step = fp.Categorify(min_frequency=20, max_categories=2000)
    fitted = fp.Pipeline(schema, [fp.col("tailnum") >> step]).fit(fit_rows)
    out = fitted.transform(frame)
    expected = expected_codes(fit_rows["tailnum"], frame["tailnum"], 20, 2000)
    assert np.array_equal(out.X[:, 0], expected)
    numba = fitted.transform(frame, backend="numba")
    assert np.array_equal(numba.X, out.X)


def test_every_backend_gives_the_same_x(flights_sample):
    features = [
        fp.cols("tailnum", "dest") >> fp.Categorify(min_frequency=3),
        fp.col("dep_delay") >> fp.FillMissing(0) >> fp.Standardize(),
        fp.col("hour") >> fp.Categorify(max_categories=10),
        fp.cols("origin", "carrier") >> fp.OneHot(),
    ]
    pipeline = fp.Pipeline(SCHEMA, features)
    reference = pipeline.fit_transform(flights_sample, backend="pandas")
    assert reference.X.shape == (len(flights_sample), 4 + 3 + 16)
    assert list(reference.feature_names)[:4] == ["tailnum", "dest", "dep_delay", "hour"]
    for backend in ("numba", "numexpr"):
        other = pipeline.fit_transform(flights_sample, backend=backend)
        assert np.array_equal(other.X[:, [0, 1, 3]], reference.X[:, [0, 1, 3]])
        assert np.allclose(other.X, reference.X, atol=1e-6)


def test_steps_before_categorify_are_applied():
    frame = pd.DataFrame({"hour": [1, 5, 30, 5, 1, 1]})
    schema = fp.Schema({"hour": fp.Int()})
    pipeline = fp.Pipeline(schema, [fp.col("hour") >> fp.Clip(0, 5) >> fp.Categorify()])
    fitted = pipeline.fit(frame)
    assert fitted.params[0]["hour"][-1]["categories"] == [1.0, 5.0]
    assert fitted.transform(frame).X[:, 0].tolist() == [2, 3, 3, 3, 2, 2]
    assert fitted.transform(pd.DataFrame({"hour": [3, 40]})).X[:, 0].tolist() == [1, 3]


def test_adversarial_text_values():
    values = ["", " ", "007", "7", "<missing>", "é", "e\u0301", None, "", "007", "\x00", "é"]
    frame = pd.DataFrame({"s": pd.Series(values, dtype=object)})
    schema = fp.Schema({"s": fp.String(nullable=True)})
    out = fp.Pipeline(schema, [fp.col("s") >> fp.Categorify()]).fit_transform(frame)
    assert np.array_equal(out.X[:, 0], expected_codes(frame["s"], frame["s"]))
    assert out.X[7, 0] == 0 and out.X[0, 0] == out.X[8, 0] != out.X[1, 0]
    assert out.X[2, 0] != out.X[3, 0]  # "007" is text, not 7


def test_all_missing_and_all_infrequent():
    frame = pd.DataFrame({"s": pd.Series([None, None, None], dtype=object), "n": [4, 5, 6]})
    schema = fp.Schema({"s": fp.String(nullable=True), "n": fp.Int()})
    features = [fp.col("s") >> fp.Categorify(), fp.col("n") >> fp.Categorify(min_frequency=2)]
    fitted = fp.Pipeline(schema, features).fit(frame)
    assert fitted.params[0]["s"][-1]["categories"] == []
    assert fitted.params[1]["n"][-1]["infrequent"] == 3
    out = fitted.transform(frame)
    assert out.X.tolist() == [[0, 1], [0, 1], [0, 1]]
    assert fitted.transform(frame.iloc[:0]).X.shape == (0, 2)


def test_integers_beyond_float32_precision_stay_distinct():
    big = 2**40
    frame = pd.DataFrame({"n": [big, big + 1, -big, big + 1, 0]})
    out = fp.Pipeline(fp.Schema({"n": fp.Int()}), [fp.col("n") >> fp.Categorify()]).fit_transform(
        frame
    )
    assert out.X[:, 0].tolist() == [4, 5, 2, 5, 3]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: fp.col("dep_delay") >> fp.Categorify(), "is float"),
        (lambda: fp.col("tailnum") >> fp.Categorify() >> fp.Standardize(), "must be the last"),
        (lambda: fp.cross("origin", "dest") >> fp.Categorify(), "cross is hashed"),
        (lambda: [fp.col("hour"), fp.col("hour") >> fp.Categorify()], "produced twice"),
    ],
)
def test_definition_errors(make, message):
    features = make()
    with pytest.raises(fp.PipelineDefinitionError, match=message):
        fp.Pipeline(SCHEMA, features if isinstance(features, list) else [features])


@pytest.mark.parametrize(
    "kwargs",
    [{"min_frequency": 0}, {"min_frequency": 1.5}, {"min_frequency": True}, {"max_categories": 0}],
)
def test_bad_arguments(kwargs):
    with pytest.raises(fp.PipelineDefinitionError, match="Categorify"):
        fp.Categorify(**kwargs)


def test_save_load_transform_identical(flights_sample, tmp_path):
    pipeline = fp.Pipeline(
        SCHEMA, [fp.cols("tailnum", "hour") >> fp.Categorify(min_frequency=4, max_categories=500)]
    )
    fitted = pipeline.fit(flights_sample.iloc[:8000])
    path = tmp_path / "cat.fastprep"
    fitted.save(path)
    again = fp.load(path)
    assert again.plan.features[0].steps == pipeline.plan.features[0].steps
    assert np.array_equal(again.transform(flights_sample).X, fitted.transform(flights_sample).X)


def rewrite_params(path, change):
    """Edit the fitted parameters and fix the checksum (a deliberate, consistent tamper)."""
    with zipfile.ZipFile(path) as archive:
        envelope = json.loads(archive.read("state.json"))
        arrays = archive.read("arrays.npz")
    change(envelope["body"]["params"][0]["tailnum"][-1])
    body = json.dumps(envelope["body"], sort_keys=True, allow_nan=False)
    envelope["body_sha256"] = hashlib.sha256(body.encode()).hexdigest()
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("state.json", json.dumps(envelope))
        archive.writestr("arrays.npz", arrays)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p["categories"].reverse(), "sorted"),
        (lambda p: p["counts"].pop(), "one count per category"),
        (lambda p: p.update(counts=[1] * len(p["counts"])), "fewer than min_frequency"),
        (lambda p: p.update(infrequent=-1), "infrequent"),
        (lambda p: p.update(categories=[1.0] * len(p["categories"])), "wrong type"),
        (lambda p: p.pop("counts"), "one count per category"),
        (lambda p: p["counts"].__setitem__(0, "9"), "non-integer"),
    ],
)
def test_tampered_vocabulary_is_refused(flights_sample, tmp_path, change, message):
    pipeline = fp.Pipeline(SCHEMA, [fp.col("tailnum") >> fp.Categorify(min_frequency=5)])
    path = tmp_path / "cat.fastprep"
    pipeline.fit(flights_sample).save(path)
    rewrite_params(path, change)
    with pytest.raises(fp.StateFormatError, match=message):
        fp.load(path)


def test_too_many_categories_for_max_categories_is_refused(flights_sample, tmp_path):
    pipeline = fp.Pipeline(SCHEMA, [fp.col("tailnum") >> fp.Categorify(max_categories=3)])
    path = tmp_path / "cat.fastprep"
    pipeline.fit(flights_sample).save(path)
    rewrite_params(path, lambda p: (p["categories"].append("ZZZZZZ"), p["counts"].append(10**6)))
    with pytest.raises(fp.StateFormatError, match="max_categories"):
        fp.load(path)
