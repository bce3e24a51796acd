"""Immutable, hashable plan nodes: expressions, steps, features, and traversal helpers.

Layer 1: imports nothing from fastprep but :mod:`fastprep.errors`, and no pandas/numba/dask.
"""

from fastprep.plan.dtypes import LType
from fastprep.plan.expr import Binary, Col, Const, Expr, Unary, Where
from fastprep.plan.nodes import Feature, Input, LogicalPlan
from fastprep.plan.steps import (
    Categorify,
    Clip,
    FillMissing,
    Hash,
    Log1p,
    MinMax,
    OneHot,
    Standardize,
    Step,
    StepChain,
    Vectorize,
)

__all__ = [
    "Binary",
    "Categorify",
    "Clip",
    "Col",
    "Const",
    "Expr",
    "Feature",
    "FillMissing",
    "Hash",
    "Input",
    "LType",
    "Log1p",
    "LogicalPlan",
    "MinMax",
    "OneHot",
    "Standardize",
    "Step",
    "StepChain",
    "Unary",
    "Vectorize",
    "Where",
]
