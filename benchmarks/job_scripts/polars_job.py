"""The flights job as a Polars user writes it: Parquet in, X (CSR) and y on disk.

    python benchmarks/job_scripts/polars_job.py --input flights.parquet --output out/

Same job as ``fastprep run pipelines/flights.py``: rows without the target (``arr_delay``)
are dropped, then on the remaining rows (in file order) the numeric features are fitted
and scaled in one lazy query, ``origin``/``carrier`` one-hot encoded over their sorted
values, and ``tailnum``/``dest`` hashed into 2**18 columns as scikit-learn's
``FeatureHasher`` does (MurmurHash3 of ``column=value``, sign from the hash). Writes
``X.data.npy``, ``X.indices.npy``, ``X.indptr.npy``, ``X.shape.npy`` (uncompressed CSR,
float32) and ``y.npy`` (float32, 1 = arrived more than 15 minutes late).

Standalone on purpose (numpy, Polars, scipy.sparse only): it is timed as a fresh process.
MurmurHash3 is written out here because importing it from scikit-learn costs ~1.2 s of
start-up, while hashing the few thousand distinct values in Python takes milliseconds.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

import numpy as np
import polars as pl
import scipy.sparse as sp

COLUMNS = ["dep_delay", "arr_delay", "air_time", "distance", "hour", "minute",
           "origin", "carrier", "dest", "tailnum"]  # fmt: skip
ONEHOT = ["origin", "carrier"]
HASHED = ["tailnum", "dest"]
N_HASH = 2**18
MASK = 0xFFFFFFFF


def murmurhash3_32(key: bytes, seed: int = 0) -> int:
    """MurmurHash3 (x86, 32-bit), signed: the hash scikit-learn's ``FeatureHasher`` uses."""

    def mix(k: int) -> int:
        k = (k * 0xCC9E2D51) & MASK
        k = ((k << 15) | (k >> 17)) & MASK
        return (k * 0x1B873593) & MASK

    h, n = seed & MASK, len(key)
    end = n - n % 4
    for i in range(0, end, 4):
        h ^= mix(int.from_bytes(key[i : i + 4], "little"))
        h = ((h << 13) | (h >> 19)) & MASK
        h = (h * 5 + 0xE6546B64) & MASK
    if n > end:
        h ^= mix(int.from_bytes(key[end:], "little"))
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def num(name: str) -> pl.Expr:
    """A numeric column with NaN treated as missing (null)."""
    return pl.col(name).cast(pl.Float64).fill_nan(None)


def finite(e: pl.Expr) -> pl.Expr:
    """``e`` where finite, else missing (a division by zero is no speed)."""
    return pl.when(e.is_finite()).then(e)


def standardize(e: pl.Expr) -> pl.Expr:
    return (e - e.mean()) / e.std(ddof=0)


def hashed_block(frame: pl.DataFrame) -> sp.csr_matrix:
    """``FeatureHasher(n_features=2**18, input_type="string")`` over ``column=value``
    tokens (missing values give no token): each distinct value hashed once."""
    rows, cols, signs = [], [], []
    for name in HASHED:
        values = frame[name]
        uniques = values.drop_nulls().unique()
        codes = [murmurhash3_32(f"{name}={v}".encode()) for v in uniques.to_list()]
        h = values.replace_strict(uniques, pl.Series(codes, dtype=pl.Int64), default=None)
        present = h.is_not_null().to_numpy()
        h = h.drop_nulls().to_numpy()
        rows.append(np.flatnonzero(present))
        cols.append(np.abs(h) % N_HASH)
        signs.append(np.where(h >= 0, 1.0, -1.0).astype(np.float32))
    coo = (np.concatenate(signs), (np.concatenate(rows), np.concatenate(cols)))
    return sp.csr_matrix(coo, shape=(frame.height, N_HASH), dtype=np.float32)  # sums collisions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)

    frame = pl.read_parquet(args.input, columns=COLUMNS)
    frame = frame.filter(num("arr_delay").is_not_null())  # no target: not a training row

    speed = finite(num("distance") / num("air_time") * 60)
    dep_hour = num("hour") + num("minute") / 60
    onehot = []
    for name in ONEHOT:
        for value in frame[name].drop_nulls().unique().sort().to_list():
            onehot.append((pl.col(name) == value).fill_null(False).cast(pl.Float32))
        if frame[name].null_count():
            onehot.append(pl.col(name).is_null().cast(pl.Float32))
    dense = (
        frame.lazy()
        .select(
            standardize(num("dep_delay").fill_null(0).clip(-60, 600)).cast(pl.Float32).alias("d0"),
            standardize(finite(num("distance").log1p())).cast(pl.Float32).alias("d1"),
            standardize(speed.fill_null(speed.median())).cast(pl.Float32).alias("d2"),
            ((dep_hour - dep_hour.min()) / (dep_hour.max() - dep_hour.min()))
            .cast(pl.Float32)
            .alias("d3"),
            *(e.alias(f"o{i}") for i, e in enumerate(onehot)),
            (num("arr_delay") > 15).cast(pl.Float32).alias("y"),
        )
        .collect()
    )
    y = dense["y"].to_numpy()
    block = dense.drop("y").to_numpy(order="c")
    X = sp.hstack([sp.csr_matrix(block), hashed_block(frame)], format="csr", dtype=np.float32)

    os.makedirs(args.output, exist_ok=True)
    for part in ("data", "indices", "indptr"):
        np.save(os.path.join(args.output, f"X.{part}.npy"), getattr(X, part))
    np.save(os.path.join(args.output, "X.shape.npy"), np.array(X.shape, dtype=np.int64))
    np.save(os.path.join(args.output, "y.npy"), y)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
