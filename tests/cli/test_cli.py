"""The ``fastprep`` command line end to end, as subprocesses, on the bundled samples.

Interpreter start-up dominates a CLI run, so the module fixture launches the subprocess
scenarios (``python -m fastprep.cli`` and the ``fastprep`` console script) at once and the
tests then check their results; further options and error paths call ``main`` in-process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from support import assert_same_matrix

import fastprep as fp

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "flights.py"
SAMPLE = REPO / "data_samples" / "flights.parquet"
BROKEN = REPO / "data_samples" / "flights_broken.csv"
DENSE_PIPELINE = f"""
import fastprep as fp

pipeline = fp.Pipeline(
    schema=fp.Schema({{
        "distance": fp.Float(),
        "origin": fp.Category(),
        "arr_delay": fp.Float(nullable=True),
    }}),
    features=[
        fp.col("distance") >> fp.Standardize(),
        fp.col("origin") >> fp.OneHot(),
    ],
    target="arr_delay",
    sample={str(SAMPLE)!r},
)
"""
#: a pipeline file that leaves work for the interpreter's exit: an atexit handler and a
#: non-daemon thread still running when the command returns (the CLI's quick exit must
#: wait for both, as a normal exit does)
EXIT_WORK = """
import atexit, threading, time
from pathlib import Path

here = Path(__file__).parent
atexit.register(lambda: (here / "atexit.done").write_text("ok"))

def _late():
    time.sleep(1.0)
    (here / "thread.done").write_text("ok")

threading.Thread(target=_late).start()
"""
TYPO_PIPELINE = """
import fastprep as fp
pipeline = fp.Pipeline(schema=fp.Schema({'distance': fp.Float()}), features=[fp.col('distnce')])
"""


def module_command(*args) -> list[str]:
    return [sys.executable, "-m", "fastprep.cli", *map(str, args)]


def console_script() -> str | None:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which("fastprep", path=path)


@pytest.fixture(scope="module")
def cli(tmp_path_factory, _flights_sample_cached):
    """Run every CLI scenario concurrently; returns ``(results by name, root folder)``."""
    from fastprep.cli import load_pipeline_file

    root = tmp_path_factory.mktemp("cli")
    fitted = load_pipeline_file(PIPELINE).fit(_flights_sample_cached)
    fitted.save(root / "api.fastprep")

    jobs: dict[str, tuple[list[str], Path]] = {
        "default": (
            module_command("run", "pipelines/flights.py", "--output", root / "default"),
            REPO,
        ),
        "transform": (
            module_command(
                "transform", root / "api.fastprep", "--input", BROKEN, "--output", root / "t"
            ),
            root,
        ),
        "missing_input": (
            module_command(
                "run",
                "pipelines/flights.py",
                "--input",
                "data_samples/missing.parquet",
                "--output",
                root / "missing",
            ),
            REPO,
        ),
    }
    jobs["transform_default_folder"] = (
        module_command("transform", "default/pipeline.fastprep", "--input", BROKEN),
        root,
    )
    script = console_script()
    if script is not None:
        jobs["console"] = ([script, "run", str(PIPELINE), "--output", str(root / "console")], root)
    exit_dir = root / "exit_work"
    exit_dir.mkdir()
    (exit_dir / "pipeline.py").write_text(textwrap.dedent(DENSE_PIPELINE) + EXIT_WORK)
    jobs["exit_work"] = (
        [sys.executable, "-m", "fastprep", "run", "pipeline.py", "--output", "out"],
        exit_dir,
    )
    later = {"transform_default_folder": jobs.pop("transform_default_folder")}
    results: dict[str, subprocess.CompletedProcess] = {}
    for batch in (jobs, later):  # the second needs the first's run output
        processes = {
            name: subprocess.Popen(
                command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for name, (command, cwd) in batch.items()
        }
        for name, process in processes.items():
            out, err = process.communicate(timeout=300)
            results[name] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return results, root


def assert_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


def assert_clean_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("fastprep: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr


def load_folder(folder: Path):
    opened = fp.open_output(folder)
    X = sp.csr_matrix(opened.X) if sp.issparse(opened.X) else np.asarray(opened.X)
    return X, np.asarray(opened.y), np.asarray(opened.row_ids), list(opened.feature_names)


def assert_one_output(folder: Path) -> None:
    """The folder holds one published output: its manifest's files and the pipeline alias."""
    from fastprep.storage.output_format import LOCK_FILES, named_files

    doc = json.loads((folder / "manifest.json").read_text())
    expected = named_files(doc) | {"manifest.json", "pipeline.fastprep", *LOCK_FILES}
    # transform-<input>-<n>/: what `transform` without --output wrote beside the state
    assert {p.name for p in folder.iterdir() if not p.name.startswith("transform-")} == expected
    assert (folder / "pipeline.fastprep").samefile(fp.open_output(folder).pipeline_path)


