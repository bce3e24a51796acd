"""``Output.to_torch`` converts through :mod:`fastprep.emit.tensors`: the run layer's
``Output`` never loads the torch integration (its IterableDataset) to make tensors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import REPO

pytest.importorskip("torch")

SCRIPT = """
import sys
import fastprep as fp
import pandas as pd
frame = pd.read_parquet("data_samples/flights.parquet").head(2000)
pipeline = fp.Pipeline(fp.Schema({"distance": fp.Float(min=0)}),
                       [fp.col("distance") >> fp.Standardize()])
X, y = pipeline.fit_transform(frame).to_torch()
assert tuple(X.shape) == (2000, 1) and y is None
print(sorted(m for m in sys.modules if m.startswith("fastprep.integrations")))
"""


def test_to_torch_loads_no_integration():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "[]"
