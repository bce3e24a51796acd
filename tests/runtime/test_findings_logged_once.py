"""A rule broken in several partitions of one run is logged once, with the run's total (the
alert), not once per partition by the validator; the report already lists every finding."""

from __future__ import annotations

import logging

import pandas as pd
import pyarrow.parquet as pq
import pytest
from support import REPO

import fastprep as fp


@pytest.fixture(scope="module")
def weather_groups(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("groups") / "weather.parquet"
    table = pq.read_table(REPO / "data_samples" / "weather.parquet")
    pq.write_table(table, path, row_group_size=3000)  # 9 row groups
    return str(path)


def test_a_warn_rule_over_partitions_is_logged_once_with_the_total(weather_groups, tmp_path,
                                                                   caplog):  # fmt: skip
    schema = fp.Schema({"wind_speed": fp.Float(nullable=True, max=30, on_invalid="warn")})
    pipeline = fp.Pipeline(schema, [fp.col("wind_speed") >> fp.FillMissing(0)])
    weather = pd.read_parquet(weather_groups)
    total = int((weather["wind_speed"] > 30).sum())
    fitted = pipeline.fit(weather)
    caplog.clear()  # the fit's own alert
    with caplog.at_level(logging.WARNING, logger="fastprep"):
        fitted.write_shards(weather_groups, tmp_path / "s", rows_per_partition=3000)
    logged = [r.getMessage() for r in caplog.records if "'above_max'" in r.getMessage()]
    assert len(fp.open_output(tmp_path / "s")) == 9
    assert len(logged) == 1, logged
    assert f"column 'wind_speed': {total:,} value(s)" in logged[0]