def test_run_without_input_uses_the_sample(cli, flights_pipeline, flights_parquet):
    results, root = cli
    result, out = results["default"], root / "default"
    assert_ok(result)
    assert_one_output(out)
    assert "rows: 20,000 in" in result.stdout
    assert "quarantined" in result.stdout
    expected = flights_pipeline.fit(flights_parquet).transform(flights_parquet)
    X, y, row_ids, names = load_folder(out)
    assert_same_matrix(X, expected.X)
    assert np.array_equal(y, expected.y)
    assert np.array_equal(row_ids, expected.row_ids)
    assert names == expected.feature_names
    report = fp.open_output(out).report
    assert report["rows_in"] == 20_000
    assert report["rows_out"] + report["rows_quarantined"] == 20_000
    assert report["rows_out"] == X.shape[0]
    quarantine = fp.open_output(out).quarantine
    assert quarantine["row_id"].tolist() == expected.quarantine["row_id"].tolist()
    assert set(quarantine["reason"]) == {"arr_delay: null"}


def test_saved_state_from_run_transforms_like_the_api(cli, flights_sample, flights_pipeline):
    _, root = cli
    loaded = fp.load(root / "default" / "pipeline.fastprep")
    expected = flights_pipeline.fit(flights_sample).transform(flights_sample)
    assert_same_matrix(loaded.transform(flights_sample).X, expected.X)
    assert loaded.pipeline.name == "flights"


def test_transform_command(cli, broken_path, flights_pipeline, flights_sample):
    results, root = cli
    result, out = results["transform"], root / "t"
    assert_ok(result)
    assert_one_output(out)
    expected = flights_pipeline.fit(flights_sample).transform(broken_path)
    X, y, row_ids, names = load_folder(out)
    assert_same_matrix(X, expected.X)
    assert np.array_equal(y, expected.y)
    assert np.array_equal(row_ids, expected.row_ids)
    assert names == expected.feature_names
    quarantine = fp.open_output(out).quarantine
    assert quarantine["reason"].tolist() == expected.quarantine["reason"].tolist()
    assert "rows: 40 in" in result.stdout
    # the findings are printed once, in the report: the alerts are not a second copy
    assert "broke rule 'above_max'" in result.stdout
    assert result.stderr == ""


def test_transform_without_output_writes_a_new_folder_beside_the_state(cli):
    """Never over the training run's output: a transform-<input>-<n> folder next to it."""
    results, root = cli
    result = results["transform_default_folder"]
    assert_ok(result)
    folder = root / "default" / "transform-flights_broken-1"
    assert f"wrote {folder}" in result.stdout
    assert_one_output(folder)
    assert len(load_folder(folder)[2]) == 26
    # the training output is untouched: still the 20,000-row run
    training = fp.open_output(root / "default")
    assert training.report["rows_in"] == 20_000
    assert len(load_folder(root / "default")[2]) == training.report["rows_out"] > 19_000


