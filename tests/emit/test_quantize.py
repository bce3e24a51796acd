"""int8/uint8 output: per-column scale and zero point fitted once, saved, reused; errors reported."""

from __future__ import annotations

import numpy as np
import pytest

import fastprep as fp
from fastprep.emit.quantize import Quantization, dequantize


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_quantized_output_is_within_half_a_step(dense_pipeline, flights_sample, dtype):
    train, test = flights_sample.iloc[:15000], flights_sample.iloc[15000:]
    fitted = dense_pipeline.fit(train).calibrate_quantization(train, dtype)
    q = fitted.quantization
    reference = fitted.transform(train)
    out = fitted.transform(train, out_dtype=dtype)
    assert out.X.dtype == np.dtype(dtype) and out.X.flags.c_contiguous
    error = np.abs(dequantize(out.X, q) - reference.X)
    steps = np.asarray(q.scale, dtype=np.float32)
    assert (error <= steps / 2 * (1 + 1e-5) + 1e-7).all()  # calibration rows: never clipped
    assert out.report.precision["clipped"] == {}
    np.testing.assert_allclose(list(out.report.precision["max_abs_error"].values()),
                               error.max(axis=0), rtol=1e-5, atol=1e-7)  # fmt: skip
    # one-hot columns are exactly 0/1 and zero is exact everywhere
    onehot = [i for i, n in enumerate(out.feature_names) if "=" in n]
    np.testing.assert_array_equal(dequantize(out.X, q)[:, onehot], reference.X[:, onehot])
    # new rows use the same parameters; values beyond the calibrated range are clipped, counted
    later = fitted.transform(test, out_dtype=dtype)
    wide = fitted.transform(test).X
    scale, zero = np.asarray(q.scale), np.asarray(q.zero_point)
    lo, hi = {"uint8": (0, 255), "int8": (-128, 127)}[dtype]
    codes = np.round(wide / scale) + zero
    expected = {n: int(c) for n, c in zip(later.feature_names, ((codes < lo) | (codes > hi)).sum(0))
                if c}  # fmt: skip
    assert later.report.precision["clipped"] == expected


def test_quantization_is_saved_with_the_fitted_state(dense_pipeline, flights_sample, tmp_path):
    fitted = dense_pipeline.fit(flights_sample).calibrate_quantization(flights_sample, "uint8")
    fitted.save(tmp_path / "p.fastprep")
    again = fp.load(tmp_path / "p.fastprep")
    assert again.quantization == fitted.quantization
    np.testing.assert_array_equal(again.transform(flights_sample, out_dtype="uint8").X,
                                  fitted.transform(flights_sample, out_dtype="uint8").X)  # fmt: skip
    stream = again.batches(flights_sample, batch_size=4096, out_dtype="uint8")
    assert all(X.dtype == np.uint8 for X, _ in stream)


def test_quantized_output_needs_calibration_and_dense_x(dense_pipeline, flights_pipeline,
                                                        flights_sample):  # fmt: skip
    fitted = dense_pipeline.fit(flights_sample)
    with pytest.raises(fp.PipelineDefinitionError, match="calibrate_quantization"):
        fitted.transform(flights_sample, out_dtype="int8")
    fitted.calibrate_quantization(flights_sample, "uint8")
    with pytest.raises(fp.PipelineDefinitionError, match="dtype='int8'"):
        fitted.transform(flights_sample, out_dtype="int8")
    sparse = flights_pipeline.fit(flights_sample)
    with pytest.raises(fp.PipelineDefinitionError, match="dense X"):
        sparse.calibrate_quantization(flights_sample, "int8")


def test_a_tampered_quantization_state_is_rejected():
    with pytest.raises(fp.StateFormatError, match="positive"):
        Quantization.from_dict({"dtype": "int8", "scale": [0.0], "zero_point": [0]})
    with pytest.raises(fp.StateFormatError, match="zero points"):
        Quantization.from_dict({"dtype": "uint8", "scale": [1.0], "zero_point": [300]})
