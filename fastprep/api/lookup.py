"""Lookup tables: side tables joined onto every source row by a key (``fp.Lookup``).

``fp.Pipeline(schema, features, lookups={"planes": fp.Lookup("planes.parquet",
key={"tailnum": "tailnum"}, schema=fp.Schema({...}))})`` lets features and expressions use
``planes.year`` like a source column. The pipeline's schema becomes a
:class:`JoinedSchema`: the source's columns plus each lookup column under its qualified name
``<lookup>.<column>``, typed as declared but nullable (a row without a match has missing
values). Reading asks the source only for its own columns and the keys of the lookups the
plan uses; the side table is read, validated and loaded at fit (``tables``, the fitted
data: opaque here, see :mod:`fastprep.data.lookup_join`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fastprep.api.schema import ColumnType, Datetime, Schema, unknown_column_message
from fastprep.errors import ExprSyntaxError, PipelineDefinitionError
from fastprep.plan.dtypes import LType

#: a lookup name is a plain identifier that is no function or constant of ``fp.expr``
_RESERVED = {"nan", "inf", "pi", "e", "where", "log", "isnull", "True", "False"}


class Lookup:
    """A side table joined onto the source by ``key`` ({source column: lookup column}; a
    name or list of names when both sides name the key columns alike).

    ``source``: a Parquet/CSV path (relative: to the pipeline file when loaded from one,
    else to the current folder at fit) or a table in memory (pandas / pyarrow / Polars).
    ``schema`` declares and validates the side table's columns; its key must be unique.
    """

    def __init__(
        self, source: Any, key: Mapping[str, str] | str | list[str] | tuple[str, ...],
        schema: Schema,
    ) -> None:  # fmt: skip
        if isinstance(source, os.PathLike):
            source = os.fspath(source)
        if isinstance(key, str):
            key = {key: key}
        elif isinstance(key, (list, tuple)) and all(isinstance(k, str) for k in key):
            key = {k: k for k in key}
        if not isinstance(schema, Schema):
            raise PipelineDefinitionError("fp.Lookup(schema=...) needs an fp.Schema({...})")
        if not isinstance(key, Mapping) or not key:
            raise PipelineDefinitionError(
                "fp.Lookup(key=...) needs a dict {source column: lookup column}, e.g. "
                "{'tailnum': 'tailnum'}"
            )
        for left, right in key.items():
            if not isinstance(left, str) or not isinstance(right, str):
                raise PipelineDefinitionError(f"fp.Lookup(key={dict(key)!r}): names must be text")
            if right not in schema:
                raise PipelineDefinitionError(
                    unknown_column_message(right, schema, "the lookup's key")
                )
            if schema[right].nullable:
                raise PipelineDefinitionError(
                    f"fp.Lookup key column {right!r} is declared nullable: a side table's "
                    "key identifies its rows and must never be missing"
                )
        if len(set(key.values())) < len(key):
            raise PipelineDefinitionError(f"fp.Lookup(key={dict(key)!r}) repeats a lookup column")
        self.source = source
        self.key: tuple[tuple[str, str], ...] = tuple(key.items())
        self.schema = schema

    @property
    def path(self) -> str | None:
        return self.source if isinstance(self.source, str) else None

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The lookup's own key columns, in key order."""
        return tuple(right for _, right in self.key)

    def resolved(self, folder: str | os.PathLike[str]) -> Lookup:
        """The same lookup with a relative path made absolute against ``folder``."""
        if self.path is None or os.path.isabs(self.path):
            return self
        return Lookup(str((Path(folder) / self.path).resolve()), dict(self.key), self.schema)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "key": [list(pair) for pair in self.key],
            "schema": self.schema.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Lookup:
        source = data.get("path") or "<in-memory table>"
        return cls(source, dict(data["key"]), Schema.from_dict(data["schema"]))

    def __repr__(self) -> str:
        where = self.path if self.path is not None else type(self.source).__name__
        return f"Lookup({where!r}, key={dict(self.key)!r})"


