"""Quantile and power transforms are fitted on all of a column's values, gathered from the
partitions: the pre-flight counts that memory in every partitioned option's peak (and the
fit's own working memory in the in-memory one), and the count holds what the fit really
allocates on real data."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from support import REPO

import fastprep as fp
from fastprep.runtime import preflight, streamed


def flights_with(step) -> fp.Pipeline:
    from fastprep.cli import load_pipeline_file

    schema = load_pipeline_file(REPO / "pipelines" / "flights.py").schema
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.col("distance") >> step,
            fp.cols("dep_delay") >> fp.FillMissing(0) >> fp.Standardize(),
            fp.cols("origin", "carrier") >> fp.OneHot(),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )


SAMPLE = str(REPO / "data_samples" / "flights.parquet")


@pytest.mark.parametrize(("step", "kind"), [
    (fp.QuantileTransform(), "quantile"),
    (fp.PowerTransform(), "yeo-johnson"),
    (fp.PowerTransform(method="box-cox"), "box-cox"),
])  # fmt: skip
def test_the_gathered_values_are_in_every_option(step, kind):
    gathering, plain = flights_with(step), flights_with(fp.Standardize())
    kw = dict(budget="100GB", whole_output=False)
    a = preflight.run_preflight(gathering.optimized, gathering.schema, SAMPLE, **kw)
    b = preflight.run_preflight(plain.optimized, plain.schema, SAMPLE, **kw)
    n = a.n_rows
    fit = int(preflight.GATHERED_FIT_BYTES[kind] * n) + preflight.GATHERED_FIT_IMPORT_BYTES[kind]
    memory, stream, cluster = a.options
    assert memory.peak_bytes - b.options[0].peak_bytes == fit
    for got, without in zip((stream, cluster), b.options[1:]):
        assert got.peak_bytes - without.peak_bytes == 16 * n + fit
        assert got.gathered_bytes == 16 * n + fit
        assert "for the fit on all values" in got.describe(a.budget)
    # a fitted pipeline's transform fits nothing: nothing gathered
    c = preflight.run_preflight(gathering.optimized, gathering.schema, SAMPLE,
                                transform_only=True, **kw)  # fmt: skip
    assert [o.peak_bytes for o in c.options] == [o.peak_bytes for o in b.options]


@pytest.mark.parametrize("step", [fp.QuantileTransform(), fp.PowerTransform(),
                                  fp.PowerTransform(method="box-cox")])  # fmt: skip
def test_the_count_holds_what_the_fit_allocates(step):
    """The merge of a streamed fit (eight partitions' values, then the fit on them) under
    tracemalloc allocates no more than the pre-flight counts for it."""
    pipeline = flights_with(step)
    plan, schema = pipeline.optimized, pipeline.schema
    from fastprep.runtime import levels

    captured = {}
    import scipy.stats  # noqa: F401  (its import is counted apart: not the fit's working memory)

    def run_pass(learned, targets, stage):
        job = streamed.job_for(plan, schema)
        parts = streamed.Partitions(SAMPLE, 2_500, job)
        results = parts.each(lambda spec, part: streamed.fit_partials(job, spec, learned,
                                                                      targets, part))  # fmt: skip
        captured.setdefault("rows", sum(r["rows_in"] for r in results))
        tracemalloc.start()
        captured["base"] = tracemalloc.get_traced_memory()[0]
        return results

    try:
        params, _ = levels.fit_levels(plan, SAMPLE, run_pass)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the values were already held when tracing started: the merge adds the rest
    allocated = peak - captured["base"]
    # less the held values themselves; the merge's fixed bits (reports, the fitted state)
    # are the run's fixed memory
    partitioned, _ = preflight.gathered_bytes(plan, captured["rows"])
    kind = getattr(step, "method", "quantile")
    predicted = (partitioned - preflight.GATHERED_FIT_IMPORT_BYTES[kind] - 8 * captured["rows"]
                 + 2**20)  # fmt: skip
    assert allocated <= predicted, (allocated, predicted)
    assert np.isfinite(params[0]["distance"][0]["lambda" if "Power" in repr(step)
                                                else "quantiles"]).all()  # fmt: skip


def test_refused_when_the_gathered_values_do_not_fit_naming_the_way_out():
    from fastprep.errors import MemoryBudgetError

    pipeline = flights_with(fp.PowerTransform(method="box-cox"))
    budget = 600 * 10**6
    n = 3_000_000  # as if the sample were that long: its gathered fit needs ~740 MB
    pre = preflight.run_preflight(pipeline.optimized, pipeline.schema, SAMPLE, budget=budget,
                                  whole_output=False)  # fmt: skip
    partitioned, _ = preflight.gathered_bytes(pipeline.optimized, n)
    assert partitioned > budget > pre.options[1].peak_bytes  # the sample itself streams
    from dataclasses import replace

    big = replace(pre, n_rows=n, input_bytes=pre.input_bytes * n // pre.n_rows,
                  output_bytes=pre.output_bytes * n // pre.n_rows, decisions=[])  # fmt: skip
    preflight._execution_decision(big, SAMPLE, preflight.load_profile(), True, 2, False,
                                  gathered=preflight.gathered_bytes(pipeline.optimized, n))  # fmt: skip
    with pytest.raises(MemoryBudgetError, match="fit on a sample"):
        big.refuse_if_needed()
    assert big.minimum_budget > partitioned
