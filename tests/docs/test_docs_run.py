"""Every code block of README.md and docs/*.md runs as written.

The rules a block follows (the README and docs are written to them):

- A ```python block is one script, run in a fresh ``python`` process: every block stands
  alone (a reader can copy any one of them), so blocks never share a namespace. A block that
  needs a cluster starts its own ``distributed.LocalCluster`` (under
  ``if __name__ == "__main__":``, as a script must).
- A ```bash / ```console / ```sh / plain ``` block holds commands, one per line (or joined
  by ``&&``). A command starting with ``fastprep `` runs as ``python -m fastprep ...`` (the
  same entry point); ``python -m fastprep`` lines run as written. Set-up lines (``pip
  install``, ``python -m pytest``) are not run: the test runs inside the installed project
  and is part of that suite. Benchmark commands (``fastprep bench``, ``python
  benchmarks/...``) are never run here (minutes of a shared machine): their blocks must be
  marked not-run. Any other line fails the test.
- A block preceded by ``<!-- output -->`` is the standard output of the last block run
  before it in the same file (blocks marked not-run in between are passed over) and is
  compared with what that run printed: ``...`` in the shown text matches anything within a
  line (a line of only ``...`` matches any number of lines), and a number of seconds
  (``0.014s``, ``0.5 s``) matches any number of seconds. Everything else must be identical,
  so a change of the output's shape shows up here as a failure.
- In a python block, a ``print(...)`` line whose trailing comment starts like a value (``(``,
  ``[``, ``{``, a digit or a quote: ``print(out.X.shape)  # (19430, 25)``) shows what that
  print writes: those lines must appear in the block's output in order, with the same
  wildcards. A comment starting otherwise is prose.
- A block preceded by ``<!-- not-run: REASON -->`` is not run (a synopsis, a diagram, a
  captured output whose figures vary per machine, an hours-long benchmark); the reason is
  required.
- A block preceded by ``<!-- slow -->`` runs only with ``-m slow``.

Each block runs with its working directory a fresh temporary folder holding symlinks to the
repository's ``pipelines/``, ``data_samples/`` and ``benchmarks/``, so relative paths read
the bundled files and every write (``out/``, ``shards/``) lands in the temporary folder.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = ("pipelines", "data_samples", "benchmarks")
TIMEOUT = 300
FENCE = re.compile(r"^\s*```(\S*)\s*$")  # also indented, inside a list item
MARKER = re.compile(r"^<!--\s*(output|slow|not-run)\s*(?::\s*(.*?))?\s*-->\s*$")
#: lines a command block may hold that the test does not run (it runs inside the installed
#: project, as part of the very suite these lines start)
SETUP = (re.compile(r"^python -m pip install "), re.compile(r"^python -m pytest\b"))
RUN = re.compile(r"^(fastprep|python -m fastprep)\b")
#: benchmarks take minutes on a shared machine: never run here, their blocks must say not-run
BENCH = re.compile(
    r"^(fastprep bench|python -m fastprep bench|python -m benchmarks|python benchmarks/)"
)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    marker: str  # "", "output", "slow" or "not-run"
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"


def read_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file with the marker comment just above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith("```"))
        above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(above.strip())
        kind, reason = (marker.group(1), marker.group(2) or "") if marker else ("", "")
        text = textwrap.dedent("\n".join(lines[i + 1 : end]) + "\n")
        blocks.append(Block(path, i + 1, opening.group(1), text, kind, reason))
        i = end + 1
    return blocks


BLOCKS = [block for path in DOCS for block in read_blocks(path)]
RUNNABLE = [b for b in BLOCKS if b.marker in ("", "slow")]


def shown_outputs() -> dict[Block, list[Block]]:
    """Each run block's shown outputs: an output block belongs to the last block run
    before it in the same file."""
    shown: dict[Block, list[Block]] = {}
    for path in DOCS:
        source = None
        for block in (b for b in BLOCKS if b.path == path):
            if block.marker == "output":
                assert source is not None, f"{block.id}: output of no block run before it"
                shown.setdefault(source, []).append(block)
            elif block.marker != "not-run":
                source = block
    return shown


SHOWN = shown_outputs()


def _param(block: Block):
    marks = [pytest.mark.slow] if block.marker == "slow" else []
    return pytest.param(block, id=block.id, marks=marks)


def commands(block: Block) -> list[str]:
    """The command lines of a shell block to run (set-up lines left out)."""
    run = []
    lines = [part.strip() for line in block.text.splitlines() for part in line.split("&&")]
    for line in lines:
        if not line or line.startswith("#"):
            continue
        if any(p.match(line) for p in SETUP):
            continue
        assert not BENCH.match(line), (
            f"{block.id}: {line!r} is a benchmark (minutes of a shared machine): mark the block "
            "<!-- not-run: REASON -->"
        )
        assert RUN.match(line), (
            f"{block.id}: {line!r} is neither a fastprep/python command the test can run nor "
            "a set-up line; mark the block <!-- not-run: REASON --> if it is not a command"
        )
        run.append(line)
    return run


def workdir(tmp_path: Path) -> Path:
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    return tmp_path


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("DASK_SCHEDULER_ADDRESS", None)  # a block starts its own cluster
    env.pop("FASTPREP_SCHEDULER", None)
    return env


def run_block(block: Block, cwd: Path) -> str:
    """Run a block as its rules say; returns its standard output."""
    if block.lang == "python":
        script = cwd / f"block_{block.line}.py"
        script.write_text(block.text, encoding="utf-8")
        argvs = [[sys.executable, script.name]]
    else:
        argvs = [to_argv(line) for line in commands(block)]
    printed = []
    for argv in argvs:
        done = subprocess.run(
            argv, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=TIMEOUT
        )
        assert done.returncode == 0, (
            f"{block.id} failed ({' '.join(argv)}), exit {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
        printed.append(done.stdout)
    return "".join(printed)


def to_argv(line: str) -> list[str]:
    argv = shlex.split(line, comments=True)
    if argv[0] == "fastprep":
        return [sys.executable, "-m", "fastprep", *argv[1:]]
    assert argv[0] == "python"
    return [sys.executable, *argv[1:]]


PRINTED = re.compile(r"^\s*print\(.*\)\s+#\s?(?P<shown>[(\[{0-9'\"].*)$")


def printed_comments(block: Block) -> list[str]:
    """The outputs a python block's ``print(...)  # value`` comments show, in order."""
    if block.lang != "python":
        return []
    found = (PRINTED.match(line) for line in block.text.splitlines())
    return [m.group("shown").rstrip() for m in found if m]


