"""Execution backends. Each implements :class:`fastprep.backends.base.Backend` and finds
its code for a step in its one dispatch table, or raises ``UnsupportedOperation``.

``pandas`` (numpy-vectorized, ``reference/``) is the reference every other backend is
tested against; ``numba`` fuses element-wise chains into JIT kernels; ``numexpr``
evaluates element-wise expressions with numexpr. Adding a step: see ``base.py``.
"""
