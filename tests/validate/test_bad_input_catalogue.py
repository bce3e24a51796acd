"""The bad-input catalogue: each bad input with its expected outcome, on every backend.

Files come from ``data_samples/bad/`` (see its README); the rest are generated here. Each
case asserts one of: an error naming the column and the rule; the quarantined rows and
their reasons; the repaired values the policy promises — and, whenever output is
produced, row accounting (``rows_in == rows_out + rows_quarantined``, every row id once).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.cli import load_pipeline_file

REPO = Path(__file__).resolve().parents[2]
BAD = REPO / "data_samples" / "bad"
FLIGHTS = load_pipeline_file(REPO / "pipelines" / "flights.py")


def simple(schema: dict[str, Any], *features: Any, target: Any = None) -> fp.Pipeline:
    return fp.Pipeline(schema=fp.Schema(schema), features=list(features), target=target)


def dense(out: fp.Output) -> np.ndarray:
    return out.X.toarray() if hasattr(out.X, "toarray") else np.asarray(out.X)


@dataclass
class Case:
    """One bad input and what must happen to it."""

    id: str
    source: Callable[[], Any]
    pipeline: fp.Pipeline = FLIGHTS
    raises: tuple[type, str] | None = None  # error type, regex naming column and rule
    quarantined: dict[int, str] | None = None  # row id -> reason (exactly these rows)
    check: Callable[[fp.Output], None] | None = None
    fit_on: Callable[[], Any] | None = None  # fit here, transform ``source``
    findings: set[tuple[str, str, str]] = field(default_factory=set)  # (column, rule, action)


def file(name: str) -> Callable[[], Any]:
    path = BAD / name
    if name.endswith(".json"):
        return lambda: pd.read_json(path, orient="records")
    return lambda: str(path)


def frame(**columns: Any) -> Callable[[], pd.DataFrame]:
    return lambda: pd.DataFrame(columns)


def objects(*values: Any) -> pd.Series:
    return pd.Series(list(values), dtype=object)


def assert_x(expected: list[list[float]]) -> Callable[[fp.Output], None]:
    def check(out: fp.Output) -> None:
        np.testing.assert_array_equal(dense(out), np.asarray(expected, dtype=np.float32))

    return check


def same_hash_rows(*rows: int) -> Callable[[fp.Output], None]:
    def check(out: fp.Output) -> None:
        X = dense(out)
        for row in rows[1:]:
            np.testing.assert_array_equal(X[rows[0]], X[row])
        assert X[rows[0]].any()

    return check


X_FLOAT = {"x": fp.Float()}
CASES = [
    # --- files in data_samples/bad/ through the flights pipeline -------------------------
    Case("missing_column", file("missing_column.csv"), raises=(fp.SchemaError, r"\['dest'\]")),
    Case("duplicated_columns", file("duplicated_columns.csv"),
         raises=(fp.SchemaError, r"duplicated column name\(s\) \['dest'\]")),
    Case("wrong_type_column", file("wrong_type_column.csv"),
         raises=(fp.SchemaError, r"column 'distance' is declared Float but none")),
    Case("tz_datetime_as_number", file("tz_datetime_as_number.parquet"),
         raises=(fp.SchemaError, r"column 'dep_delay' is declared Float.*datetime64")),
    Case("empty_file_at_fit", file("empty.csv"),
         raises=(fp.FitError, r"Standardize.*'dep_delay'.*no non-missing values")),
    Case("empty_frame_at_fit_without_statistics", frame(c=pd.Series([], dtype="str")),
         simple({"c": fp.Category()}, fp.col("c") >> fp.Hash(16)),
         findings={("*", "empty", "warn")}, check=lambda out: dense(out).shape == (0, 16)),
    Case("header_only_no_newline", file("header_only_no_newline.csv"),
         raises=(fp.SourceError, r"header_only_no_newline.csv")),
    Case("all_null_column_at_fit", file("all_null_column.parquet"),
         raises=(fp.FitError, r"FillMissing\('median'\) on 'speed': no non-missing")),
    Case("numbers_as_strings", file("numbers_as_strings.csv"),
         quarantined={5: "dep_delay: type", 8: "dep_delay: type", 9: "dep_delay: type"}),
    Case("infinite_values", file("infinite_values.csv"),
         quarantined={1: "dep_delay: not_finite", 4: "dep_delay: not_finite"}),
    Case("category_outside_domain", file("category_outside_domain.csv"),
         quarantined={2: "origin: category", 3: "origin: category", 5: "origin: category"}),
    Case("missing_target", file("missing_target.csv"),
         quarantined={0: "arr_delay: null", 7: "arr_delay: null"}),
    Case("latin1_text", file("latin1_text.csv"), quarantined={0: "dest: encoding"}),
    Case("out_of_range", file("out_of_range.csv"),
         quarantined={0: "hour: above_max", 1: "minute: above_max", 2: "distance: below_min",
                      3: "dep_delay: below_min"}),
    Case("fractional_int", file("fractional_int.csv"),
         quarantined={3: "minute: not_integer", 6: "minute: not_integer"}),
    Case("nulls_in_non_nullable", file("nulls_in_non_nullable.csv"),
         quarantined={2: "carrier: null", 4: "distance: null", 5: "dest: null"}),
    Case("nullable_int_with_na", file("nullable_int_with_na.parquet"),
         quarantined={1: "hour: null", 4: "hour: null"}),
    Case("int_beyond_2_53_in_float_column", file("int_beyond_2_53.parquet"),
         quarantined={1: "distance: inexact_int", 3: "distance: below_min; distance: inexact_int"}),
    Case("mixed_types_json", file("mixed_types.json"),
         quarantined={3: "dep_delay: type", 5: "dep_delay: type", 6: "dep_delay: type",
                      9: "dep_delay: type"}),
    # --- generated: integers and casts ------------------------------------------------
    Case("int64_beyond_2_53", frame(x=np.array([1, 2**53 + 1, 3], dtype=np.int64)),
         simple({"x": fp.Int()}, fp.col("x")), quarantined={1: "x: inexact_int"},
         check=assert_x([[1], [3]])),
    Case("nullable_Int64_beyond_2_53", frame(x=pd.array([1, 2**53 + 1, None], dtype="Int64")),
         simple({"x": fp.Int(nullable=True)}, fp.col("x") >> fp.FillMissing(0)),
         quarantined={1: "x: inexact_int"}, check=assert_x([[1], [0]])),
    Case("uint64_max", frame(x=np.array([1, 2**64 - 1], dtype=np.uint64)),
         simple({"x": fp.Int()}, fp.col("x")), quarantined={1: "x: inexact_int"}),
    Case("text_int_beyond_2_53", frame(x=["1", "9007199254740993", "-9007199254740995"]),
         simple({"x": fp.Int()}, fp.col("x")),
         quarantined={1: "x: inexact_int", 2: "x: inexact_int"}),
    Case("nan_and_inf_to_int", frame(x=[1.0, np.nan, np.inf, 4.0]),
         simple({"x": fp.Int()}, fp.col("x")),
         quarantined={1: "x: null", 2: "x: not_integer"}, check=assert_x([[1], [4]])),
    Case("float16_inf_and_int8_extremes",
         frame(x=np.array([1, 65504, np.inf], dtype=np.float16),
               i=np.array([-128, 127, 0], dtype=np.int8)),
         simple({"x": fp.Float(), "i": fp.Int()}, fp.cols("x", "i")),
         quarantined={2: "x: not_finite"}, check=assert_x([[1, -128], [65504, 127]])),
    Case("bool_in_float_column", frame(x=objects(1.0, True, "2")),
         simple(X_FLOAT, fp.col("x")), quarantined={1: "x: type"}, check=assert_x([[1], [2]])),
    Case("bool_column_bad_text", frame(b=["true", "maybe", "0", "yes"]),
         simple({"b": fp.Bool()}, fp.col("b")), quarantined={1: "b: type"},
         check=assert_x([[1], [0], [1]])),
    # --- generated: text --------------------------------------------------------------
    Case("lone_surrogate", frame(c=objects("ok", "bad\ud800", "x")),
         simple({"c": fp.String()}, fp.col("c") >> fp.Hash(16)), quarantined={1: "c: encoding"}),
    Case("bytes_not_utf8", frame(c=objects("ok", b"\xff\xfe", b"caf\xc3\xa9")),
         simple({"c": fp.Category()}, fp.col("c") >> fp.OneHot()),
         quarantined={1: "c: encoding"},
         check=lambda out: list(out.feature_names) == ["c=café", "c=ok"]),
    Case("list_and_dict_in_text_column", frame(c=objects("a", [1], {"k": 1}, "b")),
         simple({"c": fp.Category()}, fp.col("c") >> fp.OneHot()),
         quarantined={1: "c: type", 2: "c: type"}),
    Case("string_too_long", frame(c=["abc", "abcd", "éééé"]),
         simple({"c": fp.String(max_length=3)}, fp.col("c") >> fp.Hash(16)),
         quarantined={1: "c: too_long", 2: "c: too_long"}),
    # --- generated: silent-corruption pitfalls -----------------------------------------
    Case("one_vs_text_one_at_transform", frame(c=objects(1, 2, 1.0)),
         simple({"c": fp.Category()}, fp.col("c") >> fp.OneHot()),
         fit_on=frame(c=["1", "2", "2"]), check=assert_x([[1, 0], [0, 1], [1, 0]])),
    Case("one_vs_text_one_hashed", frame(c=objects(1, "1", 1.0, "2")),
         simple({"c": fp.Category()}, fp.col("c") >> fp.Hash(64)), check=same_hash_rows(0, 1, 2)),
    Case("minus_zero_hashes_as_zero", frame(x=[0.0, -0.0, 1.0], c=["a", "a", "a"]),
         simple({"x": fp.Float(), "c": fp.Category()}, fp.cols("c", "x") >> fp.Hash(64)),
         check=same_hash_rows(0, 1)),
    Case("nan_bit_patterns_hash_alike",
         frame(x=np.array([np.nan, np.uint64(0x7FF8000000000123).view(np.float64),
                           np.uint64(0xFFF8000000000001).view(np.float64)]), c=["a"] * 3),
         simple({"x": fp.Float(nullable=True), "c": fp.Category()},
                fp.cols("c", "x") >> fp.Hash(64)),
         check=same_hash_rows(0, 1, 2)),
    Case("missing_never_becomes_nan_text",
         frame(c=objects("a", None, np.nan, pd.NA, "b", float("nan"))),
         simple({"c": fp.Category(nullable=True)}, fp.col("c") >> fp.OneHot()),
         check=lambda out: list(out.feature_names) == ["c=a", "c=b", "c=<missing>"]
         and dense(out)[:, 2].tolist() == [0, 1, 1, 1, 0, 1]),
    Case("near_constant_std", frame(x=1.0 + np.array([0, 1e-16, 2e-16, 0])),
         simple(X_FLOAT, fp.col("x") >> fp.Standardize()),
         check=lambda out: np.abs(dense(out)).max() < 1e-15),
    Case("constant_column_at_fit", frame(x=[3.0] * 4),
         simple(X_FLOAT, fp.col("x") >> fp.Standardize()),
         findings={("x", "constant", "warn")}, check=assert_x([[0]] * 4)),
    Case("duplicate_index_labels", lambda: pd.DataFrame({"x": [1.0, -1, np.nan, 2]}, index=[5] * 4),
         simple(X_FLOAT, fp.col("x")), quarantined={2: "x: null"},
         check=lambda out: out.row_ids.tolist() == [0, 1, 3]),
    Case("duplicated_columns_frame", lambda: pd.DataFrame([[1.0, 2.0]], columns=["x", "x"]),
         simple(X_FLOAT, fp.col("x")), raises=(fp.SchemaError, r"duplicated column.*'x'")),
    Case("empty_frame_at_transform", frame(x=pd.Series([], dtype=float)),
         simple(X_FLOAT, fp.col("x") >> fp.Standardize()), fit_on=frame(x=[1.0, 3.0]),
         check=lambda out: dense(out).shape == (0, 1)),
    Case("all_rows_quarantined_at_fit", frame(x=[np.nan, np.nan]),
         simple(X_FLOAT, fp.col("x") >> fp.Standardize()),
         raises=(fp.FitError, r"'x'.*no non-missing")),
    Case("division_by_zero_in_expr", frame(x=[1.0, 0.0, -0.0, 2.0]),
         simple(X_FLOAT, fp.expr("r = 1 / x")),
         quarantined={1: "feature r: missing or not finite", 2: "feature r: missing or not finite"},
         check=assert_x([[1.0], [0.5]])),
    Case("log_of_negative", frame(x=[1.0, -2.0, 2.0]), simple(X_FLOAT, fp.col("x") >> fp.Log1p()),
         quarantined={1: "feature x: missing or not finite"}),
    Case("beyond_float32", frame(x=[1.0, 1e300, -1e39]), simple(X_FLOAT, fp.col("x")),
         quarantined={1: "feature x: missing or not finite", 2: "feature x: missing or not finite"}),
    # --- generated: the policies ------------------------------------------------------
    Case("raise_policy", frame(x=[1.0, 500.0, -3.0, 700.0]),
         simple({"x": fp.Float(min=0, max=100, on_invalid="raise")}, fp.col("x")),
         raises=(fp.DataValidationError,
                 r"column 'x': 2 value\(s\) broke rule 'above_max'.*first rows 1, 3")),
    Case("warn_policy_keeps_value", frame(x=[1.0, 500.0]),
         simple({"x": fp.Float(max=100, on_invalid="warn")}, fp.col("x")),
         findings={("x", "above_max", "warn")}, check=assert_x([[1], [500]])),
    Case("repair_policy_clips_and_rounds",
         frame(x=[-5.0, 50.0, 150.0, np.inf, -np.inf], m=[1.4, 2.5, 59.7, 3.0, 0.0]),
         simple({"x": fp.Float(min=0, max=100, on_invalid="repair"),
                 "m": fp.Int(min=0, max=59, on_invalid="repair")}, fp.cols("x", "m")),
         findings={("x", "below_min", "clip"), ("x", "above_max", "clip"),
                   ("x", "not_finite", "clip"), ("m", "not_integer", "round")},
         check=assert_x([[0, 1], [50, 2], [100, 59], [100, 3], [0, 0]])),
    Case("repair_policy_inf_without_bound_quarantines", frame(x=[1.0, np.inf, -np.inf]),
         simple({"x": fp.Float(min=0, on_invalid="repair")}, fp.col("x")),
         quarantined={1: "x: not_finite"}, findings={("x", "not_finite", "clip")},
         check=assert_x([[1], [0]])),
    Case("repair_policy_null_quarantines", frame(x=[1.0, None]),
         simple({"x": fp.Float(on_invalid="repair")}, fp.col("x")), quarantined={1: "x: null"}),
    # --- generated: table-level checks, datetimes, storage dtypes, imputation -----------
    Case("unexpected_column_raise", frame(x=[1.0, 2.0], extra=["a", "b"]),
         fp.Pipeline(schema=fp.Schema(X_FLOAT, unexpected="raise"), features=[fp.col("x")]),
         raises=(fp.SchemaError, r"1 column\(s\) the schema does not declare: \['extra'\]")),
    Case("unexpected_column_ignored_reported", frame(x=[1.0, 2.0], extra=["a", "b"]),
         simple(X_FLOAT, fp.col("x")), findings={("extra", "unexpected_column", "ignore")},
         check=assert_x([[1], [2]])),
    Case("duplicate_key_raise", frame(k=["a", "b", "a"], x=[1.0, 2.0, 3.0]),
         fp.Pipeline(schema=fp.Schema({"k": fp.String(), **X_FLOAT}, keys=["k"]),
                     features=[fp.col("x")]),
         raises=(fp.DataValidationError, r"column 'k': 1 value\(s\) broke rule 'duplicate_key'"
                 r".*first rows 2")),
    Case("duplicate_key_quarantine", frame(k=[3, 1, 3, 3], x=[1.0, 2.0, 3.0, 4.0]),
         fp.Pipeline(schema=fp.Schema({"k": fp.Int(), **X_FLOAT}, keys=["k"],
                                      on_duplicate="quarantine"), features=[fp.col("x")]),
         quarantined={2: "k: duplicate_key", 3: "k: duplicate_key"}, check=assert_x([[1], [2]])),
    Case("tz_aware_declared_naive",
         lambda: pd.DataFrame({"t": pd.date_range("2013-01-01", periods=3, freq="h", tz="UTC")}),
         simple({"t": fp.Datetime()}, fp.col("t")),
         raises=(fp.SchemaError, r"'t' is declared naive.*time zone UTC")),
    Case("datetime_text_with_and_without_offset",
         frame(t=["2013-01-01T00:00Z", "2013-01-01T01:00+01:00", "2013-01-01 00:00"]),
         simple({"t": fp.Datetime(tz="UTC")}, fp.expr("h = t / 3600 - 376944")),
         quarantined={2: "t: timezone"}, check=assert_x([[0], [0]])),
    Case("int8_overflow", frame(i=[5, 200, -7, -200]),
         simple({"i": fp.Int(dtype="int8")}, fp.col("i")),
         quarantined={1: "i: overflow", 3: "i: overflow"}, check=assert_x([[5], [-7]])),
    Case("int16_overflow_repair_clips", frame(i=[1, 40000, -40000]),
         simple({"i": fp.Int(dtype="int16", on_invalid="repair")}, fp.col("i")),
         findings={("i", "overflow", "clip")}, check=assert_x([[1], [32767], [-32768]])),
    Case("declared_impute", frame(x=[np.nan, 2.0, None]),
         simple({"x": fp.Float(impute=0.5)}, fp.col("x")),
         findings={("x", "null", "impute")}, check=assert_x([[0.5], [2], [0.5]])),
    Case("int_column_one_vs_text_one", frame(i=objects(1, "1", 1.0, " 2 ")),
         simple({"i": fp.Int()}, fp.col("i")), check=assert_x([[1], [1], [1], [2]])),
    Case("missing_text_never_hashed_as_nan_string",
         frame(c=objects(None, "nan", "None", "<NA>", np.nan, pd.NA)),
         simple({"c": fp.String(nullable=True)}, fp.col("c") >> fp.Hash(2**16)),
         check=lambda out: [dense(out)[r].any() for r in range(6)]
         == [False, True, True, True, False, False]
         and len({tuple(np.flatnonzero(dense(out)[r])) for r in (1, 2, 3)}) == 3),
    Case("near_constant_is_constant_at_fit", frame(x=1.0 + np.array([0, 1e-16, 2e-16, 0])),
         simple(X_FLOAT, fp.col("x") >> fp.Standardize()),
         findings={("x", "constant", "warn")}),
]  # fmt: skip


@pytest.mark.parametrize("backend", ["pandas", "numba"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, backend: str) -> None:
    if case.raises is not None:
        error, pattern = case.raises
        with pytest.raises(error, match=pattern):
            _run(case, backend)
        return
    out = _run(case, backend)
    report = out.report
    assert report.rows_in == report.rows_out + report.rows_quarantined
    emitted, rejected = out.row_ids.tolist(), out.quarantine["row_id"].tolist()
    assert sorted(emitted + rejected) == list(range(report.rows_in))
    assert dense(out).shape[0] == report.rows_out and np.isfinite(dense(out)).all()
    if case.quarantined is not None:
        assert dict(zip(rejected, out.quarantine["reason"], strict=True)) == case.quarantined
        for reason in case.quarantined.values():  # each reason is a finding naming its rows
            for part in reason.split("; "):
                if not part.startswith(("feature ", "target ")):
                    column, rule = part.split(": ")
                    assert any(f.column == column and f.rule == rule for f in report.findings)
    found = {(f.column, f.rule, f.action) for f in report.findings}
    if case.fit_on is not None:
        found |= {(f.column, f.rule, f.action) for f in out.fit_findings}
    assert case.findings <= found, found
    if case.check is not None:
        assert case.check(out) is not False


def _run(case: Case, backend: str) -> fp.Output:
    source = case.source()
    if case.fit_on is None:
        return case.pipeline.fit_transform(source, backend=backend)
    fitted = case.pipeline.fit(case.fit_on(), backend=backend)
    out = fitted.transform(source, backend=backend)
    out.fit_findings = list(fitted.fit_report.findings)
    return out


def test_catalogue_size() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 30
    files = {p.name for p in BAD.iterdir() if p.suffix in (".csv", ".parquet", ".json")}
    readme = (BAD / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in files), "document every bad file"


def test_hash_is_stable_across_processes() -> None:
    code = (
        "import pandas as pd, fastprep as fp;"
        "p = fp.Pipeline(schema=fp.Schema({'c': fp.Category()}), "
        "features=[fp.col('c') >> fp.Hash(2**10)]);"
        "print(p.fit_transform(pd.DataFrame({'c': ['JFK', 'N668DN']})).X.indices.tolist())"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1] and runs[0].strip().startswith("[")
