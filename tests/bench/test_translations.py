"""The competitors' translations do the same work as fastprep: same X and y on expressions
whose intermediate results are undefined (0/0, log of a negative, ``nan ** 0``), missing
values inside comparisons and logic, and statistics fitted over derived values.

The benchmark gate checks this on flights; here the inputs are made to hit every place a
translation must turn NaN into missing, so a faster but wrong translation fails."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.bench import harness, impls

SCHEMA = fp.Schema({
    "a": fp.Float(nullable=True), "b": fp.Float(nullable=True), "n": fp.Int(min=0, max=50),
})  # fmt: skip

EXPRESSIONS = [
    "q = a / b",  # 0/0 and x/0 are missing
    "r = (a / b) ** 0",  # 0/0 is NaN, and NaN ** 0 would be 1
    "c = (a / b) > 1",  # a comparison over an undefined value is missing, not True
    "w = where(a / b > 0, n, -n)",
    "m = isnull(log(b)) + isnull(a)",
    "t = not (a / b)",
    "l = (a > 0) & (b / a < 2)",
]


def _frame(n_rows: int = 400, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.choice([0.0, 1.0, -2.5, 3.0, np.nan, 7.25], size=n_rows)
    b = rng.choice([0.0, 2.0, -1.0, np.nan, 0.5], size=n_rows)
    n = rng.integers(0, 51, size=n_rows)
    return pd.DataFrame({"a": a, "b": b, "n": n})


def _pipeline(expression: str) -> fp.Pipeline:
    return fp.Pipeline(
        schema=SCHEMA,
        features=[
            fp.expr(expression) >> fp.FillMissing("median") >> fp.Standardize(),
            fp.expr("s = a * b") >> fp.FillMissing(-1) >> fp.MinMax(),
        ],
        target=fp.expr("y = a > b"),
    )


@pytest.mark.parametrize("competitor", ["polars", "pandas", "sklearn"])
@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_translation_matches_fastprep(competitor: str, expression: str) -> None:
    pipeline = _pipeline(expression)
    df = _frame()
    out = pipeline.fit_transform(df, backend="pandas")
    emitted = df.iloc[np.asarray(out.row_ids)].reset_index(drop=True)
    X, y = impls.get(competitor).factory(pipeline)(emitted)
    verdict = harness.compare(X, y, out.X, out.y)
    assert verdict["ok"], f"{competitor} on {expression!r}: {verdict['detail']}"


ADVERSARIAL = ["", "é", "a=b", "=", "x" * 300, "日本語", "LAX", None, "tail\u0000nul", "N12"]


@pytest.mark.parametrize("competitor", ["polars", "pandas", "sklearn"])
@pytest.mark.parametrize("alternate_sign", [True, False])
def test_hashing_translation_matches_fastprep(competitor: str, alternate_sign: bool) -> None:
    rng = np.random.default_rng(3)
    df = pd.DataFrame({
        "tag": rng.choice(np.array(ADVERSARIAL, dtype=object), size=500),
        "dest": rng.choice(np.array(["JFK", "LAX", "é=é", None], dtype=object), size=500),
        "a": rng.normal(size=500),
    })  # fmt: skip
    schema = fp.Schema({"tag": fp.String(nullable=True), "dest": fp.String(nullable=True),
                        "a": fp.Float()})  # fmt: skip
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.col("a") >> fp.Standardize(),
            fp.cols("tag", "dest") >> fp.Hash(n_features=2**5, alternate_sign=alternate_sign),
        ],
    )
    out = pipeline.fit_transform(df, backend="numba")
    emitted = df.iloc[np.asarray(out.row_ids)].reset_index(drop=True)
    X, y = impls.get(competitor).factory(pipeline)(emitted)
    verdict = harness.compare(X, y, out.X, out.y)
    assert verdict["ok"], f"{competitor}: {verdict['detail']}"
