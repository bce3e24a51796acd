"""Every backend dispatches on the step type through one table, and names what it lacks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import fastprep as fp
from fastprep.backends.base import Backend, UnsupportedOperation
from fastprep.backends.numba.ops import NUMBA
from fastprep.backends.reference import backend as reference
from fastprep.backends.reference.backend import REFERENCE
from fastprep.backends.registry import available, load_backend
from fastprep.errors import BackendError
from fastprep.plan.steps import STEP_TYPES, OneHot, Step


@dataclass(frozen=True)
class Unknown(Step):
    """A step no backend has an entry for (what a new DSL step is before its entries)."""

    kind = "fitted"
    needs_fit = True


def test_every_step_type_has_an_entry_in_every_table():
    for name, step_type in STEP_TYPES.items():
        assert step_type in REFERENCE, name
        assert step_type in NUMBA, name


def test_every_backend_implements_the_protocol():
    for name in available():
        assert isinstance(load_backend(name), Backend), name


def test_a_step_without_an_entry_is_a_named_error():
    values = np.arange(5.0)
    with pytest.raises(UnsupportedOperation) as caught:
        reference.fit_step(Unknown(), values, "Unknown() on 'x'")
    error = caught.value
    assert (error.backend, error.op, error.feature) == ("pandas", "Unknown()", "fit")
    assert isinstance(error, BackendError) and isinstance(error, NotImplementedError)
    assert "'pandas'" in str(error) and "Unknown()" in str(error) and "fit" in str(error)
    with pytest.raises(UnsupportedOperation, match="'numba' does not implement code"):
        NUMBA.entry(Unknown(), "code")


def test_an_entry_without_the_feature_is_a_named_error():
    """OneHot is an encoder: the reference has no element-wise apply for it."""
    with pytest.raises(UnsupportedOperation) as caught:
        reference.apply_step(OneHot(), {}, np.arange(3.0), "x", reference.Repairs())
    assert caught.value.feature == "apply" and caught.value.op == "OneHot()"


def test_a_pipeline_with_an_unknown_step_fails_naming_it(flights_sample):
    """Through the public API, on both engines: never a silent skip."""
    for backend in ("pandas", "numba"):
        schema = fp.Schema({"distance": fp.Float(nullable=True)})
        pipeline = fp.Pipeline(schema, [fp.col("distance") >> Unknown()])
        with pytest.raises(UnsupportedOperation, match="Unknown"):
            pipeline.fit(flights_sample, backend=backend)


def test_every_fitted_step_says_how_a_partitioned_fit_learns_it():
    """A new fitted step without ``partial`` fails here, not as wrong parameters later."""
    fitted = [
        fp.FillMissing("mean"), fp.FillMissing("median"), fp.Standardize(), fp.MinMax(),
        fp.MaxAbsScale(), fp.RobustScale(), fp.Bin(), fp.Bin(strategy="uniform"),
        fp.QuantileTransform(), fp.PowerTransform(), fp.OneHot(), fp.Categorify(),
        fp.Vectorize(),
    ]  # fmt: skip
    for step in fitted:
        kind = REFERENCE.entry(step, "partial")(step)
        assert kind in ("moments", "median", "order", "values", "vocabulary"), step
        if kind == "moments":
            assert REFERENCE.has(step, "from_moments"), step
    for step_type in STEP_TYPES.values():
        if REFERENCE.has(step_type.__new__(step_type), "partial"):
            continue
        assert step_type.__name__ in ("Clip", "Log1p", "Map", "Hash"), step_type
