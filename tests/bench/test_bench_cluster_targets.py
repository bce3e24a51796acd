"""bench_cluster.py's target lines (MET / NOT MET) from its points' medians."""

from __future__ import annotations

from benchmarks import bench_cluster


def _runs(seconds: list[float], peak: float = 500.0) -> list[dict]:
    return [{"seconds": s, "peak_mib": [peak, peak]} for s in seconds]


def _point(rows: int, single: float, one: float, two: float, ml: float, peak: float) -> dict:
    return {"rows": rows, "partition": 500_000,
            "runs": {"single": _runs([single] * 3), "1w": _runs([one, one + 9, one - 0.1]),
                     "2w": _runs([two] * 3, peak), "dask-ml": _runs([ml])}}  # fmt: skip


def test_targets_met_and_not_met() -> None:
    lines = bench_cluster.targets([
        _point(3_367_760, single=2.0, one=5.0, two=2.9, ml=15.0, peak=500.0),
        _point(10_000_000, single=6.0, one=11.0, two=7.0, ml=30.0, peak=600.0),
    ])  # fmt: skip
    assert lines[0].startswith("MET") and "within 1.5x" in lines[0] and "1.45x" in lines[0]
    assert lines[1].startswith("MET") and "1.72x" in lines[1]  # median of 1w: 5.0
    assert lines[2].startswith("MET") and "5.17x" in lines[2]
    assert lines[3].startswith("NOT MET") and "within 1.15x" in lines[3]  # 7 > 1.15 x 6
    assert lines[4].startswith("NOT MET") and lines[5].startswith("NOT MET")
    assert lines[6].startswith("NOT MET") and "500 -> 600 MiB (1.20x)" in lines[6]
