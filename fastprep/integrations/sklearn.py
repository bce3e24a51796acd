"""``FastprepTransformer``: a fastprep pipeline as a scikit-learn transformer.

>>> from fastprep.sklearn import FastprepTransformer                   # doctest: +SKIP
>>> model = make_pipeline(FastprepTransformer(pipeline), LogisticRegression())  # doctest: +SKIP

What it does, in scikit-learn's terms:

- ``fit(X, y=None)`` fits the pipeline's **features** on ``X``; ``y`` is the caller's and is
  ignored here, and so is the pipeline's own ``target=``: ``X`` need not hold the target's
  columns, and a row whose target would be missing is not set aside (only the features'
  columns are read and validated).
- ``transform(X)`` returns one row per row of ``X`` (float32 NumPy, or SciPy CSR when the
  pipeline has a sparse block such as ``fp.Hash``). A row fastprep would quarantine (a
  value breaking a schema rule under ``on_invalid="quarantine"``, a feature missing or
  infinite after all steps, a repeated key) raises :class:`fastprep.DataValidationError`
  naming the column, the rule and the first rows; ``on_invalid="repair"`` / ``"warn"``
  keep their meaning. The same holds for ``fit``: statistics are never learned from a
  silently reduced set of rows.
- ``X`` is a pandas DataFrame (columns matched by name, as declared in the schema), a
  Polars DataFrame or pyarrow Table (read as they are, not through pandas), a Polars
  LazyFrame or pyarrow Dataset (computed once per call, every column), or a
  2-D array whose columns are named like scikit-learn names unnamed columns: ``x0, x1, ...``
  (or the DataFrame's column names seen at ``fit``). As every scikit-learn estimator,
  ``transform`` wants the columns ``fit`` saw (``n_features_in_``, ``feature_names_in_``).
- ``get_feature_names_out()`` is fastprep's ``out.feature_names``; ``set_output(transform=
  "pandas" | "polars")`` works for dense outputs; with a CSR output it raises a
  ``ValueError`` naming the sparse block(s).
- ``get_params()`` holds ``pipeline``, ``backend``, ``out_dtype`` and one entry per step
  argument, ``features__<i>__<j>__<arg>`` (feature ``i``, step ``j``, 0-based, in the order
  declared), e.g. ``features__5__0__n_features`` for the ``Hash`` of
  ``pipelines/flights.py``. ``set_params`` with such keys builds a new ``fp.Pipeline``
  (steps are frozen: the pipeline object passed in is never changed), so ``clone``,
  ``GridSearchCV`` and ``RandomizedSearchCV`` search over step arguments.

``sklearn.utils.estimator_checks``: every applicable check passes on pipelines over
scikit-learn's names for unnamed columns (``x0 >> FillMissing >> Standardize``, a dense
``OneHot``, a CSR ``Hash``: ``tests/integrations/test_sklearn.py``); :data:`EXPECTED_FAILED_CHECKS` is empty. Not run:
``check_array_api_input`` (no array-API support is claimed), ``check_transformer_preserve_dtypes``
(the output dtype is ``out_dtype``, whatever the input's), ``check_estimators_nan_inf``
(``allow_nan``: missing values are the schema's business). A pipeline over named, typed
columns (text, categories) cannot take the random float arrays the checks feed it; it is
tested on real data instead. Details: ``docs/sklearn.md``.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from fastprep.api.builders import FeatureBuilder
from fastprep.data.sources import read_in_memory, source_columns, source_kind
from fastprep.emit import make_layout
from fastprep.errors import (
    DataValidationError,
    PipelineDefinitionError,
    SourceError,
    SparseOutputError,
)
from fastprep.pipeline import FittedPipeline, Pipeline
from fastprep.runtime.report import Report

#: checks of ``sklearn.utils.estimator_checks`` this transformer does not pass, and why
#: (for ``parametrize_with_checks(..., expected_failed_checks=...)``)
EXPECTED_FAILED_CHECKS: dict[str, str] = {}

_PREFIX = "features"
#: the ``out_dtype`` values whose array holds the features' values as numbers
NUMERIC_OUT_DTYPES = ("float32", "float64", "float16")


class FastprepTransformer(TransformerMixin, BaseEstimator):
    """A fastprep :class:`~fastprep.Pipeline` as a scikit-learn transformer.

    Parameters
    ----------
    pipeline : fastprep.Pipeline
        The declared pipeline; its features are fitted, its target is not used.
    backend : str, default="auto"
        As ``Pipeline.fit(backend=...)``: "auto", "pandas", "numba", ...
    out_dtype : str, default="float32"
        As ``transform(out_dtype=...)``: "float32", "float64" or "float16" (bfloat16 bit
        patterns and int8/uint8 codes are refused: the next step would read them as numbers).
    """

    def __init__(self, pipeline: Pipeline, *, backend: str = "auto", out_dtype: str = "float32"):
        self.pipeline = pipeline
        self.backend = backend
        self.out_dtype = out_dtype

    # -- parameters -------------------------------------------------------------------

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """``pipeline``, ``backend``, ``out_dtype``; with ``deep``, also every step argument
        as ``features__<i>__<j>__<arg>``."""
        params = super().get_params(deep=False)
        if deep and isinstance(self.pipeline, Pipeline):
            params.update(step_params(self.pipeline))
        return params

    def set_params(self, **params: Any) -> FastprepTransformer:
        """Set ``pipeline``/``backend``/``out_dtype`` and step arguments
        (``features__<i>__<j>__<arg>``); step changes give a new ``fp.Pipeline``."""
        steps = {k: params.pop(k) for k in list(params) if k.startswith(_PREFIX + "__")}
        super().set_params(**params)
        if steps:
            self.pipeline = with_step_params(self._checked_pipeline(), steps)
        return self

    # -- fit / transform --------------------------------------------------------------

    def fit(self, X: Any, y: Any = None) -> FastprepTransformer:
        """Fit the pipeline's features on ``X`` (``y`` is accepted and not used)."""
        self._check_out_dtype()
        frame = self._frame(X, reset=True)
        fitted = self._features_only().fit(frame, backend=self.backend)
        _raise_if_quarantined(fitted.fit_report, "fit")
        self._store(fitted)
        return self

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit on ``X`` and transform it, reading and validating it once."""
        self._check_out_dtype()
        frame = self._frame(X, reset=True)
        fitted, out = self._features_only().fit_and_transform(
            frame, backend=self.backend, out_dtype=self.out_dtype
        )
        _raise_if_quarantined(out.report, "fit_transform")
        self._store(fitted)
        return self._result(out.X)

    def transform(self, X: Any) -> Any:
        """One output row per row of ``X``; raises ``DataValidationError`` rather than
        dropping a row."""
        check_is_fitted(self, "fitted_")
        self._check_out_dtype()
        frame = self._frame(X, reset=False)
        out = self.fitted_.transform(frame, backend=self.backend, out_dtype=self.out_dtype)
        _raise_if_quarantined(out.report, "transform")
        return self._result(out.X)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """fastprep's output names (``out.feature_names``), as an object array."""
        check_is_fitted(self, "fitted_")
        if input_features is not None:
            given = [str(f) for f in np.asarray(input_features, dtype=object).ravel()]
            expected = self._input_names(self.n_features_in_)
            if given != expected:
                raise ValueError(
                    f"input_features {given} differ from the columns seen at fit {expected}"
                )
        return np.asarray(list(self._feature_names), dtype=object)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # missing values are the schema's business
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        # the output dtype is ``out_dtype`` whatever the input's: nothing is "preserved"
        tags.transformer_tags.preserves_dtype = []
        return tags

    # -- helpers ----------------------------------------------------------------------

    def _check_out_dtype(self) -> None:
        """Only dtypes whose values are the features' values: bfloat16 is stored as uint16
        bit patterns and int8/uint8 as quantized codes, which an estimator downstream
        would read as the numbers themselves."""
        if self.out_dtype not in NUMERIC_OUT_DTYPES:
            raise PipelineDefinitionError(
                f"FastprepTransformer(out_dtype={self.out_dtype!r}): a scikit-learn "
                f"transformer hands numbers to the next step; use one of "
                f"{', '.join(NUMERIC_OUT_DTYPES)} (bfloat16 is stored as uint16 bit patterns, "
                "int8/uint8 as quantized codes: use fastprep's own transform for those)"
            )

    def _checked_pipeline(self) -> Pipeline:
        if not isinstance(self.pipeline, Pipeline):
            raise PipelineDefinitionError(
                f"FastprepTransformer(pipeline=...) needs an fp.Pipeline, got {self.pipeline!r}"
            )
        return self.pipeline

    def _features_only(self) -> Pipeline:
        """The pipeline without its target: ``y`` comes from the caller."""
        pipeline = self._checked_pipeline()
        for feature in pipeline.plan.features:
            for step in feature.steps:
                if getattr(step, "needs_target", False):  # it would be fitted without y
                    raise PipelineDefinitionError(
                        f"{step.describe()} learns from the pipeline's target, which this "
                        "scikit-learn adapter does not use (y comes from the caller); fit "
                        "the fastprep pipeline itself: pipeline.fit_transform(frame)"
                    )
        return rebuild(pipeline, target=None)

    def _frame(self, X: Any, *, reset: bool) -> Any:
        """``X`` as a table with named columns — the caller's pandas or Polars DataFrame or
        pyarrow Table as it is (fastprep reads each), a LazyFrame or Dataset computed
        once; an array as a pandas DataFrame whose columns are named ``x0, x1, ...`` or
        as seen at fit — after scikit-learn's own checks of shape and feature names."""
        import pandas as pd

        X = _computed(X)
        if _named_frame(X):
            validate_data(self, X, reset=reset, skip_check_array=True)
            if len(X) == 0:
                raise ValueError(f"Found array with 0 sample(s) (shape={X.shape})")
            return X
        array = check_array(X, dtype=None, ensure_all_finite=False, input_name="X")
        validate_data(self, array, reset=reset, skip_check_array=True)
        names = self._input_names(array.shape[1])
        needed = self._features_only().plan.columns
        missing = [c for c in needed if c not in names]
        if missing:
            raise ValueError(
                f"X has {array.shape[1]} feature(s) without names, read as columns "
                f"{', '.join(names)}; the pipeline reads {', '.join(needed)} (missing: "
                f"{', '.join(missing)}). Pass a DataFrame with these columns"
            )
        frame = pd.DataFrame(array, copy=False)
        frame.columns = names
        return frame

    def _input_names(self, width: int) -> list[str]:
        names = getattr(self, "feature_names_in_", None)
        if names is not None and len(names) == width:
            return [str(n) for n in names]
        return [f"x{i}" for i in range(width)]

    def _store(self, fitted: FittedPipeline) -> None:
        plan = fitted.plan
        layout = make_layout(plan, fitted.params)
        self.fitted_ = fitted
        self._feature_names = layout.names(plan, fitted.params)
        self._sparse_blocks = [
            f"feature {i} {plan.features[i].describe()}"
            for i, slot in enumerate(layout.slots)
            if slot.sparse
        ]

    def _result(self, X: Any) -> Any:
        """``X``, after refusing a CSR output where a DataFrame was asked for."""
        import scipy.sparse as sp

        container = _get_output_config("transform", self)["dense"]
        if sp.issparse(X) and container != "default":
            blocks = "; ".join(self._sparse_blocks) or "a sparse block"
            raise SparseOutputError(
                f"set_output(transform={container!r}) needs a dense output, but this pipeline "
                f"emits CSR from: {blocks}. Use OneHot(sparse=False) or drop the Hash/"
                "Vectorize feature, or keep set_output(transform='default') for CSR"
            )
        return X


