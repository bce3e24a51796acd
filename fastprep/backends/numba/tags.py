"""Multi-valued (tag) features on the dict-column kernels: no Python object per row.

A tag column is a dict column whose only key is the column's name: the entry ``genres`` →
``Drama`` is the token ``genres=Drama`` that ``FeatureHasher(input_type="string")``
hashes, and the name ``DictVectorizer`` gives it. So hashing and the multi-hot transform
reuse :mod:`fastprep.backends.numba.dict_encode` (each distinct tag hashed or looked up
once, rows sorted and merged by one Numba kernel) on a zero-copy dict view of the tags.

A delimited text input is encoded on its *distinct* values and the CSR rows gathered by
the rows' dictionary codes; fit counts tags from the distinct values' row counts. The
results equal :mod:`fastprep.backends.reference.tags` (the tests hold them to it).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastprep.backends.numba import dict_encode
from fastprep.backends.numba import encode as encoders
from fastprep.backends.reference import backend as reference
from fastprep.backends.reference.tags import (
    is_tags,
    split_distinct,
    tag_values,
    vocabulary_params,
)
from fastprep.data.columns import Table
from fastprep.data.dict_column import DictColumn, gather_rows
from fastprep.data.tag_column import TagColumn
from fastprep.emit.blocks import SparseBlock
from fastprep.emit.layout import hash_prefix
from fastprep.emit.sink import OutputSink
from fastprep.plan.nodes import Feature, Input, LogicalPlan
from fastprep.plan.steps import Hash, OneHot

if TYPE_CHECKING:
    import scipy.sparse as sp

# the Numba backend's table entries for OneHot and Hash (``backends/numba/ops.py``): tags
# here, any other input by the encoder's usual code


def fit_onehot(plan: LogicalPlan, index: int, table: Table) -> dict[str, list[dict[str, Any]]]:
    feature = plan.features[index]
    if is_tags(feature, table):
        return fit_feature(feature, table)
    return reference.fit_feature(feature, table)


def encode_onehot(
    feature: Feature, fitted: dict[str, list[dict[str, Any]]], table: Table, sink: OutputSink,
    index: int, log: reference.Repairs,
) -> None:  # fmt: skip
    if is_tags(feature, table):
        sink.put(index, block(feature, fitted, table))
    else:
        reference.encode_feature(feature, fitted, table, sink, index, log)


def encode_hash(
    feature: Feature, fitted: dict[str, list[dict[str, Any]]], table: Table, sink: OutputSink,
    index: int, log: reference.Repairs,
) -> None:  # fmt: skip
    if is_tags(feature, table):
        sink.put(index, block(feature, fitted, table))
    else:
        encoders.encode_hash(feature, fitted, table, sink, index, log)


def _dict_view(column: TagColumn, key: str) -> DictColumn:
    """The tags as a dict column with the single key ``key`` (entries shared, not copied)."""
    n = len(column.codes)
    return DictColumn(
        column.offsets,
        np.zeros(n, dtype=np.int32),
        pa.array([key], type=pa.large_string()),
        column.codes,
        column.uniques,
        np.broadcast_to(np.float64(np.nan), (n,)),  # every entry is a string: unread
    )


def fit_feature(feature: Feature, table: Table) -> dict[str, list[dict[str, Any]]]:
    """Per input: the sorted distinct tags with the rows holding each (``OneHot``)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for item in feature.inputs:
        if not isinstance(feature.encoder, OneHot):
            out[item.name] = [{}]
            continue
        split = split_distinct(feature, item, table)
        if split is None:
            column = tag_values(feature, item, table)
            counts = column.counts()
        else:  # rows per distinct value, spread over that value's tags
            column, codes = split
            per_value = np.bincount(codes[codes >= 0], minlength=len(column))
            weights = per_value[column.entry_rows()]
            counts = np.bincount(column.codes, weights, minlength=len(column.uniques))
            counts = counts.astype(np.int64)
        seen = np.flatnonzero(counts)
        names = column.uniques.take(pa.array(seen, type=pa.int64()))
        order = pc.sort_indices(names).to_numpy()  # UTF-8 byte order = Python's str order
        out[item.name] = [
            vocabulary_params(names.take(order).to_pylist(), counts[seen][order].tolist())
        ]
    return out


