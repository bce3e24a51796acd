"""Write one output (X, y, row ids, names, report, quarantine) to a folder, atomically.

The layout is :mod:`fastprep.storage.output_format`'s: the same one every producer writes and
``fp.open_output`` reads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from fastprep.storage.shards import ShardWriter


def write_output(
    folder: str | os.PathLike[str],
    X: Any,
    y: np.ndarray | None,
    feature_names: Sequence[str],
    report: dict[str, Any],
    quarantine: Any,
    row_ids: np.ndarray,
    *,
    out_dtype: str = "float32",
    compress: str | bool | None = None,
    pipeline: Any = None,
) -> dict[str, str]:
    """Write every file under fresh names, then publish them with ``manifest.json``;
    returns name -> path. ``pipeline`` (anything with ``.save(path)``) is published too."""
    writer = ShardWriter(folder, feature_names, out_dtype, compress=compress)
    try:
        writer.add(X, y, row_ids, quarantine)
        writer.close(report, pipeline=pipeline)
    except BaseException:
        writer.discard()  # never published: the folder still holds its earlier output
        raise
    return writer.written()
