"""The reference backend: numpy-vectorized fit and transform, the semantics every backend matches."""
