"""The benchmark suite: fastprep vs naive pandas, idiomatic pandas, sklearn and Polars.

Layer 4 (may import anything in fastprep). Entry points: ``fastprep bench`` (via
:func:`fastprep.bench.cli.add_parser`) and ``python -m benchmarks``. New competitors
register with :func:`fastprep.bench.impls.register_implementation`.
"""

from fastprep.bench.harness import Config, compare, run
from fastprep.bench.impls import Implementation, register_implementation

__all__ = ["Config", "Implementation", "compare", "register_implementation", "run"]
