"""Progress per stage of a cluster job, counted over completed partition tasks.

A job's stages are its passes ("fit level 0", "fit level 0 median", "fit level 1",
"transform", and "count rows" for CSV sources); each is one task per partition, so the
progress of a stage is the number of its partition tasks that have finished, ticked as
:func:`distributed.as_completed` yields them (the loop that also stops the job on the first
failure). ``progress=`` accepts:

- ``False`` / ``None``: nothing (the API's default: a library does not write to stderr
  unasked, e.g. in a log-collected batch job);
- ``True``: a tqdm bar per stage on stderr;
- ``"auto"``: a bar when stderr is a terminal (the CLI's default);
- a callable ``(stage, done, total)``: called once with ``done == initial`` when the stage
  starts and after each completed partition (for a notebook widget, a log line, a test).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from fastprep.errors import PipelineDefinitionError

#: ``(stage, done, total)``
ProgressCallback = Callable[[str, int, int], None]
ProgressArg = bool | str | ProgressCallback | None


class Tracker:
    """One stage's counter; ``tick()`` per completed partition, ``close()`` at the end."""

    def __init__(self, stage: str, total: int, initial: int = 0,
                 callback: ProgressCallback | None = None, bar: Any = None) -> None:  # fmt: skip
        self.stage, self.total, self.done = stage, total, initial
        self._callback, self._bar = callback, bar
        if self._callback is not None:
            self._callback(stage, self.done, total)

    def tick(self) -> None:
        self.done += 1
        if self._callback is not None:
            self._callback(self.stage, self.done, self.total)
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class Progress:
    """Makes one :class:`Tracker` per stage, as ``progress=`` asks."""

    def __init__(self, progress: ProgressArg = False) -> None:
        if progress == "auto":
            progress = _stderr_is_terminal()
        elif isinstance(progress, str):
            raise PipelineDefinitionError(
                f"progress={progress!r}: use True, False, 'auto' or a callable (stage, done, total)"
            )
        self._mode = progress or None

    @property
    def enabled(self) -> bool:
        return self._mode is not None

    def stage(self, stage: str, total: int, initial: int = 0) -> Tracker:
        if self._mode is None:
            return Tracker(stage, total, initial)
        if callable(self._mode):
            return Tracker(stage, total, initial, callback=self._mode)
        return Tracker(stage, total, initial, bar=_bar(stage, total, initial))


def _stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def _bar(stage: str, total: int, initial: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        raise PipelineDefinitionError(
            "progress bars need tqdm: pip install 'fastprep[distributed]' (or pass "
            "progress=False, or a callable (stage, done, total))"
        ) from None
    return tqdm(total=total, initial=initial, desc=stage, unit="partition", file=sys.stderr,
                dynamic_ncols=True, leave=True)  # fmt: skip
