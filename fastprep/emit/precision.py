"""Output precision: float32 (default), float64, float16 and bfloat16, with checked narrowing.

Why a separate step: every backend computes in float32 (or float64 when asked); a narrow
type is a *storage* choice made at the very end, and narrowing is where values silently
become ``inf`` (float16 tops out at 65,504) or vanish to zero (below ~6e-8). So the cast here
looks at every value it narrows:

- **overflow** (a finite value whose nearest narrow value is ±inf) is a
  :class:`~fastprep.errors.DataValidationError` naming each column and its count
  (``on_overflow="raise"``, the default), or a recorded clip to the largest finite value
  (``on_overflow="clip"``) — never a silent inf;
- **underflow** (a non-zero value that becomes zero) and every other inexact value are
  counted; the counts go to ``report.precision``.

bfloat16 has no NumPy dtype: it is returned as ``uint16`` bit patterns (round to nearest
even from float32, the same rounding as ``torch.Tensor.bfloat16()``); ``to_torch`` views
them as ``torch.bfloat16``, and :func:`as_ml_dtypes_bfloat16` gives an ``ml_dtypes`` view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.errors import DataValidationError, PipelineDefinitionError

#: the dtype backends compute in, per output dtype
COMPUTE_DTYPES: dict[str, Any] = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float32,
    "bfloat16": np.float32,
    "int8": np.float32,
    "uint8": np.float32,
}
NARROW = ("float16", "bfloat16")
#: affine-quantized output (scale and zero point per column: :mod:`fastprep.emit.quantize`)
QUANTIZED = ("int8", "uint8")
POLICIES = ("raise", "clip")
#: largest finite values of the narrow types
FLOAT16_MAX = float(np.finfo(np.float16).max)
BFLOAT16_MAX = float(np.array([0x7F7F0000], dtype=np.uint32).view(np.float32)[0])
#: how many column names an overflow error lists before "..."
_NAMES_SHOWN = 8


@dataclass(frozen=True)
class Precision:
    """The requested output type and what to do with values beyond its range."""

    out_dtype: str = "float32"
    on_overflow: str = "raise"

    def __post_init__(self) -> None:
        if self.out_dtype not in COMPUTE_DTYPES:
            raise PipelineDefinitionError(
                f"out_dtype={self.out_dtype!r}; choose one of {sorted(COMPUTE_DTYPES)}"
            )
        if self.on_overflow not in POLICIES:
            raise PipelineDefinitionError(
                f"on_overflow={self.on_overflow!r}; choose one of {list(POLICIES)}"
            )

    @property
    def compute_dtype(self) -> Any:
        return COMPUTE_DTYPES[self.out_dtype]

    @property
    def narrow(self) -> bool:
        return self.out_dtype in NARROW

    @property
    def quantized(self) -> bool:
        return self.out_dtype in QUANTIZED


def narrow_values(
    values: np.ndarray, out_dtype: str, on_overflow: str = "raise"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cast float32/float64 ``values`` to ``out_dtype`` (any shape).

    Returns ``(narrowed, overflow, underflow, inexact)``: the narrow array (clipped where
    ``on_overflow="clip"``) and three boolean masks of ``values``' shape. Raising is left
    to the caller, who knows the column names.
    """
    source = np.asarray(values, dtype=np.float32)
    if out_dtype == "float16":
        with np.errstate(over="ignore", under="ignore"):
            narrowed = source.astype(np.float16)
        back = narrowed.astype(np.float32)
        top = FLOAT16_MAX
    elif out_dtype == "bfloat16":
        narrowed = float32_to_bfloat16_bits(source)
        back = bfloat16_bits_to_float32(narrowed)
        top = BFLOAT16_MAX
    else:
        raise PipelineDefinitionError(f"narrow_values: {out_dtype!r} is not a narrow type")
    overflow = np.isinf(back)
    underflow = (back == 0) & (source != 0)
    inexact = (back != source) & ~overflow
    if on_overflow == "clip" and overflow.any():
        clipped = np.where(source[overflow] > 0, top, -top).astype(np.float32)
        if out_dtype == "float16":
            narrowed[overflow] = clipped.astype(np.float16)
        else:
            narrowed[overflow] = float32_to_bfloat16_bits(clipped)
    return narrowed, overflow, underflow, inexact


