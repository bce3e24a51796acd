"""A fit whose rows were all quarantined says so: the error names the rows the input had and
the rules that set them aside, not "the input has no rows"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from support import REPO

import fastprep as fp


@pytest.fixture(scope="module")
def weather() -> pd.DataFrame:
    return pd.read_parquet(REPO / "data_samples" / "weather.parquet").iloc[::5]


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_every_row_quarantined_by_the_target(weather, backend):
    frame = weather.assign(pressure=np.nan)  # the target's column: all missing
    schema = fp.Schema({"temp": fp.Float(nullable=True), "pressure": fp.Float()})
    pipeline = fp.Pipeline(schema, [fp.col("temp") >> fp.Standardize()], target="pressure")
    for run in (pipeline.fit, pipeline.fit_transform):
        with pytest.raises(fp.FitError) as info:
            run(frame, backend=backend)
        message = str(info.value)
        assert "Standardize" in message and "'temp'" in message
        assert f"all {len(frame):,} rows of the input were quarantined" in message
        assert "column 'pressure'" in message and "rule 'null'" in message
        assert "the input has no rows" not in message


def test_every_row_quarantined_by_a_feature_rule(weather):
    schema = fp.Schema({"temp": fp.Float(max=-100), "origin": fp.Category()})
    pipeline = fp.Pipeline(schema, [fp.col("temp") >> fp.MinMax()])
    with pytest.raises(fp.FitError, match=r"rule 'above_max'.*-> quarantine"):
        pipeline.fit(weather)


@pytest.mark.parametrize("backend", ["pandas", "numba"])
@pytest.mark.parametrize("steps", [(fp.Standardize(),), (fp.FillMissing("median"), fp.MinMax())])
def test_an_empty_input_still_says_it_is_empty(weather, backend, steps):
    """On every backend (``auto`` picks Numba once its kernels are ready, which earlier
    tests in the same process decide): the error says whether there were rows at all."""
    schema = fp.Schema({"temp": fp.Float(nullable=True)})
    feature = fp.col("temp")
    for step in steps:
        feature = feature >> step
    pipeline = fp.Pipeline(schema, [feature])
    with pytest.raises(fp.FitError, match="no rows") as info:
        pipeline.fit(weather.iloc[:0], backend=backend)
    assert "quarantined" not in str(info.value)
    with pytest.raises(fp.FitError, match=f"all {len(weather):,} missing"):
        pipeline.fit(weather.assign(temp=np.nan), backend=backend)
