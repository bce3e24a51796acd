"""Dictionary-encoding text: the Numba encoder (by hash on every core, or one serial
pass) against Arrow's ``dictionary_encode``, alternating, medians; wall and CPU time.

    python benchmarks/text_encode.py [--rows 3367760] [--flights PARQUET]

An all-distinct ID column of ``--rows`` strings, then (with ``--flights``) the flights
text columns as read and ten times over.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fastprep.data import text_encode as te


def ways(codes: np.ndarray) -> dict:
    return {
        "by hash": lambda c: te._encode_by_hash(list(c.chunks), codes, max(te._workers(), 2)),
        "serial": lambda c: te._encode_serially(list(c.chunks), codes),
        "arrow": lambda c: te._encode_with_arrow(list(c.chunks), codes),
    }


def bench(column: pa.ChunkedArray, runs: int, skip: tuple[str, ...] = ()) -> str:
    candidates = {k: f for k, f in ways(np.empty(len(column), np.int32)).items() if k not in skip}
    wall: dict[str, list[float]] = {k: [] for k in candidates}
    cpu: dict[str, list[float]] = {k: [] for k in candidates}
    for f in candidates.values():
        f(column)
    for _ in range(runs):
        for k, f in candidates.items():
            w, c = time.perf_counter(), time.process_time()
            f(column)
            wall[k].append(time.perf_counter() - w)
            cpu[k].append(time.process_time() - c)
    med = statistics.median
    return ", ".join(
        f"{k} {med(wall[k]) * 1e3:.1f} ms (cpu {med(cpu[k]) * 1e3:.0f})" for k in candidates
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=3_367_760)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--flights")
    args = parser.parse_args()
    n = args.rows
    ids = pc.cast(pa.array(np.random.default_rng(0).permutation(n)), pa.string())
    ids = ids.cast(pa.large_string())
    column = pa.chunked_array([ids.slice(i, 1 << 16) for i in range(0, n, 1 << 16)])
    print(f"{n:,} all-distinct strings: {bench(column, args.runs)}")
    if args.flights:
        names = ["origin", "carrier", "dest", "tailnum"]
        table = pq.ParquetFile(args.flights).read(columns=names)
        ten = pa.concat_tables([table] * 10)
        for name in names:
            once = bench(table[name], args.runs, skip=("by hash",))
            tenfold = bench(ten[name], args.runs, skip=("by hash",))
            print(f"{name}: x1 {once}; x10 {tenfold}")


if __name__ == "__main__":
    main()
