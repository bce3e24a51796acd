"""Logical column types the plan reasons about (independent of any dataframe library)."""

from __future__ import annotations

from enum import Enum


class LType(str, Enum):
    """Logical type of a column or an expression result."""

    FLOAT = "float"
    INT = "int"
    BOOL = "bool"
    CATEGORY = "category"
    STRING = "string"
    #: a column of ``{str: number | str}`` dicts (``fp.DictOf``), hashed or vectorized
    DICT = "dict"
    #: a column of lists of strings (``fp.ListOf``, Parquet ``list<string>``): tags
    LIST = "list"

    @property
    def is_numeric(self) -> bool:
        return self in (LType.FLOAT, LType.INT, LType.BOOL)

    @property
    def is_text(self) -> bool:
        return self in (LType.CATEGORY, LType.STRING)