def cast_dense(
    X: np.ndarray, precision: Precision, names: Sequence[str]
) -> tuple[np.ndarray, dict[str, Any]]:
    """A dense float32 ``X`` (rows × columns) narrowed as ``precision`` says, plus its report."""
    narrowed, overflow, underflow, inexact = narrow_values(
        X, precision.out_dtype, precision.on_overflow
    )
    per_column = overflow.sum(axis=0) if overflow.ndim == 2 else overflow.astype(np.int64)
    info = _info(precision, X.size, per_column, names, underflow, inexact)
    return np.ascontiguousarray(narrowed), info


def cast_sparse_data(
    data: np.ndarray, indices: np.ndarray, width: int, precision: Precision, names: Sequence[str]
) -> tuple[np.ndarray, dict[str, Any]]:
    """The stored values of a CSR matrix (column of each in ``indices``) narrowed."""
    narrowed, overflow, underflow, inexact = narrow_values(
        data, precision.out_dtype, precision.on_overflow
    )
    per_column = np.bincount(indices[overflow], minlength=width) if overflow.any() else None
    info = _info(precision, data.size, per_column, names, underflow, inexact)
    return narrowed, info


def _info(
    precision: Precision,
    n_values: int,
    overflow_per_column: np.ndarray | None,
    names: Sequence[str],
    underflow: np.ndarray,
    inexact: np.ndarray,
) -> dict[str, Any]:
    overflowed: dict[str, int] = {}
    if overflow_per_column is not None:
        for j in np.flatnonzero(overflow_per_column):
            overflowed[str(names[int(j)])] = int(overflow_per_column[j])
    if overflowed and precision.on_overflow == "raise":
        raise DataValidationError(overflow_message(precision.out_dtype, overflowed))
    return {
        "out_dtype": precision.out_dtype,
        "storage": "uint16 bfloat16 bits" if precision.out_dtype == "bfloat16" else "",
        "on_overflow": precision.on_overflow,
        "values": int(n_values),
        "values_inexact": int(inexact.sum()),
        "underflow_to_zero": int(underflow.sum()),
        "clipped": dict(overflowed),
    }


def overflow_message(out_dtype: str, overflowed: dict[str, int]) -> str:
    total = sum(overflowed.values())
    top = FLOAT16_MAX if out_dtype == "float16" else BFLOAT16_MAX
    shown = ", ".join(f"{name!r}: {n:,}" for name, n in list(overflowed.items())[:_NAMES_SHOWN])
    more = "" if len(overflowed) <= _NAMES_SHOWN else f", ... ({len(overflowed)} columns)"
    return (
        f"out_dtype={out_dtype!r}: {total:,} value(s) beyond its largest finite value "
        f"±{top:.6g} would become inf, in column(s) {shown}{more}; use out_dtype='float32' "
        "(or 'bfloat16', float32's range), scale the feature, or pass on_overflow='clip'"
    )


def merge_info(total: dict[str, Any] | None, part: dict[str, Any]) -> dict[str, Any]:
    """Sum the precision reports of several partitions (for streaming batches)."""
    if not total:
        return {**part, "clipped": dict(part["clipped"])}
    out = dict(total)
    for key in ("values", "values_inexact", "underflow_to_zero"):
        out[key] = total[key] + part[key]
    clipped = dict(total["clipped"])
    for name, n in part["clipped"].items():
        clipped[name] = clipped.get(name, 0) + n
    out["clipped"] = clipped
    return out


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of finite float32 ``values`` (round to nearest, ties to even)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bit patterns (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def as_ml_dtypes_bfloat16(bits: np.ndarray) -> np.ndarray:
    """A zero-copy ``ml_dtypes.bfloat16`` view of bit patterns (needs ``pip install ml_dtypes``)."""
    try:
        import ml_dtypes
    except ImportError as exc:
        raise ImportError(
            "a bfloat16 NumPy dtype needs ml_dtypes: pip install ml_dtypes "
            "(without it, bfloat16 output is uint16 bit patterns)"
        ) from exc
    return bits.view(ml_dtypes.bfloat16)
