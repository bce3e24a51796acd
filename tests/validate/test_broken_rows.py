"""The deliberately broken sample: one fault per row 0-16 (see data_samples/make_samples.py).

Each faulty row must land in the quarantine with its own reason, the valid-but-odd rows
must be emitted with the documented repair, and every input row must be accounted for.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import MinMaxScaler, StandardScaler

import fastprep as fp

EXPECTED_REASONS = {
    0: "arr_delay: null",
    1: "arr_delay: type",
    2: "dep_delay: above_max",
    3: "dep_delay: below_min",
    4: "dep_delay: not_finite",
    5: "distance: below_min",
    6: "distance: null",
    7: "hour: above_max",
    8: "minute: not_integer",
    9: "origin: category",
    10: "carrier: null",
    12: "air_time: below_min",
    13: "dest: null",
}
VALID_ODD_ROWS = (11, 14, 15, 16)


@pytest.fixture
def broken_out(flights_pipeline, broken_path):
    return flights_pipeline.fit_transform(broken_path)


@pytest.fixture
def broken_raw(broken_path) -> pd.DataFrame:
    return pd.read_csv(broken_path, dtype=str, keep_default_na=False)


def real_missing_target_rows(flights_sample: pd.DataFrame) -> set[int]:
    # rows 17-39 are untouched real rows; some of them really have no arr_delay
    head = flights_sample.head(40)
    return {i for i in range(17, 40) if pd.isna(head.loc[i, "arr_delay"])}


def test_each_broken_row_has_its_reason(broken_out, flights_sample):
    quarantine = broken_out.quarantine
    reasons = dict(zip(quarantine["row_id"].tolist(), quarantine["reason"].tolist()))
    real = real_missing_target_rows(flights_sample)
    assert real, "the sample is expected to contain a real row without arr_delay"
    expected = dict(EXPECTED_REASONS)
    expected.update({i: "arr_delay: null" for i in real})
    assert reasons == expected
    for row in VALID_ODD_ROWS:
        assert row in broken_out.row_ids


def test_row_accounting_on_broken(broken_out):
    report = broken_out.report
    assert report.rows_in == 40
    assert report.rows_in == report.rows_out + report.rows_quarantined
    emitted = broken_out.row_ids.tolist()
    quarantined = broken_out.quarantine["row_id"].tolist()
    assert not set(emitted) & set(quarantined)
    assert sorted(emitted + quarantined) == list(range(report.rows_in))
    assert emitted == sorted(emitted)  # input order kept
    assert len(quarantined) == len(set(quarantined)) == report.rows_quarantined
    assert broken_out.X.shape[0] == len(broken_out.y) == report.rows_out


def test_findings_name_column_rule_and_row(broken_out):
    findings = {(f.column, f.rule): f for f in broken_out.report.findings}
    for row, reason in EXPECTED_REASONS.items():
        column, rule = reason.split(": ")
        finding = findings[(column, rule)]
        assert row in finding.first_rows
        assert finding.action == "quarantine"
    assert findings[("dep_delay", "above_max")].count == 1
    assert findings[("dep_delay", "above_max")].first_rows == (2,)
    assert "5000" in findings[("dep_delay", "above_max")].examples[0]
    # the coerced text number in row 16 and the nullable gaps in rows 14/15 are not findings
    for finding in broken_out.report.findings:
        assert not set(finding.first_rows) & {11, 14, 15, 16}


def test_quarantine_keeps_the_rows_as_read(broken_out, flights_pipeline):
    quarantine = broken_out.quarantine.set_index("row_id")
    assert list(broken_out.quarantine.columns) == [
        "row_id",
        *flights_pipeline.plan.columns,
        "reason",
    ]
    assert str(quarantine.loc[1, "arr_delay"]) == "about 5"
    assert float(quarantine.loc[2, "dep_delay"]) == 5000.0
    assert quarantine.loc[9, "origin"] == "BOS"
    assert float(quarantine.loc[12, "air_time"]) == -3.0


def _numbers(frame: pd.DataFrame, name: str, rows) -> np.ndarray:
    return pd.to_numeric(frame.loc[rows, name], errors="coerce").to_numpy(dtype=np.float64)


def test_zero_air_time_is_repaired_with_the_fitted_median(broken_out, broken_raw):
    names = broken_out.feature_names
    kept = broken_out.row_ids
    distance = _numbers(broken_raw, "distance", kept)
    air_time = _numbers(broken_raw, "air_time", kept)
    with np.errstate(divide="ignore", invalid="ignore"):
        speed = distance / air_time * 60
    speed[~np.isfinite(speed)] = np.nan
    assert np.isnan(speed[kept.tolist().index(11)])
    median = np.nanmedian(speed)
    filled = np.where(np.isnan(speed), median, speed).reshape(-1, 1)
    scaler = StandardScaler().fit(filled)
    X = broken_out.X.tocsr()
    column = X[:, names.index("speed")].toarray().ravel()
    assert np.array_equal(column, scaler.transform(filled).ravel().astype(np.float32))
    row11 = column[kept.tolist().index(11)]
    assert row11 == np.float32((median - scaler.mean_[0]) / scaler.scale_[0])
    repairs = [r for r in broken_out.report.repairs if r["output"] == "speed"]
    assert repairs == [
        {"output": "speed", "rule": "expr_not_finite", "count": 1, "action": "set_missing"}
    ]


def test_dep_delay_rows_fill_coerce_and_exclude_outliers_from_fit(broken_out, broken_raw):
    kept = broken_out.row_ids
    dep = _numbers(broken_raw, "dep_delay", kept)
    assert np.isnan(dep[kept.tolist().index(15)])  # row 15: missing, filled by 0
    assert dep[kept.tolist().index(16)] == 12.0  # row 16: "12" as text, coerced
    values = np.clip(np.where(np.isnan(dep), 0, dep), -60, 600).reshape(-1, 1)
    expected = StandardScaler().fit_transform(values).ravel().astype(np.float32)
    column = broken_out.X[:, broken_out.feature_names.index("dep_delay")].toarray().ravel()
    # statistics come from the emitted rows only: 5000 / -500 / inf never reach the fit
    assert np.array_equal(column, expected)


def test_missing_tailnum_hashes_only_dest(broken_out):
    X = broken_out.X.tocsr()
    hash_columns = [i for i, n in enumerate(broken_out.feature_names) if n.startswith("hash:")]
    assert len(hash_columns) == 2**18
    start = hash_columns[0]
    row = broken_out.row_ids.tolist().index(14)
    block = X[row, start:]
    assert block.nnz == 1 and abs(block.data[0]) == 1.0
    others = [X[r, start:].nnz for r in range(X.shape[0]) if r != row]
    assert 2 in set(others) and set(others) <= {1, 2}


def test_target_values_for_kept_rows(broken_out, broken_raw):
    arr = _numbers(broken_raw, "arr_delay", broken_out.row_ids)
    assert np.array_equal(broken_out.y, (arr > 15).astype(np.float32))


def test_minmax_dep_hour_on_kept_rows(broken_out, broken_raw):
    kept = broken_out.row_ids
    dep_hour = _numbers(broken_raw, "hour", kept) + _numbers(broken_raw, "minute", kept) / 60
    expected = MinMaxScaler().fit_transform(dep_hour.reshape(-1, 1)).ravel().astype(np.float32)
    column = broken_out.X[:, broken_out.feature_names.index("dep_hour")].toarray().ravel()
    assert np.array_equal(column, expected)


def test_row_accounting_on_the_real_sample(flights_pipeline, flights_sample):
    out = flights_pipeline.fit_transform(flights_sample)
    report = out.report
    assert report.rows_in == len(flights_sample) == 20_000
    assert report.rows_in == report.rows_out + report.rows_quarantined
    emitted = out.row_ids
    quarantined = out.quarantine["row_id"].to_numpy()
    assert np.array_equal(np.sort(np.concatenate([emitted, quarantined])), np.arange(20_000))
    assert np.all(np.diff(emitted) > 0)
    missing_target = np.flatnonzero(flights_sample["arr_delay"].isna().to_numpy())
    assert np.array_equal(np.sort(quarantined), missing_target)
    assert set(out.quarantine["reason"]) == {"arr_delay: null"}


def test_row_with_several_faults_is_quarantined_once():
    frame = pd.DataFrame(
        {"a": [1.0, -5.0, np.nan, 3.0], "b": ["x", "zzz", "y", None]}, dtype=object
    )
    schema = fp.Schema({"a": fp.Float(min=0), "b": fp.Category(["x", "y"])})
    pipeline = fp.Pipeline(schema, [fp.col("a"), fp.col("b") >> fp.OneHot()])
    out = pipeline.fit_transform(frame)
    reasons = dict(zip(out.quarantine["row_id"], out.quarantine["reason"]))
    assert set(reasons) == {1, 2, 3}
    assert set(reasons[1].split("; ")) == {"a: below_min", "b: category"}
    assert reasons[2] == "a: null"
    assert reasons[3] == "b: null"
    assert out.report.rows_quarantined == 3 and out.report.rows_out == 1
    assert out.row_ids.tolist() == [0]


def test_feature_still_missing_after_steps_is_quarantined():
    frame = pd.DataFrame({"a": [1.0, np.nan, 3.0], "b": [1.0, 2.0, np.nan]})
    schema = fp.Schema({"a": fp.Float(nullable=True), "b": fp.Float(nullable=True)})
    out = fp.Pipeline(schema, [fp.cols("a", "b") >> fp.Clip(0, 2)]).fit_transform(frame)
    assert out.row_ids.tolist() == [0]
    reasons = dict(zip(out.quarantine["row_id"], out.quarantine["reason"]))
    assert reasons == {1: "feature a: missing or not finite", 2: "feature b: missing or not finite"}
    assert np.isfinite(out.X).all()


def test_bool_and_int_and_string_rules():
    frame = pd.DataFrame(
        {
            "flag": ["true", "no", "maybe", "1", None],
            "n": ["1", "2.5", "3", "x", "4"],
            "code": ["abc", "abcdef", "ab", "a", "abcd"],
        }
    )
    schema = fp.Schema(
        {
            "flag": fp.Bool(nullable=True),
            "n": fp.Int(),
            "code": fp.String(max_length=4),
        }
    )
    pipeline = fp.Pipeline(
        schema, [fp.col("flag") >> fp.FillMissing(0), fp.col("n"), fp.col("code") >> fp.Hash(8)]
    )
    out = pipeline.fit_transform(frame)
    reasons = dict(zip(out.quarantine["row_id"], out.quarantine["reason"]))
    assert reasons == {
        1: "n: not_integer; code: too_long",
        2: "flag: type",
        3: "n: type",
    }
    assert out.row_ids.tolist() == [0, 4]
    X = out.X.toarray()
    assert X[:, 0].tolist() == [1.0, 0.0]
    assert X[:, 1].tolist() == [1.0, 4.0]


def test_infinity_allowed_only_with_allow_inf():
    frame = pd.DataFrame({"a": [1.0, np.inf, -np.inf, 2.0]})
    strict = fp.Pipeline(fp.Schema({"a": fp.Float()}), [fp.col("a") >> fp.Clip(-10, 10)])
    out = strict.fit_transform(frame)
    assert dict(zip(out.quarantine["row_id"], out.quarantine["reason"])) == {
        1: "a: not_finite",
        2: "a: not_finite",
    }
    relaxed = fp.Pipeline(
        fp.Schema({"a": fp.Float(allow_inf=True)}), [fp.col("a") >> fp.Clip(-10, 10)]
    )
    out = relaxed.fit_transform(frame)
    assert out.X[:, 0].tolist() == [1.0, 10.0, -10.0, 2.0]


def test_warn_policy_keeps_the_value(caplog):
    frame = pd.DataFrame({"a": [1.0, 50.0, 2.0], "b": ["1", "oops", "3"]})
    schema = fp.Schema(
        {
            "a": fp.Float(max=10, on_invalid="warn"),
            "b": fp.Float(nullable=True, on_invalid="warn"),
        }
    )
    with caplog.at_level("WARNING"):
        out = fp.Pipeline(schema, [fp.col("a"), fp.col("b") >> fp.FillMissing(-1)]).fit_transform(
            frame
        )
    assert out.report.rows_quarantined == 0
    assert out.X[:, 0].tolist() == [1.0, 50.0, 2.0]
    assert out.X[:, 1].tolist() == [1.0, -1.0, 3.0]  # wrong type becomes missing, then filled
    actions = {(f.column, f.rule): f.action for f in out.report.findings}
    assert actions == {("a", "above_max"): "warn", ("b", "type"): "warn"}
    assert "above_max" in caplog.text


# ------------------------------------------------------------------ data-time errors


def test_source_missing_a_column_names_it(flights_pipeline, flights_sample, tmp_path):
    frame = flights_sample.drop(columns=["air_time"])
    with pytest.raises(fp.SchemaError, match="air_time"):
        flights_pipeline.fit(frame)
    path = tmp_path / "no_air_time.csv"
    frame.head(100).to_csv(path, index=False)
    with pytest.raises(fp.SchemaError, match="air_time"):
        flights_pipeline.fit(path)
    parquet = tmp_path / "no_air_time.parquet"
    frame.head(100).to_parquet(parquet)
    with pytest.raises(fp.SchemaError, match="air_time"):
        flights_pipeline.fit(parquet)
    fitted = flights_pipeline.fit(flights_sample)
    with pytest.raises(fp.SchemaError, match="air_time"):
        fitted.transform(frame)


def test_text_column_where_float_is_declared(flights_pipeline, flights_sample, tmp_path):
    frame = flights_sample.head(200).copy()
    frame["distance"] = "far"
    with pytest.raises(fp.SchemaError) as info:
        flights_pipeline.fit(frame)
    assert "'distance'" in str(info.value) and "Float" in str(info.value)
    path = tmp_path / "text_distance.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(fp.SchemaError, match="'distance'"):
        flights_pipeline.fit(path)


def test_on_invalid_raise_names_column_rule_count_rows(broken_path):
    schema = fp.Schema(
        {
            "dep_delay": fp.Float(nullable=True, min=-120, max=2000, on_invalid="raise"),
            "distance": fp.Float(nullable=True),
        }
    )
    pipeline = fp.Pipeline(schema, [fp.cols("dep_delay", "distance") >> fp.FillMissing(0)])
    with pytest.raises(fp.DataValidationError) as info:
        pipeline.fit(broken_path)
    message = str(info.value)
    assert "'dep_delay'" in message
    for rule, row in (("above_max", 2), ("below_min", 3), ("not_finite", 4)):
        line = next(line for line in message.splitlines() if f"'{rule}'" in line)
        assert "1 value(s)" in line
        assert f"first rows {row}" in line
    assert "'distance'" not in message  # only the columns whose policy is raise


def test_on_invalid_raise_counts_many_rows(flights_sample):
    schema = fp.Schema({"arr_delay": fp.Float(on_invalid="raise")})
    pipeline = fp.Pipeline(schema, [fp.col("arr_delay")])
    missing = np.flatnonzero(flights_sample["arr_delay"].isna().to_numpy())
    with pytest.raises(fp.DataValidationError) as info:
        pipeline.fit(flights_sample)
    message = str(info.value)
    assert "'arr_delay'" in message and "'null'" in message
    assert f"{len(missing):,} value(s)" in message
    assert "first rows " + ", ".join(str(r) for r in missing[:5]) in message


@pytest.mark.parametrize(
    "step", [fp.FillMissing("median"), fp.FillMissing("mean"), fp.Standardize(), fp.MinMax()]
)
def test_fit_on_an_all_missing_column(step):
    frame = pd.DataFrame({"empty": [np.nan] * 5, "x": [1.0, 2.0, 3.0, 4.0, 5.0]})
    schema = fp.Schema({"empty": fp.Float(nullable=True), "x": fp.Float()})
    pipeline = fp.Pipeline(schema, [fp.col("x"), fp.col("empty") >> step])
    with pytest.raises(fp.FitError) as info:
        pipeline.fit(frame)
    assert "'empty'" in str(info.value)
    assert type(step).__name__ in str(info.value)


def test_fit_error_when_every_row_is_quarantined(flights_pipeline, flights_sample):
    frame = flights_sample[flights_sample["arr_delay"].isna()]
    with pytest.raises(fp.FitError):
        flights_pipeline.fit(frame)


def test_transform_of_rows_that_are_all_quarantined(flights_pipeline, flights_sample):
    fitted = flights_pipeline.fit(flights_sample)
    frame = flights_sample[flights_sample["arr_delay"].isna()]
    out = fitted.transform(frame)
    assert out.X.shape == (0, len(out.feature_names))
    assert out.y.shape == (0,)
    assert out.report.rows_in == out.report.rows_quarantined == len(frame)
    assert sp.issparse(out.X)


def test_integers_beyond_float_precision_are_an_inexact_int_fault():
    frame = pd.DataFrame({"n": [1, 2**60, 3, -(2**54)]})
    out = fp.Pipeline(fp.Schema({"n": fp.Int()}), [fp.col("n")]).fit_transform(frame)
    assert dict(zip(out.quarantine["row_id"], out.quarantine["reason"])) == {
        1: "n: inexact_int",
        3: "n: inexact_int",
    }
    assert out.X[:, 0].tolist() == [1.0, 3.0]


def test_category_domain_applies_to_numbers_read_as_text():
    frame = pd.DataFrame({"o": [1, 2, 3]})
    out = fp.Pipeline(
        fp.Schema({"o": fp.Category(["1", "2"])}), [fp.col("o") >> fp.OneHot()]
    ).fit_transform(frame)
    assert out.feature_names == ["o=1", "o=2"]
    assert dict(zip(out.quarantine["row_id"], out.quarantine["reason"])) == {2: "o: category"}
