"""Hand-offs to other libraries: PyTorch tensors and datasets, a scikit-learn transformer."""
