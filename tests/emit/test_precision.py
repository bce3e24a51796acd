"""Narrow output types: float16 overflow is caught, clips are recorded, precision loss counted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.emit.precision import (
    BFLOAT16_MAX,
    bfloat16_bits_to_float32,
    float32_to_bfloat16_bits,
)


def _raw_pipeline() -> fp.Pipeline:
    """Values pass through unscaled, so their magnitude reaches X."""
    schema = fp.Schema({"distance": fp.Float(min=0), "arr_delay": fp.Float(nullable=True),
                        "carrier": fp.Category()})  # fmt: skip
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.expr("big = distance * 100"),  # up to ~500,000: beyond float16's 65,504
            fp.col("distance") >> fp.Standardize(),
            fp.col("carrier") >> fp.OneHot(),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )


@pytest.fixture
def flights_small(flights_sample: pd.DataFrame) -> pd.DataFrame:
    return flights_sample.dropna(subset=["arr_delay"]).head(3000).reset_index(drop=True)


def test_float16_overflow_is_an_error_naming_the_column_and_count(flights_small):
    fitted = _raw_pipeline().fit(flights_small)
    expected = int((flights_small["distance"] * 100 > 65504).sum())
    assert expected > 0
    with pytest.raises(fp.DataValidationError) as err:
        fitted.transform(flights_small, out_dtype="float16")
    message = str(err.value)
    assert "'big'" in message and f"{expected:,}" in message and "on_overflow='clip'" in message
    assert "'distance'" not in message  # the standardized column fits


def test_float16_clip_is_recorded_and_never_inf(flights_small):
    fitted = _raw_pipeline().fit(flights_small)
    reference = fitted.transform(flights_small)
    out = fitted.transform(flights_small, out_dtype="float16", on_overflow="clip")
    assert out.X.dtype == np.float16 and out.X.flags.c_contiguous
    assert np.isfinite(out.X).all()
    big = reference.X[:, 0]
    expected = int((big > 65504).sum())
    assert out.report.precision["clipped"] == {"big": expected}
    assert (out.X[big > 65504, 0] == np.float16(65504)).all()
    # every other value is the nearest float16; the report counts those that changed
    wide = out.X.astype(np.float32)
    inexact = wide != reference.X
    inexact[big > 65504, 0] = False  # clipped, not merely inexact
    assert out.report.precision["values_inexact"] == int(inexact.sum()) > 0
    np.testing.assert_array_equal(out.X[big <= 65504], reference.X[big <= 65504].astype(np.float16))
    assert "precision: float16" in out.report.summary()
    assert out.report.to_dict()["precision"]["clipped"] == {"big": expected}


def test_float16_underflow_is_counted():
    schema = fp.Schema({"x": fp.Float(), "y": fp.Float()})
    pipe = fp.Pipeline(schema=schema, features=[fp.expr("tiny = x * 1e-9")], target="y")
    frame = pd.DataFrame({"x": [0.0, 1.0, 2.0, 1e5], "y": [0.0, 1.0, 0.0, 1.0]})
    out = pipe.fit_transform(frame, out_dtype="float16")
    # 1e-9 and 2e-9 are below float16's smallest subnormal (6e-8): flushed to zero
    assert out.report.precision["underflow_to_zero"] == 2
    assert out.X[:, 0].tolist() == [0.0, 0.0, 0.0, float(np.float16(1e-4))]


def test_bfloat16_bits_round_like_torch_and_keep_float32_range(flights_small):
    values = np.array([1.0, 1.00390625, 1.01171875, -3.40e38, 3.0e38, 1e-40, 0.0], np.float32)
    bits = float32_to_bfloat16_bits(values)
    assert bits.dtype == np.uint16
    back = bfloat16_bits_to_float32(bits)
    assert back[0] == 1.0 and back[1] == 1.0  # tie rounds to even
    assert back[2] == np.float32(1.015625)
    assert np.isinf(back[3])  # beyond bfloat16's max (3.39e38): overflow
    assert abs(back[4] - 3.0e38) / 3.0e38 < 2**-8
    fitted = _raw_pipeline().fit(flights_small)
    out = fitted.transform(flights_small, out_dtype="bfloat16")  # 500,000 fits bfloat16
    reference = fitted.transform(flights_small)
    assert out.X.dtype == np.uint16 and out.out_dtype == "bfloat16"
    relative = np.abs(bfloat16_bits_to_float32(out.X) - reference.X) / np.maximum(
        np.abs(reference.X), 1e-30
    )
    assert relative.max() <= 2**-8
    assert out.report.output["dtype"] == "bfloat16"
    assert pytest.approx(3.3895313892515355e38) == BFLOAT16_MAX


def test_sparse_float16_output_keeps_the_csr_structure(flights_pipeline, flights_sample):
    fitted = flights_pipeline.fit(flights_sample)
    wide = fitted.transform(flights_sample)
    narrow = fitted.transform(flights_sample, out_dtype="float16")
    assert narrow.X.format == "csr" and narrow.X.data.dtype == np.float16
    np.testing.assert_array_equal(narrow.X.indptr, wide.X.indptr)
    np.testing.assert_array_equal(narrow.X.data, wide.X.data.astype(np.float16))
    assert narrow.report.precision["values"] == wide.X.nnz


def test_unknown_dtype_or_policy_is_a_definition_error(flights_small):
    fitted = _raw_pipeline().fit(flights_small)
    with pytest.raises(fp.PipelineDefinitionError, match="choose one of"):
        fitted.transform(flights_small, out_dtype="int4")
    with pytest.raises(fp.PipelineDefinitionError, match="on_overflow"):
        fitted.transform(flights_small, out_dtype="float16", on_overflow="ignore")


def test_cli_writes_float16_and_reports_the_precision(tmp_path, repo_root, capsys):

    from fastprep.cli import main

    code = main(["run", str(repo_root / "pipelines" / "flights.py"), "--out-dtype", "float16",
                 "--output", str(tmp_path / "o")])  # fmt: skip
    assert code == 0
    assert "precision: float16" in capsys.readouterr().out
    report = fp.open_output(tmp_path / "o").report
    assert report["output"]["dtype"] == "float16" and report["precision"]["values_inexact"] > 0
    opened = fp.open_output(tmp_path / "o")
    assert opened.X.dtype == np.float16 and opened.out_dtype == "float16"
