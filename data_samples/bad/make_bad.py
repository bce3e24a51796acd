"""Write the bad-input catalogue files from the first rows of ``../flights.parquet``.

Each file breaks one thing (see README.md here); ``tests/validate/test_bad_input_catalogue.py``
asserts what fastprep does with each. Run: ``python data_samples/bad/make_bad.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
COLUMNS = ["dep_delay", "arr_delay", "air_time", "distance", "hour", "minute",
           "origin", "carrier", "dest", "tailnum"]  # fmt: skip


def base(rows: int = 12) -> pd.DataFrame:
    frame = pd.read_parquet(HERE.parent / "flights.parquet").head(rows)
    return frame[COLUMNS].astype(object).reset_index(drop=True)


def csv(name: str, frame: pd.DataFrame) -> None:
    frame.to_csv(HERE / name, index=False)


def main() -> None:
    frame = base()
    csv("missing_column.csv", frame.drop(columns=["dest"]))
    lines = frame.to_csv(index=False).splitlines()  # a second "dest" column at the end
    dup = [lines[0] + ",dest"] + [line + "," + line.split(",")[8] for line in lines[1:]]
    (HERE / "duplicated_columns.csv").write_text("\n".join(dup) + "\n")
    wrong = frame.copy()
    wrong["distance"] = ["far", "near"] * 6
    csv("wrong_type_column.csv", wrong)
    strings = frame.copy()
    strings["dep_delay"] = ["12", " 7 ", "1e1", "-3", "NA", "about 5", "", "+4", "0x10",
                            "1,5", "null", "8"]  # fmt: skip
    csv("numbers_as_strings.csv", strings)
    inf = frame.copy()
    inf.loc[[1, 4], "dep_delay"] = ["inf", "-Infinity"]
    csv("infinite_values.csv", inf)
    domain = frame.copy()
    domain.loc[[2, 3, 5], "origin"] = ["BOS", "jfk", " EWR"]
    csv("category_outside_domain.csv", domain)
    target = frame.copy()
    target.loc[[0, 7], "arr_delay"] = None
    csv("missing_target.csv", target)
    csv("empty.csv", frame.head(0))
    header_only = ",".join(COLUMNS) + "\n"
    (HERE / "header_only_no_newline.csv").write_text(header_only.rstrip("\n"))
    latin1 = frame.to_csv(index=False).replace("ATL", "Bogot\xe1", 1)
    (HERE / "latin1_text.csv").write_bytes(latin1.encode("latin-1"))
    ranges = frame.copy()
    ranges.loc[[0, 1, 2, 3], ["hour", "minute", "distance", "dep_delay"]] = [
        [25, 0, 10, 1], [5, 60, 10, 1], [5, 0, -1, 1], [5, 0, 10, -121]]  # fmt: skip
    csv("out_of_range.csv", ranges)
    frac = frame.copy()
    frac.loc[[3, 6], "minute"] = [7.5, 0.001]
    csv("fractional_int.csv", frac)
    nulls = frame.copy()
    nulls.loc[2, "carrier"] = None
    nulls.loc[4, "distance"] = None
    nulls.loc[5, "dest"] = None
    csv("nulls_in_non_nullable.csv", nulls)
    # Parquet cases: typed columns a CSV cannot carry
    typed = frame.copy()
    typed["hour"] = pd.array([6, None, 6, 7, None, 8, 9, 9, 10, 10, 11, 11], dtype="Int64")
    typed.astype({c: "float64" for c in ["dep_delay", "arr_delay", "air_time", "distance"]}).astype(
        {"minute": "int64"}
    ).to_parquet(HERE / "nullable_int_with_na.parquet")
    big = frame.copy().astype({c: "float64" for c in ["dep_delay", "arr_delay", "air_time"]})
    big["distance"] = np.array([762, 2**53 + 1, 719, -(2**62), 1028, 2**53, 1, 2, 3, 4, 5, 6],
                               dtype=np.int64)  # fmt: skip
    big["minute"] = big["minute"].astype("int64")
    big["hour"] = big["hour"].astype("int64")
    big.to_parquet(HERE / "int_beyond_2_53.parquet")
    tz = frame.copy().astype({c: "float64" for c in ["arr_delay", "air_time", "distance"]})
    tz["dep_delay"] = pd.date_range("2013-01-01", periods=12, freq="h", tz="America/New_York")
    tz["hour"] = tz["hour"].astype("int64")
    tz["minute"] = tz["minute"].astype("int64")
    tz.to_parquet(HERE / "tz_datetime_as_number.parquet")
    allnull = frame.copy().astype({c: "float64" for c in ["dep_delay", "arr_delay", "distance"]})
    allnull["air_time"] = np.full(12, np.nan)
    allnull["hour"] = allnull["hour"].astype("int64")
    allnull["minute"] = allnull["minute"].astype("int64")
    allnull.to_parquet(HERE / "all_null_column.parquet")
    # JSON: an object column mixing numbers, text, bools and nulls
    mixed = frame.copy()
    mixed["dep_delay"] = [1, "2", 3.5, True, None, "x", [1], 4, "5.0", False, 6, 7]
    mixed.to_json(HERE / "mixed_types.json", orient="records")


if __name__ == "__main__":
    main()
