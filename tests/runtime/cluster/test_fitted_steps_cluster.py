"""The quantile/power steps fitted on a real Dask cluster equal the single-process fit:
``RobustScale`` and quantile ``Bin`` from exact order statistics (two passes, like the
median), ``QuantileTransform``/``PowerTransform`` from the partitions' values merged in
partition order."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fastprep as fp
from fastprep.runtime import aggregates as agg


def _pipeline() -> fp.Pipeline:
    schema = fp.Schema(
        {
            "dep_delay": fp.Float(nullable=True),
            "air_time": fp.Float(nullable=True),
            "distance": fp.Float(),
        }
    )
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.col("dep_delay") >> fp.RobustScale() >> fp.FillMissing(0),
            fp.col("air_time") >> fp.FillMissing("median") >> fp.QuantileTransform(300)
            >> fp.PowerTransform(),
            fp.col("distance") >> fp.MaxAbsScale() >> fp.Bin(7) >> fp.Standardize(),
            fp.expr("d2 = distance") >> fp.Bin(4, strategy="uniform", encode="onehot"),
            fp.expr("d3 = dep_delay") >> fp.Bin(edges=[-10, 0, 10]) >> fp.FillMissing(-1),
            fp.expr("d4 = air_time") >> fp.Bin(6, strategy="uniform") >> fp.FillMissing(-1),
            fp.expr("d5 = dep_delay") >> fp.RobustScale(quantile_range=(5.0, 95.0))
            >> fp.Bin(9) >> fp.FillMissing(-1),
        ],
    )  # fmt: skip


def _same(a, b) -> None:
    if isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15)
    else:
        assert a == b


def test_cluster_fit_equals_single_process(flights_row_groups, client) -> None:
    pipeline = _pipeline()
    single = pipeline.fit(flights_row_groups)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=5_000)
    for a, b in zip(single.params, dist.params, strict=True):
        for name in a:
            for sa, sb in zip(a[name], b[name], strict=True):
                assert sa.keys() == sb.keys(), name
                for key in sa:
                    _same(sa[key], sb[key])
    x_single = single.transform(flights_row_groups).X
    x_dist = dist.transform(flights_row_groups, client=client, rows_per_partition=5_000).X
    np.testing.assert_array_equal(x_single.toarray(), x_dist.toarray())


def test_a_gather_above_the_cap_is_refused_naming_the_step(
    flights_row_groups, client, monkeypatch
) -> None:
    monkeypatch.setattr(agg, "MAX_GATHERED_VALUES", 1_000)
    with pytest.raises(fp.FitError, match=r"QuantileTransform\(.*'air_time'.*without client="):
        _pipeline().fit(flights_row_groups, client=client, rows_per_partition=5_000)


@pytest.mark.parametrize("seed", range(6))
def test_order_statistics_rebuild_the_fit_exactly(seed) -> None:
    """RobustScale and quantile Bin from per-partition summaries and windows (no cluster:
    the aggregate functions themselves) equal the single-process numpy fit bit for bit."""
    from fastprep.backends.reference import backend as reference
    from fastprep.backends.reference import scalers

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5_000))
    values = np.round(rng.standard_t(3, size=n) * 10, int(rng.integers(0, 3)))  # ties
    values[rng.random(n) < 0.2] = np.nan
    if np.isnan(values).all():
        values[0] = 1.0
    cuts = np.sort(rng.integers(0, n, size=int(rng.integers(0, 6))))
    parts = np.split(values, cuts)
    for step in (fp.RobustScale(), fp.RobustScale(quantile_range=(1.0, 99.0)), fp.Bin(10),
                 fp.Bin(3)):  # fmt: skip
        summaries = [agg.summary_of(p, points=17) for p in parts]
        total = sum(s.count for s in summaries)
        ranks = sorted(scalers.order_ranks(step, total))
        around = [agg.rank_window(summaries, r) for r in ranks]
        windows = [[agg.window_of(p, lo, hi) for lo, hi in around] for p in parts]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = agg.params_from_order(step, summaries, windows, ranks, "x")
            expected = reference.fit_step(step, values, "x")
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key])
