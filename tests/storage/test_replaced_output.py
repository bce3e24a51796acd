"""An output opened, then replaced by another run into the same folder: its memory-mapped
arrays stay readable (mapped when opened), and what is read on first use — a compressed
array, the quarantine, the report — is a StateFormatError saying the output was replaced
after it was opened, never a FileNotFoundError from pandas or the file system."""

from __future__ import annotations

import pytest
from support import REPO

import fastprep as fp
from fastprep.errors import StateFormatError

SAMPLE = str(REPO / "data_samples" / "flights.parquet")


def pipeline() -> fp.Pipeline:
    schema = fp.Schema({"distance": fp.Float(), "origin": fp.Category(),
                        "arr_delay": fp.Float()})  # fmt: skip
    features = [fp.col("distance") >> fp.Standardize(), fp.col("origin") >> fp.OneHot()]
    return fp.Pipeline(schema, features, target=fp.expr("late = arr_delay > 15"))


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_an_output_replaced_after_it_was_opened(tmp_path, codec):
    out = pipeline().fit_transform(SAMPLE)
    out.save(tmp_path, compress=codec)
    opened = fp.open_output(tmp_path)
    pipeline().fit_transform(SAMPLE).save(tmp_path, compress=codec)  # another run's
    lazy = [lambda: opened.quarantine, lambda: opened.report]
    if codec is None:
        assert opened.whole().X.shape == out.X.shape  # mapped when it was opened
    else:
        lazy.append(lambda: opened.whole().X)
    for read in lazy:
        with pytest.raises(StateFormatError, match="replaced or removed after it was opened"):
            read()
    assert fp.open_output(tmp_path).report["rows_in"] == 20_000