def output_pattern(shown: str) -> re.Pattern[str]:
    """The shown output as a regular expression (see the module docstring)."""
    parts = []
    for line in shown.rstrip("\n").splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pieces = re.split(r"(\.\.\.|\d+(?:\.\d+)?(?:e-?\d+)? ?s\b)", line.rstrip())
        pattern = ""
        for i, piece in enumerate(pieces):
            if i % 2 == 0:
                pattern += re.escape(piece)
            elif piece == "...":
                pattern += r"[^\n]*?"
            else:
                pattern += r"\d+(?:\.\d+)?(?:e-?\d+)? ?s\b"
        parts.append(pattern + r"[ \t]*\n")
    return re.compile("".join(parts) + r"\Z")


def test_every_block_is_classified() -> None:
    """Blocks are python, shell commands, or marked; a not-run block says why."""
    assert len(BLOCKS) > 15
    for block in BLOCKS:
        if block.marker == "not-run":
            assert block.reason, f"{block.id}: <!-- not-run: REASON --> needs its reason"
        elif block.marker == "output":
            assert any(block in outputs for outputs in SHOWN.values()), block.id
        elif block.lang != "python":
            assert block.lang in ("", "bash", "console", "sh"), f"{block.id}: {block.lang}"
            assert commands(block), f"{block.id}: no command to run; mark it"


def test_shown_output_matching() -> None:
    """``...`` and seconds are the only wildcards: any other difference is a mismatch."""
    shown = "rows: 20,000 in, ...\nstages: read 0.014s, fit 0.5 s\n...\nwrote out: X.npz\n"
    pattern = output_pattern(shown)
    assert pattern.match(
        "rows: 20,000 in, 19 out\nstages: read 1.5s, fit 2e-05 s\nwrote out: X.npz\n"
    )
    assert pattern.match("rows: 20,000 in, x\nstages: read 0s, fit 3 s\na\nb\nwrote out: X.npz\n")
    assert not pattern.match(
        "rows: 20,001 in, 1\nstages: read 0.014s, fit 0.5 s\nwrote out: X.npz\n"
    )
    assert not pattern.match(
        "rows: 20,000 in, 1\nstages: read 0.014s, fit 0.5 s\nwrote out: X.npy\n"
    )
    assert not pattern.match("rows: 20,000 in, 1\nstages: read 0.014s\nwrote out: X.npz\n")


def test_print_comments_that_show_a_value() -> None:
    text = "print(out.X.shape)  # (19430, 25)\nprint(out.report)  # rows, findings\n"
    block = Block(Path("x.md"), 1, "python", text, "", "")
    assert printed_comments(block) == ["(19430, 25)"]


def test_the_readme_pipeline_is_the_bundled_file() -> None:
    """The README's DSL block shows ``pipelines/flights.py``: it must not drift from it."""
    shown = next(b for b in BLOCKS if b.text.startswith("# pipelines/flights.py\n"))
    code = (REPO / "pipelines" / "flights.py").read_text(encoding="utf-8")
    body = code[code.index("import fastprep") :]
    strip = re.compile(r"\s+#.*$|  # fmt: skip", re.M)
    shown_body = shown.text.split("\n", 1)[1]
    assert strip.sub("", body).split() == strip.sub("", shown_body).split()


@pytest.mark.parametrize("block", [_param(b) for b in RUNNABLE])
def test_block_runs(block: Block, tmp_path: Path) -> None:
    printed = run_block(block, workdir(tmp_path))
    lines = iter(printed.splitlines())
    for comment in printed_comments(block):
        pattern = output_pattern(comment)
        assert any(pattern.match(line + "\n") for line in lines), (
            f"{block.id}: no printed line after the previous shows {comment!r}:\n{printed}"
        )
    for shown in SHOWN.get(block, []):
        assert output_pattern(shown.text).match(printed), (
            f"{shown.id}: the shown output is not what {block.id} printed:\n{printed}"
        )
