"""How much memory dictionary-encoding a text column saves (for the run report).

``before`` is the source column as pandas holds it (``Series.memory_usage(deep=True)``: the
Arrow buffers for Arrow-backed strings, an object pass for Python strings — pandas' own
measure, nothing more); ``after`` is what fastprep keeps: the int32 codes plus the
distinct strings (the Arrow buffers they are held in, or — for text that was not
Arrow-backed — their pointer array and the ``str`` objects, measured on distinct values only).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from fastprep.data.columns import TextColumn

if TYPE_CHECKING:
    import pandas as pd


def text_encoding_bytes(series: pd.Series | pa.ChunkedArray, text: TextColumn) -> dict[str, Any]:
    """Bytes of ``series`` (or an Arrow column: its buffers) before and of ``text`` after
    dictionary encoding."""
    if isinstance(series, pa.ChunkedArray):
        before, dtype = int(series.nbytes), str(series.type)
    else:
        before, dtype = int(series.memory_usage(index=False, deep=True)), str(series.dtype)
    codes = int(text.codes.nbytes)
    arrow = text.arrow_uniques
    if arrow is not None:  # held as one Arrow array: its buffers
        strings = int(arrow.nbytes)
    else:
        strings = int(text.uniques.nbytes) + sum(sys.getsizeof(u) for u in text.uniques)
    return {
        "source_dtype": dtype,
        "rows": len(text.codes),
        "distinct": text.n_unique,
        "bytes_before": before,
        "bytes_after": codes + strings,
        "codes_bytes": codes,
        "strings_bytes": strings,
    }