def _computed(X: Any) -> Any:
    """A Polars LazyFrame collected, a pyarrow Dataset read (every column: scikit-learn
    checks the names and number of ``X``'s columns); any other ``X`` as it is. The query
    runs once, as it does for a fastprep run."""
    try:
        kind = source_kind(X)
    except SourceError:  # an array, a list: scikit-learn's check_array judges it
        return X
    if kind not in ("polars_lazy", "dataset"):
        return X
    return read_in_memory(X, kind, source_columns(X) or [])


def _named_frame(X: Any) -> bool:
    """A pandas or Polars DataFrame or a pyarrow Table whose column names are all strings."""
    import pandas as pd

    if isinstance(X, pd.DataFrame):
        names: Any = X.columns
    elif hasattr(X, "to_pandas"):  # pyarrow: column_names; Polars: columns
        names = getattr(X, "column_names", None) or getattr(X, "columns", None)
    else:
        return False
    return names is not None and all(isinstance(c, str) for c in names)


def step_params(pipeline: Pipeline) -> dict[str, Any]:
    """Every step argument of ``pipeline`` as ``features__<i>__<j>__<arg>``."""
    out: dict[str, Any] = {}
    for i, feature in enumerate(pipeline.plan.features):
        for j, step in enumerate(feature.steps):
            for f in fields(step):  # type: ignore[arg-type]
                out[f"{_PREFIX}__{i}__{j}__{f.name}"] = getattr(step, f.name)
    return out


