"""wl-lower-sm90: replace each planned sm_90a `wl.kernel` by a `wl.launch` of a `gpu.module` holding its code.

    %0 = "wl.kernel"(%a, %b) ({ ...roles, buffers, barriers... }) {...}
becomes
    %0 = "wl.launch"(%a, %b) {kernel = "wl_gemm_bf16_kn_128x256x64_s4", grid = [["cdiv", "N", 256], ...],
                              block = [384, 1, 1], cluster = [1, 1, 1], smem_bytes = 197696}
    gpu.module @wl_gemm_bf16_kn_128x256x64_s4_mod [#nvvm.target<chip = "sm_90a", ...>] { llvm.func ... }
and the top module gets `gpu.container_module`. The code comes from `warploom.lowering.lower_program` (the one
lowering of every target: a GEMM, or an attention for a program of kind "attention"), after wl-plan-barriers,
which builds the gpu.module with the MLIR builders in this module's context; the pass moves it in (no text, no
parse). PTX is made afterwards by `warploom.lowering.ptx` (upstream passes only). wl-lower-sm100 is the same pass
for sm_100a programs (`lowering_pass`).
"""
from __future__ import annotations

from mlir import ir

from warploom.dialect import op_attrs
from warploom.dialect.kernel_ir import kernel_ops, make_op
from warploom.kernel import read_program
from warploom.lowering import kernel_name, lower_program

from .registry import PassError, register


def existing_gpu_modules(top) -> dict[str, ir.Operation]:
    return {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
            for op in top.regions[0].blocks[0].operations if op.operation.name == "gpu.module"}


def lowering_pass(target: str):
    """The lowerer of the pass for `target`: (entry name, LoweredKernel) of a program planned for that target, a GEMM
    or an attention; a program planned for another target is refused with the pass that lowers it."""
    def lower_target(program, context):
        if program.target != target:
            raise ValueError(f"the kernel is planned for {program.target}: lower it with "
                             f"{pass_name(program.target)}")
        if program.kind not in ("gemm", "attention"):
            raise ValueError(f"kernel kind {program.kind!r} has no {target} lowering (only 'gemm' and 'attention')")
        name = kernel_name(program)
        return name, lower_program(program, name, context)
    return lower_target


def pass_name(target: str) -> str:
    """wl-lower-sm90 for sm_90a, wl-lower-sm100 for sm_100a."""
    return f"wl-lower-{target.removesuffix('a').replace('_', '')}"


lower_sm90 = lowering_pass("sm_90a")


def lower(kernel, top, modules: dict, lowerer=lower_sm90, pass_name: str = "wl-lower-sm90") -> None:
    """Replace `kernel` by a wl.launch of the gpu.module `lowerer(program, context)` builds."""
    try:
        program = read_program(kernel)
        name, lowered = lowerer(program, top.context)
    except (ValueError, KeyError) as e:
        msg = str(e) if isinstance(e, ValueError) else f"missing attribute {e}"
        raise PassError(f"{pass_name}: {msg}", kernel) from None
    mod_name = f"{name}_mod"
    if mod_name not in modules:        # identical kernels share one gpu.module
        gpu_module = lowered.gpu_module
        gpu_module.detach_from_parent()
        ir.InsertionPoint(top.regions[0].blocks[0]).insert(gpu_module)
        modules[mod_name] = gpu_module
    attrs = op_attrs(kernel)
    with ir.InsertionPoint(kernel), kernel.operation.location:
        launch = make_op("launch", {
            "kernel": name, "grid": list(attrs["grid"]), "block": list(lowered.block),
            "cluster": list(lowered.cluster), "smem_bytes": lowered.smem_bytes},
            operands=kernel.operation.operands, result_types=[kernel.operation.results[0].type])
    kernel.operation.results[0].replace_all_uses_with(launch.results[0])
    kernel.operation.erase()


@register("wl-lower-sm90", "Lower each planned wl.kernel to an sm_90a gpu.module (NVVM: TMA, mbarrier, wgmma) "
          "and a wl.launch of it")
def run(module):
    lower_all(module, lower_sm90, "wl-lower-sm90")


def lower_all(module, lowerer, pass_name: str) -> None:
    top = module.operation if hasattr(module, "operation") else module
    kernels = kernel_ops(module)
    if not kernels:
        return
    modules = existing_gpu_modules(top)
    for kernel in kernels:
        lower(kernel, top, modules, lowerer, pass_name)
    top.attributes["gpu.container_module"] = ir.UnitAttr.get()
