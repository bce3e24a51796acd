"""Numeric numpy arrays as Arrow arrays, without ``pa.array``.

``pa.array`` of a numpy array imports numpy.ma (~7 ms of a fresh process) to test whether
it was given a masked array; so do ``np.unique``, ``np.median`` and other numpy functions.
A command-line job that needs none of them leaves it unimported; the arrays it hands to
Arrow go through here: wrapped as they are (no copy for a contiguous array of the type).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def numeric_array(values: np.ndarray, type: pa.DataType | None = None) -> pa.Array:
    """A 1-d integer or float array (no nulls) as Arrow, of ``type`` (default: its own);
    what ``pa.array(values, type=type)`` gives for such an array."""
    values = np.asarray(values)
    if values.ndim != 1 or values.dtype.kind not in "iuf":
        raise TypeError(f"numeric_array takes a 1-d integer or float array, not {values.dtype}")
    if type is not None:
        values = values.astype(type.to_pandas_dtype(), copy=False)
    values = np.ascontiguousarray(values)
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])
