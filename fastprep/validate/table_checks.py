"""Checks of the table as a whole: columns the schema does not declare, duplicated keys.

Unexpected columns are found from the source's column names (a Parquet schema, a CSV
header, a DataFrame's columns), never by reading their values: column pruning still reads
only the columns the pipeline uses. Duplicate keys are found with one hash pass
(``pandas.DataFrame.duplicated``) over the coerced key columns (text as its codes).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from fastprep.api.schema import Schema
from fastprep.data.columns import Column, TextColumn
from fastprep.errors import DataValidationError, Reason, SchemaError
from fastprep.validate.findings import Finding, make_finding

if TYPE_CHECKING:
    pass

#: at DEBUG: the run's alert logs each finding once (see ``fastprep.validate.validator``)
log = logging.getLogger("fastprep.validate")

UNEXPECTED_DETAIL = "(not declared in the schema: not read)"


def unexpected_column_findings(
    schema: Schema, present: list[str] | None, phase: str = "transform"
) -> list[Finding]:
    """One finding per source column the schema does not declare (``schema.unexpected``).

    ``ignore`` (default): reported, not logged; ``warn``: also logged (and alerted);
    ``raise``: a :class:`SchemaError` listing them. ``present`` None: names unknown.
    """
    if not present:
        return []
    extra = [str(c) for c in present if c not in schema]
    if not extra:
        return []
    if schema.unexpected == "raise":
        raise SchemaError(
            f"source has {len(extra)} column(s) the schema does not declare: {extra[:20]}; "
            "declare them, drop them from the source, or use fp.Schema(..., unexpected='ignore')"
        )
    findings = [
        Finding(name, Reason.UNEXPECTED_COLUMN.value, 1, schema.unexpected,
                detail=UNEXPECTED_DETAIL, phase=phase)
        for name in extra
    ]  # fmt: skip
    if schema.unexpected == "warn":
        log.debug(
            "source has %d column(s) the schema does not declare (not read): %s",
            len(extra), ", ".join(extra[:20]),
        )  # fmt: skip
    return findings


def duplicate_key_mask(columns: list[Column]) -> np.ndarray:
    """True where a row's key (all of ``columns``) equals an earlier row's.

    Rows with a missing key value are never duplicates (missing is not a value);
    ``-0.0`` equals ``0.0``. Vectorized: one hash pass over the columns.
    """
    import pandas as pd

    parts: dict[str, np.ndarray] = {}
    missing = np.zeros(len(columns[0]) if columns else 0, dtype=bool)
    for i, column in enumerate(columns):
        if isinstance(column, TextColumn):
            codes = np.asarray(column.codes)
            missing |= codes < 0
            parts[str(i)] = codes
        else:
            values = np.asarray(column)
            if values.dtype.kind == "f":
                missing |= np.isnan(values)
                values = values + 0.0  # -0.0 + 0.0 is 0.0: one key, not two
            parts[str(i)] = values
    if len(parts) == 1:
        duplicated = pd.Series(next(iter(parts.values()))).duplicated(keep="first")
    else:
        duplicated = pd.DataFrame(parts).duplicated(keep="first")
    mask = duplicated.to_numpy(dtype=bool)
    if missing.any():  # the missing rows may have marked each other as duplicates
        mask = mask & ~missing
    return mask


def duplicate_key_finding(
    schema: Schema, coerced: dict[str, Column], ids: np.ndarray, phase: str
) -> tuple[Finding, np.ndarray] | None:
    """The duplicate-key finding and its mask (None: no key declared or no duplicate).

    ``raise`` (default) raises here; ``quarantine`` sets aside every repeat after the first
    occurrence; ``warn`` logs and keeps them.
    """
    if not schema.keys_ or not len(ids):
        return None
    mask = duplicate_key_mask([coerced[k] for k in schema.keys_])
    if not mask.any():
        return None
    label = "+".join(schema.keys_)
    detail = "(the key repeats an earlier row's; the first occurrence is kept)"
    finding = make_finding(
        label, Reason.DUPLICATE_KEY.value, mask, ids, schema.on_duplicate, detail=detail,
        phase=phase,
    )  # fmt: skip
    if schema.on_duplicate == "raise":
        raise DataValidationError(
            f"{finding.message()}\ndeduplicate the source, or declare "
            "fp.Schema(..., on_duplicate='quarantine') to set the repeats aside"
        )
    if schema.on_duplicate == "warn":
        log.debug(finding.message())
    return finding, mask
