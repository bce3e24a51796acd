"""Drift between fit and transform, alerts (logging + on_alert, once per rule per run) and the
anomaly pattern, on the real flights sample."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.validate.drift import THRESHOLDS


@pytest.fixture(scope="module")
def halves(repo_root):
    frame = pd.read_parquet(repo_root / "data_samples" / "flights.parquet")
    return frame.iloc[:10_000].reset_index(drop=True), frame.iloc[10_000:].reset_index(drop=True)


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_no_drift_between_two_halves_of_one_sample(flights_pipeline, halves, backend):
    first, second = halves
    fitted = flights_pipeline.fit(first, backend=backend)
    drift = fitted.transform(second).report.drift
    assert set(drift) == set(flights_pipeline.plan.columns)
    for column in ("dep_delay", "distance", "hour", "origin", "carrier"):
        assert drift[column]["alerts"] == [], (column, drift[column])
    assert drift["dep_delay"]["mean_shift"] < 0.2  # Jan-Jun vs Jul-Dec: a real, small shift
    assert drift["origin"]["unseen_share"] == 0.0


def test_shifted_mean_new_categories_and_nulls_alert(flights_pipeline, halves, caplog):
    first, second = halves
    fitted = flights_pipeline.fit(first)
    baseline = fitted.transform(second).report.drift["dep_delay"]["mean_shift"]
    shifted = second.copy()
    shifted["dep_delay"] += fitted.profile["dep_delay"]["std"]  # one fitted std
    shifted.loc[: len(shifted) // 5, "carrier"] = "ZZ"  # ~20% unseen
    shifted.loc[: len(shifted) // 2, "air_time"] = np.nan  # null rate +50%
    got: list = []
    with caplog.at_level(logging.WARNING, logger="fastprep.alerts"):
        out = fitted.transform(shifted, on_alert=got.append)
    drift = out.report.drift
    assert drift["dep_delay"]["alerts"] == ["mean_shift"]
    assert drift["dep_delay"]["mean_shift"] - baseline == pytest.approx(1.0, abs=0.02)
    assert drift["carrier"]["alerts"] == ["unseen_share"]
    assert drift["carrier"]["unseen_share"] == pytest.approx(0.2, abs=0.01)
    assert drift["carrier"]["unseen_examples"] == ["ZZ"]
    assert "null_rate_delta" in drift["air_time"]["alerts"]
    rules = {a.rule for a in got}
    assert {"drift:dep_delay:mean_shift", "drift:carrier:unseen_share",
            "drift:air_time:null_rate_delta"} <= rules  # fmt: skip
    assert "drift:origin:unseen_share" not in rules
    assert any("'carrier': drift unseen_share" in r.getMessage() for r in caplog.records)
    assert "drift 'carrier': unseen_share" in out.report.summary()
    assert out.report.to_dict()["drift"]["carrier"]["alerts"] == ["unseen_share"]
    # thresholds are settable: a looser one silences the mean shift
    looser = fitted.transform(shifted, drift_thresholds={"mean_shift": 2.0}).report.drift
    assert looser["dep_delay"]["alerts"] == []
    assert THRESHOLDS["mean_shift"] == 0.5


def test_alerts_are_sent_once_per_rule_per_run(flights_pipeline, broken_path):
    got: list = []
    fitted = flights_pipeline.fit(broken_path, on_alert=got.append)
    fit_keys = [a.key for a in got]
    assert len(fit_keys) == len(set(fit_keys)) > 5
    assert all(job == "flights:fit" for job, _, _ in fit_keys)
    first = fitted.transform(broken_path, on_alert=got.append)
    sent = got[len(fit_keys) :]
    assert len({a.key for a in sent}) == len(sent) > 5  # one per rule
    assert all(a.job == "flights:transform" for a in sent)
    # another run is reported again: the same path may hold new data
    again = fitted.transform(broken_path, on_alert=got.append)
    assert [a.to_dict() for a in got[len(fit_keys) + len(sent) :]] == first.report.alerts
    assert again.report.alerts == first.report.alerts
    assert any(f.rule == "above_max" for f in again.report.findings)


def test_saved_pipeline_keeps_its_drift_profile(flights_pipeline, halves, tmp_path):
    first, second = halves
    fitted = flights_pipeline.fit(first)
    fitted.save(tmp_path / "p.fastprep")
    loaded = fp.load(tmp_path / "p.fastprep")
    assert loaded.profile == fitted.profile
    assert loaded.transform(second).report.drift == fitted.transform(second).report.drift


def test_anomaly_pattern_names_columns_failing_together():
    schema = fp.Schema({"a": fp.Float(max=10), "b": fp.Float(max=10), "c": fp.Float()})
    pipeline = fp.Pipeline(schema=schema, features=[fp.cols("a", "b", "c")])
    frame = pd.DataFrame({
        "a": [50.0, 50, 50, 1, 1, 50],
        "b": [50.0, 50, 1, 1, 1, 50],
        "c": [1.0, 1, 1, np.nan, 1, 1],
    })  # fmt: skip
    out = pipeline.fit_transform(frame)
    assert out.report.anomaly_patterns == [
        {"columns": ["a", "b"], "rules": ["a: above_max", "b: above_max"], "rows": 3},
        {"columns": ["a"], "rules": ["a: above_max"], "rows": 1},
        {"columns": ["c"], "rules": ["c: null"], "rows": 1},
    ]
    assert "3 row(s) failed together on a: above_max + b: above_max" in out.report.summary()


def test_text_profile_of_selected_rows_counts_only_those_rows(flights_sample):
    # the selected rows' counts come from all rows' less the left-out rows': the same
    # vocabulary and null rate as counting the selected rows themselves
    from fastprep.data.columns import Table, TextColumn, row_range
    from fastprep.validate import drift

    codes, uniques = pd.factorize(flights_sample["tailnum"])
    column = TextColumn(codes.astype(np.int32), uniques.to_numpy(dtype=object))
    n = len(column)
    selection = np.flatnonzero(np.arange(n) % 3 != 0)  # a third of the rows left out
    selected = Table(row_range(0, n), {"tailnum": column}, selection)
    taken = Table(row_range(0, len(selection)), {"tailnum": column.take(selection)})
    assert drift.profile(selected) == drift.profile(taken)
    assert drift.profile(selected)["tailnum"]["null_rate"] > 0


def test_the_selected_rows_counts_seed_the_gathered_column(flights_sample):
    # a step that later gathers the column (a OneHot fit on the reference backend) starts
    # with the counts the profile found, equal to counting the gathered codes
    from fastprep.data.columns import Table, TextColumn, row_range

    codes, uniques = pd.factorize(flights_sample["carrier"])
    column = TextColumn(codes.astype(np.int32), uniques.to_numpy(dtype=object))
    selection = np.flatnonzero(np.arange(len(column)) % 4 != 1)
    table = Table(row_range(0, len(column)), {"carrier": column}, selection)
    counts = table.selected_counts("carrier")
    gathered = table["carrier"]
    assert gathered._counts is counts
    fresh = TextColumn(gathered.codes, gathered.uniques)
    assert np.array_equal(fresh.value_counts(), counts)
