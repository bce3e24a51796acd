"""``python -m fastprep`` is the ``fastprep`` command."""

from fastprep.cli import entry

entry()
