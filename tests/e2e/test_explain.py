"""``explain`` shows the plan at each named stage and what the optimizer changed."""

from __future__ import annotations

import pytest

import fastprep as fp
from fastprep.cli import main


def test_explain_names_folds_simplifications_and_fusion() -> None:
    schema = fp.Schema({"x": fp.Float(min=0, max=10), "w": fp.Float(nullable=True)})
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.expr("a = (x + 0) * 1 + 2 * 3")
            >> fp.FillMissing(0)
            >> fp.Clip(-5, 100)
            >> fp.Clip(0, 50),
            fp.col("w") >> fp.FillMissing(0) >> fp.Standardize(),
        ],
    )
    logical = pipeline.explain("logical")
    assert "(x + 0) * 1 + 2 * 3" in logical and "Clip(-5.0, 100.0)" in logical
    optimized = pipeline.explain()
    assert "folded a: (x + 0) * 1 + 2 * 3  ->  x + 6" in optimized
    # x + 6 lies in [6, 16] and is never missing: the fill and both clips go
    assert (
        "simplified [a]: FillMissing(0.0) >> Clip(-5.0, 100.0) >> Clip(0.0, 50.0)  ->  (none)"
        in optimized
    )
    assert "fused 2 element-wise output(s) into one kernel: a, w" in optimized
    assert "release after: x, w" in optimized
    with pytest.raises(fp.PipelineDefinitionError):
        pipeline.explain("physical-ish")


def test_cli_explain(repo_root, capsys) -> None:
    assert main(["explain", str(repo_root / "pipelines" / "flights.py")]) == 0
    out = capsys.readouterr().out
    assert "stage 0 (fused)" in out and "Hash(262144, True)" in out
    assert "read 10 column(s)" in out
