"""warploom's runtime: load compiled kernels and launch them. Imports no MLIR, by design:
a machine with only numpy and cuda-python can run kernels compiled elsewhere."""
from . import dtypes  # noqa: F401
