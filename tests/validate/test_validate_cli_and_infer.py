"""``fastprep validate`` (checks alone, exit 1 when a raise rule fails) and
``fp.Schema.infer`` (a printable, savable draft schema from a sample)."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

import fastprep as fp
from fastprep.cli import main

RAISING = """
import fastprep as fp
schema = fp.Schema({
    "dep_delay": fp.Float(nullable=True, min=-120, max=2000, on_invalid="raise"),
    "arr_delay": fp.Float(),
})
pipeline = fp.Pipeline(schema=schema, features=[fp.col("dep_delay") >> fp.FillMissing(0)],
                       target="arr_delay")
"""


def test_validate_reports_quarantine_and_exits_0(repo_root, broken_path, tmp_path, capsys):
    report = tmp_path / "report.json"
    code = main(["validate", str(repo_root / "pipelines" / "flights.py"), "--input",
                 str(broken_path), "--report", str(report)])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    assert "rows: 40 in, 26 would be used, 14 would be quarantined" in text
    assert "column 'origin': 1 value(s) broke rule 'category'" in text
    data = json.loads(report.read_text())
    assert data["rows_in"] == data["rows_out"] + data["rows_quarantined"] == 40
    assert {(f["column"], f["rule"]) for f in data["findings"]} >= {("hour", "above_max")}


def test_validate_exits_1_when_a_raise_rule_fails(broken_path, tmp_path):
    pipeline = tmp_path / "strict.py"
    pipeline.write_text(RAISING)
    run = subprocess.run(
        [sys.executable, "-m", "fastprep", "validate", str(pipeline), "--input", str(broken_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "FAILED" in run.stdout
    assert "column 'dep_delay'" in run.stdout and "'above_max'" in run.stdout
    assert "first rows 2" in run.stdout


def test_validate_exits_0_on_the_clean_sample(repo_root, flights_parquet, tmp_path):
    pipeline = tmp_path / "strict.py"
    pipeline.write_text(RAISING)
    assert main(["validate", str(pipeline), "--input", str(flights_parquet)]) == 0


def test_infer_schema_from_the_flights_sample(flights_parquet, flights_csv, tmp_path):
    schema = fp.Schema.infer(flights_parquet)
    assert schema["origin"] == fp.Category(["EWR", "JFK", "LGA"])
    assert schema["dep_delay"] == fp.Float(nullable=True)
    assert schema["hour"] == fp.Int()
    assert isinstance(schema["tailnum"], fp.String) and schema["tailnum"].nullable
    assert isinstance(schema["dest"], fp.String)  # 100+ destinations: not a category
    assert dict(fp.Schema.infer(flights_csv)) == dict(schema)  # CSV text infers the same
    assert "'origin': Category(" in repr(schema)
    schema.save(tmp_path / "schema.json")
    assert dict(fp.Schema.load(tmp_path / "schema.json")) == dict(schema)
    ranged = fp.Schema.infer(flights_parquet, ranges=True)
    assert ranged["hour"] == fp.Int(min=5, max=23)


def test_inferred_schema_validates_its_own_sample(flights_sample):
    schema = fp.Schema.infer(flights_sample)
    pipeline = fp.Pipeline(schema=schema, features=[fp.cols("dep_delay", "distance") >> fp.FillMissing(0),
                                                    fp.col("carrier") >> fp.OneHot()])  # fmt: skip
    out = pipeline.fit_transform(flights_sample)
    assert out.report.rows_quarantined == 0 and out.report.rows_out == len(flights_sample)


def test_infer_text_numbers_and_nulls():
    frame = pd.DataFrame({"n": ["1", "2", "NA", " 3"], "f": ["1.5", "2", None, "3"],
                          "c": ["a", "b", "a", "a"]})  # fmt: skip
    schema = fp.Schema.infer(frame)
    assert schema["n"] == fp.Int(nullable=True)
    assert schema["f"] == fp.Float(nullable=True)
    assert schema["c"] == fp.Category(["a", "b"])
