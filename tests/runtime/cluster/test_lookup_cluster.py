"""Lookup tables on a real Dask cluster: the fit gives the single process's state (the side
tables included) and X, the fitted side tables reach the workers once per job (one
``scatter`` with ``broadcast``, not one copy per task), and the workers never read the
side files (a fitted pipeline's lookups live in its state)."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from support import REPO, assert_same_matrix

import fastprep as fp

SAMPLES = REPO / "data_samples"


def _pipeline(folder) -> fp.Pipeline:
    schema = fp.Schema(
        {
            "tailnum": fp.String(nullable=True),
            "origin": fp.Category(),
            "time_hour": fp.Datetime(tz="UTC"),
            "dep_delay": fp.Float(nullable=True),
        }
    )
    planes = fp.Schema(
        {
            "tailnum": fp.String(),
            "year": fp.Int(nullable=True),
            "seats": fp.Int(),
            "manufacturer": fp.String(),
        }
    )
    weather = fp.Schema(
        {
            "origin": fp.Category(),
            "time_hour": fp.Datetime(tz="UTC"),
            "temp": fp.Float(nullable=True),
            "visib": fp.Float(),
        }
    )
    return fp.Pipeline(schema, [
        fp.expr("plane_age = 2013 - planes.year") >> fp.FillMissing("median") >> fp.Standardize(),
        fp.col("planes.seats") >> fp.FillMissing("mean"),
        fp.col("planes.manufacturer") >> fp.OneHot(),
        fp.cols("weather.temp", "weather.visib") >> fp.FillMissing("median") >> fp.RobustScale(),
        fp.col("dep_delay") >> fp.FillMissing(0),
    ], lookups={
        "planes": fp.Lookup(folder / "planes.parquet", key={"tailnum": "tailnum"}, schema=planes),
        "weather": fp.Lookup(folder / "weather.parquet",
                             key={"origin": "origin", "time_hour": "time_hour"}, schema=weather),
    })  # fmt: skip


def _same_params(a, b) -> None:
    for fa, fb in zip(a, b, strict=True):
        for name in fa:
            for sa, sb in zip(fa[name], fb[name], strict=True):
                assert sa.keys() == sb.keys(), name
                for key in sa:
                    if isinstance(sa[key], np.ndarray):
                        np.testing.assert_array_equal(sa[key], sb[key])
                    elif isinstance(sa[key], float):
                        assert sa[key] == pytest.approx(sb[key], rel=1e-12, abs=1e-15)
                    else:
                        assert sa[key] == sb[key]


def test_cluster_fit_and_transform_equal_one_process(flights_row_groups, client, tmp_path,
                                                     monkeypatch) -> None:  # fmt: skip
    for name in ("planes.parquet", "weather.parquet"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    pipeline = _pipeline(tmp_path)
    single = pipeline.fit(flights_row_groups)
    scattered = []
    real_scatter = client.scatter

    def scatter(data, **options):
        scattered.append(options)
        return real_scatter(data, **options)

    monkeypatch.setattr(client, "scatter", scatter)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=5_000)
    assert len(scattered) == 1 and scattered[0]["broadcast"]  # 4 partitions, 2+ passes
    _same_params(single.params, dist.params)
    for name, table in single.schema.tables.items():
        other = dist.schema.tables[name]
        assert table.to_dict()["key"] == other.to_dict()["key"]
        assert set(table.values) == set(other.values)
    (tmp_path / "planes.parquet").unlink()  # the workers use the fitted state, not the file
    (tmp_path / "weather.parquet").unlink()
    expected = single.transform(flights_row_groups).X
    out = dist.transform(flights_row_groups, client=client, rows_per_partition=5_000)
    assert len(scattered) == 1  # the transform after the fit takes the fit's copy
    assert_same_matrix(out.X, expected)
    frame = pd.read_parquet(flights_row_groups)
    assert_same_matrix(dist.transform(frame).X, expected)
    written = dist.transform(flights_row_groups, client=client, rows_per_partition=5_000,
                             output_dir=tmp_path / "out")  # fmt: skip
    assert written is not None
    assert_same_matrix(fp.open_output(tmp_path / "out").whole().X, expected)
