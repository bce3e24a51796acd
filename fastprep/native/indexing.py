"""Array indices for Numba kernels without the negative-index test, as an intrinsic.

Numba tests every signed index for a negative value (Python's wraparound) at each
access, which LLVM removes only where it proves the index non-negative; an unsigned index
has no test. ``slot(code, last)``: ``code`` as an unsigned index, where a signed code
below 0 (the kernels' "-1: the last slot", a missing key or an unseen group) reads
``last``, as wraparound made it, and not past every slot as a plain unsigned cast would;
an unsigned code is only widened (it has no -1: no comparison at all, which a ``min``
in the kernel would still pay for).

This module imports Numba: kernel modules name its intrinsic through
:func:`fastprep.native.kernel_files.intrinsic`, which loads it when their kernels are made.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def slot(typingctx: Any, code: Any, last: Any) -> Any:
    """``code`` as a uint64 index; a signed one's negative value (or one above ``last``)
    is ``last``."""
    if not (isinstance(code, types.Integer) and isinstance(last, types.Integer)):
        return None
    signature = types.uint64(code, last)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        wide = ir.IntType(64)
        value, top = args
        if sig.args[0].bitwidth < 64:
            value = (builder.sext if sig.args[0].signed else builder.zext)(value, wide)
        if not sig.args[0].signed:
            return value
        if sig.args[1].bitwidth < 64:
            top = (builder.sext if sig.args[1].signed else builder.zext)(top, wide)
        # unsigned, -1 is the largest value: the smaller of the two is ``last`` for it
        return builder.select(builder.icmp_unsigned("<", value, top), value, top)

    return signature, codegen
