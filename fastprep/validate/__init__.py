"""Input validation: coerce to the schema's types, check rules, apply policies."""

from fastprep.validate.findings import Finding, Quarantine
from fastprep.validate.validator import validate_frame

__all__ = ["Finding", "Quarantine", "validate_frame"]