def test_error_exits_2_without_traceback(cli):
    results, root = cli
    assert_clean_error(results["missing_input"], "missing.parquet")
    assert not (root / "missing").exists()


def test_console_script(cli):
    results, root = cli
    if "console" not in results:
        pytest.skip("the fastprep console script is not installed")
    assert_ok(results["console"])
    out = root / "console"
    assert_one_output(out)
    X, y, _, names = load_folder(out)
    X_module, y_module, _, names_module = load_folder(root / "default")
    assert_same_matrix(X, X_module)
    assert np.array_equal(y, y_module) and names == names_module


def test_quick_exit_still_runs_exit_work(cli):
    """``python -m fastprep`` leaves by ``os._exit`` (no interpreter teardown), after joining
    the user's threads and running atexit handlers, with its output complete."""
    results, root = cli
    assert_ok(results["exit_work"])
    folder = root / "exit_work"
    assert (folder / "atexit.done").read_text() == "ok"
    assert (folder / "thread.done").read_text() == "ok"
    assert "wrote out" in results["exit_work"].stdout
    assert_one_output(folder / "out")


# the remaining error paths run ``main`` in-process (the same code, without an interpreter start)


def run_main(capsys, monkeypatch, *args) -> tuple[int, str, str]:
    from fastprep.cli import main

    monkeypatch.chdir(REPO)
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("run", "pipelines/nope.py"), ("nope.py",)),
        (("run", "pipelines/flights.py", "--backend", "bogus"), ("bogus",)),
        (("transform", "data_samples/flights.csv", "--input", "data_samples/flights.csv"), ()),
        (("transform", "nowhere/pipeline.fastprep"), ("nowhere",)),
    ],
)
def test_error_paths_in_process(capsys, monkeypatch, tmp_path, args, fragments):
    code, _, err = run_main(capsys, monkeypatch, *args, "--output", tmp_path / "out")
    assert code == 2
    assert err.startswith("fastprep: error: ")
    for fragment in fragments:
        assert fragment in err


def test_schema_error_from_the_data(capsys, monkeypatch, tmp_path, flights_sample):
    source = tmp_path / "no_air_time.parquet"
    flights_sample.drop(columns=["air_time"]).head(50).to_parquet(source)
    code, _, err = run_main(
        capsys, monkeypatch, "run", "pipelines/flights.py", "--input", source,
        "--output", tmp_path / "out",
    )  # fmt: skip
    assert code == 2
    assert err.startswith("fastprep: error: ") and "air_time" in err
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_error_raised_by_the_users_pipeline_file(capsys, monkeypatch, tmp_path):
    pipeline_file = tmp_path / "broken.py"
    pipeline_file.write_text("import fastprep as fp\nraise RuntimeError('boom')\n")
    code, _, err = run_main(capsys, monkeypatch, "run", pipeline_file)
    assert code == 2
    assert err.startswith("fastprep: error: ") and "boom" in err
    assert "broken.py, line 2" in err  # where, in the user's own file
    helper = tmp_path / "helper.py"  # raised in a function of the file: the line that raised
    helper.write_text("import fastprep as fp\ndef make():\n    return 1 / 0\nmake()\n")
    code, _, err = run_main(capsys, monkeypatch, "run", helper)
    assert code == 2 and "helper.py, line 3" in err and "ZeroDivisionError" in err, err


def test_error_in_the_pipeline_definition(capsys, monkeypatch, tmp_path):
    (tmp_path / "typo.py").write_text(TYPO_PIPELINE)
    code, _, err = run_main(capsys, monkeypatch, "run", tmp_path / "typo.py", "--input", SAMPLE)
    assert code == 2
    assert err.startswith("fastprep: error: ")
    assert "'distnce'" in err and "'distance'" in err


