"""An in-memory run pauses the cyclic garbage collector and always restores it."""

from __future__ import annotations

import gc

import pytest

from fastprep.runtime import execute


def test_the_collector_is_paused_inside_and_restored_after(
    flights_pipeline, flights_sample, monkeypatch
):
    seen = []
    real = execute.transform_prepared

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(execute, "transform_prepared", spy)
    flights_pipeline.fit_transform(flights_sample)
    assert seen == [False] and gc.isenabled()


def test_restored_after_an_error_and_left_alone_when_disabled(monkeypatch):
    with pytest.raises(RuntimeError), execute.cyclic_gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with execute.cyclic_gc_paused():
            pass
        assert not gc.isenabled()  # the caller's choice stands
    finally:
        gc.enable()
    monkeypatch.setenv("FASTPREP_PAUSE_GC", "0")
    with execute.cyclic_gc_paused():
        assert gc.isenabled()
