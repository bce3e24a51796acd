"""A CSV file larger than a partition is cut into chunks of whole lines: read one by one
(each with the file's header in front) they give exactly the rows of the whole file, also
where quoted values hold delimiters, line ends and doubled quotes, with CRLF line ends, a
byte order mark, blank trailing lines or no final line end. A file that cannot be cut
(compressed, a quote inside an unquoted value) is one partition, and says why."""

from __future__ import annotations

import gzip

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from support import REPO

from fastprep.data import csv_chunks
from fastprep.data.partitions import iter_partitions, plan_partitions, read_partition
from fastprep.data.sources import read_source, source_columns

SAMPLES = REPO / "data_samples"


def _weather_csv(line_end: bytes = b"\n") -> bytes:
    """The weather sample as CSV with a quoted note holding commas, line ends and doubled
    quotes on most rows (a few plain, a few empty)."""
    table = pq.read_table(SAMPLES / "weather.parquet").slice(0, 3_000)
    rng = np.random.default_rng(7)
    notes = []
    for i in range(table.num_rows):
        kind = rng.integers(0, 5)
        note = ["calm", 'gusts, "strong"\nthen rain', 'a ""b"",\r\nc', "", 'x\n\n"y"'][kind]
        notes.append(note if i % 97 else None)
    table = table.append_column("note", pa.array(notes, pa.string()))
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(quoting_style="needed"))
    data = sink.getvalue().to_pybytes()
    return data.replace(b"\n", line_end) if line_end != b"\n" else data


def _rows(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def _chunked_equals_whole(path, rows_per_partition: int) -> list:
    names = source_columns(str(path))
    specs = plan_partitions(str(path), rows_per_partition)
    # fastprep reads an empty value as missing, text too
    whole = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
    parts = [t for _, t in iter_partitions(str(path), names, names, rows_per_partition)]
    assert sum(t.num_rows for t in parts) == whole.num_rows
    # the same values, row for row (text read as text, as the partitioned read does)
    assert _rows(pa.concat_tables(parts)) == _rows(read_source(str(path), names, names)[0])
    # and read as Arrow infers each chunk's types: the values of Arrow's read of the file
    inferred = [t for _, t in iter_partitions(str(path), names, (), rows_per_partition)]
    assert [row for t in inferred for row in _rows(t)] == _rows(whole)
    return specs


@pytest.mark.parametrize("block", [csv_chunks.BLOCK_BYTES, 997], ids=["one block", "blocks"])
@pytest.mark.parametrize("line_end", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
def test_quoted_values_with_line_ends_are_never_cut(tmp_path, line_end, block, monkeypatch) -> None:
    # small blocks: quotes counted across block ends (a doubled quote, a CRLF split by one)
    monkeypatch.setattr(csv_chunks, "BLOCK_BYTES", block)
    monkeypatch.setattr(csv_chunks, "_MEMO", {})
    path = tmp_path / "weather.csv"
    path.write_bytes(_weather_csv(line_end))
    specs = _chunked_equals_whole(path, 150)
    assert len(specs) >= 10
    header = path.read_bytes()[: specs[0].header_bytes]
    assert header.rstrip(b"\r\n").endswith(b'"note"') and header.endswith(b"\n")
    ranges = [s.byte_range for s in specs]
    assert ranges[0][0] == specs[0].header_bytes and ranges[-1][1] == path.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # every byte once
    # every cut is right after a line end, and the chunks hold the whole file's rows in order
    data = path.read_bytes()
    assert all(data[start - 1 : start] == b"\n" for start, _ in ranges)
    names = source_columns(str(path))
    read = [read_partition(s, names, names) for s in specs]
    assert _rows(pa.concat_tables(read)) == _rows(read_source(str(path), names, names)[0])


def test_a_byte_order_mark_blank_trailing_lines_and_no_final_line_end(tmp_path) -> None:
    body = _weather_csv()
    for name, data in {
        "bom.csv": b"\xef\xbb\xbf" + body,
        "blank.csv": body + b"\n" * 30_000 + b"\r\n\n",  # chunks of blank lines only
        "open.csv": body.rstrip(b"\n"),
        "bom.tsv": b"\xef\xbb\xbf" + body.replace(b",", b"\t"),  # no tab in the notes
    }.items():
        path = tmp_path / name
        path.write_bytes(data)
        names = source_columns(str(path))
        assert names[0] == "origin" and names[-1] == "note"
        specs = plan_partitions(str(path), 200)
        assert len(specs) > 5, name
        whole = read_source(str(path), names, names)[0]
        parts = [t for _, t in iter_partitions(str(path), names, names, 200)]
        assert _rows(pa.concat_tables(parts, promote_options="permissive")) == _rows(whole), name
        if name == "blank.csv":
            assert parts[-1].num_rows == 0  # read as a file of no rows


def test_small_header_only_and_uncuttable_files_are_one_partition(tmp_path) -> None:
    flights = SAMPLES / "flights.csv"
    assert len(plan_partitions(str(flights), 50_000)) == 1  # smaller than one chunk
    header = tmp_path / "header.csv"
    header.write_bytes(b"a,b\n")
    assert [s.byte_range for s in plan_partitions(str(header), 1)] == [()]
    # a quote inside an unquoted value is a plain character to Arrow: no exact cut
    odd = tmp_path / "inches.csv"
    odd.write_bytes(b"name,height\n" + b"".join(b"p%d,5'10\"\n" % i for i in range(5_000)))
    assert pacsv.read_csv(odd).num_rows == 5_000
    assert len(plan_partitions(str(odd), 100)) == 1
    assert "quote character inside an unquoted value" in csv_chunks.why_not_cut(str(odd))
    # a compressed file is read through its codec: one partition, and the reason names it
    packed = tmp_path / "flights.csv.gz"
    packed.write_bytes(gzip.compress(flights.read_bytes()))
    assert len(plan_partitions(str(packed), 1_000)) == 1
    why = csv_chunks.why_not_cut(str(packed))
    assert "flights.csv.gz" in why and "Parquet" in why
    assert csv_chunks.why_not_cut(str(flights)) is None


def test_flights_chunks_are_balanced_and_number_rows_as_the_whole_file() -> None:
    flights = str(SAMPLES / "flights.csv")
    specs = plan_partitions(flights, 3_000, workers=2)
    assert len(specs) % 2 == 0 and len(specs) >= 8
    estimates = [s.rows_estimate for s in specs]
    assert max(estimates) <= 1.2 * min(estimates)
    offsets = [s.row_offset for s, _ in iter_partitions(flights, ["year"], (), 3_000)]
    counts = [t.num_rows for _, t in iter_partitions(flights, ["year"], (), 3_000)]
    assert offsets == [0, *np.cumsum(counts)[:-1].tolist()] and sum(counts) == 20_000
    assert "bytes" in specs[1].describe()


def test_a_large_file_with_quoted_line_ends_reads_whole(tmp_path) -> None:
    # Arrow's fast block split (at any line end) loses its place in such a file larger
    # than one block (1 MiB): the read falls back to the split that follows quotes
    path = tmp_path / "long.csv"
    path.write_bytes(b"a,s\n" + b"".join(b'%d,"x\ny ""q"""\n' % i for i in range(150_000)))
    table, _ = read_source(str(path), ["a", "s"], ["s"])
    assert table.num_rows == 150_000 and table["s"][0].as_py() == 'x\ny "q"'
