"""Alerts: findings and drift beyond a threshold, sent to ``logging`` and ``on_alert=``.

An alert is one rule broken in one run: the findings of every partition of the run are
totalled first (:func:`~fastprep.validate.findings.merge_findings`), so a cluster or
streamed run whose partitions break the same rule sends ONE alert with the summed count.
It is keyed by ``(job, source, rule)`` — the pipeline's name and phase, the source the
run read, and the broken rule (``"column:rule"``, or ``"drift:column:measure"``). Every
``fit``/``transform`` call is a run of its own and sends its alerts (the same path or an
equally long DataFrame may hold new data); the passes of one stream (a ``BatchDataset``'s
epochs) re-read the same source by construction, so that stream sends a key once.

The ``fastprep.alerts`` logger has a ``NullHandler``: the report already lists every
finding (the CLI prints it), so alerts are not printed a second time on stderr unless the
application configures logging (``logging.basicConfig()`` shows them as warnings). A rule
whose action is ``warn`` is also a Python warning (:class:`~fastprep.errors.FindingWarning`),
once per run with its total: what a user asked to be warned of shows in a notebook or a
script without any logging set up, as scikit-learn's data warnings do.
Also here: the anomaly pattern, which columns fail together in quarantined rows.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from fastprep.errors import FindingWarning
from fastprep.validate.findings import Finding, merge_findings

log = logging.getLogger("fastprep.alerts")
# without it, logging's last-resort handler would print every alert to stderr
log.addHandler(logging.NullHandler())


@dataclass(frozen=True)
class Alert:
    """One rule broken in one run of one job (``count``: summed over its partitions)."""

    job: str
    #: the source the run read (all of its partitions)
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


def send(
    owner: Any,
    report: Any,
    on_alert: AlertCallback | None,
    phase: str,
    seen: set[tuple[str, str, str]] | None = None,
) -> list[Alert]:
    """Send a finished run's alerts (its report's findings, totalled, and its drift), once
    per key within the run and, given ``seen``, once across the runs sharing that set;
    record them in ``report.alerts``. ``owner``: the ``fp.Pipeline`` (its name)."""
    job = f"{getattr(owner, 'name', None) or 'pipeline'}:{phase}"
    # totalled here once more: an in-memory run's report may name a rule twice (two
    # features over one column); a streamed or cluster run's is already totalled, unchanged
    merged = merge_findings(report.findings)
    found = alerts_from(job, report.source, merged, report.drift)
    sent = dispatch(found, set() if seen is None else seen, on_alert)
    warned = {f"{f.column}:{f.rule}" for f in merged if f.action == "warn"}
    for alert in sent:
        if alert.rule in warned:
            warnings.warn(f"[{alert.job}] {alert.message}", FindingWarning,
                          stacklevel=_caller_level())  # fmt: skip
    report.alerts = [a.to_dict() for a in sent]
    return sent


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside fastprep: a warning points at the
    user's ``fit``/``transform`` line (what Python shows, and what its once-per-location
    filter keys on), not at the engine's."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1  # _getframe(1): the function calling warn
    while frame is not None and frame.f_code.co_filename.startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def anomaly_patterns(reasons: Iterable[str], limit: int = 20) -> list[dict[str, Any]]:
    """Which columns fail together: quarantined rows (``reasons``: each one's reason)
    counted per set of (column: rule)."""
    counts = Counter(reasons)
    patterns: dict[tuple[str, ...], int] = {}
    for reason, rows in counts.items():
        key = tuple(sorted(set(str(reason).split("; "))))
        patterns[key] = patterns.get(key, 0) + int(rows)
    ranked = sorted(patterns.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [
        {"columns": sorted({r.split(": ")[0] for r in key}), "rules": list(key), "rows": rows}
        for key, rows in ranked
    ]
