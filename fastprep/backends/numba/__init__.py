"""The Numba backend: fused JIT kernels per stage, parallel hashing and CSR assembly."""
