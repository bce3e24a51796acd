"""Below every engine: generated Numba modules on disk, loaded lazily, and retained memory for large arrays."""
