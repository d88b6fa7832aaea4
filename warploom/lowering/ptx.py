"""gpu.module (NVVM/LLVM ops, from `warploom.lowering.sm90`) -> PTX text, with upstream MLIR passes only.

The pipeline is the one the sm_90a prototype was checked with on hardware:
scf/arith/NVVM ops are lowered inside the gpu.module (convert-nvvm-to-llvm turns
`mbarrier.try_wait.parity` and `wgmma.mma_async` into inline PTX, which nothing
else lowers), cf to LLVM on the outer module (it is not anchored on gpu.module),
then `gpu-module-to-binary{format=isa}` runs LLVM's NVPTX backend in process
and leaves the PTX in a `gpu.binary` op. No external tool is needed.
"""
from __future__ import annotations

from mlir import ir

# Pipeline elements in the form warploom.passes.run_passes takes (upstream passes only).
SM90_TO_PTX: list[str] = [
    "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,convert-nvvm-to-llvm,convert-arith-to-llvm,canonicalize,cse)",
    "convert-cf-to-llvm",
    "reconcile-unrealized-casts",
    "gpu-module-to-binary{format=isa}",
]


def pipeline_text() -> str:
    return f"builtin.module({','.join(SM90_TO_PTX)})"


def _gpu_modules_text(source) -> str:
    """The gpu.module ops of `source` (text, ir.Module or ir.Operation) as the text of a fresh module."""
    if isinstance(source, str):
        return source
    op = source.operation
    if op.name == "gpu.module":
        return str(op)
    mods = [o for o in op.regions[0].blocks[0].operations if o.operation.name == "gpu.module"]
    return "\n".join(str(m.operation) for m in mods)


def gpu_modules_to_ptx(source) -> dict[str, str]:
    """PTX of every gpu.module in `source`, by module symbol name. `source` is not modified."""
    from mlir.dialects import gpu
    from mlir.passmanager import PassManager

    from warploom.dialect import make_context

    text = _gpu_modules_text(source)
    with make_context() as ctx, ir.Location.unknown():
        parsed = ir.Module.parse(text)
        # Keep only the gpu.modules: host code (func.func, wl.launch) is not for this pipeline.
        module = ir.Module.create()
        mods = [o for o in parsed.body.operations if o.operation.name == "gpu.module"]
        if not mods:
            raise ValueError("no gpu.module found: lower the kernel (wl-lower-sm90) first")
        with ir.InsertionPoint(module.body):
            for m in mods:
                m.operation.clone()
        try:
            PassManager.parse(pipeline_text(), ctx).run(module.operation)
        except ir.MLIRError as e:
            raise RuntimeError(f"MLIR -> PTX pipeline failed ({pipeline_text()}):\n{e}") from None
        out = {}
        for op in module.body.operations:
            if op.operation.name != "gpu.binary":
                continue
            name = ir.StringAttr(op.operation.attributes["sym_name"]).value
            objects = list(op.operation.attributes["objects"])
            if len(objects) != 1:
                raise RuntimeError(f"gpu.binary @{name} holds {len(objects)} objects; expected one PTX object")
            out[name] = gpu.ObjectAttr(objects[0]).object.decode()
        return out


def gpu_module_to_ptx(source, name: str | None = None) -> str:
    """PTX of the gpu.module in `source` (MLIR text, ir.Module or the gpu.module op).

    With several gpu.modules, `name` (the module's symbol, e.g. "wl_gemm_..._mod") picks one."""
    ptx = gpu_modules_to_ptx(source)
    if name is None:
        if len(ptx) != 1:
            raise ValueError(f"{len(ptx)} gpu.modules ({', '.join(ptx)}); pass name= to pick one")
        return next(iter(ptx.values()))
    if name not in ptx:
        raise ValueError(f"no gpu.module @{name}; found {', '.join(ptx) or 'none'}")
    return ptx[name]
