"""A real Dask cluster for the distributed tests: one ``dask scheduler`` and two
``dask worker`` processes on 127.0.0.1 (random ports, one thread each), started with
``subprocess`` and stopped after the module. Workers run without a nanny, so a test can
kill a worker process by its pid the way a crash or the OOM killer would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed")


from support import REPO, assert_same_matrix, to_dense  # noqa: E402,F401

DASK = str(Path(sys.executable).with_name("dask"))
START_TIMEOUT = 60


class Cluster:
    """The scheduler and worker processes of one test module."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.file = folder / "scheduler.json"
        self.workers: list[subprocess.Popen] = []
        with open(folder / "scheduler.log", "wb") as log:  # the child keeps its own fd
            self.scheduler = subprocess.Popen(
                [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                 "--scheduler-file", str(self.file)],
                stdout=subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
        deadline = time.time() + START_TIMEOUT
        while not self.file.exists():
            if time.time() > deadline or self.scheduler.poll() is not None:
                raise RuntimeError((folder / "scheduler.log").read_text())
            time.sleep(0.1)
        time.sleep(0.2)
        self.address = json.loads(self.file.read_text())["address"]
        self.client = distributed.Client(self.address, timeout=START_TIMEOUT)
        for _ in range(2):
            self.start_worker()
        self.wait_for_workers(2)

    def start_worker(self) -> subprocess.Popen:
        n = len(self.workers)
        with open(self.folder / f"worker-{n}.log", "wb") as log:
            worker = subprocess.Popen(
                [DASK, "worker", self.address, "--host", "127.0.0.1", "--nthreads", "1",
                 "--no-nanny", "--no-dashboard", "--memory-limit", "0", "--name", f"w{n}",
                 "--preload", "fastprep.runtime.partition_tasks",
                 "--local-directory", str(self.folder / f"w{n}")],
                stdout=subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
        self.workers.append(worker)
        return worker

    def alive(self) -> list[subprocess.Popen]:
        return [w for w in self.workers if w.poll() is None]

    def wait_for_workers(self, n: int) -> None:
        self.client.wait_for_workers(n, timeout=START_TIMEOUT)

    def kill(self, worker: subprocess.Popen) -> None:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)

    def ensure_two_workers(self) -> None:
        while len(self.alive()) < 2:
            self.start_worker()
        deadline = time.time() + START_TIMEOUT
        while len(self.client.scheduler_info()["workers"]) != 2:
            if time.time() > deadline:
                raise RuntimeError("workers did not come back")
            time.sleep(0.1)

    def close(self) -> None:
        self.client.close()
        for process in [*self.workers, self.scheduler]:
            if process.poll() is None:
                process.terminate()
        for process in [*self.workers, self.scheduler]:
            try:
                process.wait(3)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(3)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dask-cluster")
    running = Cluster(folder)
    try:
        yield running
    finally:
        running.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def client(cluster):
    cluster.ensure_two_workers()
    return cluster.client


@pytest.fixture(scope="session")
def flights_row_groups(tmp_path_factory, _flights_sample_cached: pd.DataFrame) -> Path:
    """The 20,000-row flights sample as Parquet with 2,500-row row groups (8 groups)."""
    path = tmp_path_factory.mktemp("flights") / "flights.parquet"
    table = pa.Table.from_pandas(_flights_sample_cached, preserve_index=False)
    pq.write_table(table, path, row_group_size=2_500)
    return path
