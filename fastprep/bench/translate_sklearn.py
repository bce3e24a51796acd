"""scikit-learn: one ``ColumnTransformer`` whose branches are the plan's features.

Each feature becomes a ``Pipeline``: a ``FunctionTransformer`` that evaluates its inputs
(the expression evaluator of the idiomatic pandas translation), then one transformer per
step — ``SimpleImputer``, ``FunctionTransformer(np.clip / np.log1p)``, ``StandardScaler``,
``MinMaxScaler``, ``OneHotEncoder(handle_unknown="ignore")`` or ``FeatureHasher``.
``fit`` and ``transform`` are called separately, as a user would on train and test data.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction import FeatureHasher
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, OneHotEncoder, StandardScaler

from fastprep.bench.common import (
    Result,
    RunFn,
    as_float32,
    is_text_input,
    numeric_steps,
    plan_may_be_sparse,
    refuse_tags,
    text_columns,
    unsupported,
)
from fastprep.bench.translate_pandas import hash_rows, input_series
from fastprep.plan.nodes import Feature
from fastprep.plan.steps import Clip, FillMissing, Hash, Log1p, MinMax, OneHot, Standardize, Step


def _inputs(frame: pd.DataFrame, feature: Feature, text: frozenset[str]) -> np.ndarray:
    """The feature's inputs as a 2-D array (object with NaN for missing text)."""
    columns = []
    for item in feature.inputs:
        s = input_series(item, frame, text)
        if is_text_input(item, text):
            columns.append(s.to_numpy(dtype=object, na_value=np.nan))
        else:
            columns.append(s.to_numpy(dtype=np.float64))
    return np.column_stack(columns) if columns else np.empty((len(frame), 0))


def _tokens(frame: pd.DataFrame, feature: Feature, text: frozenset[str]) -> list[Any]:
    parts = [(i.name, input_series(i, frame, text), is_text_input(i, text)) for i in feature.inputs]
    return hash_rows(parts)[0]


def _log1p(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.log1p(x)
    out[~np.isfinite(out)] = np.nan
    return out


def _step(step: Step) -> Any:
    if isinstance(step, FillMissing):
        if isinstance(step.value, str):
            return SimpleImputer(strategy=step.value, keep_empty_features=True)
        return SimpleImputer(strategy="constant", fill_value=step.value, keep_empty_features=True)
    if isinstance(step, Clip):
        return FunctionTransformer(partial(np.clip, a_min=step.lower, a_max=step.upper))
    if isinstance(step, Log1p):
        return FunctionTransformer(_log1p)
    if isinstance(step, Standardize):
        return StandardScaler(with_mean=step.with_mean, with_std=step.with_std)
    if isinstance(step, MinMax):
        return MinMaxScaler(feature_range=step.feature_range)
    raise unsupported("sklearn", step.describe())


def _encoder(feature: Feature, text: frozenset[str]) -> list[Any]:
    encoder = feature.encoder
    if encoder is None:
        return []
    if isinstance(encoder, OneHot):
        # sparse_output=True; the ColumnTransformer's sparse_threshold picks the final layout
        return [OneHotEncoder(handle_unknown="ignore", sparse_output=True, dtype=np.float32)]
    if isinstance(encoder, Hash):
        kind = "string" if all(is_text_input(i, text) for i in feature.inputs) else "pair"
        hasher = FeatureHasher(
            n_features=encoder.n_features,
            input_type=kind,
            alternate_sign=encoder.alternate_sign,
            dtype=np.float32,
        )
        return [hasher]
    raise unsupported("sklearn", encoder.describe())


def branch(feature: Feature, text: frozenset[str]) -> Pipeline:
    """One feature as an sklearn ``Pipeline`` (inputs → steps → encoder)."""
    if isinstance(feature.encoder, Hash):
        if numeric_steps(feature.steps):
            raise unsupported("sklearn", "numeric steps before Hash")
        first = FunctionTransformer(partial(_tokens, feature=feature, text=text))
    else:
        first = FunctionTransformer(partial(_inputs, feature=feature, text=text))
    steps = [_step(s) for s in numeric_steps(feature.steps)]
    return make_pipeline(first, *steps, *_encoder(feature, text))


def build(pipeline: Any, sparse: bool) -> ColumnTransformer:
    """The ``ColumnTransformer``; ``sparse`` forces CSR (fastprep emits CSR) or dense."""
    text = text_columns(pipeline)
    branches = [
        (f"f{i}_{f.inputs[0].name}", branch(f, text), list(f.columns))
        for i, f in enumerate(pipeline.plan.features)
    ]
    return ColumnTransformer(branches, remainder="drop", sparse_threshold=1.0 if sparse else 0.0)


def make(pipeline: Any) -> RunFn:
    """The sklearn implementation of ``pipeline`` (``fit_transform`` on the same frame)."""
    refuse_tags(pipeline, "sklearn")
    text = text_columns(pipeline)
    target = pipeline.plan.target
    sparse = plan_may_be_sparse(pipeline)

    def run(df: pd.DataFrame) -> Result:
        transformer = build(pipeline, sparse)
        X = transformer.fit_transform(df)
        X = X.astype(np.float32) if sparse else np.ascontiguousarray(X, dtype=np.float32)
        y = None if target is None else as_float32(input_series(target, df, text))
        return X, y

    return run
