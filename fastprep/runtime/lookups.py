"""Lookup tables at run time: read and validate each side table at fit, join it after
validating the source (every run: in memory, streamed, per Dask partition, batches).

Only the lookup columns the plan uses (and the key) are read and kept. A side table is
never silently shortened: a row its schema would quarantine is an error naming the rule and
rows (a dropped plane would turn every one of its flights into a silent non-match), and a
repeated key is an error naming the key values and rows.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastprep.api.lookup import JoinedSchema, Lookup, qualified
from fastprep.api.schema import Datetime, Schema
from fastprep.data.columns import RowRange, Table
from fastprep.data.lookup_join import LookupTable, as_stored
from fastprep.data.sources import raw_len, read_source
from fastprep.errors import DataValidationError, FastprepError, PipelineDefinitionError
from fastprep.plan.dtypes import LType
from fastprep.validate import validate_frame


def schema_for_fit(schema: Schema, columns: Iterable[str]) -> Schema:
    """The schema a fit runs with: with lookups, bound to their side tables read afresh
    (only those ``columns`` use); any other schema as it is."""
    if not isinstance(schema, JoinedSchema):
        return schema
    return load_tables(schema.unbound(), columns)


def load_tables(schema: JoinedSchema, columns: Iterable[str]) -> JoinedSchema:
    """``schema`` bound to the side tables the plan's ``columns`` use, read and validated."""
    used = schema.used(columns)
    return schema.bind({name: read_lookup(name, schema.lookups[name], cols)
                        for name, cols in used.items()})  # fmt: skip


def read_lookup(name: str, lookup: Lookup, columns: list[str]) -> LookupTable:
    """Read the key and ``columns`` of one side table, validate them by its schema, and
    check that its key is unique."""
    keys = list(lookup.key_columns)
    read = keys + [c for c in columns if c not in keys]
    spec = lookup.schema
    text = [c for c in read if spec[c].ltype in (LType.CATEGORY, LType.STRING)]
    where = f"lookup {name!r} ({lookup.path or 'table in memory'})"
    try:
        raw, _ = read_source(lookup.source, read, text)
        result = validate_frame(raw, spec, read, phase="fit", row_ids=RowRange(0, raw_len(raw)))
    except FastprepError as exc:
        raise type(exc)(f"{where}: {exc}") from None
    if len(result.quarantine):
        broken = [f.message() for f in result.findings if f.action == "quarantine"]
        raise DataValidationError(
            f"{where}: {len(result.quarantine):,} row(s) break the lookup's schema (a side "
            "table's rows are never dropped):\n  "
            + "\n  ".join(broken)
            + "\nfix the table, or declare the column nullable / on_invalid='repair' or 'warn'"
        )
    table = result.table
    stored = LookupTable(
        name, tuple(keys), tuple(as_stored(table[k]) for k in keys),
        {c: as_stored(table[c]) for c in columns},
    )  # fmt: skip
    stored.check_unique(table.row_ids, tuple(isinstance(spec[k], Datetime) for k in keys),
                        tuple(spec[k].ltype == LType.INT for k in keys))  # fmt: skip
    return stored


def join_lookups(table: Table, schema: JoinedSchema, columns: Iterable[str]) -> None:
    """Add the lookup columns among ``columns`` to ``table`` (over all its source rows)."""
    used = schema.used(columns)
    if not used:
        return
    if schema.tables is None:
        raise PipelineDefinitionError(
            "the lookup tables are read when the pipeline is fitted: fit it first "
            "(pipeline.fit(...)), or load a fitted pipeline"
        )
    for name, wanted in used.items():
        stored = schema.tables.get(name)
        missing = [c for c in wanted if stored is None or c not in stored.values]
        if missing:
            raise PipelineDefinitionError(
                f"lookup {name!r}: the fitted state holds no column(s) {missing}; refit"
            )
        assert stored is not None
        keys = [table.raw(left) for left, _ in schema.lookups[name].key]
        for column, values in stored.join(keys, wanted).items():
            table.columns[qualified(name, column)] = values
