"""The Numba backend's encoders: MurmurHash3 kernels straight to CSR (bit-identical to
sklearn's ``FeatureHasher``) and a dict column's vocabulary (``fp.Dict >> Vectorize``).

Text columns are already dictionary-encoded: each distinct value is hashed once and
gathered by code; quarantined rows are skipped by gathering the selected codes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fastprep.backends.base import FeatureParams
from fastprep.backends.numba import dict_encode
from fastprep.backends.numba.hashing import hash_column_arrays
from fastprep.backends.reference import backend as reference
from fastprep.data.columns import Table, TextColumn
from fastprep.data.dict_column import DictColumn
from fastprep.emit.blocks import SparseBlock
from fastprep.emit.layout import hash_prefix
from fastprep.emit.sink import OutputSink
from fastprep.plan.nodes import Feature, Input, LogicalPlan
from fastprep.plan.steps import Hash, Vectorize


def encode_hash(
    feature: Feature, fitted: FeatureParams, table: Table, sink: OutputSink, index: int,
    log: reference.Repairs,
) -> None:  # fmt: skip
    """``Hash``: the hashed features of each row as one CSR block."""
    encoder = feature.encoder
    assert isinstance(encoder, Hash)
    name = feature.inputs[0].name
    if isinstance(table.columns.get(name), DictColumn):  # fp.Dict >> Hash
        hashed = dict_encode.hash_dicts(
            table[name], encoder.n_features, alternate_sign=encoder.alternate_sign
        )
        sink.put(index, SparseBlock(hash_prefix(feature), hashed))
        return
    if len(feature.steps) > 1:  # numeric inputs go through the steps before the hash
        values = {i.name: reference.input_values(i, table, log) for i in feature.inputs}
        values = reference.before_encoder(feature, fitted, values, log)
        columns = list(values.items())
    else:
        columns = [(item.name, _hash_input(item, table)) for item in feature.inputs]
    kwargs: dict[str, Any] = {"alternate_sign": encoder.alternate_sign, "dtype": np.float32}
    if feature.cross:
        matrix = hash_column_arrays([], encoder.n_features, crosses=[columns], **kwargs)
    else:
        matrix = hash_column_arrays(columns, encoder.n_features, **kwargs)
    sink.put(index, SparseBlock(hash_prefix(feature), matrix))


def encode_vectorize(
    feature: Feature, fitted: FeatureParams, table: Table, sink: OutputSink, index: int,
    log: reference.Repairs,
) -> None:  # fmt: skip
    """``Vectorize``: the dict column's entries over the fitted vocabulary, as CSR."""
    assert isinstance(feature.encoder, Vectorize)
    name = feature.inputs[0].name
    vocabulary = fitted[name][-1]["vocabulary"]
    sink.put(index, SparseBlock(f"{name}:", dict_encode.vectorize_dicts(table[name], vocabulary)))


def fit_vectorize(plan: LogicalPlan, index: int, table: Table) -> FeatureParams:
    """``Vectorize``'s vocabulary from the dict column's flattened entries."""
    name = plan.features[index].inputs[0].name
    return {name: [{"vocabulary": dict_encode.fit_vocabulary(table[name])}]}


def _hash_input(item: Input, table: Table) -> Any:
    """A hashed input as the hashing kernels take it: numbers as an array, text as its
    ``TextColumn`` (dictionary codes of the selected rows: no Arrow round trip)."""
    if not item.is_plain_column:  # a derived text column stays dictionary-encoded
        value = reference.input_values(item, table, reference.Repairs())
        return value if isinstance(value, TextColumn) else np.asarray(value)
    return table[item.name]
