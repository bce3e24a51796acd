"""The pre-flight's HyperLogLog: the same murmur hash as the kernels, its error bound, merges."""

from __future__ import annotations

import numpy as np
import pytest

from fastprep.planning.sketch import HyperLogLog, hash_values


def _strings(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    alphabet = list("abcxyz019-_ é漢")
    return ["".join(rng.choice(alphabet, int(k))) for k in rng.integers(0, 41, n)]


def test_hash_is_the_kernels_murmur3_and_sklearns():
    numba_murmur = pytest.importorskip("fastprep.backends.numba.murmur")
    sklearn_utils = pytest.importorskip("sklearn.utils")
    keys = _strings(300) + ["", "a", "abcd", "x" * 1000]
    ours = hash_values(keys)
    for key, h in zip(keys, ours):
        raw = np.frombuffer(key.encode("utf-8"), dtype=np.uint8)
        assert int(h) == numba_murmur.murmur3_32(raw) & 0xFFFFFFFF
        assert int(h) == sklearn_utils.murmurhash3_32(key, positive=True)


def test_numbers_hash_by_value():
    assert hash_values(np.array([0.0]))[0] == hash_values(np.array([-0.0]))[0]
    assert hash_values(np.array([1, 2]))[0] == hash_values(np.array([1.0, 2.0]))[0]
    assert len(set(hash_values(np.arange(1000.0)).tolist())) == 1000


@pytest.mark.parametrize("n", [10, 1_000, 20_000, 300_000])
def test_estimate_is_within_three_standard_errors(n):
    sketch = HyperLogLog().add(np.array([f"tail-{i}" for i in range(n)], dtype=object))
    error = abs(sketch.estimate() - n) / n
    assert error <= 3 * sketch.relative_error  # 2.4 % at p=14
    # duplicates change nothing
    again = sketch.merge(HyperLogLog().add(np.array([f"tail-{i}" for i in range(n // 2)])))
    assert again.estimate() == sketch.estimate()


def test_lower_precision_has_the_larger_error_it_announces():
    n = 50_000
    values = np.arange(n, dtype=np.float64) * 1.5
    coarse = HyperLogLog(p=8).add(values)
    assert coarse.relative_error == pytest.approx(1.04 / 16)
    assert abs(coarse.estimate() - n) / n <= 3 * coarse.relative_error
    assert coarse.registers.nbytes == 256


def test_merge_equals_the_sketch_of_the_union():
    a, b = _strings(5_000, seed=1), _strings(5_000, seed=2)
    merged = HyperLogLog().add(a).merge(HyperLogLog().add(b))
    union = HyperLogLog().add(a + b)
    assert np.array_equal(merged.registers, union.registers)
    with pytest.raises(ValueError, match="p=14 with p=10"):
        HyperLogLog().merge(HyperLogLog(p=10))
    with pytest.raises(ValueError, match="precision"):
        HyperLogLog(p=30)