def with_step_params(pipeline: Pipeline, params: dict[str, Any]) -> Pipeline:
    """A new pipeline with the step arguments in ``params`` (``features__<i>__<j>__<arg>``)
    changed; each changed step is rebuilt, so its own checks run on the new values."""
    features = list(pipeline.plan.features)
    changes: dict[tuple[int, int], dict[str, Any]] = {}
    for key, value in params.items():
        i, j, name = _parse_key(pipeline, key)
        if isinstance(value, np.generic):  # a grid built with NumPy: np.int64(16) -> 16
            value = value.item()
        current = getattr(features[i].steps[j], name)
        if type(current) is not type(value) or current != value:
            changes.setdefault((i, j), {})[name] = value
    if not changes:  # e.g. set_params(**get_params()): the same pipeline, not a copy
        return pipeline
    for (i, j), args in changes.items():
        steps = list(features[i].steps)
        steps[j] = replace(steps[j], **args)  # type: ignore[type-var]
        features[i] = replace(features[i], steps=tuple(steps))
    return rebuild(pipeline, features=features)


def _parse_key(pipeline: Pipeline, key: str) -> tuple[int, int, str]:
    parts = key.split("__")
    valid = sorted(step_params(pipeline))
    hint = f"; valid step parameters: {', '.join(valid) or '(none)'}"
    if len(parts) != 4 or not (parts[1].isdigit() and parts[2].isdigit()):
        raise ValueError(f"invalid parameter {key!r}: expected features__<i>__<j>__<arg>{hint}")
    i, j, name = int(parts[1]), int(parts[2]), parts[3]
    features = pipeline.plan.features
    if i >= len(features) or j >= len(features[i].steps):
        raise ValueError(f"invalid parameter {key!r}: no step {j} in feature {i}{hint}")
    step = features[i].steps[j]
    if name not in {f.name for f in fields(step)}:  # type: ignore[arg-type]
        raise ValueError(
            f"invalid parameter {key!r}: {type(step).__name__} has no argument {name!r}{hint}"
        )
    return i, j, name


