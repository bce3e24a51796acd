"""Helpers shared by test modules (``from support import ...``): comparing outputs, and the
dense variant of the bundled flights pipeline.

Test modules never import ``conftest``: with one conftest per folder, which of them answers
to that module name depends on collection order.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import fastprep as fp

REPO = Path(__file__).resolve().parent.parent


def to_dense(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def assert_same_matrix(a, b) -> None:
    """Exactly the same matrix: same layout, dtype, shape and bits (CSR arrays compared)."""
    assert sp.issparse(a) == sp.issparse(b)
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    if sp.issparse(a):
        assert a.format == b.format == "csr"
        assert np.array_equal(a.indptr, b.indptr)
        assert np.array_equal(a.indices, b.indices)
        assert np.array_equal(a.data, b.data)
    else:
        assert np.array_equal(a, b)


def dense_flights_pipeline() -> fp.Pipeline:
    """``pipelines/flights.py`` without the hashed block: every column dense (25 columns)."""
    schema = fp.Schema({
        "dep_delay": fp.Float(nullable=True, min=-120, max=2000),
        "arr_delay": fp.Float(nullable=False),
        "air_time": fp.Float(nullable=True, min=0),
        "distance": fp.Float(min=0),
        "hour": fp.Int(min=0, max=24), "minute": fp.Int(min=0, max=59),
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
        "carrier": fp.Category(),
    })  # fmt: skip
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.cols("dep_delay") >> fp.FillMissing(0) >> fp.Clip(-60, 600) >> fp.Standardize(),
            fp.col("distance") >> fp.Log1p() >> fp.Standardize(),
            fp.expr("speed = distance / air_time * 60")
            >> fp.FillMissing("median")
            >> fp.Standardize(),
            fp.expr("dep_hour = hour + minute / 60") >> fp.MinMax(),
            fp.cols("origin", "carrier") >> fp.OneHot(),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )


def streaming_budget(pipeline: fp.Pipeline, source) -> int:
    """A budget between the streamed run's predicted peak (smallest partitions) and the
    in-memory run's, by the pre-flight's own model: the planner must stream."""
    from fastprep.runtime import preflight

    pre = preflight.run_preflight(pipeline.optimized, pipeline.schema, source, budget="100GB")
    per_row = (
        preflight.STREAM_WORKING_COPIES * (pre.input_bytes + pre.output_bytes)
        + preflight.STREAM_PREFETCH_COPIES * pre.input_bytes
    ) / pre.n_rows
    rows = preflight.smallest_partition_rows(source)
    streamed = preflight.PROCESS_BASE_BYTES + preflight.RUN_FIXED_BYTES + rows * per_row
    # what a partitioned fit gathers on the client (target encodings, group medians, ...)
    streamed += preflight.gathered_bytes(pipeline.optimized, pre.n_rows, cross_fit=True)[0]
    memory = pre.options[0].peak_bytes
    assert streamed < memory
    return int((streamed + memory) / 2 / (1 - preflight.BUDGET_MARGIN))


def text_key_parts(
    rng: np.random.Generator, n: int
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[int]]:
    """Two text keys' ``(codes, lut)`` parts over ``n`` rows and their sizes, as GroupStats'
    kernels take them: codes from -1 (missing) to the key's uniques, and a lut mapping
    each code to its level, one of them (code 1) unseen at fit (-1)."""
    parts, sizes = [], []
    for uniques in (4, 9):
        codes = rng.integers(-1, uniques, n).astype(np.int32)
        lut = np.append(rng.permutation(uniques), uniques).astype(np.int64)
        lut[1] = -1  # unseen at fit
        parts.append((codes, lut))
        sizes.append(uniques + 1)
    return parts, sizes


def assert_same_drift(got: dict, want: dict) -> None:
    """Two drift reports (or profiles) equal: floats within 1e-9 (partitions' measures are
    merged in another order), missing where missing; ``unseen_examples`` (the first three
    seen: partition order) not compared."""
    assert got.keys() == want.keys()
    for column, entry in want.items():
        assert got[column].keys() == entry.keys(), column
        for key, value in entry.items():
            if isinstance(value, float) and not math.isnan(value):
                assert got[column][key] == pytest.approx(value, rel=1e-9, abs=1e-12), (column, key)
            elif key != "unseen_examples":
                assert got[column][key] == value or (
                    isinstance(value, float) and math.isnan(got[column][key])
                ), (column, key)  # fmt: skip