def qualified(lookup: str, column: str) -> str:
    """``planes.year``: how features name a lookup column."""
    return f"{lookup}.{column}"


class JoinedSchema(Schema):
    """The source schema plus every lookup column as ``<lookup>.<column>`` (nullable).

    ``tables`` (name -> fitted side table) is set by :meth:`bind` once the lookups are
    read at fit; an unbound schema can be checked against, not run.
    """

    def __init__(
        self, source: Schema, lookups: Mapping[str, Lookup], tables: Mapping[str, Any] | None = None
    ) -> None:
        if not isinstance(lookups, Mapping):
            raise PipelineDefinitionError(
                'Pipeline(lookups=...) takes a dict {"planes": fp.Lookup(...)}'
            )
        if isinstance(source, JoinedSchema):  # more lookups on a joined schema: one level
            lookups = {**source.lookups, **lookups}
            source = source.source
        columns: dict[str, ColumnType] = dict(source.items())
        for name, lookup in lookups.items():
            _check_lookup(name, lookup, source)
            for column, spec in lookup.schema.items():
                full = qualified(name, column)
                if full in columns:
                    raise PipelineDefinitionError(
                        f"lookup column {full!r} clashes with a source column of that name; "
                        "rename the lookup"
                    )
                columns[full] = _nullable(spec)
        super().__init__(
            columns, keys=source.keys_ or None, on_duplicate=source.on_duplicate,
            unexpected=source.unexpected,
        )  # fmt: skip
        self.source = source
        self.lookups: dict[str, Lookup] = dict(lookups)
        self.tables: dict[str, Any] | None = None if tables is None else dict(tables)

    def bind(self, tables: Mapping[str, Any]) -> JoinedSchema:
        """This schema with the fitted side tables (read and validated at fit)."""
        return JoinedSchema(self.source, self.lookups, tables)

    def unbound(self) -> JoinedSchema:
        """This schema without fitted tables (a fit reads them afresh)."""
        return self if self.tables is None else JoinedSchema(self.source, self.lookups)

    def resolved(self, folder: str | os.PathLike[str]) -> JoinedSchema:
        lookups = {n: lk.resolved(folder) for n, lk in self.lookups.items()}
        return JoinedSchema(self.source, lookups, self.tables)

    def used(self, columns: Iterable[str]) -> dict[str, list[str]]:
        """Lookup name -> its columns among ``columns`` (qualified names), first-use order."""
        out: dict[str, list[str]] = {}
        for name in columns:
            split = self.split(name)
            if split is not None:
                out.setdefault(split[0], [])
                if split[1] not in out[split[0]]:
                    out[split[0]].append(split[1])
        return out

    def split(self, name: str) -> tuple[str, str] | None:
        """``("planes", "year")`` for a lookup column's qualified name, else None."""
        if name in self.source or "." not in name:
            return None
        lookup, _, column = name.partition(".")
        if lookup in self.lookups and column in self.lookups[lookup].schema:
            return lookup, column
        return None

    def read_columns(self, columns: list[str] | tuple[str, ...]) -> list[str]:
        """The source columns among ``columns``, the keys of the lookups they use, and the
        schema's key columns: what is read from the source (never a lookup column)."""
        out = [c for c in columns if self.split(c) is None]
        for name in self.used(columns):
            out += [left for left, _ in self.lookups[name].key if left not in out]
        return self.source.read_columns(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.source.to_dict(),
            "lookups": [[n, lk.to_dict()] for n, lk in self.lookups.items()],
        }


def describe_lookups(schema: Schema, columns: Iterable[str]) -> str:
    """Lines for ``explain``: each lookup the plan uses, its key and the joined columns."""
    if not isinstance(schema, JoinedSchema):
        return ""
    lines = []
    for name, used in schema.used(columns).items():
        lookup = schema.lookups[name]
        key = ", ".join(left if left == right else f"{left} = {name}.{right}"
                        for left, right in lookup.key)  # fmt: skip
        where = lookup.path if lookup.path is not None else "a table in memory"
        fitted = schema.tables is not None and name in schema.tables
        rows = f", {schema.tables[name].n_rows:,} rows fitted" if fitted else ""
        lines.append(f"\n└─ lookup {name} ({where}{rows}): left join by {key} -> "
                     + ", ".join(f"{name}.{c}" for c in used))  # fmt: skip
    return "".join(lines)