def rebuild(pipeline: Pipeline, **changes: Any) -> Pipeline:
    """A new ``fp.Pipeline`` like ``pipeline`` with ``features=`` and/or ``target=``
    replaced (through the constructor, so the plan is checked again)."""
    plan = pipeline.plan
    target = None if plan.target is None else FeatureBuilder((plan.target,))
    args: dict[str, Any] = {"features": list(plan.features), "target": target, **changes}
    return Pipeline(
        pipeline.schema,
        args["features"],
        args["target"],
        sample=pipeline.sample,
        name=pipeline.name,
        optimize=pipeline.optimize,
    )


def _raise_if_quarantined(report: Report, phase: str) -> None:
    """A transformer returns one row per input row: a row fastprep set aside is an error."""
    if not report.rows_quarantined:
        return
    found = [replace(f, action="raise") for f in report.findings if f.action == "quarantine"]
    lines = "\n  ".join(f.message() for f in found) or "(no finding recorded)"
    raise DataValidationError(
        f"{report.rows_quarantined:,} row(s) of X would be quarantined at {phase}; a "
        "transformer returns every row, so it raises instead (rows are 0-based positions "
        f"in X):\n  {lines}\nfix or drop these rows first, or declare how to handle them "
        "(on_invalid='repair', nullable=True, fp.FillMissing)"
    )
