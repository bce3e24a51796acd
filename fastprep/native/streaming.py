"""Non-temporal ("streaming") stores for Numba kernels that write large arrays once.

Why: a plain store to a line that is not in the cache first reads the line (a read for
ownership), then the line is written back: twice the memory traffic of the write. A
kernel that fills tens of MB it will not read again (the rows of X gathered from a
per-group table, the values of a counting sort) spends most of its time there; stores
marked non-temporal go to write-combining buffers and to memory whole, without the read
(the 80 MB gather of six float32 columns at 3.4M rows: 10 ms -> 5 ms on one core).

They pay only when every byte of each 64-byte line is written by consecutive stores: the
callers use them for contiguous rows, or for whole aligned lines. Non-temporal stores are
weakly ordered: a kernel ends with :func:`store_fence` before another thread reads what it
wrote.

This module imports Numba: kernel modules name its intrinsics through
:func:`fastprep.native.kernel_files.intrinsic`, which loads it when their kernels are made.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _nontemporal(builder: Any, store: Any) -> None:
    store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))


def _contiguous(array: Any) -> bool:
    return isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C"


@intrinsic
def stream_store(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
    """``array[index] = value`` as a non-temporal store (a 1-d contiguous array; ``value``
    of its element type; no bounds check)."""
    if not (_contiguous(array) and isinstance(index, types.Integer) and value == array.dtype):
        return None
    signature = types.void(array, index, value)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        _nontemporal(builder, builder.store(args[2], builder.gep(data, [args[1]])))
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def stream_line(typingctx: Any, target: Any, at: Any, source: Any, start: Any) -> Any:
    """``target[at:at + 8] = source[start:start + 8]`` (float64) as one 64-byte
    non-temporal store: ``target``'s element ``at`` must start a 64-byte line (no bounds
    check)."""
    float64 = types.float64
    if not (_contiguous(target) and _contiguous(source) and target.dtype == float64
            and source.dtype == float64):  # fmt: skip
        return None
    signature = types.void(target, at, source, start)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        line = ir.VectorType(ir.DoubleType(), 8).as_pointer()
        out = context.make_array(sig.args[0])(context, builder, args[0]).data
        into = context.make_array(sig.args[2])(context, builder, args[2]).data
        value = builder.load(builder.bitcast(builder.gep(into, [args[3]]), line), align=8)
        store = builder.store(value, builder.bitcast(builder.gep(out, [args[1]]), line), align=64)
        _nontemporal(builder, store)
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def store_fence(typingctx: Any) -> Any:
    """A full memory fence: the non-temporal stores before it are visible to every thread
    after it (a kernel calls it before it returns)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen
