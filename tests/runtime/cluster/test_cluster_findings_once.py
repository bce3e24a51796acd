"""A rule broken in several partitions of a cluster run is ONE finding with the summed
count, and one alert, in the fit report, the gathered output and the shard manifest."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import fastprep as fp
from fastprep.cli import load_pipeline_file

REPO = Path(__file__).resolve().parents[3]
ROWS = 5_000  # 4 partitions of the 8 row groups


def by_rule(findings):
    out: dict[tuple[str, str], list] = {}
    for finding in findings:
        out.setdefault((finding.column, finding.rule), []).append(finding)
    return out


@pytest.fixture(scope="module")
def single(flights_row_groups):
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fitted = pipeline.fit(flights_row_groups)
    return fitted, fitted.transform(flights_row_groups)


def test_cluster_run_reports_each_rule_once_with_the_total(
    single, flights_row_groups, client, tmp_path, caplog
):
    _, expected = single
    null = [f for f in expected.report.findings if (f.column, f.rule) == ("arr_delay", "null")]
    assert len(null) == 1 and null[0].count > 0
    total = null[0].count
    pipeline = load_pipeline_file(REPO / "pipelines" / "flights.py")
    fit_alerts: list = []
    with caplog.at_level(logging.WARNING, logger="fastprep.alerts"):
        fitted = pipeline.fit(
            flights_row_groups, client=client, rows_per_partition=ROWS, on_alert=fit_alerts.append
        )
    parts = fitted.fit_report
    assert by_rule(parts.findings)[("arr_delay", "null")][0].count == total
    assert all(len(v) == 1 for v in by_rule(parts.findings).values())
    assert [a.count for a in fit_alerts if a.rule == "arr_delay:null"] == [total]

    alerts: list = []
    out = fitted.transform(
        flights_row_groups, client=client, rows_per_partition=ROWS, on_alert=alerts.append
    )
    found = by_rule(out.report.findings)
    assert all(len(v) == 1 for v in found.values()), found
    finding = found[("arr_delay", "null")][0]
    assert finding.count == total == out.report.rows_quarantined
    assert finding.first_rows == null[0].first_rows  # the run's first rows, not a partition's
    assert out.report.summary().count("'arr_delay'") == 1
    sent = [a for a in alerts if a.rule == "arr_delay:null"]
    assert len(sent) == 1 and sent[0].count == total
    assert sent[0].job == "flights:transform"
    assert [a["rule"] for a in out.report.alerts] == [a.rule for a in alerts]
    # logged once per rule too (the logger has a NullHandler: silent unless configured)
    logged = [r.getMessage() for r in caplog.records]
    assert len([m for m in logged if m.startswith("[flights:fit") and "'arr_delay'" in m]) == 1
    assert (
        len([m for m in logged if m.startswith("[flights:transform") and "'arr_delay'" in m]) == 1
    )

    manifest = fitted.transform(
        flights_row_groups, client=client, rows_per_partition=ROWS, output_dir=tmp_path / "s"
    )
    assert len(manifest.partitions) == 4
    on_disk = fp.open_output(tmp_path / "s").report["findings"]
    assert [(f["column"], f["count"]) for f in on_disk if f["rule"] == "null"] == [
        ("arr_delay", total)
    ]
    assert by_rule(manifest.load().report.findings)[("arr_delay", "null")][0].count == total


def test_whole_column_fit_warnings_hold_for_the_whole_source(flights_sample, client, tmp_path):
    """A column all missing in one partition is not all missing; in every one it is, once."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = flights_sample[["distance"]].copy()
    frame["part_null"] = frame["distance"].where(frame.index >= 5_000)  # partition 0 only
    frame["all_null"] = np.nan
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=2_500)
    schema = fp.Schema({
        "distance": fp.Float(), "part_null": fp.Float(nullable=True),
        "all_null": fp.Float(nullable=True),
    })  # fmt: skip
    pipeline = fp.Pipeline(
        schema=schema, features=[fp.cols("distance", "part_null", "all_null") >> fp.FillMissing(0)]
    )
    single = pipeline.fit(path).fit_report.findings
    dist = pipeline.fit(path, client=client, rows_per_partition=ROWS).fit_report.findings
    expected = [(f.column, f.rule, f.count) for f in single if f.rule == "all_null"]
    assert expected == [("all_null", "all_null", 20_000)]
    assert [(f.column, f.rule, f.count) for f in dist if f.rule == "all_null"] == expected
