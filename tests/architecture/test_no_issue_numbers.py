"""Code says what it does, not which issue or decision asked for it: no ``#12``, ``issue 12``
or ``decision 40`` in the comments, docstrings and strings (printed text included) of
``fastprep/`` and ``benchmarks/*.py``. The history lives in ``git log`` and docs/decisions.md.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from support import REPO

FILES = sorted([*(REPO / "fastprep").rglob("*.py"), *(REPO / "benchmarks").glob("*.py")])
REFERENCE = re.compile(
    r"(?<![\w&])#\d+\b"  # "#12" (an issue); "&#12" is an HTML entity
    r"|\bissues?\s+#?\d+"  # "issue 12", "issues #3"
    r"|\bdecisions?\s+#?\d+",  # "decision 40"
    re.IGNORECASE,
)
#: text that looks like a reference and is not one: (file relative to the repository, text)
ALLOWED: set[tuple[str, str]] = set()


def references(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every issue/decision reference in a comment or a string of ``path``."""
    found = []
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    for token in tokens:
        if token.type not in (tokenize.COMMENT, tokenize.STRING, *_fstring_parts()):
            continue
        for match in REFERENCE.finditer(token.string):
            found.append((token.start[0] + token.string.count("\n", 0, match.start()), match[0]))
    return found


def _fstring_parts() -> tuple[int, ...]:
    """Python 3.12 tokenizes f-strings into parts; the middle holds the text."""
    return tuple(getattr(tokenize, name) for name in ("FSTRING_MIDDLE",) if hasattr(tokenize, name))


def test_no_issue_or_decision_numbers_in_comments_and_strings() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {text!r}"
        for path in FILES
        for line, text in references(path)
        if (str(path.relative_to(REPO)), text) not in ALLOWED
    ]
    assert found == [], "say what the code does instead:\n" + "\n".join(found)


def test_the_pattern_finds_references() -> None:
    hits = [
        "# fixed in #12",
        "see issue 3",
        "Issue #9: target",
        "decision 40 says",
        "decisions 29",
    ]
    misses = ["color #1f77b4", "&#12;", "tissue 3", "the decision", "n_issues = 2", "row #", "#x"]
    assert [text for text in hits if not REFERENCE.search(text)] == []
    assert [text for text in misses if REFERENCE.search(text)] == []
