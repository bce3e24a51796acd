"""Multi-valued (tag) features, the reference: numpy over the rows' tag entries.

``fp.Tags("genres", sep="|") >> fp.OneHot()`` is sklearn's ``MultiLabelBinarizer`` with
the classes seen at fit (sorted; unseen tags ignored); ``>> fp.Hash(n)`` is
``FeatureHasher(input_type="string")`` on the tokens ``genres=<tag>``. Empty pieces are
no tag, a repeated tag counts once, a missing value has no tags.

Independent of the Numba backend's :mod:`fastprep.backends.numba.tags` (which splits with
Arrow and assembles with the dict kernels): a text input is split here with Python's
``str.split`` on each distinct value, classes are sorted by Python, tokens hashed by the
reference hasher and the matrix finished by scipy, as sklearn finishes it. Work is per
distinct value or tag, gathered per entry with numpy: no Python object per row.

The fitted state of ``OneHot`` on tags has the shape of a text ``OneHot``'s (``categories``
sorted with their ``counts`` — rows holding the tag —, ``missing`` False, no
``infrequent``), so saving, loading and merging partitions' vocabularies need nothing new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.backends.reference import hashing as hashref
from fastprep.data.columns import Table, TextColumn
from fastprep.data.dict_column import gather_rows
from fastprep.data.tag_column import TagColumn
from fastprep.data.tag_split import split_text
from fastprep.data.text_encode import arrow_uniques
from fastprep.emit.blocks import SparseBlock
from fastprep.emit.layout import hash_prefix
from fastprep.errors import SchemaError
from fastprep.plan.nodes import Feature, Input, LogicalPlan
from fastprep.plan.steps import Hash, OneHot

if TYPE_CHECKING:
    import scipy.sparse as sp


def is_tags(feature: Feature, table: Table) -> bool:
    """A tags feature: ``fp.Tags`` on text, or inputs that are ``list<string>`` columns."""
    if feature.tags is not None:
        return True
    return any(isinstance(table.columns.get(i.name), TagColumn) for i in feature.inputs)


def check_usage(plan: LogicalPlan, table: Table) -> None:
    """A column read as tags (its source holds lists of strings, whatever text type it was
    declared) is encoded alone by ``OneHot()``/``Hash(n)``: a clear error otherwise (the
    definition checks could not know a ``String`` column's source holds lists)."""
    lists = {n for n, c in table.columns.items() if isinstance(c, TagColumn)}
    uses = [(f.describe(), f.columns, f) for f in plan.features]
    if plan.target is not None:
        uses.append((f"target {plan.target.name!r}", plan.target.columns, None))
    for where, columns, feature in uses:
        found = [c for c in columns if c in lists]
        if not found or (feature is not None and _encodes_tags(feature, table)):
            continue
        raise SchemaError(
            f"column {found[0]!r} holds lists of strings (tags) in the source, so {where} "
            f"cannot use it; encode it alone: fp.cols({found[0]!r}) >> fp.OneHot() or "
            f">> fp.Hash(n) (declare it fp.ListOf() to have this checked when the pipeline "
            "is defined)"
        )


def _encodes_tags(feature: Feature, table: Table) -> bool:
    encoder = feature.steps[0] if len(feature.steps) == 1 else None
    if feature.cross or not isinstance(encoder, (OneHot, Hash)):
        return False
    if isinstance(encoder, OneHot) and (encoder.min_frequency != 1 or encoder.max_categories):
        return False
    return all(
        item.is_plain_column
        and (isinstance(table.columns.get(item.name), TagColumn) or feature.tags is not None)
        for item in feature.inputs
    )


def tag_values(feature: Feature, item: Input, table: Table) -> TagColumn:
    """The input's tags over the table's selected rows, flattened."""
    split = split_distinct(feature, item, table)
    if split is None:
        return table[item.name]  # type: ignore[return-value]  # a list column as validated
    distinct, codes = split
    return distinct.take(codes)


def split_distinct(
    feature: Feature, item: Input, table: Table
) -> tuple[TagColumn, np.ndarray] | None:
    """A text input's tags per distinct value (Arrow's split, remembered per column and
    separator) and the selected rows' codes (-1: missing); None for a list column."""
    column = table[item.name]
    if isinstance(column, TagColumn):
        return None
    assert isinstance(column, TextColumn) and feature.tags is not None
    raw, sep = table.raw(item.name), feature.tags
    distinct = table.derive(("tags", sep, item.name), raw,  # type: ignore[arg-type]
                            lambda: split_text(arrow_uniques(raw), sep))  # fmt: skip
    return distinct, column.codes


def tag_entries(
    feature: Feature, item: Input, table: Table
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The selected rows' tags as (offsets, a code per tag, the tags' names): a list column
    as validated; text split with ``str.split`` on its distinct values, gathered by code."""
    column = table[item.name]
    if isinstance(column, TagColumn):
        return column.offsets, column.codes, column.uniques.to_pylist()
    assert isinstance(column, TextColumn) and feature.tags is not None
    sep = feature.tags
    names: dict[str, int] = {}
    lengths, codes = [], []
    for value in column.uniques:
        tags = dict.fromkeys(t for t in str(value).split(sep) if t)
        lengths.append(len(tags))
        codes.extend(names.setdefault(t, len(names)) for t in tags)
    per_value = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=per_value[1:])
    offsets, entries = gather_rows(per_value, column.codes)
    return offsets, np.asarray(codes, dtype=np.int64)[entries], list(names)


def vocabulary_params(categories: list[str], counts: list[int]) -> dict[str, Any]:
    """A tags ``OneHot``'s fitted state (the text ``OneHot`` shape, see the module doc)."""
    return {
        "categories": categories,
        "counts": counts,
        "numeric": False,
        "missing": False,
        "infrequent": 0,
    }


def fit_feature(feature: Feature, table: Table) -> dict[str, list[dict[str, Any]]]:
    """Per input: the sorted classes with their row counts (``OneHot``), nothing (``Hash``)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for item in feature.inputs:
        if not isinstance(feature.encoder, OneHot):
            out[item.name] = [{}]
            continue
        _, codes, names = tag_entries(feature, item, table)
        counts = np.bincount(codes, minlength=len(names))  # a row holds a tag once
        seen = sorted((names[i], int(counts[i])) for i in np.flatnonzero(counts))
        out[item.name] = [vocabulary_params([t for t, _ in seen], [c for _, c in seen])]
    return out


def block(feature: Feature, fitted: dict[str, list[dict[str, Any]]], table: Table) -> SparseBlock:
    """The feature's CSR block (multi-hot per input side by side, or one hashed block)."""
    import scipy.sparse as sp

    entries = {item.name: tag_entries(feature, item, table) for item in feature.inputs}
    encoder = feature.encoder
    if isinstance(encoder, Hash):
        return SparseBlock(hash_prefix(feature), hashed(entries, encoder, table.n_rows))
    parts = [multi_hot(*entries[i.name], fitted[i.name][-1]["categories"]) for i in feature.inputs]
    matrix = parts[0] if len(parts) == 1 else sp.hstack(parts, format="csr")
    return SparseBlock("", matrix.tocsr())


def multi_hot(
    offsets: np.ndarray, codes: np.ndarray, names: list[str], classes: list[str]
) -> sp.csr_matrix:
    """``MultiLabelBinarizer(classes=classes)`` without the unknown-class warning: a row's
    known tags as ones at their class's column (sorted), unknown tags ignored."""
    import scipy.sparse as sp

    position = {c: i for i, c in enumerate(classes)}
    column = np.array([position.get(t, -1) for t in names] + [-1], dtype=np.int64)[codes]
    known = column >= 0
    n_rows = len(offsets) - 1
    rows = np.repeat(np.arange(n_rows), np.diff(offsets))[known]
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    out = sp.csr_matrix(
        (np.ones(len(rows), np.float32), column[known].astype(np.int32), indptr),
        shape=(n_rows, len(classes)),
    )
    out.sort_indices()
    return out


def hashed(
    entries: dict[str, tuple[np.ndarray, np.ndarray, list[str]]], step: Hash, n_rows: int
) -> sp.csr_matrix:
    """``FeatureHasher(input_type="string")`` of each row's tokens ``col=tag`` (inputs in
    order within a row): each distinct token hashed once, then finished as sklearn does."""
    rows, columns, values = [], [], []
    for name, (offsets, codes, names) in entries.items():
        hashes = hashref.signed_hashes([f"{name}={t}" for t in names])
        column, sign = hashref.columns_and_signs(hashes, step.n_features)
        rows.append(np.repeat(np.arange(n_rows), np.diff(offsets)))
        columns.append(column[codes])
        values.append(sign[codes] if step.alternate_sign else np.ones(len(codes)))
    row = np.concatenate(rows)
    order = np.argsort(row, kind="stable")  # row by row, each input's tokens in turn
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n_rows), out=indptr[1:])
    return hashref.finish(np.concatenate(columns)[order], np.concatenate(values)[order],
                          indptr, step.n_features, np.float32)  # fmt: skip
