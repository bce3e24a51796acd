"""Load a pipeline file: the user's own Python that defines one ``fp.Pipeline``."""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import TypeVar

from fastprep.api.lookup import JoinedSchema
from fastprep.errors import FastprepError, PipelineDefinitionError

P = TypeVar("P")


def load_pipeline_file(path: str | os.PathLike[str], kind: type[P]) -> P:
    """Run a pipeline file (the user's own Python) and return its ``fp.Pipeline``.

    The file's variable ``pipeline`` is used; otherwise its only instance of ``kind`` (the
    pipeline class, passed in by the layer that defines it).
    A relative ``sample=`` path, and a lookup table's relative path, are resolved
    against the file's folder.
    """
    file = Path(path)
    if not file.is_file():
        raise PipelineDefinitionError(f"pipeline file {str(file)!r} does not exist")
    try:
        namespace = runpy.run_path(str(file), run_name="__fastprep_pipeline__")
    except FastprepError:
        raise
    except Exception as exc:  # the user's own file failed: say where, without our internals
        raise PipelineDefinitionError(
            f"{file}: running the pipeline file failed{_where(exc, file)}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    pipeline = namespace.get("pipeline")
    if not isinstance(pipeline, kind):
        found = [v for v in namespace.values() if isinstance(v, kind)]
        if len(found) != 1:
            raise PipelineDefinitionError(
                f"{file}: define exactly one fp.Pipeline, ideally named 'pipeline' "
                f"(found {len(found)})"
            )
        pipeline = found[0]
    if pipeline.sample is not None and not os.path.isabs(pipeline.sample):
        # relative to the pipeline file, never to the current folder: the same file
        # names the same data wherever the command is run from
        pipeline.sample = str((file.parent / pipeline.sample).resolve())
    schema = getattr(pipeline, "schema", None)
    if isinstance(schema, JoinedSchema):  # lookup tables' relative paths: the same rule
        pipeline.schema = schema.resolved(file.parent)  # type: ignore[attr-defined]
    return pipeline


def _where(exc: BaseException, file: Path) -> str:
    """`` (name.py, line N)``: the last line of ``file`` the traceback passes through (a syntax
    error names its own line in its message)."""
    import traceback

    own = os.path.abspath(file)
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
             if os.path.abspath(f.filename) == own]  # fmt: skip
    return f" ({file.name}, line {lines[-1]})" if lines else ""
