"""Exact floating-point operations for Numba kernels, as intrinsics.

``fma(a, b, c)``: ``a * b + c`` rounded once (LLVM's ``llvm.fma``: the CPU's fused
multiply-add where it has one, else the C library's correctly rounded ``fma``). Its use
here: the rounding error of a square, ``fma(x, x, -x * x)``, exact in one instruction where
Veltkamp's split and Dekker's product take seven (the same value whenever the square does
not overflow or underflow, which the callers rule out first).

This module imports Numba: kernel modules name its intrinsics through
:func:`fastprep.native.kernel_files.intrinsic`, which loads it when their kernels are made.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def fma(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` with one rounding (float64)."""
    if not all(x == types.float64 for x in (a, b, c)):
        return None
    signature = types.float64(types.float64, types.float64, types.float64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        double = ir.DoubleType()
        kind = ir.FunctionType(double, [double, double, double])
        return builder.call(builder.module.declare_intrinsic("llvm.fma", [double], kind), args)

    return signature, codegen
