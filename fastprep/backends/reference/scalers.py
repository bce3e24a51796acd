"""Fit and apply the quantile/power steps exactly as their scikit-learn peers do.

Each fit sees the present values only (``x[~isnan(x)]``); each transform keeps missing
values missing. The arithmetic follows the peers line by line (``MaxAbsScaler``,
``RobustScaler``, ``KBinsDiscretizer``, ``QuantileTransformer``, ``PowerTransformer``), so
the float32 output equals the peer's float64 output cast to float32. Fitted arrays (bin
edges, quantiles) are float64 ``ndarray``s: a saved state keeps them in its arrays file.

scipy is imported inside the functions that need it (``ndtri`` for a normal output, the
Brent search of the power transforms' lambda): ``import fastprep`` stays light.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from fastprep.backends.moments import require_values
from fastprep.backends.reference.stats import standardize_params
from fastprep.errors import FitError
from fastprep.plan.steps import Bin, PowerTransform, QuantileTransform, RobustScale, Step

_EPS = np.finfo(np.float64).eps
#: QuantileTransformer's tolerance at the ends of a normal output
BOUNDS_THRESHOLD = 1e-7


def _present(values: np.ndarray, what: str) -> np.ndarray:
    present = values[~np.isnan(values)]
    require_values(len(present), len(values), what)
    return present


def _nonzero_scale(scale: float) -> float:
    """sklearn's ``_handle_zeros_in_scale``: a near-zero scale becomes 1."""
    return 1.0 if scale < 10 * _EPS else float(scale)


# ---------------------------------------------------------------- MaxAbsScale


def maxabs_params(values: np.ndarray, what: str) -> dict[str, float]:
    present = _present(values, what)
    return maxabs_from_range(float(present.min()), float(present.max()))


def maxabs_from_range(low: float, high: float) -> dict[str, float]:
    """The scale from the fitted extremes (a cluster fit merges only these)."""
    max_abs = max(abs(low), abs(high))
    return {"max_abs": max_abs, "scale": _nonzero_scale(max_abs)}


# ---------------------------------------------------------------- RobustScale


def robust_params(step: RobustScale, values: np.ndarray, what: str) -> dict[str, float]:
    present = _present(values, what)
    center = float(np.median(present)) if step.with_centering else 0.0
    scale = 1.0
    if step.with_scaling:
        low, high = np.percentile(present, step.quantile_range)
        scale = _nonzero_scale(float(high - low))
    return {"center": center, "scale": scale}


def robust_apply(step: RobustScale, params: dict[str, Any], values: np.ndarray) -> np.ndarray:
    out = values - params["center"] if step.with_centering else values.copy()
    if step.with_scaling:
        out /= params["scale"]
    return out


# ---------------------------------------------------------------- Bin


def bin_params(step: Bin, values: np.ndarray, what: str) -> dict[str, Any]:
    """KBinsDiscretizer's ``bin_edges_`` for one column (fixed edges need no data)."""
    if step.edges is not None:
        return {"edges": np.asarray(step.edges, dtype=np.float64)}
    present = _present(values, what)
    low, high = float(present.min()), float(present.max())
    if low == high or step.strategy == "uniform":
        return bin_from_range(step, low, high, what)
    levels = np.linspace(0, 100, step.n_bins + 1)
    edges = np.asarray(
        np.percentile(present, levels, method="averaged_inverted_cdf"), dtype=np.float64
    )
    return {"edges": drop_narrow_bins(edges, step.n_bins, what)}


def bin_from_range(step: Bin, low: float, high: float, what: str) -> dict[str, Any]:
    """Uniform edges from the extremes; a constant column is one bin ``[-inf, inf]``."""
    if low == high:
        warnings.warn(f"{what}: the column is constant; every value goes to bin 0", stacklevel=4)
        return {"edges": np.array([-np.inf, np.inf])}
    return {"edges": np.linspace(low, high, step.n_bins + 1)}


def drop_narrow_bins(edges: np.ndarray, n_bins: int, what: str) -> np.ndarray:
    """KBinsDiscretizer removes bins whose width is <= 1e-8 (ties at the quantiles)."""
    kept = edges[np.ediff1d(edges, to_begin=np.inf) > 1e-8]
    if len(kept) - 1 != n_bins:
        warnings.warn(
            f"{what}: bins narrower than 1e-8 were removed ({len(kept) - 1} of {n_bins} "
            "left); consider fewer bins",
            stacklevel=4,
        )
    return kept


def bin_count(params: dict[str, Any]) -> int:
    return len(params["edges"]) - 1


