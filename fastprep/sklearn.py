"""The public import path of the scikit-learn adapter: ``from fastprep.sklearn import FastprepTransformer``.

The adapter lives in :mod:`fastprep.integrations.sklearn`; ``import fastprep`` alone never
imports scikit-learn.
"""

from fastprep.integrations.sklearn import FastprepTransformer

__all__ = ["FastprepTransformer"]
