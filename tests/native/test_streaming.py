"""Non-temporal stores in Numba kernels write what plain stores write, a kernel module names
them lazily (no Numba import until its kernels are made), and a module of kernels that uses
them compiles through ``kernel_files``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from fastprep.native import streaming  # noqa: E402


@numba.njit
def _copy_words(out, values):
    for i in range(len(values)):
        streaming.stream_store(out, i, values[i])
    streaming.store_fence()


@numba.njit
def _copy_lines(out, at, values):
    for j in range(0, len(values), 8):
        streaming.stream_line(out, at + j, values, j)
    streaming.store_fence()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint64, np.int32])
@pytest.mark.parametrize("n", [0, 1, 7, 4099])
def test_stream_store_writes_each_value(dtype, n):
    values = (np.arange(n) * 3 - 7).astype(dtype)
    out = np.zeros(n + 1, dtype)
    _copy_words(out, values)
    np.testing.assert_array_equal(out[:n], values)
    assert out[n] == 0  # nothing past the last value


def test_stream_line_writes_whole_aligned_lines():
    raw = np.zeros(64 + 8)
    phase = raw.ctypes.data // 8 % 8
    at = (8 - phase) % 8  # raw[at] starts a 64-byte line
    values = np.arange(1.0, 49.0)  # six lines
    _copy_lines(raw, at, values)
    np.testing.assert_array_equal(raw[at : at + 48], values)
    assert not raw[:at].any() and not raw[at + 48 :].any()


def test_a_lazy_intrinsic_is_bound_when_its_kernels_are_made(tmp_path):
    """A module of lazy kernels imports neither Numba nor the intrinsic's module until a
    kernel runs; then the kernel stores through the intrinsic."""
    module = tmp_path / "lazy_streams.py"
    module.write_text(
        textwrap.dedent("""
        import numpy as np
        from fastprep.native.kernel_files import intrinsic, jit

        stream_store = intrinsic("fastprep.native.streaming", "stream_store")
        store_fence = intrinsic("fastprep.native.streaming", "store_fence")

        @jit(nogil=True)
        def fill(out, value):
            for i in range(len(out)):
                stream_store(out, i, value)
            store_fence()
    """)
    )
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np
        import lazy_streams
        assert "numba" not in sys.modules and "fastprep.native.streaming" not in sys.modules
        try:
            lazy_streams.stream_store(np.zeros(1), 0, 1.0)
        except RuntimeError:
            pass
        else:
            raise AssertionError("a lazy intrinsic ran outside a kernel")
        out = np.zeros(5)
        lazy_streams.fill(out, 2.5)
        assert (out == 2.5).all(), out
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
