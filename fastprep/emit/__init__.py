"""Turn computed blocks into the training matrix: one preallocated dense array, or CSR."""

from fastprep.emit.blocks import CodesBlock, SparseBlock
from fastprep.emit.layout import Layout, make_layout
from fastprep.emit.sink import OutputSink

__all__ = ["CodesBlock", "Layout", "OutputSink", "SparseBlock", "make_layout"]