def test_run_with_input_and_float64(capsys, monkeypatch, tmp_path, flights_csv, flights_pipeline):
    out = tmp_path / "f64"
    code, stdout, err = run_main(
        capsys, monkeypatch, "run", PIPELINE, "--input", flights_csv, "--output", out,
        "--out-dtype", "float64", "--backend", "pandas",
    )  # fmt: skip
    assert code == 0, err
    assert "rows: 20,000 in" in stdout
    X, _, row_ids, _ = load_folder(out)
    # the same backend as the CLI run: auto may pick numba, whose fit differs in the last
    # bits of a mean (one float32 ulp; exact bits are compared here)
    fitted = flights_pipeline.fit(flights_csv, backend="pandas")
    expected = fitted.transform(flights_csv, out_dtype="float64", backend="pandas")
    assert X.dtype == np.float64
    assert_same_matrix(X, expected.X)
    assert np.array_equal(row_ids, expected.row_ids)


def test_dense_pipeline_writes_x_npy(capsys, monkeypatch, tmp_path):
    (tmp_path / "dense.py").write_text(textwrap.dedent(DENSE_PIPELINE))
    out = tmp_path / "dense"
    out.mkdir()
    (out / "X.npz").write_bytes(b"stale")  # an earlier version's output: replaced on publish
    (out / "feature_names.json").write_bytes(b"[]")
    code, _, err = run_main(capsys, monkeypatch, "run", tmp_path / "dense.py", "--output", out)
    assert code == 0, err
    assert not (out / "X.npz").exists() and not (out / "feature_names.json").exists()
    X = fp.open_output(out).X
    assert X.dtype == np.float32 and X.flags.c_contiguous and X.shape[1] == 4
    assert isinstance(X, np.memmap)
    assert fp.open_output(out).feature_names == [
        "distance",
        "origin=EWR",
        "origin=JFK",
        "origin=LGA",
    ]
    assert_one_output(out)


def test_transform_never_writes_into_the_states_folder(capsys, monkeypatch, tmp_path,
                                                      flights_pipeline, flights_sample):  # fmt: skip
    folder = tmp_path / "train"
    fitted = flights_pipeline.fit(flights_sample)
    fitted.transform(flights_sample).save(folder, pipeline=fitted)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    code, _, err = run_main(capsys, monkeypatch, "transform", folder / "pipeline.fastprep",
                            "--input", BROKEN, "--output", folder)  # fmt: skip
    assert code == 2 and err.startswith("fastprep: error: ") and "overwritten" in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    code, _, err = run_main(capsys, monkeypatch, "transform", folder / "pipeline.fastprep",
                              "--input", BROKEN)  # fmt: skip
    assert code == 0, err
    assert {p.name for p in folder.iterdir()} == set(before) | {"transform-flights_broken-1"}
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    (tmp_path / "in").mkdir()
    shutil.copy(BROKEN, tmp_path / "in" / "a.csv")
    code, _, err = run_main(capsys, monkeypatch, "transform", folder / "pipeline.fastprep",
                              "--input", tmp_path / "in" / "*.csv")  # fmt: skip
    assert code == 0, err
    assert (folder / "transform-input-1").is_dir()  # a glob: a safe name


def test_transform_without_input_is_an_error(capsys, monkeypatch, tmp_path, flights_pipeline,
                                             flights_sample):  # fmt: skip
    """The state names the training sample, but that is never used silently."""
    state = tmp_path / "p.fastprep"
    flights_pipeline.fit(flights_sample.head(500)).save(state)
    assert fp.load(state).pipeline.sample  # the saved state does name one
    code, _, err = run_main(capsys, monkeypatch, "transform", state)
    assert code == 2 and err.startswith("fastprep: error: ") and "--input" in err
    assert [p.name for p in tmp_path.iterdir()] == ["p.fastprep"]


