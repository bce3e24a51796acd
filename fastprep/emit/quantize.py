"""Quantized dense output: int8/uint8 with a per-column scale and zero point (affine).

Why: memory-bound training or inference can read a quarter of float32's bytes. The scale and
zero point of each column are *fitted state* — learned once from calibration rows
(``fitted.calibrate_quantization(source, dtype)``), saved with the pipeline, and reused
unchanged by every transform, so the same value always maps to the same code:

    q = clip(round(x / scale) + zero_point, qmin, qmax)      x ≈ (q - zero_point) * scale

Each column's calibrated range is widened to include 0, so 0 (one-hot zeros, a centred
mean) is represented exactly. A value outside the calibrated range is clipped and counted
per column; the report gives each column's largest and mean absolute error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.errors import PipelineDefinitionError, StateFormatError

QUANT_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


@dataclass(frozen=True)
class Quantization:
    """Per-column affine parameters of an int8/uint8 output."""

    dtype: str
    scale: tuple[float, ...]
    zero_point: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "scale": list(self.scale), "zero_point": list(self.zero_point)}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Quantization:
        try:
            q = cls(str(doc["dtype"]), tuple(float(s) for s in doc["scale"]),
                    tuple(int(z) for z in doc["zero_point"]))  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise StateFormatError(f"malformed quantization state: {exc}") from None
        lo, hi = QUANT_RANGES.get(q.dtype, (None, None))
        if lo is None or len(q.scale) != len(q.zero_point):
            raise StateFormatError(f"malformed quantization state for dtype {q.dtype!r}")
        if not all(np.isfinite(s) and s > 0 for s in q.scale):
            raise StateFormatError("quantization scales must be finite and positive")
        if not all(lo <= z <= hi for z in q.zero_point):
            raise StateFormatError(f"quantization zero points must lie in [{lo}, {hi}]")
        return q


def calibrate(X: np.ndarray, dtype: str) -> Quantization:
    """Scale and zero point of each column of dense ``X`` (its range widened to include 0)."""
    if dtype not in QUANT_RANGES:
        raise PipelineDefinitionError(
            f"quantize dtype={dtype!r}; choose one of {list(QUANT_RANGES)}"
        )
    if not isinstance(X, np.ndarray) or X.ndim != 2:
        raise PipelineDefinitionError(
            "quantized output needs dense X: this pipeline emits CSR (a sparse encoder)"
        )
    qmin, qmax = QUANT_RANGES[dtype]
    lo = np.minimum(X.min(axis=0, initial=0.0), 0.0).astype(np.float64)
    hi = np.maximum(X.max(axis=0, initial=0.0), 0.0).astype(np.float64)
    scale = (hi - lo) / (qmax - qmin)
    scale[scale == 0] = 1.0  # a constant-zero column: any scale represents it exactly
    zero = np.clip(np.round(qmin - lo / scale), qmin, qmax).astype(np.int64)
    return Quantization(dtype, tuple(scale.tolist()), tuple(zero.tolist()))


def quantize(
    X: np.ndarray, q: Quantization, names: Sequence[str]
) -> tuple[np.ndarray, dict[str, Any]]:
    """``X`` as ``q.dtype`` codes, with clipped counts and errors per column."""
    if not isinstance(X, np.ndarray) or X.ndim != 2:
        raise PipelineDefinitionError("quantized output needs dense X (this output is CSR)")
    if X.shape[1] != len(q.scale):
        raise PipelineDefinitionError(
            f"quantization was calibrated for {len(q.scale)} columns, X has {X.shape[1]}"
        )
    qmin, qmax = QUANT_RANGES[q.dtype]
    scale = np.asarray(q.scale, dtype=np.float64)
    zero = np.asarray(q.zero_point, dtype=np.float64)
    codes = np.round(X / scale) + zero
    clipped = ((codes < qmin) | (codes > qmax)).sum(axis=0)
    out = np.clip(codes, qmin, qmax).astype(q.dtype)
    error = np.abs(dequantize(out, q).astype(np.float64) - X)
    rows = max(X.shape[0], 1)
    info = {
        "out_dtype": q.dtype,
        "values": int(X.size),
        "clipped": {str(names[j]): int(clipped[j]) for j in np.flatnonzero(clipped)},
        "max_abs_error": {str(n): float(e) for n, e in zip(names, error.max(axis=0, initial=0))},
        "mean_abs_error": {str(n): float(e) for n, e in zip(names, error.sum(axis=0) / rows)},
    }
    return np.ascontiguousarray(out), info


def dequantize(codes: np.ndarray, q: Quantization) -> np.ndarray:
    """float32 values of quantized codes: ``(q - zero_point) * scale``."""
    scale = np.asarray(q.scale, dtype=np.float64)
    zero = np.asarray(q.zero_point, dtype=np.float64)
    return ((codes.astype(np.float64) - zero) * scale).astype(np.float32)