def bin_codes(params: dict[str, Any], values: np.ndarray) -> np.ndarray:
    """The bin of each value as float64 (NaN for missing)."""
    edges = np.asarray(params["edges"], dtype=np.float64)
    codes = np.searchsorted(edges[1:-1], values, side="right").astype(np.float64)
    codes[np.isnan(values)] = np.nan
    return codes


# ---------------------------------------------------------------- QuantileTransform


def quantile_params(step: QuantileTransform, values: np.ndarray, what: str) -> dict[str, Any]:
    present = _present(values, what)
    n = max(1, min(step.n_quantiles, len(present)))
    if step.n_quantiles > len(present):
        warnings.warn(
            f"{what}: n_quantiles ({step.n_quantiles}) is greater than the number of "
            f"values ({len(present)}); using {n}",
            stacklevel=3,
        )
    references = np.linspace(0, 1, n, endpoint=True)
    return {"quantiles": np.percentile(present, references * 100)}


def quantile_apply(
    step: QuantileTransform, params: dict[str, Any], values: np.ndarray
) -> np.ndarray:
    """QuantileTransformer's ``_transform_col`` (forward) on one column."""
    quantiles = np.asarray(params["quantiles"], dtype=np.float64)
    references = np.linspace(0, 1, len(quantiles), endpoint=True)
    normal = step.output_distribution == "normal"
    values = np.asarray(values, dtype=np.float64)  # an Int column arrives as int64
    out = values.copy()
    with np.errstate(invalid="ignore"):
        if normal:
            lower = values - BOUNDS_THRESHOLD < quantiles[0]
            upper = values + BOUNDS_THRESHOLD > quantiles[-1]
        else:
            lower = values == quantiles[0]
            upper = values == quantiles[-1]
    present = ~np.isnan(values)
    x = values[present]
    out[present] = 0.5 * (
        np.interp(x, quantiles, references) - np.interp(-x, -quantiles[::-1], -references[::-1])
    )
    out[upper] = 1.0
    out[lower] = 0.0
    if normal:
        from scipy.special import ndtri

        with np.errstate(invalid="ignore", divide="ignore"):
            out = ndtri(out)
        clip_min = ndtri(BOUNDS_THRESHOLD - np.spacing(1))
        clip_max = ndtri(1 - (BOUNDS_THRESHOLD - np.spacing(1)))
        out = np.clip(out, clip_min, clip_max)
    return out


# ---------------------------------------------------------------- PowerTransform


def power_params(step: PowerTransform, values: np.ndarray, what: str) -> dict[str, Any]:
    """PowerTransformer's lambda (scipy's Brent search of the log-likelihood), then the
    StandardScaler statistics of the transformed values. Box-Cox is fitted on the
    positive values: a value <= 0 is outside its domain and missing (as at transform)."""
    present = _present(values, what)
    if step.method == "box-cox":
        present = present[present > 0]
        if len(present) == 0:
            raise FitError(f"{what}: Box-Cox needs positive values; there are none")
    mean = np.mean(present, dtype=np.float64)
    var = np.var(present, dtype=np.float64)
    n = len(present)
    constant = var <= n * _EPS * var + (n * mean * _EPS) ** 2
    if step.method == "yeo-johnson" and constant:
        lam = 1.0
    elif step.method == "box-cox" and np.all(present == present[0]):
        raise FitError(f"{what}: Box-Cox cannot fit a constant column")
    else:
        lam = _optimal_lambda(step.method, present)
    out: dict[str, Any] = {"lambda": lam}
    if step.standardize:
        transformed, _ = power_values(step.method, lam, present)
        fitted = standardize_params(transformed, what)
        out.update(mean=fitted["mean"], scale=fitted["scale"])
    return out


def _optimal_lambda(method: str, present: np.ndarray) -> float:
    from scipy import stats  # the peer's own optimizer: same lambda bit for bit

    with np.errstate(all="ignore"):
        if method == "yeo-johnson":
            return float(stats.yeojohnson_normmax(present))
        return float(stats.boxcox_normmax(present, method="mle"))


def power_values(method: str, lam: float, values: np.ndarray) -> tuple[np.ndarray, int]:
    """scipy's Yeo-Johnson transform / ``special.boxcox`` (NaN stays NaN), and how many
    present values were outside Box-Cox's domain (<= 0: set missing)."""
    with np.errstate(all="ignore"):
        if method == "box-cox":
            from scipy.special import boxcox

            outside = values <= 0
            out = boxcox(values, lam)
            out[outside] = np.nan
            return out, int(np.count_nonzero(outside))
        out = np.zeros_like(values, dtype=np.float64)
        pos = values >= 0
        neg = ~pos
        if abs(lam) < _EPS:
            out[pos] = np.log1p(values[pos])
        else:
            out[pos] = np.expm1(lam * np.log1p(values[pos])) / lam
        if abs(lam - 2) > _EPS:
            out[neg] = -np.expm1((2 - lam) * np.log1p(-values[neg])) / (2 - lam)
        else:
            out[neg] = -np.log1p(-values[neg])
        return out, 0