def test_sample_is_relative_to_the_pipeline_file(capsys, monkeypatch, tmp_path, flights_sample):
    """Not to the current folder: run from elsewhere, the file's own sample is used."""
    (tmp_path / "sub").mkdir()
    flights_sample.head(300).to_parquet(tmp_path / "sub" / "mine.parquet")
    text = textwrap.dedent(DENSE_PIPELINE).replace(repr(str(SAMPLE)), "'mine.parquet'")
    (tmp_path / "sub" / "p.py").write_text(text)
    code, out, err = run_main(capsys, monkeypatch, "run", tmp_path / "sub" / "p.py",
                              "--output", tmp_path / "o")  # fmt: skip
    assert code == 0, err
    assert "rows: 300 in" in out and str(tmp_path / "sub" / "mine.parquet") in out
    (tmp_path / "sub" / "p.py").write_text(text.replace("mine.parquet", "absent.parquet"))
    code, _, err = run_main(capsys, monkeypatch, "run", tmp_path / "sub" / "p.py")
    assert code == 2 and "absent.parquet" in err


def test_explain_without_input_uses_the_sample(capsys, monkeypatch, tmp_path):
    code, out, err = run_main(capsys, monkeypatch, "explain", PIPELINE)
    assert code == 0, err
    assert "pre-flight: 20,000 rows" in out and "backends for 19,430 validated rows" in out
    assert "├─ stage 0: " in out
    (tmp_path / "nosample.py").write_text(textwrap.dedent(DENSE_PIPELINE).replace(
        f"sample={str(SAMPLE)!r},", ""))  # fmt: skip
    code, out, _ = run_main(capsys, monkeypatch, "explain", tmp_path / "nosample.py")
    assert code == 0 and "backends per stage not planned" in out
    code, _, err = run_main(capsys, monkeypatch, "explain", tmp_path / "nosample.py", "--analyze")
    assert code == 2 and err.startswith("fastprep: error: ") and "--input" in err


def test_broken_pipe_exits_quietly():
    """``fastprep explain ... | head``: the reader is gone; no BrokenPipeError traceback."""
    read, write = os.pipe()
    os.close(read)  # a reader that already left: the first write fails
    try:
        result = subprocess.run(module_command("explain", PIPELINE, "--stage", "logical"),
                                stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                timeout=120)  # fmt: skip
    finally:
        os.close(write)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("command", ["run", "transform", "explain"])
def test_help_lists_the_real_choices(capsys, command):
    from fastprep.backends.registry import available
    from fastprep.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--backend {auto,pandas,numba,numexpr}" in text
    assert set(available()) == {"pandas", "numba", "numexpr"}
    if command == "run":  # int8/uint8 need a calibration a fresh fit does not have
        assert "{float32,float64,float16,bfloat16}" in text and "uint8" not in text
    if command == "transform":
        assert "{float32,float64,float16,bfloat16,int8,uint8}" in text


def test_bad_argument_is_one_line_error(capsys, monkeypatch):
    code, _, err = run_main(capsys, monkeypatch, "run", PIPELINE, "--out-dtype", "uint8")
    assert code == 2
    assert err.startswith("fastprep: error: argument --out-dtype") and err.count("\n") == 1


def test_transform_uint8_with_a_calibrated_state(capsys, monkeypatch, tmp_path):
    (tmp_path / "dense.py").write_text(textwrap.dedent(DENSE_PIPELINE))
    from fastprep.cli import load_pipeline_file

    fitted = load_pipeline_file(tmp_path / "dense.py").fit(SAMPLE)
    fitted.save(tmp_path / "plain.fastprep")
    code, _, err = run_main(capsys, monkeypatch, "transform", tmp_path / "plain.fastprep",
                            "--input", SAMPLE, "--out-dtype", "uint8")  # fmt: skip
    assert code == 2 and "calibrate_quantization" in err
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []  # refused before writing
    fitted.calibrate_quantization(SAMPLE, "uint8").save(tmp_path / "q.fastprep")
    code, _, err = run_main(capsys, monkeypatch, "transform", tmp_path / "q.fastprep",
                            "--input", SAMPLE, "--out-dtype", "uint8", "-o", tmp_path / "q")  # fmt: skip
    assert code == 0, err
    X = np.asarray(fp.open_output(tmp_path / "q").X)
    assert X.dtype == np.uint8
    np.testing.assert_array_equal(X, fitted.transform(SAMPLE, out_dtype="uint8").X)