def schema_from_dict(data: Mapping[str, Any]) -> Schema:
    """A saved schema: a :class:`JoinedSchema` (unbound) if it has lookups."""
    lookups = data.get("lookups") if isinstance(data, Mapping) else None
    if not lookups:
        return Schema.from_dict(data)
    source = Schema.from_dict({k: v for k, v in data.items() if k != "lookups"})
    return JoinedSchema(source, {str(n): Lookup.from_dict(d) for n, d in lookups})


def check_qualified_names(columns: Iterable[str], schema: Schema) -> None:
    """A dotted name (``planes.year``) that is no column must be ``<lookup>.<column>``;
    anything else is attribute access, which ``fp.expr`` never allows."""
    lookups = schema.lookups if isinstance(schema, JoinedSchema) else {}
    for name in columns:
        if name in schema or "." not in name:
            continue
        lookup, _, column = name.partition(".")
        if lookup in lookups:
            raise PipelineDefinitionError(
                unknown_column_message(column, lookups[lookup].schema, f"lookup {lookup!r}")
            )
        declared = ", ".join(lookups) if lookups else "none"
        raise ExprSyntaxError(
            f"{name!r} is not a schema column, and {lookup!r} is not a declared lookup table "
            f"(Pipeline(lookups=...): {declared}); `a.b` in fp.expr names a lookup's column "
            "and attribute access is not allowed otherwise (a source column whose name has "
            "a dot is declared in the schema, and written in backticks in fp.expr)"
        )


def _check_lookup(name: Any, lookup: Any, source: Schema) -> None:
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
        raise PipelineDefinitionError(
            f"lookup name {name!r}: use a plain identifier such as 'planes'"
        )
    if name in _RESERVED:
        raise PipelineDefinitionError(f"lookup name {name!r} is reserved by fp.expr")
    if not isinstance(lookup, Lookup):
        raise PipelineDefinitionError(f"lookups[{name!r}] must be an fp.Lookup(...)")
    for left, right in lookup.key:
        if left not in source:
            raise PipelineDefinitionError(
                unknown_column_message(left, source, f"the key of lookup {name!r}")
            )
        _check_key_types(name, left, source[left], right, lookup.schema[right])


def _check_key_types(name: str, left: str, ours: ColumnType, right: str, theirs: Any) -> None:
    """Keys match by value: text with text, numbers with numbers, and timestamps with
    timestamps of the same kind (both zone-aware: the same UTC instant; both naive)."""
    kinds = [_key_kind(spec) for spec in (ours, theirs)]
    if kinds[0] != kinds[1] or "dict" in kinds or "list" in kinds:
        raise PipelineDefinitionError(
            f"lookup {name!r}: key {left!r} ({kinds[0]}) cannot match {right!r} ({kinds[1]}); "
            "declare both as text, both as numbers, or both fp.Datetime with or both "
            "without tz="
        )


def _key_kind(spec: ColumnType) -> str:
    if isinstance(spec, Datetime):
        return "naive timestamp" if spec.tz is None else "zoned timestamp"
    if spec.ltype == LType.DICT:
        return "dict"
    if spec.ltype == LType.LIST:
        return "list"
    return "text" if spec.ltype.is_text else "number"


def _nullable(spec: ColumnType) -> ColumnType:
    """The joined column's type: as declared, but missing where no side row matched."""
    changes: dict[str, Any] = {"nullable": True}
    if getattr(spec, "impute", None) is not None:
        changes["impute"] = None  # imputed in the side table, not for an unmatched row
    return dataclasses.replace(spec, **changes)
