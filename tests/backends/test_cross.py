"""``fp.cross`` hashes one joint token per row; every backend equals sklearn's FeatureHasher."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.feature_extraction import FeatureHasher

import fastprep as fp


def sklearn_cross(frame: pd.DataFrame, columns: list[str], n: int, alternate_sign: bool = True):
    tokens = []
    for row in frame[columns].itertuples(index=False):
        if any(pd.isna(v) for v in row):
            tokens.append([])
        else:
            tokens.append(["^".join(f"{c}={v}" for c, v in zip(columns, row))])
    hasher = FeatureHasher(n, input_type="string", alternate_sign=alternate_sign, dtype=np.float32)
    return hasher.transform(tokens)


@pytest.mark.parametrize("backend", ["pandas", "numba"])
@pytest.mark.parametrize(
    ("columns", "n", "alternate_sign"),
    [(["origin", "dest"], 2**16, True), (["carrier", "tailnum", "dest"], 77, False)],
)
def test_cross_equals_feature_hasher_on_joint_tokens(
    flights_pipeline, flights_sample, backend, columns, n, alternate_sign
) -> None:
    pipeline = fp.Pipeline(
        schema=flights_pipeline.schema,
        features=[fp.cross(*columns) >> fp.Hash(n, alternate_sign=alternate_sign)],
    )
    out = pipeline.fit_transform(flights_sample, backend=backend)
    expected = sklearn_cross(flights_sample.iloc[out.row_ids], columns, n, alternate_sign)
    assert (expected != out.X).nnz == 0
    np.testing.assert_array_equal(out.X.indptr, expected.indptr)
    assert out.feature_names[0] == f"hash:{'^'.join(columns)}[0]"
    if "tailnum" in columns:  # a missing member: the row contributes nothing
        missing = flights_sample.iloc[out.row_ids]["tailnum"].isna().to_numpy()
        assert missing.any() and (np.diff(out.X.indptr)[missing] == 0).all()


def test_cross_needs_text_columns_and_a_hash(flights_pipeline) -> None:
    schema = flights_pipeline.schema
    with pytest.raises(fp.PipelineDefinitionError, match="'distance' is float"):
        fp.Pipeline(schema=schema, features=[fp.cross("origin", "distance") >> fp.Hash(16)])
    with pytest.raises(fp.PipelineDefinitionError, match="a cross is hashed"):
        fp.Pipeline(schema=schema, features=[fp.cross("origin", "dest") >> fp.OneHot()])
    with pytest.raises(fp.PipelineDefinitionError, match="2 or 3"):
        fp.cross("origin")


def test_cross_survives_save_and_load(flights_pipeline, flights_sample, tmp_path) -> None:
    pipeline = fp.Pipeline(
        schema=flights_pipeline.schema, features=[fp.cross("origin", "dest") >> fp.Hash(1024)]
    )
    fitted = pipeline.fit(flights_sample)
    fitted.save(tmp_path / "cross.fastprep")
    loaded = fp.load(tmp_path / "cross.fastprep")
    assert loaded.plan.features[0].cross
    assert (loaded.transform(flights_sample).X != fitted.transform(flights_sample).X).nnz == 0


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_steps_before_a_hash_apply_at_transform(flights_pipeline, flights_sample, backend) -> None:
    """dep_delay is filled and clipped before it is hashed as a number, at fit and transform."""
    pipeline = fp.Pipeline(
        schema=flights_pipeline.schema,
        features=[fp.cols("dep_delay") >> fp.FillMissing(-7) >> fp.Clip(-5, 10) >> fp.Hash(64)],
    )
    out = pipeline.fit_transform(flights_sample, backend=backend)
    values = flights_sample.iloc[out.row_ids]["dep_delay"].fillna(-7).clip(-5, 10)
    expected = FeatureHasher(64, input_type="dict", dtype=np.float32).transform(
        [{"dep_delay": v} for v in values]
    )
    assert (expected != out.X).nnz == 0
