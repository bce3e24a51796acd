"""The user-facing builders: ``cols``, ``col``, ``expr`` and ``>>``; they produce plan nodes."""

from fastprep.api.builders import Dict, FeatureBuilder, Tags, col, cols, cross, expr
from fastprep.api.check import check_plan

__all__ = ["Dict", "FeatureBuilder", "Tags", "check_plan", "col", "cols", "cross", "expr"]
