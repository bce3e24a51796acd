"""Declared input schema: column types, nullability, ranges, domains and policies.

``on_invalid`` decides what happens to a value that breaks its column's rules:

- ``"quarantine"`` (default): the row goes to ``out.quarantine`` with the rule that failed;
- ``"raise"``: a :class:`~fastprep.errors.DataValidationError` names column, rule, count, rows;
- ``"warn"``: the finding is logged and reported; the value is kept (a value of the wrong
  type becomes missing, since it cannot be kept as a number);
- ``"repair"``: numeric values out of range are clipped to the bound, ±inf clipped to the
  bound on its side, non-integers in an ``Int`` rounded — each repair counted in the
  report; a rule with no repair (missing, wrong type, category...) quarantines its row.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from fastprep.errors import PipelineDefinitionError
from fastprep.plan.dtypes import LType
from fastprep.plan.facts import UNKNOWN, Facts

POLICIES = ("quarantine", "raise", "warn", "repair")
#: what to do with source columns the schema does not declare (default: ignore, reported)
UNEXPECTED_POLICIES = ("ignore", "warn", "raise")
#: what to do with rows whose declared key repeats an earlier row's (default: raise)
DUPLICATE_POLICIES = ("raise", "quarantine", "warn")
#: storage dtypes a column may declare; values beyond the dtype's range break rule ``overflow``
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True)
class ColumnType:
    """Base of the column types; subclasses add their own rules."""

    ltype: ClassVar[LType]
    nullable: bool = False
    on_invalid: str = "quarantine"

    def __post_init__(self) -> None:
        if self.on_invalid not in POLICIES:
            raise PipelineDefinitionError(
                f"on_invalid={self.on_invalid!r}; choose one of {', '.join(POLICIES)}"
            )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": type(self).__name__}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def _check_bounds(kind: str, low: float | None, high: float | None) -> None:
    for label, value in (("min", low), ("max", high)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise PipelineDefinitionError(f"{kind}({label}={value!r}): must be a number")
    if low is not None and high is not None and low > high:
        raise PipelineDefinitionError(f"{kind}(min={low}, max={high}): min is above max")


@dataclass(frozen=True)
class Float(ColumnType):
    """A floating-point column; ``allow_inf=False`` treats ±inf as invalid values."""

    ltype: ClassVar[LType] = LType.FLOAT
    min: float | None = None
    max: float | None = None
    allow_inf: bool = False
    #: declared storage type: a finite value beyond its range breaks rule ``overflow``
    dtype: str | None = None
    #: a number that replaces missing values (action ``impute``, counted in the report)
    impute: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bounds("Float", self.min, self.max)
        _check_storage("Float", self.dtype, FLOAT_DTYPES, self.impute)


@dataclass(frozen=True)
class Int(ColumnType):
    """An integer column; non-integral numbers are invalid values."""

    ltype: ClassVar[LType] = LType.INT
    min: int | None = None
    max: int | None = None
    #: declared storage type (``"int8"``...): a value beyond its range breaks ``overflow``
    dtype: str | None = None
    #: a whole number that replaces missing values (action ``impute``, counted)
    impute: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bounds("Int", self.min, self.max)
        _check_storage("Int", self.dtype, INT_DTYPES, self.impute)
        if self.impute is not None and not float(self.impute).is_integer():
            raise PipelineDefinitionError(f"Int(impute={self.impute!r}): must be a whole number")


def _check_storage(
    kind: str, dtype: str | None, allowed: tuple[str, ...], impute: float | None
) -> None:
    if dtype is not None and dtype not in allowed:
        raise PipelineDefinitionError(
            f"{kind}(dtype={dtype!r}); choose one of {', '.join(allowed)}"
        )
    if impute is not None and (
        isinstance(impute, bool)
        or not isinstance(impute, (int, float))
        or not math.isfinite(impute)
    ):
        raise PipelineDefinitionError(
            f"{kind}(impute={impute!r}): must be a finite number (for a fitted statistic "
            "use the step fp.FillMissing('median'))"
        )


@dataclass(frozen=True)
class Datetime(ColumnType):
    """A timestamp column, seen by expressions as float64 seconds since 1970-01-01 (UTC).

    ``tz=None``: naive timestamps (wall-clock, no zone); ``tz="UTC"`` (or any zone name):
    time-zone-aware timestamps, converted to UTC. A source whose zone-awareness differs from
    the declaration is a ``SchemaError`` (fastprep never guesses a zone).
    """

    ltype: ClassVar[LType] = LType.FLOAT
    tz: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "tz", _zone_name(self.tz))


def _zone_name(tz: Any) -> str | None:
    """The zone's name, checked where it is declared (an unknown one would fail deep in
    pandas at the first run); a zone object (``ZoneInfo``, pytz, ``datetime.timezone``)
    becomes its name, the form a saved pipeline keeps."""
    import datetime as dt

    if tz is None:
        return None
    if isinstance(tz, dt.timezone):
        offset = tz.utcoffset(None)
        if not offset:
            return "UTC"
        minutes = int(offset.total_seconds()) // 60
        sign = "+" if minutes >= 0 else "-"
        return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    name = tz if isinstance(tz, str) else getattr(tz, "key", None) or getattr(tz, "zone", None)
    if isinstance(name, str) and (name == "utc" or re.fullmatch(r"[+-]\d\d:?\d\d", name)):
        return name  # what pandas reads besides the IANA names
    if isinstance(name, str) and name:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(name)
            return name
        except Exception:  # unknown, empty or path-like names fail in several ways
            pass
    raise PipelineDefinitionError(
        f"Datetime(tz={tz!r}): not a time zone fastprep knows; use an IANA zone name such as "
        "'America/New_York' or 'UTC' (or tz=None for naive timestamps)"
    )


@dataclass(frozen=True)
class Bool(ColumnType):
    """A boolean column (also accepts 0/1 and the strings true/false)."""

    ltype: ClassVar[LType] = LType.BOOL


@dataclass(frozen=True)
class Category(ColumnType):
    """A low-cardinality text column; ``categories`` (optional) is the allowed domain."""

    ltype: ClassVar[LType] = LType.CATEGORY
    categories: tuple[str, ...] | None = None

    def __init__(
        self,
        categories: list[str] | tuple[str, ...] | None = None,
        nullable: bool = False,
        on_invalid: str = "quarantine",
    ) -> None:
        if categories is not None:
            if isinstance(categories, str) or not all(isinstance(c, str) for c in categories):
                raise PipelineDefinitionError(
                    f"Category(categories=...) needs a list of strings, got {categories!r}"
                )
            categories = tuple(categories)
        object.__setattr__(self, "categories", categories)
        object.__setattr__(self, "nullable", nullable)
        object.__setattr__(self, "on_invalid", on_invalid)
        self.__post_init__()


@dataclass(frozen=True)
class String(ColumnType):
    """A free text column (identifiers, codes); ``max_length`` limits characters."""

    ltype: ClassVar[LType] = LType.STRING
    max_length: int | None = None


#: what the values of a ``DictOf`` column may be
DICT_VALUES = ("number", "string")


@dataclass(frozen=True)
class DictOf(ColumnType):
    """A column of dicts ``{str: number | str}`` (DictVectorizer input), for ``fp.Dict(name)``.

    Each row must be a dict (or a list of ``(key, value)`` pairs, as pyarrow gives for a
    ``map`` column); keys must be strings; a value is a finite number (bool counts as a
    number, like sklearn) or a string; a ``None`` value means the key is absent. A key's
    values must all be one type: ``values="number"`` or ``"string"`` pins it, ``None``
    takes each key's majority type in the batch and flags the other rows. A missing row
    (None/NaN) is an empty dict if ``nullable=True``, else the ``null`` rule.
    """

    ltype: ClassVar[LType] = LType.DICT
    values: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.values is not None and self.values not in DICT_VALUES:
            raise PipelineDefinitionError(
                f"DictOf(values={self.values!r}): use 'number', 'string' or None (any)"
            )


@dataclass(frozen=True)
class ListOf(ColumnType):
    """A column of lists of strings (Parquet/Arrow ``list<string>``, or Python lists in a
    pandas column): a multi-valued column, encoded with ``fp.OneHot()`` (multi-hot) or
    ``fp.Hash(n)``. A null or empty element is no tag, a repeated one counts once; a
    missing row (None/NaN) has no tags if ``nullable=True``, else breaks the ``null`` rule;
    a row that is not a list of strings breaks the ``type`` rule."""

    ltype: ClassVar[LType] = LType.LIST


COLUMN_TYPES: dict[str, type[ColumnType]] = {
    cls.__name__: cls for cls in (Float, Int, Bool, Category, String, DictOf, Datetime, ListOf)
}


class Schema(Mapping[str, ColumnType]):
    """Column name → :class:`ColumnType`, in declaration order."""

    def __init__(
        self,
        columns: Mapping[str, ColumnType],
        *,
        keys: list[str] | tuple[str, ...] | None = None,
        on_duplicate: str = "raise",
        unexpected: str = "ignore",
    ) -> None:
        """``keys``: columns whose combination must be unique (``on_duplicate`` decides);
        ``unexpected``: what to do with source columns the schema does not declare."""
        if not isinstance(columns, Mapping):
            raise PipelineDefinitionError(
                "fp.Schema takes a dict of column name -> fp.Float(...) etc."
            )
        for name, spec in columns.items():
            if not isinstance(name, str) or not name:
                raise PipelineDefinitionError(f"schema column names must be strings, got {name!r}")
            if not isinstance(spec, ColumnType):
                hint = f"; did you mean fp.{spec.__name__}()?" if isinstance(spec, type) else ""
                raise PipelineDefinitionError(
                    f"schema column {name!r}: expected fp.Float/Int/Bool/Category/String/"
                    f"DictOf/ListOf, got {spec!r}{hint}"
                )
        self._columns = dict(columns)
        self.keys_: tuple[str, ...] = _check_keys(keys, self._columns)
        for label, value, allowed in (
            ("on_duplicate", on_duplicate, DUPLICATE_POLICIES),
            ("unexpected", unexpected, UNEXPECTED_POLICIES),
        ):
            if value not in allowed:
                raise PipelineDefinitionError(
                    f"Schema({label}={value!r}); choose one of {', '.join(allowed)}"
                )
        self.on_duplicate = on_duplicate
        self.unexpected = unexpected

    def read_columns(self, columns: list[str] | tuple[str, ...]) -> list[str]:
        """``columns`` plus the key columns (uniqueness needs them read)."""
        return list(columns) + [k for k in self.keys_ if k not in columns]

    def __getitem__(self, name: str) -> ColumnType:
        try:
            return self._columns[name]
        except KeyError:
            raise PipelineDefinitionError(unknown_column_message(name, self._columns)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __repr__(self) -> str:
        body = ",\n".join(f"    {name!r}: {spec!r}" for name, spec in self._columns.items())
        options = "".join(f", {k}={v!r}" for k, v in self._options().items())
        return f"Schema({{\n{body}\n}}{options})"

    def _options(self) -> dict[str, Any]:
        """The non-default schema-level options (kept out of the JSON when default)."""
        out: dict[str, Any] = {}
        if self.keys_:
            out["keys"] = list(self.keys_)
            out["on_duplicate"] = self.on_duplicate
        if self.unexpected != "ignore":
            out["unexpected"] = self.unexpected
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; ``columns`` is a list so the declared order survives sorted keys."""
        columns = [[name, spec.to_dict()] for name, spec in self._columns.items()]
        return {"columns": columns, **self._options()}

    @classmethod
    def infer(cls, source: Any, *, ranges: bool = False, max_categories: int = 50) -> Schema:
        """A draft schema from a sample (DataFrame or CSV/Parquet path): print it, edit it,
        ``save`` it. Ranges stay open unless ``ranges=True`` (the sample's min/max)."""
        if _INFERRER is None:
            raise PipelineDefinitionError("Schema.infer needs fastprep.validate.infer imported")
        schema: Schema = _INFERRER(source, ranges=ranges, max_categories=max_categories)
        return schema

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the schema as JSON (``Schema.load`` reads it back)."""
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.to_dict(), handle, indent=1)
            handle.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Schema:
        """Read a schema saved by :meth:`save`."""
        with open(path, encoding="utf-8") as handle:
            return cls.from_dict(json.load(handle))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        columns: dict[str, ColumnType] = {}
        pairs = data["columns"] if "columns" in data else list(data.items())
        names = ("keys", "on_duplicate", "unexpected")
        options = {k: data[k] for k in names if "columns" in data and k in data}
        for name, spec in pairs:
            if not isinstance(spec, Mapping):
                raise PipelineDefinitionError(f"column {name!r}: malformed type {spec!r}")
            spec = dict(spec)
            kind = spec.pop("type", None)
            if kind not in COLUMN_TYPES:
                raise PipelineDefinitionError(f"column {name!r}: unknown type {kind!r}")
            columns[name] = COLUMN_TYPES[kind](**spec)
        return cls(columns, **options)


def _check_keys(keys: Any, columns: Mapping[str, ColumnType]) -> tuple[str, ...]:
    if keys is None:
        return ()
    if isinstance(keys, str) or not all(isinstance(k, str) for k in keys) or not keys:
        raise PipelineDefinitionError(f"Schema(keys={keys!r}) needs a list of column names")
    for key in keys:
        if key not in columns:
            raise PipelineDefinitionError(unknown_column_message(key, columns, "keys"))
    return tuple(keys)


_INFERRER: Callable[..., Schema] | None = None


def set_inferrer(function: Callable[..., Schema]) -> None:
    """Registered by ``fastprep.validate.infer`` (it reads data; this layer does not)."""
    global _INFERRER
    _INFERRER = function


def unknown_column_message(name: str, known: Mapping[str, Any] | list[str], where: str = "") -> str:
    """ "column 'dep_dealy' is not in the schema; did you mean 'dep_delay'?"."""
    import difflib  # on use: only an error message needs it

    names = list(known)
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    context = f" (used in {where})" if where else ""
    listing = "" if close else f"; declared columns: {', '.join(names)}"
    return f"column {name!r}{context} is not in the schema{hint}{listing}"


def column_facts(schema: Schema) -> tuple[tuple[str, Facts], ...]:
    """What validation guarantees about each column's values (for the optimizer).

    Under ``on_invalid="warn"`` nothing is guaranteed: invalid values are kept.
    """
    out = []
    for name, spec in schema.items():
        if (
            spec.on_invalid == "warn"
            or spec.ltype.is_text
            or spec.ltype in (LType.DICT, LType.LIST)
        ):
            out.append((name, UNKNOWN))
        elif isinstance(spec, Datetime):
            out.append((name, Facts(-math.inf, math.inf, spec.nullable, True)))
        elif isinstance(spec, (Float, Int)):
            finite = not (isinstance(spec, Float) and spec.allow_inf)
            lo = -math.inf if spec.min is None else float(spec.min)
            hi = math.inf if spec.max is None else float(spec.max)
            missing = spec.nullable and spec.impute is None  # imputed: never missing
            out.append((name, Facts(lo, hi, missing, finite)))
        else:  # Bool
            out.append((name, Facts(0.0, 1.0, spec.nullable, True)))
    return tuple(sorted(out))
