"""Review: the partitions a fit keeps on the workers are taken by the transform whose
key matches (``job._held_key``: the plan, the fitted parameters, the source). They were
validated by the fit's schema: a transform of another pipeline with the same plan and
parameters but a schema that validates differently (a bound) must validate the rows by
its own schema, not take rows the other schema kept."""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed")

from support import REPO, assert_same_matrix  # noqa: E402

import fastprep as fp  # noqa: E402

SAMPLES = REPO / "data_samples"


def _pipeline(delay: fp.Float) -> fp.Pipeline:
    schema = fp.Schema({"dep_delay": delay, "arr_delay": fp.Float(nullable=True)})
    # parameters that do not depend on the rows kept: the two fits' are equal
    return fp.Pipeline(schema, [fp.cols("dep_delay", "arr_delay") >> fp.FillMissing(0)])


@pytest.mark.xfail(
    strict=True,
    reason="job._held_key leaves out the schema: another pipeline's transform takes the "
    "partitions the fit validated by its own schema",
)
def test_a_transform_validates_by_its_own_schema_after_another_pipelines_fit() -> None:
    source = str(SAMPLES / "flights.parquet")
    bounded = _pipeline(fp.Float(nullable=True, max=60))  # rows delayed more: quarantined
    plain = _pipeline(fp.Float(nullable=True))
    fitted = plain.fit(source)
    expected = fitted.transform(source)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        other = bounded.fit(source, client=client, rows_per_partition=10_000)
        assert other.params == fitted.params  # the same key for the kept partitions
        out = fitted.transform(source, client=client, rows_per_partition=10_000)
    assert out.report.rows_quarantined == expected.report.rows_quarantined
    assert_same_matrix(out.X, expected.X)
