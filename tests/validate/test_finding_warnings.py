"""A rule whose action is ``warn`` is a Python warning (``fp.FindingWarning``) once per run
with the run's total, pointing at the caller's line: visible in a notebook or a script with
no logging set up. Quarantined rows are not warned of (the report lists them); the CLI, which
prints the report, shows no warning."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pandas as pd
import pyarrow.parquet as pq
import pytest
from support import REPO

import fastprep as fp


def _pipeline() -> fp.Pipeline:
    schema = fp.Schema({
        "wind_speed": fp.Float(nullable=True, max=30, on_invalid="warn"),
        "temp": fp.Float(nullable=True),  # missing values: quarantined, not warned of
    })  # fmt: skip
    return fp.Pipeline(schema, [fp.col("wind_speed") >> fp.FillMissing(0), fp.col("temp")])


def _finding_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, fp.FindingWarning)]


def test_a_warn_rule_is_one_warning_per_run_at_the_callers_line() -> None:
    weather = pd.read_parquet(REPO / "data_samples" / "weather.parquet")
    total = int((weather["wind_speed"] > 30).sum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = _pipeline().fit(weather)
        out = fitted.transform(weather)
    messages = _finding_warnings(caught)
    assert len(messages) == 2, messages  # the fit's and the transform's
    assert all(f"column 'wind_speed': {total:,} value(s)" in m for m in messages)
    assert "[pipeline:fit]" in messages[0] and "[pipeline:transform]" in messages[1]
    assert {w.filename for w in caught if issubclass(w.category, fp.FindingWarning)} == {__file__}
    assert out.report.rows_quarantined > 0  # and none of them was a warning


def test_a_partitioned_run_warns_once_with_the_total(tmp_path) -> None:
    path = tmp_path / "weather.parquet"
    pq.write_table(pq.read_table(REPO / "data_samples" / "weather.parquet"), path,
                   row_group_size=3000)  # fmt: skip
    weather = pd.read_parquet(path)
    total = int((weather["wind_speed"] > 30).sum())
    fitted = _pipeline().fit(weather)
    with pytest.warns(fp.FindingWarning) as caught:
        fitted.write_shards(path, tmp_path / "out", rows_per_partition=3000)
    messages = _finding_warnings(caught)
    assert len(fp.open_output(tmp_path / "out")) == 9
    assert len(messages) == 1 and f"{total:,} value(s)" in messages[0], messages


def test_the_cli_prints_the_report_and_no_warning(tmp_path) -> None:
    (tmp_path / "pipeline.py").write_text(
        "import fastprep as fp\n"
        "pipeline = fp.Pipeline(fp.Schema({'wind_speed': fp.Float(nullable=True, max=30, "
        "on_invalid='warn')}), [fp.col('wind_speed') >> fp.FillMissing(0)])\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "default", "-m", "fastprep", "run", "pipeline.py", "--input",
         str(REPO / "data_samples" / "weather.parquet"), "--output", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "FindingWarning" not in result.stderr, result.stderr
    assert "above_max" in result.stdout + result.stderr  # the report says it
