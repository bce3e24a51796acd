"""Error types and reason codes.

Every error fastprep raises derives from :class:`FastprepError`; each subclass also
inherits the builtin a caller would naturally catch (``ValueError``, ``KeyError``...),
so ``except ValueError`` keeps working for users who do not know fastprep's types.
"""

from __future__ import annotations

from enum import Enum


class FastprepError(Exception):
    """Root of every error fastprep raises on purpose."""


class PipelineDefinitionError(FastprepError, ValueError):
    """The pipeline itself is wrong: unknown column, op on the wrong type, bad argument."""


class ExprSyntaxError(PipelineDefinitionError):
    """An ``expr`` string could not be parsed or uses something outside the whitelist."""


class SchemaError(FastprepError, ValueError):
    """The data does not have the shape the schema declares (missing column, wrong dtype)."""


class DataValidationError(FastprepError, ValueError):
    """Values broke a rule whose policy is ``raise``."""


class FitError(FastprepError, ValueError):
    """A statistic could not be fitted (e.g. no non-missing value to take a median of)."""


class SourceError(FastprepError, FileNotFoundError):
    """A source path, glob or format could not be read."""


class StateFormatError(FastprepError, ValueError):
    """A saved fitted state is corrupt, tampered with, or from an unknown format version."""


class BackendError(FastprepError, NotImplementedError):
    """A backend does not implement an operation (never silently skipped)."""


class Reason(str, Enum):
    """Why a row was quarantined or a value repaired; stable strings used in reports."""

    NULL = "null"
    TYPE = "type"
    BELOW_MIN = "below_min"
    ABOVE_MAX = "above_max"
    NOT_FINITE = "not_finite"
    NOT_INTEGER = "not_integer"
    CATEGORY = "category"
    TOO_LONG = "too_long"
    NONFINITE_FEATURE = "nonfinite_feature"
    NONFINITE_TARGET = "nonfinite_target"
    INEXACT_INT = "inexact_int"
    ENCODING = "encoding"
    ALL_NULL = "all_null"
    CONSTANT = "constant"
    EMPTY = "empty"
    DICT_KEY_TYPE = "dict_key_type"
    DICT_VALUE_TYPE = "dict_value_type"
    DICT_MIXED_TYPES = "dict_mixed_types"
    DICT_DUPLICATE_KEY = "dict_duplicate_key"
    UNEXPECTED_COLUMN = "unexpected_column"
    DUPLICATE_KEY = "duplicate_key"
    OVERFLOW = "overflow"
    TIMEZONE = "timezone"


class JobError(FastprepError, RuntimeError):
    """A distributed job could not finish (a partition killed its workers, shards missing)."""


class OutputError(FastprepError, OSError):
    """An output folder could not be written (a file in its place, no permission, the disk
    full); the message names the folder and says whether its earlier output is kept."""


class FindingWarning(UserWarning):
    """A validation rule whose action is ``warn`` was broken in a run (a constant column,
    an undeclared column, values beyond a bound set to warn): issued once per rule per run
    with the run's total, as scikit-learn warns of its data. The report lists every finding;
    ``warnings.filterwarnings("ignore", category=fp.FindingWarning)`` silences them (the CLI
    does, since it prints the report)."""


class MemoryBudgetError(FastprepError, MemoryError):
    """The memory pre-flight predicts a run would not fit the memory budget (nothing was
    loaded); the message says what, by how much, and the options."""


class SparseOutputError(FastprepError, ValueError):
    """A dense-only hand-off (a DataFrame) was asked of a sparse X; the message names the
    sparse blocks and the options."""
