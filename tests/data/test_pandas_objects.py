"""Telling pandas objects without importing pandas, and the command line's pyarrow without
pandas: a run after it gives what a run in a process with pandas gives, also where
validation converts a column through pandas (the lookup tables' timestamps)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd

from fastprep.data.pandas_objects import is_pandas_frame, is_pandas_na, is_pandas_time

RUN = (
    "import hashlib, json, sys, numpy as np; {setup}"
    "from fastprep.pipeline import load_pipeline_file; "
    "out = load_pipeline_file({pipeline!r}).fit_transform({source!r}); "
    "X = out.matrix; parts = [X.data, X.indices, X.indptr] if hasattr(X, 'indptr') else [X]; "
    "digest = hashlib.sha256(b''.join(np.ascontiguousarray(p).tobytes() for p in parts)); "
    "print(json.dumps([digest.hexdigest(), out.quarantine_reason_texts(), "
    "'pandas' in sys.modules]))"
)


def _run(repo_root, setup: str) -> list:
    code = RUN.format(
        setup=setup,
        pipeline=str(repo_root / "pipelines" / "flights_lookups.py"),
        source=str(repo_root / "data_samples" / "flights.parquet"),
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300,
        cwd=repo_root,
    )  # fmt: skip
    return json.loads(result.stdout.splitlines()[-1])


def test_a_run_after_arrow_without_pandas_equals_one_with_pandas(repo_root) -> None:
    primed = _run(
        repo_root,
        "from fastprep.data.pandas_objects import arrow_without_pandas; "
        "assert arrow_without_pandas(); ",
    )
    with_pandas = _run(repo_root, "import pandas; ")
    assert primed[:2] == with_pandas[:2]
    assert primed[1]  # the sample has quarantined rows
    assert primed[2]  # pandas imported after all, by the timestamps' validation


def test_pandas_objects_are_told_apart() -> None:
    assert is_pandas_frame(pd.DataFrame({"a": [1]})) and not is_pandas_frame({"a": [1]})
    assert is_pandas_na(pd.NA) and not is_pandas_na(None) and not is_pandas_na(np.nan)
    assert is_pandas_time(pd.Timestamp("2024-01-01")) and is_pandas_time(pd.Timedelta(1))
    assert not is_pandas_time("2024-01-01")
