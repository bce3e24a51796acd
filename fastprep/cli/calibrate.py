"""``fastprep calibrate``: measure the planner's cost constants on this machine.

A generated frame (numbers with missing values, low-cardinality and high-cardinality text)
runs through a pipeline with one stage of each kind — fused element-wise chains, one-hot
encoding, hashing — on every backend at two sizes. Each stage's measured seconds (the
``report.plan`` entries) at the two sizes give a per-row-unit cost (the slope) and a per-stage
overhead (the intercept); JIT one-time costs are measured as the first call's extra time.
The result is stored as JSON (``planner.profile_path()``) and read by later runs.
"""

from __future__ import annotations

import platform
import statistics
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fastprep.api import cols, expr
from fastprep.api.schema import Category, Float, Schema, String
from fastprep.backends import stages as stage_backends
from fastprep.pipeline import Pipeline
from fastprep.plan.steps import Clip, FillMissing, Hash, Log1p, OneHot, Standardize
from fastprep.planning import planner

if TYPE_CHECKING:
    import pandas as pd

SIZES = (40_000, 320_000)
REPEAT = 3


def sample_frame(n_rows: int, seed: int = 0) -> pd.DataFrame:
    """Numbers with 2% missing, 3- and 20-value categories and ~n/10 distinct IDs."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": rng.normal(size=n_rows) * (i + 1) for i in range(4)})
    for name in frame.columns:
        frame.loc[rng.random(n_rows) < 0.02, name] = np.nan
    frame["small"] = pd.Series(rng.choice(["a", "b", "c"], n_rows), dtype="str")
    frame["medium"] = pd.Series(rng.choice([f"m{i}" for i in range(20)], n_rows), dtype="str")
    ids = rng.integers(0, max(n_rows // 10, 1), n_rows)
    frame["ident"] = pd.Series([f"id-{i}" for i in ids], dtype="str")
    return frame


def sample_pipeline() -> Pipeline:
    numbers = {f"x{i}": Float(nullable=True) for i in range(4)}
    schema = Schema({**numbers, "small": Category(), "medium": Category(), "ident": String()})
    return Pipeline(
        schema,
        [
            cols(*numbers) >> FillMissing("mean") >> Clip(-5, 5) >> Standardize(),
            expr("ratio = x0 / (abs(x1) + 1)") >> FillMissing(0.0) >> Log1p(),
            cols("small", "medium") >> OneHot(),
            cols("medium", "ident") >> Hash(2**18),
        ],
    )


def _stage_seconds(pipeline: Pipeline, frame: pd.DataFrame, backend: str) -> list[dict]:
    out = pipeline.fit_transform(frame, backend=backend)
    return out.report.plan


def calibrate(
    sizes: tuple[int, int] = SIZES,
    repeat: int = REPEAT,
    progress: Callable[[str], None] | None = None,
) -> planner.CostProfile:
    """Measure every constant of :class:`planner.CostProfile` (about a minute at most)."""
    say = progress or (lambda _m: None)
    pipeline = sample_pipeline()
    frames = {n: sample_frame(n) for n in sizes}
    # one-time costs: the kernels' compile or disk-cache load times of a first numba run
    hash_cold = stage_backends.hash_readiness() != planner.READY
    first_report = pipeline.fit_transform(frames[sizes[0]], backend="numba").report
    first = first_report.kernels
    first_hash = sum(
        sum((e["measured_seconds"] or {}).values())
        for e in first_report.plan
        if e["kind"] == "hash"
    )
    loads = [k["seconds"] for k in first if k["cache_hit"]]
    compiles = [k["seconds"] for k in first if not k["cache_hit"]]
    say(f"numba kernels: {len(loads)} loaded from the disk cache, {len(compiles)} compiled")
    measured: dict[tuple[str, str, int], list[float]] = {}
    units: dict[str, int] = {}
    for n, frame in frames.items():
        for backend in ("pandas", "numba"):
            for _ in range(repeat):
                for entry in _stage_seconds(pipeline, frame, backend):
                    seconds = sum((entry["measured_seconds"] or {}).values())
                    measured.setdefault((backend, entry["kind"], n), []).append(seconds)
                    units[entry["kind"]] = entry["units"]
            say(f"{backend} at {n:,} rows measured")
    slopes: dict[tuple[str, str], tuple[float, float]] = {}
    small, large = sizes
    for (backend, kind, n), _values in measured.items():
        if n != small:
            continue
        a = statistics.median(measured[(backend, kind, small)])
        b = statistics.median(measured[(backend, kind, large)])
        per_unit = max(b - a, 0.0) / ((large - small) * max(units[kind], 1))
        overhead = max(a - per_unit * small * units[kind], 0.0)
        slopes[(backend, kind)] = (per_unit, overhead)
    defaults = planner.CostProfile()

    def slope(backend: str, kind: str, default: float) -> float:
        value = slopes[(backend, kind)][0]
        return value if value > 0 else default  # lost in noise: keep the shipped constant

    return planner.CostProfile(
        pandas_stage_seconds=slopes[("pandas", "elementwise")][1],
        pandas_row_unit_seconds=slope("pandas", "elementwise", defaults.pandas_row_unit_seconds),
        pandas_hash_row_unit_seconds=slope("pandas", "hash", defaults.pandas_hash_row_unit_seconds),
        numba_stage_seconds=slopes[("numba", "elementwise")][1],
        numba_row_unit_seconds=slope("numba", "elementwise", defaults.numba_row_unit_seconds),
        numba_hash_row_unit_seconds=slope("numba", "hash", defaults.numba_hash_row_unit_seconds),
        numba_import_seconds=defaults.numba_import_seconds,  # measured once per process only
        numba_cache_load_seconds=(
            statistics.median(loads) if loads else defaults.numba_cache_load_seconds
        ),
        numba_compile_seconds=(
            statistics.median(compiles) if compiles else defaults.numba_compile_seconds
        ),
        numba_hash_load_seconds=(  # the first hashing call's extra time over a warm one
            max(first_hash - statistics.median(measured[("numba", "hash", small)]), 0.0)
            if hash_cold
            else defaults.numba_hash_load_seconds
        ),
        source=(
            f"fastprep calibrate on {platform.node()} ({platform.machine()}), "
            f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}"
        ),
    )


def run(path: Path | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """Calibrate and store the profile; returns where it was written."""
    return planner.save_profile(calibrate(progress=progress), path)
