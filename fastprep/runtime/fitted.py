"""``FittedState``: what a fit learned, with what a later run needs to apply it.

Why a plain record in the run layer: every consumer of a fit — the in-memory transform, the
streamed and cluster runs, ``batches``, the torch dataset — needs the same few things (the
plan that runs, the schema, the fitted parameters, the backend, the drift profile, the
int8/uint8 calibration, the pipeline's name for its alerts), never the user-facing
``FittedPipeline`` (which wraps one of these and adds saving, the declared pipeline and the
public methods). So nothing in the run layer imports the façade above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastprep.api.schema import Schema
from fastprep.emit.quantize import Quantization
from fastprep.plan.nodes import LogicalPlan

#: per feature, per input column, per step: that step's fitted parameters
Params = list[dict[str, list[dict[str, Any]]]]


@dataclass
class FittedState:
    """A fit's result: the plan it ran (optimized), its schema and learned parameters."""

    #: the plan that runs (the optimizer's passes applied, unless the pipeline said not to)
    plan: LogicalPlan
    schema: Schema
    params: Params
    #: the backend asked for at fit (a later run's default)
    backend: str = "auto"
    #: the fit's own report (rows used vs quarantined, findings, stage times)
    fit_report: Any = None
    #: per input column at fit: null rate, mean/std or vocabulary (the drift reference)
    profile: dict[str, Any] | None = None
    #: per-column int8/uint8 scale and zero point (``calibrate_quantization``), or None
    quantization: Quantization | None = None
    #: the pipeline's name: it names the job of the run's alerts
    name: str | None = None
