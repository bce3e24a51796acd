"""``fp.Map``: a user's scalar function, JIT-compiled by Numba when it can be.

The function is compiled once per process into a Numba ufunc over float64; when Numba
cannot type it (strings, dicts, unsupported libraries), fastprep warns with Numba's reason
and falls back to ``np.vectorize`` — correct, but a Python call per value.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

_COMPILED: dict[int, tuple[Callable[[float], float], Callable[[np.ndarray], np.ndarray], str]] = {}


def compiled_map(func: Callable[[float], float]) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
    """``(vectorized function, how)`` where ``how`` is "numba" or "numpy (reason)"."""
    cached = _COMPILED.get(id(func))
    if cached is not None and cached[0] is func:
        return cached[1], cached[2]
    try:
        import numba

        ufunc = numba.vectorize(["float64(float64)"], nopython=True)(func)
        vectorized, how = ufunc, "numba"
    except Exception as exc:  # numba raises many typing/lowering error types
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        name = getattr(func, "__qualname__", repr(func))
        warnings.warn(
            f"fp.Map({name}): Numba could not compile it ({reason}); "
            "using a vectorized numpy fallback (a Python call per value)",
            RuntimeWarning,
            stacklevel=3,
        )
        vectorized, how = _python_fallback(func), f"numpy ({reason})"
    _COMPILED[id(func)] = (func, vectorized, how)
    return vectorized, how


def _python_value(func: Callable[[float], float], value: float) -> float:
    """The function on one value; an arithmetic error (1/0, log of -1) means missing."""
    try:
        return float(func(value))
    except (ArithmeticError, ValueError):
        return float("nan")


def _agrees_with_python(func: Callable[[float], float], vectorized, sample: np.ndarray) -> bool:
    """Numba's semantics can differ from Python's (e.g. ``str(1.0)``): check on a sample.

    Results that are not finite on both sides agree: either way the value becomes missing.
    """
    with np.errstate(all="ignore"):
        compiled = np.asarray(vectorized(sample), dtype=np.float64)
    try:
        expected = np.array([_python_value(func, float(v)) for v in sample], dtype=np.float64)
    except Exception:
        return False
    same = (compiled == expected) | (~np.isfinite(compiled) & ~np.isfinite(expected))
    return bool(same.all())


def _python_fallback(func: Callable[[float], float]):
    return np.vectorize(lambda v: _python_value(func, v), otypes=[np.float64])


def apply_map(func: Callable[[float], float], values: np.ndarray) -> tuple[np.ndarray, int]:
    """``func`` over the present values; returns the result and how many became missing."""
    vectorized, how = compiled_map(func)
    present_values = values[~np.isnan(values)]
    if how == "numba" and not _agrees_with_python(func, vectorized, present_values[:64]):
        name = getattr(func, "__qualname__", repr(func))
        warnings.warn(
            f"fp.Map({name}): the Numba-compiled function disagrees with Python on this data; "
            "using the vectorized numpy fallback",
            RuntimeWarning,
            stacklevel=2,
        )
        vectorized = _python_fallback(func)
        _COMPILED[id(func)] = (func, vectorized, "numpy (Numba result differed from Python)")
    out = np.full(len(values), np.nan)
    present = ~np.isnan(values)
    with np.errstate(all="ignore"):
        result = np.asarray(vectorized(values[present]), dtype=np.float64)
    bad = ~np.isfinite(result)
    result[bad] = np.nan
    out[present] = result
    return out, int(np.count_nonzero(bad))