def power_apply(
    step: PowerTransform, params: dict[str, Any], values: np.ndarray
) -> tuple[np.ndarray, int]:
    """The transformed values and the count of values outside Box-Cox's domain."""
    out, outside = power_values(step.method, params["lambda"], values)
    if step.standardize:
        out -= params["mean"]
        out /= params["scale"]
    return out, outside


# ---------------------------------------------------------------- from order statistics
# A cluster fit knows the count of present values and can fetch exact order statistics
# (the ``at(rank)`` of sorted values) without holding the values: these rebuild the fits
# above from them, with numpy's percentile arithmetic replayed line by line.


def _virtual_index(n: int, q: float, method: str) -> float:
    if method == "linear":
        return (n - 1) * q
    return n * q - 1  # averaged_inverted_cdf


def _percentile_ranks(n: int, q: float, method: str) -> tuple[int, int, float]:
    """numpy's neighbouring indexes and weight for quantile ``q`` of ``n`` sorted values."""
    v = _virtual_index(n, q, method)
    prev = int(np.floor(v))
    nxt = prev + 1
    if v >= n - 1:
        prev = nxt = -1
    if v < 0:
        prev = nxt = 0
    gamma = v - prev
    if method != "linear":
        gamma = 0.5 if gamma == 0 else 1.0
    return prev % n, nxt % n, gamma


def _lerp(a: float, b: float, t: float) -> float:
    """numpy's ``_lerp``: from ``b`` backwards when ``t >= 0.5``."""
    diff = np.float64(b) - np.float64(a)
    return float(np.float64(b) - diff * (1 - t) if t >= 0.5 else np.float64(a) + diff * t)


def percentile_ranks(n: int, percents: Any, method: str = "linear") -> set[int]:
    """The ranks ``percentile_from`` reads for these percents."""
    qs = np.true_divide(np.asarray(percents, dtype=np.float64), 100)
    out: set[int] = set()
    for q in qs:
        prev, nxt, _ = _percentile_ranks(n, float(q), method)
        out |= {prev, nxt}
    return out


def percentile_from(n: int, percents: Any, at: Any, method: str = "linear") -> np.ndarray:
    """``np.percentile(x, percents, method=...)`` of ``n`` sorted values read by ``at``."""
    qs = np.true_divide(np.asarray(percents, dtype=np.float64), 100)
    out = []
    for q in qs:
        prev, nxt, gamma = _percentile_ranks(n, float(q), method)
        out.append(_lerp(at(prev), at(nxt), gamma))
    return np.array(out, dtype=np.float64)


def median_ranks(n: int) -> set[int]:
    return {(n - 1) // 2, n // 2}


def median_from(n: int, at: Any) -> float:
    """``np.median``: the middle value, or the mean of the two middle ones."""
    a, b = at((n - 1) // 2), at(n // 2)
    return float(a) if n % 2 else float(np.mean([a, b]))


def order_ranks(step: Step, n: int) -> set[int]:
    """The order statistics a cluster fit of ``step`` needs from ``n`` present values."""
    if isinstance(step, RobustScale):
        ranks = median_ranks(n) if step.with_centering else set()
        return ranks | (percentile_ranks(n, step.quantile_range) if step.with_scaling else set())
    assert isinstance(step, Bin) and step.strategy == "quantile"
    levels = np.linspace(0, 100, step.n_bins + 1)
    return {0, n - 1} | percentile_ranks(n, levels, "averaged_inverted_cdf")


def params_from_order(step: Step, n: int, at: Any, what: str) -> dict[str, Any]:
    """:func:`robust_params` / :func:`bin_params` (quantile) from order statistics."""
    require_values(n, -1, what)
    if isinstance(step, RobustScale):
        center = median_from(n, at) if step.with_centering else 0.0
        scale = 1.0
        if step.with_scaling:
            low, high = percentile_from(n, step.quantile_range, at)
            scale = _nonzero_scale(float(high - low))
        return {"center": center, "scale": scale}
    assert isinstance(step, Bin) and step.strategy == "quantile"
    if at(0) == at(n - 1):
        return bin_from_range(step, at(0), at(n - 1), what)
    levels = np.linspace(0, 100, step.n_bins + 1)
    edges = percentile_from(n, levels, at, "averaged_inverted_cdf")
    return {"edges": drop_narrow_bins(edges, step.n_bins, what)}
