"""warploom: a Python compiler for GEMM and attention kernels on NVIDIA tensor-core GPUs.

`import warploom` stays light: the MLIR-based compiler (`Graph`, passes) loads on
first use, so `warploom.runtime` can run on machines without MLIR.
"""
from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "Graph": ("warploom.dialect.builder", "Graph"),
    "Tensor": ("warploom.dialect.builder", "Tensor"),
    "ShapeError": ("warploom.dialect.shapes", "ShapeError"),
    "run_passes": ("warploom.passes", "run_passes"),
    "compile": ("warploom.ops", "compile_kernel"),
    "pipeline_for": ("warploom.passes", "pipeline_for"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'warploom' has no attribute {name!r}")


__all__ = ["__version__", *_LAZY]

# kernel = warploom.compile(graph, target="sm_90a"): see warploom.build.CompiledKernel (built by
# warploom.build.compile_graph, run by warploom.ops.run_compiled)
