"""Text columns of a Parquet file are read as Arrow dictionaries (the reader hands over
each row group's dictionary and indices instead of every string), marked so that every
conversion to pandas decodes them back to the file's own dtype; a dictionary the file
itself stores (a pandas categorical) is left as the file holds it, and a declared text
column stored as numbers is decoded at once."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fastprep.data.partitions import iter_partitions
from fastprep.data.sources import READ_AS_DICTIONARY, decoded, read_source, rows_as_read


def write(tmp_path) -> str:
    frame = pd.DataFrame({
        "s": ["a", "b", None, "a"], "c": pd.Categorical(["x", "y", "x", None]),
        "n": [1, 2, 3, 4], "v": [0.5, 1.5, None, 2.0],
    })  # fmt: skip
    path = str(tmp_path / "t.parquet")
    frame.to_parquet(path, index=False, row_group_size=2)
    return path


def test_text_columns_are_read_as_marked_dictionaries(tmp_path):
    path = write(tmp_path)
    raw, _ = read_source(path, ["s", "c", "n", "v"], ["s", "c", "n"])
    assert pa.types.is_dictionary(raw.schema.field("s").type)
    assert READ_AS_DICTIONARY in (raw.schema.field("s").metadata or {})
    assert not (raw.schema.field("c").metadata or {}).get(READ_AS_DICTIONARY)  # the file's own
    assert pa.types.is_integer(raw.schema.field("n").type)  # numbers stay numbers
    plain = pq.read_table(path)
    assert decoded(raw).column("s").to_pylist() == plain.column("s").to_pylist()
    as_pandas = rows_as_read(raw, [0, 2])
    assert as_pandas["s"].dtype == pd.read_parquet(path)["s"].dtype
    assert isinstance(as_pandas["c"].dtype, pd.CategoricalDtype)


def test_partitions_read_text_as_the_whole_file_does(tmp_path):
    path = write(tmp_path)
    whole, _ = read_source(path, ["s", "v"], ["s"])
    parts = [t for _, t in iter_partitions(path, ["s", "v"], ["s"], 2)]
    assert len(parts) == 2
    assert pa.concat_tables(parts).equals(whole)
