"""Alerts: findings and drift beyond a threshold, sent to ``logging`` and ``on_alert=``.

An alert is keyed by ``(job, partition, rule)`` — the pipeline's name, the part of the
source (its description and first row id), and the broken rule (``"column:rule"``, or
``"drift:column:measure"``) — and fires at most once per key per pipeline object, so a
job that re-reads a partition, or whose partitions break the same rule, is not flooded.
Also here: the anomaly pattern, which columns fail together in quarantined rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from fastprep.validate.findings import Finding

log = logging.getLogger("fastprep.alerts")


@dataclass(frozen=True)
class Alert:
    """One rule broken in one partition of one job."""

    job: str
    partition: str
    rule: str
    message: str
    count: int = 0
    phase: str = "transform"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.job, self.partition, self.rule)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


AlertCallback = Callable[[Alert], None]


def alerts_from(
    job: str,
    partition: str,
    findings: Iterable[Finding],
    drift: dict[str, dict[str, Any]] | None = None,
) -> list[Alert]:
    """An alert per finding (except repairs, which are expected) and per drift measure."""
    out = [
        Alert(job, partition, f"{f.column}:{f.rule}", f.message(), f.count, f.phase)
        for f in findings
        if f.count and f.action not in ("clip", "round", "set_missing", "impute", "ignore")
    ]
    for column, entry in (drift or {}).items():
        for measure in entry.get("alerts", ()):
            value = entry.get(measure.replace("_delta", ""), entry.get("null_rate"))
            message = f"column {column!r}: drift {measure} = {value:.4g} beyond its threshold"
            out.append(Alert(job, partition, f"drift:{column}:{measure}", message))
    return out


def dispatch(
    alerts: list[Alert], seen: set[tuple[str, str, str]], on_alert: AlertCallback | None
) -> list[Alert]:
    """Log and call back each alert whose key was not seen before; returns those sent."""
    sent = []
    for alert in alerts:
        if alert.key in seen:
            continue
        seen.add(alert.key)
        log.warning("[%s %s] %s", alert.job, alert.partition, alert.message)
        if on_alert is not None:
            on_alert(alert)
        sent.append(alert)
    return sent


def anomaly_patterns(quarantine: pd.DataFrame, limit: int = 20) -> list[dict[str, Any]]:
    """Which columns fail together: quarantined rows counted per set of (column: rule)."""
    if quarantine.empty:
        return []
    counts = quarantine["reason"].value_counts()
    patterns: dict[tuple[str, ...], int] = {}
    for reason, rows in counts.items():
        key = tuple(sorted(set(str(reason).split("; "))))
        patterns[key] = patterns.get(key, 0) + int(rows)
    ranked = sorted(patterns.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [
        {"columns": sorted({r.split(": ")[0] for r in key}), "rules": list(key), "rows": rows}
        for key, rows in ranked
    ]
