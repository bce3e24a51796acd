"""Validate and flatten a column of dicts (``fp.DictOf``) into a :class:`DictColumn`.

One pass over the Python objects collects every row's keys and values into flat lists;
every rule after that is a mask over entries, gathered to rows with one ``bincount``:

- ``type``: the row is not a dict (a list of ``(key, value)`` pairs — what pyarrow gives
  for a ``map`` column — counts as one, as does a list of ``{"key", "value"}`` structs);
- ``null``: the row is missing (None/NaN) and the column is not ``nullable``;
- ``dict_key_type``: a key is not a ``str``; ``dict_duplicate_key``: a pair list repeats a key;
- ``dict_value_type``: a value is neither a number nor a string (or not the declared one);
- ``dict_mixed_types``: a key has string values in some rows and numbers in others (the
  minority rows are flagged; ties count as numbers);
- ``not_finite``: a number is NaN or ±inf; ``encoding``: a key or string value is not
  valid Unicode.

A ``None`` value means the key is absent. Bad entries are dropped from the flattened column
(their rows are quarantined under the default policy, or kept without them under ``warn``).
"""

from __future__ import annotations

import numbers
from itertools import chain, compress, repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from fastprep.api.schema import DictOf
from fastprep.data import text_encode
from fastprep.data.dict_column import DictColumn
from fastprep.data.pandas_objects import is_pandas_na
from fastprep.errors import Reason
from fastprep.native.arena import ARENA

if TYPE_CHECKING:
    import pandas as pd

Violation = tuple[str, np.ndarray, str]

_STR, _NUM, _ABSENT, _BAD = 0, 1, 2, 3
_VALUE_KIND: dict[type, int] = {str: _STR, float: _NUM, int: _NUM, bool: _NUM, type(None): _ABSENT}
_VALUE_KIND.update({t: _NUM for t in (np.float64, np.float32, np.int64, np.int32, np.bool_)})
_EMPTY: dict[str, Any] = {}


def check_dicts(
    name: str, series: pd.Series, spec: DictOf
) -> tuple[DictColumn, list[Violation], tuple[bool, bool]]:
    """The flattened column, the rules it broke, and the fit checks (all missing, constant)."""
    rows, missing, not_dict, dup_rows = _rows(series.to_numpy(dtype=object))
    n = len(rows)
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    keys = list(chain.from_iterable(rows))
    values = list(chain.from_iterable(map(dict.values, rows)))
    entry_rows = np.repeat(np.arange(n, dtype=np.int64), lengths)

    key_strings, bad_key, bad_key_text = _strings(keys, check_type=True)
    kind = _value_kinds(values)
    numbers_, not_finite = _numbers(values, kind)
    str_pos = np.flatnonzero(kind == _STR)
    texts, _, bad_text = _strings(list(compress(values, (kind == _STR).tolist())), check_type=False)
    bad_value_text = ARENA.zeros(len(values), np.bool_)
    bad_value_text[str_pos] = bad_text

    key_codes, key_uniques = text_encode.encode(pa.chunked_array([key_strings]))
    wrong, wrong_detail, mixed = _type_rules(spec, kind, key_codes, bad_key | bad_key_text)

    def to_rows(entry_mask: np.ndarray) -> np.ndarray:
        return np.bincount(entry_rows[entry_mask], minlength=n).astype(bool)

    rules: list[Violation] = []
    if not spec.nullable:
        rules.append((Reason.NULL.value, missing, "(missing value in a non-nullable column)"))
    rules.append((Reason.TYPE.value, not_dict, "(not a dict)"))
    rules.append((Reason.DICT_KEY_TYPE.value, to_rows(bad_key), "(a key is not a str)"))
    rules.append((Reason.DICT_DUPLICATE_KEY.value, dup_rows, "(a key appears twice in the row)"))
    bad_value = kind == _BAD
    rules.append((Reason.DICT_VALUE_TYPE.value, to_rows(bad_value | wrong), wrong_detail))
    detail = "(a key has string values in some rows and numbers in others)"
    rules.append((Reason.DICT_MIXED_TYPES.value, to_rows(mixed), detail))
    rules.append((Reason.NOT_FINITE.value, to_rows(not_finite), "(a value is NaN or ±inf)"))
    detail = "(a key or value is not valid Unicode)"
    rules.append((Reason.ENCODING.value, to_rows(bad_key_text | bad_value_text), detail))

    drop = bad_key | bad_key_text | bad_value | wrong | mixed | not_finite | bad_value_text
    keep = ~drop & (kind != _ABSENT)
    column = _flattened(keep, entry_rows, n, key_codes, key_uniques, kind, str_pos, texts, numbers_)
    return column, rules, (bool(missing.all()) if n else False, False)


def _rows(objects: np.ndarray) -> tuple[list[dict], np.ndarray, np.ndarray, np.ndarray]:
    """Every row as a dict (missing and non-dict rows as ``{}``) and the row masks."""
    n = len(objects)
    rows: list[dict] = objects.tolist()
    missing = np.zeros(n, dtype=bool)
    not_dict = np.zeros(n, dtype=bool)
    dup = np.zeros(n, dtype=bool)
    # one C-level pass when every row is a plain dict (the common case)
    odd = (
        []
        if set(map(type, rows)) <= {dict}
        else [i for i, r in enumerate(rows) if type(r) is not dict]
    )
    for i in odd:
        row = rows[i]
        converted, state = _as_dict(row)
        rows[i] = converted
        missing[i] = state == "missing"
        not_dict[i] = state == "not_dict"
        dup[i] = state == "duplicate"
    return rows, missing, not_dict, dup


