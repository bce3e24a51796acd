"""A wide fused stage is compiled as several Numba kernels of bounded size, with the
results of one kernel.

Numba's SSA pass recurses once per basic block: one kernel for 100 standardized columns
(or 40 features of ``where``/``max``/``//``) raised RecursionError while compiling. The
stage's chains are cut into consecutive parts; every chain is computed on its own, so the
parts give the reference's output, repairs and fitted state bit for bit.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.backends.numba import backend as numba_backend
from fastprep.backends.numba.codegen import transform_program
from fastprep.runtime import execute

BRANCH = re.compile(r"\b(?:if|elif|while|and|or)\b")
NUMBERS = ["temp", "humid", "wind_gust", "precip", "pressure"]


@pytest.fixture(autouse=True)
def _serial_numba(monkeypatch):
    """The (identical) serial variant compiles faster."""
    monkeypatch.setenv("FASTPREP_NUMBA_PARALLEL", "0")


@pytest.fixture(scope="module")
def weather(repo_root) -> pd.DataFrame:
    frame = pd.read_parquet(repo_root / "data_samples" / "weather.parquet").iloc[::9]
    return frame.reset_index(drop=True)


def _schema() -> fp.Schema:
    return fp.Schema({**{c: fp.Float(nullable=True) for c in NUMBERS}, "origin": fp.Category(),
                      "time_hour": fp.Datetime(tz="America/New_York")})  # fmt: skip


def test_a_wide_stage_is_cut_into_kernels_within_the_budget(weather) -> None:
    features = [
        fp.expr(f"x{i} = temp * {i + 1} + humid") >> fp.FillMissing(0) >> fp.Standardize()
        for i in range(100)
    ]
    pipeline = fp.Pipeline(_schema(), features)
    plan = pipeline.optimized
    (stage,) = [s for s in plan.stages if s.kind == "fused"]
    table = execute.prepare(plan, pipeline.schema, weather, phase="fit", backend="numba").table
    chains = numba_backend.chains_of(plan, stage)
    whole = transform_program(chains, set(), False).source
    assert len(BRANCH.findall(whole)) > 2 * numba_backend.KERNEL_BRANCHES  # what failed
    parts = numba_backend.kernel_parts(chains, table)
    assert len(parts) > 1 and [c for part in parts for c in part] == chains
    for part in parts:
        source = transform_program(part, set(), False).source
        assert len(BRANCH.findall(source)) <= numba_backend.KERNEL_BRANCHES


def test_kernels_of_parts_give_the_references_output(weather, monkeypatch) -> None:
    """A small budget cuts an ordinary stage (date parts, text, medians, quantiles,
    repairs) into many kernels: output, repairs and fitted state equal the reference's."""
    monkeypatch.setattr(numba_backend, "KERNEL_BRANCHES", 12)
    features = [
        fp.cols("temp", "humid") >> fp.FillMissing("median") >> fp.Standardize(),
        fp.expr("gust = where(wind_gust > 20, wind_gust // 5, max(precip, 0.5))")
        >> fp.FillMissing(-1),
        fp.expr("local = hour(time_hour) + minute(time_hour) / 60"),
        fp.expr("ewr = startswith(origin, 'EW')"),
        fp.expr("p = log(pressure - 1000)") >> fp.FillMissing(0) >> fp.MinMax(),
        fp.col("precip") >> fp.QuantileTransform(20) >> fp.Bin(3),
        fp.expr("w = wind_gust") >> fp.RobustScale() >> fp.Clip(-2, 2) >> fp.FillMissing(0),
    ]
    pipeline = fp.Pipeline(_schema(), features)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = pipeline.fit(weather, backend="numba")
        out = fitted.transform(weather, backend="numba")
        want = pipeline.fit(weather, backend="pandas").transform(weather, backend="pandas")
    assert len(out.report.kernels) > 3  # one kernel per part and fit round
    np.testing.assert_array_equal(out.X, want.X)
    assert out.report.repairs == want.report.repairs and out.report.repairs


@pytest.mark.slow
def test_a_hundred_standardized_columns_compile_on_numba(weather) -> None:
    """The case that raised RecursionError in Numba's SSA pass (~1 min of compiling)."""
    features = [
        fp.expr(f"x{i} = temp * {i + 1} + humid") >> fp.FillMissing(0) >> fp.Standardize()
        for i in range(100)
    ]
    pipeline = fp.Pipeline(_schema(), features)
    out = pipeline.fit_transform(weather, backend="numba")
    want = pipeline.fit_transform(weather, backend="pandas")
    np.testing.assert_array_equal(out.X, want.X)
