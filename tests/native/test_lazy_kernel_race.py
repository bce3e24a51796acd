"""Two threads making the same module's lazy kernels at once: the second one must not
compile a kernel while the module's globals still name lazy stand-ins (a kernel's
dispatcher handed out before the intrinsics and kernels it calls are bound)."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest

pytest.importorskip("numba")


def test_a_second_thread_never_compiles_against_unbound_globals(tmp_path, monkeypatch):
    name = f"review_lazy_{tmp_path.name}".replace("-", "_")
    # the intrinsic's module takes a while to import (a slow disk, a heavy import): the
    # window in which the first thread binds the globals, held open until the second
    # thread has called the kernel (or waited 2 s for it to be handed out)
    gate = types.ModuleType(f"{name}_gate")
    gate.release = threading.Event()  # type: ignore[attr-defined]
    sys.modules[gate.__name__] = gate
    (tmp_path / f"{name}_slow.py").write_text(
        f"import {name}_gate\n{name}_gate.release.wait(30)\n"
        "from fastprep.native.streaming import stream_store\n"
    )
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(f"""
        from fastprep.native.kernel_files import intrinsic, jit

        stream_store = intrinsic("{name}_slow", "stream_store")

        @jit(nogil=True)
        def fill(out, value):
            for i in range(len(out)):
                stream_store(out, i, value)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    lazy = module.fill  # what a caller that looked the global up before it was bound holds
    outs = [np.zeros(16) for _ in range(2)]
    errors: list[str] = []

    def run(k: int) -> None:
        if k:  # the second thread arrives once the first has made the dispatcher
            deadline = time.monotonic() + 30
            while lazy.dispatcher is None and time.monotonic() < deadline:
                if time.monotonic() > deadline - 28:
                    gate.release.set()  # not handed out while the globals are unbound
                time.sleep(0.001)
        try:
            (lazy if k else module.fill)(outs[k], float(k + 1))
        except Exception as exc:  # reported below
            errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
        finally:
            gate.release.set()

    try:
        workers = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert errors == []
        assert (outs[0] == 1.0).all() and (outs[1] == 2.0).all()
    finally:
        sys.modules.pop(name, None)
        sys.modules.pop(f"{name}_slow", None)
        sys.modules.pop(gate.__name__, None)
