"""The optimizer: an ordered tuple of pure ``plan -> plan`` passes, run to a fixed point.

Passes never import pandas, numba or dask; each module holds one pass with a before/after
example in its docstring.
"""

from fastprep.optimize.driver import PASSES, optimize

__all__ = ["PASSES", "optimize"]