def block(feature: Feature, fitted: dict[str, list[dict[str, Any]]], table: Table) -> SparseBlock:
    """The feature's CSR block: multi-hot per input side by side, or one hashed block."""
    import scipy.sparse as sp

    encoder = feature.encoder
    if isinstance(encoder, Hash):
        return SparseBlock(hash_prefix(feature), _hashed(feature, encoder, table))
    parts = []
    for item in feature.inputs:
        names = [f"{item.name}={c}" for c in fitted[item.name][-1]["categories"]]
        parts.append(_per_input(feature, item, table, partial(_vectorize, vocabulary=names)))
    matrix = parts[0] if len(parts) == 1 else sp.hstack(parts, format="csr")
    return SparseBlock("", matrix)


def _vectorize(column: DictColumn, vocabulary: list[str]) -> sp.csr_matrix:
    return dict_encode.vectorize_dicts(column, vocabulary)


def _hashed(feature: Feature, encoder: Hash, table: Table) -> sp.csr_matrix:
    def hash_(column: DictColumn) -> sp.csr_matrix:
        return dict_encode.hash_dicts(
            column, encoder.n_features, alternate_sign=encoder.alternate_sign
        )

    if len(feature.inputs) == 1:
        return _per_input(feature, feature.inputs[0], table, hash_)
    return hash_(_merged([(i.name, tag_values(feature, i, table)) for i in feature.inputs]))


def _per_input(feature: Feature, item: Input, table: Table, encode: Any) -> sp.csr_matrix:
    """``encode`` of one input's dict view: of the distinct text values then gathered by
    code, or of the rows of a list column."""
    import scipy.sparse as sp

    split = split_distinct(feature, item, table)
    if split is None:
        return _by_tag(tag_values(feature, item, table), item.name, encode)
    distinct, codes = split
    per_value = encode(_dict_view(distinct, item.name))
    indptr, entries = gather_rows(per_value.indptr, codes)
    index_dtype = np.int32 if max(len(entries), per_value.shape[1]) <= 2**31 - 1 else np.int64
    out = sp.csr_matrix(
        (per_value.data[entries], per_value.indices[entries].astype(index_dtype, copy=False),
         indptr.astype(index_dtype)),
        shape=(len(codes), per_value.shape[1]), copy=False,
    )  # fmt: skip
    out.has_sorted_indices = True
    return out


def _by_tag(column: TagColumn, name: str, encode: Any) -> sp.csr_matrix:
    """``encode`` of each distinct tag alone (its column and value: hashed or looked up
    once), gathered per entry and assembled by the dict kernels' row sort and merge."""
    n_tags = len(column.uniques)
    single = TagColumn(np.arange(n_tags + 1, dtype=np.int64), np.arange(n_tags, dtype=np.int32),
                       column.uniques)  # fmt: skip
    per_tag = encode(_dict_view(single, name))
    present = np.diff(per_tag.indptr) > 0
    index = np.full(n_tags, -1, dtype=np.int64)
    index[present] = per_tag.indices[per_tag.indptr[:-1][present]]
    value = np.zeros(n_tags, dtype=per_tag.dtype)
    value[present] = per_tag.data[per_tag.indptr[:-1][present]]
    entries = index[column.codes]
    return dict_encode._to_csr(column, entries >= 0, entries, value[column.codes],
                               per_tag.shape[1], per_tag.dtype)  # fmt: skip


def _merged(columns: list[tuple[str, TagColumn]]) -> DictColumn:
    """Several tag inputs as one dict column (key = input name): row by row, the first
    input's tags, then the second's... (FeatureHasher's order of the row's tokens)."""
    n = len(columns[0][1])
    lengths = np.stack([np.diff(c.offsets) for _, c in columns])  # inputs x rows
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths.sum(axis=0), out=offsets[1:])
    before = np.cumsum(lengths, axis=0) - lengths  # entries of earlier inputs in the row
    total = int(offsets[-1])
    keys = np.empty(total, dtype=np.int32)
    values = np.empty(total, dtype=np.int32)
    uniques, base = [], 0
    for j, (_, column) in enumerate(columns):
        rows = column.entry_rows()
        at = offsets[rows] + before[j][rows] + (np.arange(len(rows)) - column.offsets[rows])
        keys[at] = j
        values[at] = column.codes + base
        uniques.append(column.uniques.cast(pa.large_string()))
        base += len(column.uniques)
    names = pa.array([name for name, _ in columns], type=pa.large_string())
    strings = pa.concat_arrays(uniques) if uniques else pa.array([], pa.large_string())
    return DictColumn(offsets, keys, names, values, strings,
                      np.broadcast_to(np.float64(np.nan), (total,)))  # fmt: skip
