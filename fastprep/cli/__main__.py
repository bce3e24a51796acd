"""``python -m fastprep.cli`` is the ``fastprep`` command, as ``python -m fastprep`` is."""

from fastprep.cli import entry

entry()
