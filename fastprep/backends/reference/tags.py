"""Multi-valued (tag) features, the reference: Python lists of tags, sets and a row loop.

``fp.Tags("genres", sep="|") >> fp.OneHot()`` is sklearn's ``MultiLabelBinarizer`` with
the classes seen at fit (sorted; unseen tags ignored); ``>> fp.Hash(n)`` is
``FeatureHasher(input_type="string")`` on the tokens ``genres=<tag>``. A text input is
split here with ``str.split`` (the Numba backend's :mod:`fastprep.backends.numba.tags`
splits with Arrow and must give the same matrices). Empty pieces are no tag, a repeated tag
counts once, a missing value has no tags.

The fitted state of ``OneHot`` on tags has the shape of a text ``OneHot``'s (``categories``
sorted with their ``counts`` — rows holding the tag —, ``missing`` False, no
``infrequent``), so saving, loading and merging partitions' vocabularies need nothing new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.backends.reference.hashing import hash_pairs
from fastprep.data.columns import Table, TextColumn
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
    """The input's tags over the table's selected rows, flattened (Arrow split of the
    distinct text values, gathered by code; remembered per column and separator)."""
    column = table[item.name]
    if isinstance(column, TagColumn):
        return column
    assert isinstance(column, TextColumn) and feature.tags is not None
    raw = table.raw(item.name)
    sep = feature.tags
    distinct = table.derive(("tags", sep, item.name), raw,  # type: ignore[arg-type]
                            lambda: split_text(arrow_uniques(raw), sep))  # fmt: skip
    return distinct.take(column.codes)


def tag_lists(feature: Feature, item: Input, table: Table) -> list[list[str]]:
    """Each selected row's tags in first-seen order (Python ``str.split`` for text)."""
    column = table[item.name]
    if isinstance(column, TagColumn):
        return column.to_lists()
    assert isinstance(column, TextColumn) and feature.tags is not None
    sep = feature.tags
    return [
        [] if v is None else list(dict.fromkeys(t for t in v.split(sep) if t))
        for v in column.values()
    ]


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
        counts: dict[str, int] = {}
        for row in tag_lists(feature, item, table):
            for tag in row:
                counts[tag] = counts.get(tag, 0) + 1
        classes = sorted(counts)
        out[item.name] = [vocabulary_params(classes, [counts[c] for c in classes])]
    return out


def block(feature: Feature, fitted: dict[str, list[dict[str, Any]]], table: Table) -> SparseBlock:
    """The feature's CSR block (multi-hot per input side by side, or one hashed block)."""
    import scipy.sparse as sp

    rows = {item.name: tag_lists(feature, item, table) for item in feature.inputs}
    encoder = feature.encoder
    if isinstance(encoder, Hash):
        pairs = (
            [(name, tag) for name in rows for tag in rows[name][i]] for i in range(table.n_rows)
        )
        hashed = hash_pairs(pairs, encoder.n_features, encoder.alternate_sign, np.float32)
        return SparseBlock(hash_prefix(feature), hashed)
    parts = [multi_hot(rows[i.name], fitted[i.name][-1]["categories"]) for i in feature.inputs]
    matrix = parts[0] if len(parts) == 1 else sp.hstack(parts, format="csr")
    return SparseBlock("", matrix.tocsr())


def multi_hot(rows: list[list[str]], classes: list[str]) -> sp.csr_matrix:
    """``MultiLabelBinarizer(classes=classes)`` without the unknown-class warning: a row's
    known tags as ones at their class's column (sorted), unknown tags ignored."""
    import scipy.sparse as sp

    position = {c: i for i, c in enumerate(classes)}
    indptr, indices = [0], []
    for row in rows:
        indices.extend(sorted({position[t] for t in row if t in position}))
        indptr.append(len(indices))
    return sp.csr_matrix(
        (np.ones(len(indices), np.float32), np.array(indices, np.int32), np.array(indptr)),
        shape=(len(rows), len(classes)),
    )
