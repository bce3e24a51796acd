"""``fastprep validate``: run a pipeline's input checks alone, without fitting anything.

Reads the columns the pipeline uses, validates them against its schema (target included)
and reports what was found. A rule with ``on_invalid="raise"`` that fails is the only
"failure" (exit code 1 in the CLI); quarantined rows and warnings are reported, not failed.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastprep.data.sources import Source
from fastprep.errors import DataValidationError
from fastprep.pipeline import Pipeline
from fastprep.runtime import engine
from fastprep.runtime.lookups import schema_for_fit
from fastprep.runtime.report import Report


@dataclass
class CheckResult:
    """The validation report, and the error of the ``raise`` rules that failed (if any)."""

    report: Report
    error: DataValidationError | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def summary(self) -> str:
        if self.error is not None:
            return f"FAILED: {self.error}"
        report = self.report
        lines = [
            f"rows: {report.rows_in:,} in, {report.rows_out:,} would be used, "
            f"{report.rows_quarantined:,} would be quarantined",
            f"validation: {report.stages.get('validate', 0.0):.3f}s "
            f"(read {report.stages.get('read', 0.0):.3f}s)",
        ]
        if not report.findings:
            lines.append("no rule broken")
        for finding in report.findings:
            lines.append(f"  - {finding.message()}")
        for pattern in report.anomaly_patterns[:5]:
            lines.append(
                f"  pattern: {pattern['rows']:,} row(s) fail together on "
                f"{' + '.join(pattern['rules'])}"
            )
        return "\n".join(lines)


def run_checks(pipeline: Pipeline, source: Source, *, phase: str = "fit") -> CheckResult:
    """Validate ``source`` as ``pipeline`` would at ``phase`` (``fit`` requires the target)."""
    try:
        plan = pipeline.optimized  # lookups: the side tables are checked too
        schema = schema_for_fit(pipeline.schema, plan.columns)
        report = engine.validate_only(plan, schema, source, phase=phase)
    except DataValidationError as exc:
        return CheckResult(Report(), exc)
    return CheckResult(report)