@pytest.mark.parametrize("command", ["run", "transform"])
def test_output_that_cannot_be_a_folder_is_refused_before_any_work(
    capsys, monkeypatch, tmp_path, command
):
    """An --output naming a file (or a path below one) is a bad argument: one line, exit 2,
    no traceback, and nothing read or computed first."""
    (tmp_path / "dense.py").write_text(textwrap.dedent(DENSE_PIPELINE))
    if command == "run":
        head = ["run", tmp_path / "dense.py", "--input", tmp_path / "nowhere.parquet"]
    else:
        head = ["transform", tmp_path / "nowhere.fastprep", "--input", SAMPLE]
    (tmp_path / "afile").write_text("mine")
    for output in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        code, _, err = run_main(capsys, monkeypatch, *head, "--output", output)
        assert code == 2, err
        assert err.startswith("fastprep: error: ") and err.count("\n") == 1
        assert "not a folder" in err and "afile" in err
        assert "nowhere" not in err  # refused before the input (or the state) is read
    assert (tmp_path / "afile").read_text() == "mine"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_the_system_refuses_is_a_one_line_error(capsys, monkeypatch, tmp_path):
    """A file-system error while writing (no space, no permission, here a folder /proc
    cannot hold) ends the command like any other error, not with a traceback."""
    (tmp_path / "dense.py").write_text(textwrap.dedent(DENSE_PIPELINE))
    code, _, err = run_main(capsys, monkeypatch, "run", tmp_path / "dense.py",
                            "--output", "/proc/fastprep-nope/out")  # fmt: skip
    assert code == 2, err
    assert err.startswith("fastprep: error: ") and "/proc/fastprep-nope" in err
    assert err.count("\n") == 1


WARN_PIPELINE = """
import fastprep as fp

pipeline = fp.Pipeline(
    schema=fp.Schema({
        "distance": fp.Float(max=1000, on_invalid="warn"),
        "origin": fp.Category(),
    }),
    features=[fp.col("distance") >> fp.Standardize(), fp.col("origin") >> fp.OneHot()],
)
"""


def test_findings_are_printed_once_not_again_on_stderr(tmp_path):
    """The run prints its report (every finding, totalled); a 'warn' finding is not printed
    a second time on stderr by logging."""
    (tmp_path / "warn.py").write_text(WARN_PIPELINE)
    result = subprocess.run(
        module_command("run", tmp_path / "warn.py", "--input", SAMPLE, "-o", tmp_path / "o"),
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert_ok(result)
    assert result.stdout.count("broke rule 'above_max'") == 1
    assert result.stderr == ""


INTERRUPTING = """
import os, signal, threading
# Ctrl-C as the run starts: the signal a terminal sends, in the middle of the command
threading.Timer(0.0, os.kill, (os.getpid(), signal.SIGINT)).start()
"""


def test_ctrl_c_exits_130_without_traceback_and_keeps_the_output(tmp_path):
    (tmp_path / "pipeline.py").write_text(textwrap.dedent(DENSE_PIPELINE))
    (tmp_path / "interrupted.py").write_text(textwrap.dedent(DENSE_PIPELINE) + INTERRUPTING)
    run = [sys.executable, "-m", "fastprep", "run"]
    first = subprocess.run([*run, "pipeline.py", "--output", "out"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert_ok(first)
    before = load_folder(tmp_path / "out")
    result = subprocess.run([*run, "interrupted.py", "--output", "out"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 130, result.stderr
    assert result.stderr.startswith("fastprep: interrupted"), result.stderr
    assert "Traceback" not in result.stderr
    after = load_folder(tmp_path / "out")
    assert_same_matrix(after[0], before[0])
    assert [list(a) for a in after[1:3]] == [list(b) for b in before[1:3]]
