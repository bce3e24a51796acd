"""Findings are reported once per run, totalled over partitions, for streamed runs
(``batches``, ``write_shards``) as for in-memory ones; alerts once per rule per run."""

from __future__ import annotations

import logging
import subprocess
import sys

import fastprep as fp
from fastprep.validate.findings import Finding, merge_findings


def test_merge_findings_sums_counts_and_keeps_the_first_rows():
    a = Finding("x", "null", 3, "quarantine", (40, 41, 45), phase="transform")
    b = Finding("x", "null", 6, "quarantine", (2, 3, 7, 8, 9), phase="transform")
    other = Finding("y", "above_max", 1, "quarantine", (5,), ("99.0",))
    extra = Finding("z", "unexpected_column", 1, "ignore")
    merged = merge_findings([a, other, extra, b, extra])
    assert [(f.column, f.count) for f in merged] == [("x", 9), ("y", 1), ("z", 1)]
    assert merged[0].first_rows == (2, 3, 7, 8, 9)
    assert merge_findings([a, Finding("x", "null", 2, "warn")])[1].action == "warn"  # other action


def test_streamed_pass_reports_each_rule_once_with_the_total(
    flights_pipeline, flights_sample, tmp_path
):
    fitted = flights_pipeline.fit(flights_sample)
    whole = fitted.transform(flights_sample)
    total = next(f.count for f in whole.report.findings if f.rule == "null")
    alerts: list = []
    stream = fitted.batches(
        flights_sample, batch_size=4096, rows_per_partition=2_500, shuffle=True,
        on_alert=alerts.append,
    )  # fmt: skip
    for _ in stream:
        pass
    assert stream.stats.partitions == 8
    nulls = [f for f in stream.stats.findings if (f.column, f.rule) == ("arr_delay", "null")]
    assert [f.count for f in nulls] == [total]
    assert (
        nulls[0].first_rows == next(f for f in whole.report.findings if f.rule == "null").first_rows
    )
    assert [(a.rule, a.count) for a in alerts] == [("arr_delay:null", total)]
    assert stream.stats.to_dict()["findings"][0]["count"] == total
    for _ in stream:
        pass  # another pass of the same stream re-reads the same source: no new alert
    assert len(alerts) == 1
    # a new stream may read new data (here the same rows, so the same description): it alerts
    for _ in fitted.batches(flights_sample, rows_per_partition=2_500, epoch=1,
                            on_alert=alerts.append):  # fmt: skip
        pass
    assert len(alerts) == 2
    stats = fitted.write_shards(flights_sample, tmp_path / "shards", rows_per_partition=5_000)
    assert [f.count for f in stats.findings if f.rule == "null"] == [total]
    saved = fp.open_output(tmp_path / "shards").report["findings"]
    assert [(f["column"], f["count"]) for f in saved if f["rule"] == "null"] == [
        ("arr_delay", total)
    ]


def test_alerts_are_not_printed_again_on_stderr(broken_path, repo_root):
    """Without logging configured, a transform with findings writes nothing to stderr (the
    report holds the findings); a configured logger still gets them."""
    script = (
        "import sys, logging\n"
        "from fastprep.cli import load_pipeline_file\n"
        "fitted = load_pipeline_file('pipelines/flights.py').fit('data_samples/flights.parquet')\n"
        f"out = fitted.transform({str(broken_path)!r})\n"
        "assert out.report.findings and out.report.alerts\n"
        "if sys.argv[1:] == ['configured']:\n"
        "    logging.basicConfig()\n"
        f"    fitted.transform({str(broken_path)!r})\n"
    )
    quiet = subprocess.run([sys.executable, "-c", script], cwd=repo_root, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    loud = subprocess.run([sys.executable, "-c", script, "configured"], cwd=repo_root,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert loud.returncode == 0, loud.stderr
    assert "WARNING:fastprep.alerts:" in loud.stderr
    assert logging.getLogger("fastprep.alerts").handlers  # the NullHandler
