"""Execution backends. Each implements the same operations or raises ``BackendError``.

``pandas`` (numpy-vectorized) is the reference every other backend is tested against.
"""
