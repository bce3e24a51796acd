"""``fp.Map`` (JIT-compiled user functions) and the collapse of consecutive affine steps."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.backends.reference.map_step import compiled_map

SCHEMA = fp.Schema({"a": fp.Float(nullable=True)})
FRAME = pd.DataFrame({"a": [1.0, 4.0, np.nan, -3.0, 0.0, 9.0]})


def root_or_minus_one(x):
    if x < 0:
        return -1.0
    return math.sqrt(x)


def digits_of(x):
    return float(len(str(x)))  # Numba's str() of a float differs from Python's


def through_a_set(x):
    return float(len({x, 2 * x}))


def reciprocal(x):
    return 1.0 / x


@pytest.mark.parametrize("backend", ["pandas", "numba", "numexpr"])
def test_map_compiles_and_skips_missing(backend: str) -> None:
    pipeline = fp.Pipeline(
        schema=SCHEMA, features=[fp.col("a") >> fp.Map(root_or_minus_one) >> fp.FillMissing(7)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a compilable function gives no fallback warning
        out = pipeline.fit_transform(FRAME, backend=backend)
    np.testing.assert_array_equal(out.X[:, 0], [1.0, 2.0, 7.0, -1.0, 0.0, 3.0])
    assert compiled_map(root_or_minus_one)[1] == "numba"


def test_map_falls_back_when_numba_disagrees_with_python() -> None:
    pipeline = fp.Pipeline(
        schema=SCHEMA, features=[fp.col("a") >> fp.Map(digits_of) >> fp.FillMissing(0)]
    )
    with pytest.warns(RuntimeWarning, match="digits_of"):
        out = pipeline.fit_transform(FRAME)
    np.testing.assert_array_equal(out.X[:, 0], [3.0, 3.0, 0.0, 4.0, 3.0, 3.0])


def test_map_falls_back_with_the_reason_when_numba_cannot_compile() -> None:
    def uncompilable(x):
        return float(len(pd.Series([x])))  # pandas inside: Numba cannot type it

    pipeline = fp.Pipeline(
        schema=SCHEMA, features=[fp.col("a") >> fp.Map(uncompilable) >> fp.FillMissing(0)]
    )
    with pytest.warns(RuntimeWarning, match="could not compile"):
        out = pipeline.fit_transform(FRAME)
    np.testing.assert_array_equal(out.X[:, 0], [1, 1, 0, 1, 1, 1])


def test_map_non_finite_results_become_missing_and_are_counted() -> None:
    pipeline = fp.Pipeline(schema=SCHEMA, features=[fp.col("a") >> fp.Map(reciprocal)])
    out = pipeline.fit_transform(FRAME)
    # 1/0 -> inf -> missing -> the row (and the row with a missing input) is quarantined
    assert sorted(out.quarantine["row_id"]) == [2, 4]
    assert {
        "output": "a",
        "rule": "map_not_finite",
        "count": 1,
        "action": "set_missing",
    } in out.report.repairs


def test_map_is_saved_by_name_and_needs_the_function_to_load(tmp_path) -> None:
    pipeline = fp.Pipeline(
        schema=SCHEMA, features=[fp.col("a") >> fp.Map(through_a_set) >> fp.FillMissing(0)]
    )
    fitted = pipeline.fit(FRAME)
    path = tmp_path / "map.fastprep"
    fitted.save(path)
    import zipfile

    with zipfile.ZipFile(path) as archive:
        text = archive.read("state.json")
    assert b"through_a_set" in text and b"def " not in text  # a name, never code
    loaded = fp.load(path, functions={"through_a_set": through_a_set})
    np.testing.assert_array_equal(loaded.transform(FRAME).X, fitted.transform(FRAME).X)


def test_loading_a_map_without_its_function_is_a_clear_error(tmp_path) -> None:
    from fastprep.plan.steps import FUNCTIONS

    step = fp.Map(lambda x: x + 1, name="plus_one_once")
    pipeline = fp.Pipeline(schema=SCHEMA, features=[fp.col("a") >> step])
    path = tmp_path / "lambda.fastprep"
    pipeline.fit(FRAME).save(path)
    FUNCTIONS.pop(step.code)  # as in a new process
    with pytest.raises(fp.StateFormatError, match="plus_one_once"):
        fp.load(path)


def test_a_function_defined_again_or_two_lambdas_work() -> None:
    """A re-run notebook cell defines its function again under the same name; two lambdas
    share the name ``<lambda>``: each Map is its own function, told apart by its code."""
    first = fp.Map(lambda x: x, name="same_name_twice")
    again = fp.Map(lambda x: x * 2, name="same_name_twice")
    assert first != again and first.code != again.code
    assert fp.Map(lambda x: x * 2, name="same_name_twice") == again  # same code, same step
    pipeline = fp.Pipeline(
        schema=SCHEMA,
        features=[
            fp.col("a") >> fp.Map(lambda x: x + 1) >> fp.FillMissing(0),
            fp.expr("b = a * 1") >> fp.Map(lambda x: x - 1) >> fp.FillMissing(0),
        ],
    )
    out = pipeline.fit_transform(FRAME)
    a = FRAME["a"].to_numpy(np.float64)[out.row_ids]
    np.testing.assert_allclose(out.X[:, 0], np.where(np.isnan(a), 0, a + 1).astype(np.float32))
    np.testing.assert_allclose(out.X[:, 1], np.where(np.isnan(a), 0, a - 1).astype(np.float32))


def test_a_saved_map_is_found_by_its_code_not_its_name(tmp_path) -> None:
    from fastprep.plan.steps import FUNCTIONS

    def scaled(x):
        return x * 3.0

    pipeline = fp.Pipeline(schema=SCHEMA, features=[fp.col("a") >> fp.Map(scaled)])
    path = tmp_path / "scaled.fastprep"
    fitted = pipeline.fit(FRAME)
    fitted.save(path)
    FUNCTIONS.clear()  # a new process: the function is passed under another name

    def renamed(x):
        return x * 3.0

    loaded = fp.load(path, functions={"anything": renamed})
    np.testing.assert_array_equal(loaded.transform(FRAME).X, fitted.transform(FRAME).X)

    def scaled(x):
        return x * 4.0

    with pytest.raises(fp.StateFormatError, match="other code"):
        fp.load(
            path,
            functions={
                "test_a_saved_map_is_found_by_its_code_not_its_name.<locals>.scaled": scaled
            },
        )


def test_consecutive_affine_steps_collapse_within_one_ulp() -> None:
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({"a": rng.normal(size=20_000) * 50 + 3})
    frame.loc[:50, "a"] = np.nan
    schema = fp.Schema({"a": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.col("a")
            >> fp.FillMissing(0)
            >> fp.MinMax()
            >> fp.Standardize()
            >> fp.MinMax((-1, 1))
        ],
    )
    fitted = pipeline.fit(frame, backend="pandas")
    reference = fitted.transform(frame).X
    fused = fitted.transform(frame, backend="numba").X
    from fastprep.backends.numba.backend import chains_of
    from fastprep.backends.numba.codegen import transform_program

    plan = fitted.plan
    source = transform_program(chains_of(plan, plan.execution_stages()[0]), set(), False).source
    assert source.count(" + p") == 1, "three affine steps became one multiply-add"
    ulp = np.spacing(np.maximum(np.abs(reference), np.abs(fused)))
    assert (np.abs(reference.astype(np.float64) - fused) <= np.maximum(ulp, 1e-6)).all()


@pytest.mark.parametrize("func", ["log1p", "log", "exp", "sqrt"])
def test_threaded_hoisted_ufunc_is_bit_identical_to_one_numpy_call(func):
    from fastprep.backends.numba import backend as numba_

    rng = np.random.default_rng(11)
    for n in (numba_.UFUNC_THREADS_MIN + 1, numba_.UFUNC_THREADS_MIN * 3 + 12_345):
        values = rng.normal(size=n) * 50
        values[rng.random(n) < 0.05] = np.nan
        values[:4] = [np.inf, -np.inf, -1.0, 0.0]
        with np.errstate(all="ignore"):
            expected = getattr(np, func)(values)
        np.testing.assert_array_equal(numba_._ufunc(func, values), expected)


def test_a_changed_helper_changes_the_digest() -> None:
    namespace: dict = {}
    exec("def helper(x):\n    return x + 1\ndef f(x):\n    return helper(x)\n", namespace)
    first = fp.Map(namespace["f"])
    exec("def helper(x):\n    return x * 2\ndef g(x):\n    return helper(x)\n", namespace)
    second = fp.Map(namespace["g"], name=first.name)
    assert first.code != second.code  # same code of its own, another helper