def _as_dict(row: Any) -> tuple[dict, str]:
    if row is None or is_pandas_na(row) or (isinstance(row, float) and row != row):
        return _EMPTY, "missing"
    if isinstance(row, dict):
        return dict(row), "ok"
    if isinstance(row, (list, tuple, np.ndarray)):
        pairs = [_pair(p) for p in row]
        if all(p is not None for p in pairs):
            out = dict(pairs)  # type: ignore[arg-type]
            return out, "ok" if len(out) == len(pairs) else "duplicate"
    return _EMPTY, "not_dict"


def _pair(item: Any) -> tuple[Any, Any] | None:
    """A ``(key, value)`` tuple (Arrow map) or ``{"key": k, "value": v}`` (list of structs)."""
    if isinstance(item, tuple) and len(item) == 2:
        return item
    if isinstance(item, dict) and item.keys() == {"key", "value"}:
        return item["key"], item["value"]
    return None


def _value_kinds(values: list[Any]) -> np.ndarray:
    """Per value: string, number, absent (None) or bad; the common types by one C-level map."""
    kinds = np.fromiter(
        map(_VALUE_KIND.get, map(type, values), repeat(-1)), dtype=np.int8, count=len(values)
    )
    for i in np.flatnonzero(kinds < 0).tolist():  # subclasses, numpy scalars, pd.NA, ...
        kinds[i] = _value_kind(values[i])
    return kinds


def _value_kind(value: Any) -> int:
    kind = _VALUE_KIND.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, str):
        return _STR
    if isinstance(value, numbers.Real):
        return _NUM
    return _ABSENT if is_pandas_na(value) else _BAD


def _numbers(values: list[Any], kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 per entry (NaN where not a number) and the non-finite numbers' mask."""
    out = ARENA.empty(len(values), np.float64)
    out.fill(np.nan)
    pos = np.flatnonzero(kind == _NUM)
    try:
        out[pos] = np.fromiter(
            compress(values, (kind == _NUM).tolist()), dtype=np.float64, count=len(pos)
        )
    except (OverflowError, TypeError, ValueError):  # an int beyond float64's range
        for i in pos.tolist():
            try:
                out[i] = float(values[i])
            except (OverflowError, TypeError, ValueError):
                out[i] = np.inf
    not_finite = ARENA.zeros(len(values), np.bool_)
    not_finite[pos] = ~np.isfinite(out[pos])
    return out, not_finite


def _strings(items: list[Any], check_type: bool) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Arrow strings (bad ones as ""), and masks: not a str, not valid Unicode."""
    n = len(items)
    no = np.zeros(n, dtype=bool)
    try:
        return pa.array(items, type=pa.large_string()), no, no
    except (pa.ArrowTypeError, pa.ArrowInvalid, UnicodeEncodeError, TypeError):
        pass
    wrong = np.fromiter((not isinstance(s, str) for s in items), dtype=bool, count=n)
    bad_text = np.fromiter((isinstance(s, str) and not _utf8(s) for s in items), bool, count=n)
    fixed = [s if ok else "" for s, ok in zip(items, ~(wrong | bad_text))]
    return pa.array(fixed, type=pa.large_string()), wrong if check_type else no, bad_text


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _type_rules(
    spec: DictOf, kind: np.ndarray, key_codes: np.ndarray, bad_key: np.ndarray
) -> tuple[np.ndarray, str, np.ndarray]:
    """(entries of the wrong declared type, its detail, entries of a key's minority type)."""
    none = np.zeros(len(kind), dtype=bool)
    if spec.values is not None:
        expected = _STR if spec.values == "string" else _NUM
        other = _NUM if expected == _STR else _STR
        return kind == other, f"(not a {spec.values}, or not a number or string)", none
    detail = "(not a number or a string)"
    typed = ((kind == _STR) | (kind == _NUM)) & ~bad_key
    if not typed.any():
        return none, detail, none
    size = int(key_codes.max()) + 1
    n_str = np.bincount(key_codes[typed & (kind == _STR)], minlength=size)
    n_num = np.bincount(key_codes[typed & (kind == _NUM)], minlength=size)
    key_is_str = n_str > n_num
    entry_is_str = key_is_str[key_codes]
    mixed = typed & (entry_is_str != (kind == _STR))
    return none, detail, mixed


def _flattened(keep, entry_rows, n, key_codes, key_uniques, kind, str_pos, texts, numbers_):
    """The kept entries as a DictColumn (string values dictionary-encoded)."""
    value_codes = ARENA.empty(len(kind), np.int32)
    value_codes.fill(-1)
    if len(str_pos):
        codes, value_uniques = text_encode.encode(pa.chunked_array([texts]))
        value_codes[str_pos] = codes
    else:
        value_uniques = pa.array([], type=pa.large_string())
    n_kept = int(np.count_nonzero(keep))
    kept_rows = _compress(keep, entry_rows, n_kept)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(kept_rows, minlength=n), out=offsets[1:])
    return DictColumn(
        offsets,
        _compress(keep, np.asarray(key_codes, dtype=np.int32), n_kept),
        key_uniques,
        _compress(keep, value_codes, n_kept),
        value_uniques,
        _compress(keep, numbers_, n_kept),  # NaN wherever the entry is not a number
    )


def _compress(mask: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """``values[mask]`` into retained memory (fresh pages cost more than the gather)."""
    return np.compress(mask, values, out=ARENA.empty(count, values.dtype))
