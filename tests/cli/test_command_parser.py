"""The command line builds the named command's parser alone; help and unknown commands
get the full one, so what users see is unchanged."""

from __future__ import annotations

import pytest

from fastprep import cli


def test_named_command() -> None:
    assert cli._command_named(["run", "p.py", "--input", "x"]) == "run"
    assert cli._command_named(["--debug", "transform", "s"]) == "transform"
    assert cli._command_named(["--help"]) is None
    assert cli._command_named(["bogus", "run"]) is None
    assert cli._command_named([]) is None


def test_one_command_parses_as_the_full_parser() -> None:
    argv = ["--debug", "run", "p.py", "-i", "data.parquet", "--backend", "auto"]
    alone = vars(cli._parser("run").parse_args(argv))
    full = vars(cli._parser().parse_args(argv))
    assert alone == full
    assert alone["handler"] is cli._run and alone["debug_main"]


def test_unknown_command_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bogus"]) == 2
    message = capsys.readouterr().err
    assert "invalid choice: 'bogus'" in message
    assert all(name in message for name in cli.COMMANDS)
