"""Pieces every competitor translation shares: plan facts, layout rules and block stacking.

The competitors must reproduce fastprep's *output contract* (column order, dense vs CSR,
float32) from the plan alone, so these rules mirror the reference backend's, written once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fastprep.plan.dtypes import LType
from fastprep.plan.expr import Col
from fastprep.plan.nodes import Input
from fastprep.plan.steps import Hash, OneHot, Step

#: ``X`` (dense float32 array or CSR float32 matrix) and ``y`` (float32 or None)
Result = tuple[Any, Any]
#: a competitor, ready to run: fit + transform on one DataFrame, returns ``(X, y)``
RunFn = Callable[[pd.DataFrame], Result]

#: mirrors ``fastprep.backends.reference.backend.SPARSE_ONEHOT_MIN_CATEGORIES``
SPARSE_ONEHOT_MIN_CATEGORIES = 64
MISSING_LABEL = "<missing>"
EPS = float(np.finfo(np.float64).eps)


def text_columns(pipeline: Any) -> frozenset[str]:
    """Source columns the schema declares as text (Category or String)."""
    return frozenset(
        name
        for name, spec in pipeline.schema.items()
        if spec.ltype in (LType.CATEGORY, LType.STRING)
    )


def unsupported(impl: str, what: str) -> NotImplementedError:
    """The error a translation raises for an op it cannot express (the gate reports it)."""
    return NotImplementedError(f"{impl} translation cannot express {what}")


def refuse_tags(pipeline: Any, impl: str) -> None:
    """Tag features (``fp.Tags``, ``fp.ListOf`` columns) are not translated: a whole-value
    one-hot of "a|b" would be a different computation, not a slower one."""
    for feature in pipeline.plan.features:
        if feature.tags is not None:
            raise unsupported(impl, f"the tags feature {feature.describe()}")


#: the expression grammar the peer translations express (the functions added later, text
#: functions and date parts among them, are refused by name instead of mistranslated)
TRANSLATED_UNARY = frozenset({"neg", "not", "isnull", "log", "log1p", "exp", "sqrt", "abs"})
TRANSLATED_BINARY = frozenset(
    {"add", "sub", "mul", "div", "mod", "pow", "eq", "ne", "lt", "le", "gt", "ge", "and", "or"}
)


def check_translatable(node: Any, impl: str) -> None:
    """Raise :func:`unsupported` naming the first sub-expression ``impl`` cannot express."""
    from fastprep.plan.expr import Binary, Const, Unary, Where, to_source, walk

    for sub in walk(node):
        known = (
            isinstance(sub, (Col, Const, Where))
            or (isinstance(sub, Unary) and sub.op in TRANSLATED_UNARY)
            or (isinstance(sub, Binary) and sub.op in TRANSLATED_BINARY)
        )
        if not known:
            raise unsupported(impl, f"the expression {to_source(sub)!r}")


def onehot_sparse(step: OneHot, widths: list[int]) -> bool:
    """fastprep's rule: CSR when asked, or above 64 output columns for one input."""
    if step.sparse is not None:
        return bool(step.sparse)
    return max(widths, default=0) > SPARSE_ONEHOT_MIN_CATEGORIES


def plan_may_be_sparse(pipeline: Any) -> bool:
    """True if some block is CSR whatever the data (Hash, or OneHot(sparse=True))."""
    for feature in pipeline.plan.features:
        encoder = feature.encoder
        if isinstance(encoder, Hash) or (isinstance(encoder, OneHot) and encoder.sparse):
            return True
    return False


def is_text_input(item: Input, text: frozenset[str]) -> bool:
    """A feature input that is a text column (only a bare column reference can be text)."""
    return isinstance(item.expr, Col) and item.expr.name in text


def numeric_steps(steps: tuple[Step, ...]) -> list[Step]:
    return [s for s in steps if s.kind != "encoder"]


def standardize_scale(var: float, mean: float, count: int) -> float:
    """Population std, or 1 for a constant / near-constant column (sklearn's tolerance)."""
    if var <= count * EPS * var + (count * mean * EPS) ** 2:
        return 1.0
    return float(np.sqrt(var))


def minmax_scale(data_min: float, data_max: float, low: float, high: float) -> tuple[float, float]:
    """``(scale, offset)`` with ``x * scale + offset`` mapping [min, max] onto [low, high]."""
    data_range = data_max - data_min
    if data_range < 10 * EPS:
        data_range = 1.0
    scale = (high - low) / data_range
    return scale, low - data_min * scale


def stack_blocks(blocks: list[Any], n_rows: int) -> Any:
    """Blocks (2-D arrays or CSR) side by side, float32: CSR if any block is sparse."""
    if any(sp.issparse(b) for b in blocks):
        parts = [sp.csr_matrix(b, dtype=np.float32) for b in blocks]
        out = sp.hstack(parts, format="csr", dtype=np.float32)
        out.sort_indices()
        return out
    if not blocks:
        return np.zeros((n_rows, 0), dtype=np.float32)
    if len(blocks) == 1 and np.ndim(blocks[0]) == 2:  # already the matrix: no stacking copy
        return np.ascontiguousarray(blocks[0], dtype=np.float32)
    return np.ascontiguousarray(np.column_stack(blocks), dtype=np.float32)


def as_float32(y: Any) -> Any:
    return None if y is None else np.asarray(y, dtype=np.float32)


def nan_power(a: Any, b: Any) -> Any:
    """``a ** b`` that is missing where ``a`` or ``b`` is (IEEE: ``nan ** 0 == 1``), for
    scalars, arrays and Series alike."""
    with np.errstate(all="ignore"):
        result = np.power(a, b)
    missing = np.isnan(a) | np.isnan(b)
    if np.ndim(result) == 0:
        return np.nan if missing else result
    if isinstance(result, pd.Series):
        return result.where(~missing)
    return np.where(missing, np.nan, result)


#: numpy implementations of the expression language's operators (Python's ``%``: sign of
#: the divisor, as fastprep), shared by the naive and the idiomatic pandas translations
NUMPY_ARITH = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "mod": np.remainder,
    "pow": nan_power,
}
NUMPY_FUNCS = {"log": np.log, "log1p": np.log1p, "exp": np.exp, "sqrt": np.sqrt, "abs": np.abs}
