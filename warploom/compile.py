"""Compile a kernel spec into a KernelArtifact: graph -> wl passes -> NVVM -> PTX -> cubin.

    artifact = compile_gemm(GemmSpec("bf16", "kn", block_n=256))

The graph goes through the target's pass pipeline up to the resource-assigned
level (wl-plan-barriers); `lower_kernel` turns that kernel into a gpu.module and
the launch contract (params, tensor maps, grid rules); upstream MLIR passes make
PTX and ptxas makes the cubin (whole-program mode, which keeps setmaxnreg). The
artifact's meta keeps the plans, the pass times and the ptxas/SASS summaries,
which `warploom explain` and `warploom demo` print.
"""
from __future__ import annotations

import importlib.metadata
import time

import warploom
from warploom.kernels import GemmSpec
from warploom.runtime.artifact import KernelArtifact
from warploom.runtime.cache import cache_key

SASS_OPCODES = ("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG", "LDL", "STL")


def toolchain() -> dict[str, str]:
    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "absent"
    return {"warploom": warploom.__version__, "mlir": version("xtc-mlir-python-bindings"),
            "ptxas": version("nvidia-cuda-nvcc"), "nvjitlink": version("nvidia-nvjitlink")}


def gemm_graph(spec: GemmSpec):
    g = warploom.Graph("gemm")
    a = g.input("a", ("M", "K"), spec.elem)
    b = g.input("b", ("N", "K") if spec.b_layout == "nk" else ("K", "N"), spec.elem)
    g.output(g.matmul(a, b, transpose_b=spec.b_layout == "nk"))
    return g


def planning_passes(spec: GemmSpec) -> list[str]:
    """The target pipeline up to the resource-assigned level, with the spec's tile options."""
    from warploom.passes import pipeline_for
    options = {"wl-tile": f"wl-tile{{block-n={spec.block_n} schedule={spec.schedule}}}",
               "wl-pipeline": f"wl-pipeline{{stages={spec.stages}}}"}
    names = pipeline_for(spec.target)
    return [options.get(n, n) for n in names[: names.index("wl-plan-barriers") + 1]]


def build_gemm_module(spec: GemmSpec, lower: bool = True):
    """The GEMM graph of `spec` through the planning passes (and wl-lower-sm90 when `lower`)."""
    passes = planning_passes(spec) + (["wl-lower-sm90"] if lower else [])
    module, _ = gemm_graph(spec).run_pipeline(passes)
    return module


def planned_program(spec: GemmSpec):
    """The resource-assigned kernel of `spec`, as a KernelProgram."""
    from warploom.dialect.kernel_ir import kernel_ops, read_kernel
    module = build_gemm_module(spec, lower=False)
    with module.context:
        (kernel,) = kernel_ops(module)
        return read_kernel(kernel)


def role_table(program) -> str:
    lines = ["roles"]
    for role in program.roles:
        a = role.attrs
        ops = [op.kind for op in role.walk() if op is not role]
        lines.append(f"  {a['name']:<9} warpgroups {a['warpgroups']}  setmaxnreg {a['regs']:>3}  "
                     f"issue {a.get('issue', '?'):<10} ops: {', '.join(ops)}")
    return "\n".join(lines)


def barrier_table(program) -> str:
    lines = ["mbarriers        offset  count  arrivals  tx bytes"]
    for b in program.barriers.values():
        lines.append(f"  {b['name']:<12} {b['offset']:>8} {b['count']:>6} {b['arrivals']:>9} {b.get('tx_bytes', 0):>9}")
    return "\n".join(lines)


def compile_gemm(spec: GemmSpec) -> KernelArtifact:
    if spec.target != "sm_90a":
        raise ValueError(f"no GPU back end for {spec.target} yet (only sm_90a kernels are compiled today)")
    from warploom.dialect.kernel_ir import kernel_ops, read_kernel
    from warploom.kernel import read_program
    from warploom.lowering.assemble import assemble, disassemble, sass_counts
    from warploom.lowering.ptx import gpu_module_to_ptx
    from warploom.lowering.sm90 import kernel_name, lower_kernel
    from warploom.passes.plan_smem import SMEM_LIMIT, plan_smem

    module, records = gemm_graph(spec).run_pipeline(planning_passes(spec))
    with module.context:
        (kernel,) = kernel_ops(module)
        program = read_kernel(kernel)
        typed = read_program(kernel)
    name = kernel_name(typed)
    t0 = time.perf_counter()
    lowered = lower_kernel(typed, name)
    ptx = gpu_module_to_ptx(lowered.gpu_module)
    t1 = time.perf_counter()
    asm = assemble(ptx, spec.target, "ptxas")
    t2 = time.perf_counter()
    counts = sass_counts(disassemble(asm.cubin), SASS_OPCODES)
    meta = {
        "spec": spec.lookup_id, "description": spec.describe(),
        "tile": program.attrs["tile"], "stages": program.attrs["stages"],
        "smem_plan": plan_smem(program, SMEM_LIMIT[spec.target]).table(),
        "barrier_plan": barrier_table(program), "roles": role_table(program),
        "passes": [{"name": r.name, "ms": round(r.seconds * 1e3, 3)} for r in records[1:]]
                  + [{"name": "lower-sm90 + ptx", "ms": round((t1 - t0) * 1e3, 3)},
                     {"name": "ptxas", "ms": round((t2 - t1) * 1e3, 3)}],
        "ptxas": {"registers": asm.registers, "spill_bytes": asm.spill_stores + asm.spill_loads,
                  "stack_bytes": asm.stack_bytes},
        "sass": counts,
    }
    key = cache_key(records[-1].ir + "\n" + str(lowered.gpu_module), spec.target, toolchain())
    return KernelArtifact(name=name, target=spec.target, cubin=asm.cubin, ptx=ptx, smem_bytes=lowered.smem_bytes,
                          block=lowered.block, cluster=lowered.cluster, grid=lowered.grid, params=lowered.params,
                          tensor_maps=lowered.tensor_maps, meta=meta, key=key)
