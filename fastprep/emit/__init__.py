"""Turn computed blocks into the training matrix: one preallocated dense array, or CSR."""

from fastprep.emit.assemble import assemble
from fastprep.emit.blocks import Block, CodesBlock, NumericBlock, SparseBlock

__all__ = ["Block", "CodesBlock", "NumericBlock", "SparseBlock", "assemble"]
