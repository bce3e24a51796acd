"""Recognise pandas objects without importing pandas.

A job that reads files never needs pandas, and importing it costs a fresh process ~0.2 s;
an object of pandas can only exist once pandas is imported, so ``sys.modules`` answers.
A pandas another thread is still importing (a Dask worker running two tasks at once) is
in ``sys.modules`` half made, without its names yet: it counts as not imported.
"""

from __future__ import annotations

import sys
from typing import Any


def loaded_pandas() -> Any:
    """The pandas module if this process imported it (whole), else None."""
    pd = sys.modules.get("pandas")
    if pd is None or getattr(getattr(pd, "__spec__", None), "_initializing", False):
        return None
    return pd


def is_pandas_frame(obj: Any) -> bool:
    """Whether ``obj`` is a pandas DataFrame."""
    pd = loaded_pandas()
    return pd is not None and isinstance(obj, pd.DataFrame)


def is_pandas_na(value: Any) -> bool:
    """Whether ``value`` is ``pandas.NA``."""
    pd = loaded_pandas()
    return pd is not None and value is pd.NA


def is_pandas_time(value: Any) -> bool:
    """Whether ``value`` is a pandas ``Timestamp`` or ``Timedelta``."""
    pd = loaded_pandas()
    return pd is not None and isinstance(value, (pd.Timestamp, pd.Timedelta))


class _RefusePandas:
    """A meta-path finder under which ``import pandas`` fails (and nothing else changes)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "pandas":
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: Any) -> None:
        raise ImportError("pandas is not imported by a job that reads only files")

    def exec_module(self, module: Any) -> None:  # pragma: no cover - create_module raises
        pass


def arrow_without_pandas() -> bool:
    """Let pyarrow work without importing pandas in this process, when nothing imported it.

    pyarrow imports pandas (~0.2 s of a fresh process) the first time it checks whether a
    value is a pandas object: ``pa.array``, ``pa.scalar`` (every compute call with a Python
    scalar), ``to_numpy``. Both of its checks (the Python shim and the C++ static data)
    try the import once and remember a failure, so they are made to fail here, once, with
    pandas refused. For a process that hands pyarrow no pandas object (a command-line job
    reading files) nothing else changes; pyarrow's own pandas conversions (``to_pandas``,
    ``from_pandas``) still import pandas when called. What is lost: pyarrow no longer
    recognises ``pd.NA``/``pd.NaT``/``pd.Timestamp`` among Python objects it converts, so
    this is for the command line only, never called by the library on a user's process.
    Returns whether it was done (False: pandas already imported)."""
    if "pandas" in sys.modules:
        return False
    import pyarrow as pa

    finder = _RefusePandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.scalar(0)  # the Python shim's check
        # the C++ conversion's check; from a list, not a numpy array: ``pa.array`` of an
        # ndarray imports numpy.ma (~7 ms) to test for a masked array
        pa.array([0.0]).to_numpy()
    finally:
        sys.meta_path.remove(finder)
        sys.modules.pop("pandas", None)
    return "pandas" not in sys.modules
