"""The run report: row accounting, validation findings, repairs and per-stage timings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastprep.validate.findings import Finding


@dataclass
class Report:
    """What happened to every row, and how long each stage took.

    ``rows_in == rows_out + rows_quarantined`` always holds; the engine asserts it.
    """

    source: str = ""
    backend: str = "pandas"
    rows_in: int = 0
    rows_out: int = 0
    rows_quarantined: int = 0
    findings: list[Finding] = field(default_factory=list)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)
    #: JIT kernels compiled (or loaded from the disk cache) during this run
    kernels: list[dict[str, Any]] = field(default_factory=list)
    #: things a user should know that are not findings (e.g. "transformed without y")
    notes: list[str] = field(default_factory=list)
    #: per text column: bytes as the source held it vs dictionary-encoded (codes + distinct)
    text_encoding: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: per execution stage: the backend it ran on, the planner's predictions, the reason
    #: and the measured seconds per phase
    plan: list[dict[str, Any]] = field(default_factory=list)
    #: per input column at transform: measures vs the fitted profile, and which alert
    drift: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: which columns fail together: quarantined rows per set of (column: rule)
    anomaly_patterns: list[dict[str, Any]] = field(default_factory=list)
    #: alerts sent (to logging and on_alert) for this run, after de-duplication
    alerts: list[dict[str, Any]] = field(default_factory=list)
    #: narrowing to float16/bfloat16: values inexact, flushed to zero, clipped per column
    precision: dict[str, Any] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage (accumulates if the stage runs more than once)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - start

    def check_accounting(self) -> None:
        if self.rows_in != self.rows_out + self.rows_quarantined:
            raise AssertionError(
                f"row accounting broken: {self.rows_in} in != {self.rows_out} out + "
                f"{self.rows_quarantined} quarantined (a fastprep bug: please report it)"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "backend": self.backend,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "rows_quarantined": self.rows_quarantined,
            "findings": [f.to_dict() for f in self.findings],
            "repairs": list(self.repairs),
            "stages_seconds": {k: round(v, 6) for k, v in self.stages.items()},
            "kernels": list(self.kernels),
            "notes": list(self.notes),
            "output": dict(self.output),
            "text_encoding": {k: dict(v) for k, v in self.text_encoding.items()},
            "plan": [dict(p) for p in self.plan],
            "drift": {k: dict(v) for k, v in self.drift.items()},
            "anomaly_patterns": list(self.anomaly_patterns),
            "alerts": list(self.alerts),
            "precision": dict(self.precision),
        }

    def summary(self) -> str:
        """A few human lines: rows, shape, nnz, dtype, seconds per stage, top findings."""
        out = self.output
        lines = [
            f"rows: {self.rows_in:,} in, {self.rows_out:,} emitted, "
            f"{self.rows_quarantined:,} quarantined",
        ]
        if out:
            shape = " × ".join(f"{n:,}" for n in out.get("shape", ()))
            # a dense X's non-zeros are not counted in memory: no figure rather than "nnz 0"
            nnz = f", nnz {out['nnz']:,}" if "nnz" in out else ""
            lines.append(f"X: {shape} {out.get('layout', '')} {out.get('dtype', '')}{nnz}")
        if self.text_encoding:
            before = sum(v["bytes_before"] for v in self.text_encoding.values())
            after = sum(v["bytes_after"] for v in self.text_encoding.values())
            lines.append(
                f"text: {len(self.text_encoding)} column(s) dictionary-encoded, "
                f"{after / 2**20:.2f} MiB ({before / 2**20:.2f} MiB as the source held them)"
            )
        if self.precision and "max_abs_error" in self.precision:  # int8/uint8 codes
            p = self.precision
            worst = max(p["max_abs_error"].values(), default=0.0)
            lines.append(
                f"precision: {p['out_dtype']} codes: {sum(p['clipped'].values()):,} of "
                f"{p['values']:,} value(s) clipped to the calibrated range, largest error "
                f"{worst:.3g}"
            )
        elif self.precision:
            p = self.precision
            clipped = sum(p["clipped"].values())
            lines.append(
                f"precision: {p['out_dtype']}: {p['values_inexact']:,} of {p['values']:,} "
                f"value(s) lost precision, {p['underflow_to_zero']:,} underflowed to 0, "
                f"{clipped:,} clipped"
            )
        timing = ", ".join(f"{k} {v:.3f}s" for k, v in self.stages.items())
        lines.append(f"stages ({self.backend}): {timing}")
        if self.kernels:
            cached = sum(1 for k in self.kernels if k.get("cache_hit"))
            lines.append(
                f"kernels: {len(self.kernels)} compiled or loaded ({cached} from the disk cache)"
            )
        for note in self.notes:
            lines.append(f"note: {note}")
        unexpected = [f.column for f in self.findings if f.rule == "unexpected_column"]
        if unexpected:  # one line, not one per column
            names = ", ".join(unexpected[:10]) + (", ..." if len(unexpected) > 10 else "")
            lines.append(
                f"  - {len(unexpected)} source column(s) not in the schema (not read): {names}"
            )
        findings = [f for f in self.findings if f.rule != "unexpected_column"]
        for finding in findings[:8]:
            lines.append(f"  - {finding.message()}")
        if len(findings) > 8:
            lines.append(f"  ... and {len(findings) - 8} more findings in report.json")
        drifting = {c: e["alerts"] for c, e in self.drift.items() if e.get("alerts")}
        for column, measures in drifting.items():
            lines.append(f"  - drift {column!r}: {', '.join(measures)}")
        for pattern in self.anomaly_patterns[:3]:
            lines.append(
                f"  - {pattern['rows']:,} row(s) failed together on {' + '.join(pattern['rules'])}"
            )
        for repair in self.repairs[:5]:
            lines.append(
                f"  - repaired {repair['count']:,} value(s) of {repair['output']!r}: {repair['rule']}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()
