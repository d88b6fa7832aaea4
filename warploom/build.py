"""Compile a kernel spec into a KernelArtifact: graph -> wl passes -> NVVM -> PTX -> cubin.

    artifact = compile_gemm(GemmSpec("bf16", "kn", block_n=256))
    artifact = compile_attention(AttentionSpec("bf16", head_dim=128, causal=True))
    artifact = compile_attention_graph(my_graph, AttentionSpec(...))   # any graph that fuses to that attention

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
from warploom import targets
import math

from warploom.kernel.contract import (AttentionSpec, GemmSpec, check_attention_artifact, default_attention_exp2_poly,
                                      default_attention_q_stages, default_attention_stages)
from warploom.runtime.artifact import KernelArtifact
from warploom.score import NONE as NO_MODS
from warploom.score import ScoreMods
from warploom.runtime.cache import cache_key

SASS_OPCODES = ("HGMMA", "UTCHMMA", "LDTM", "UTCBAR", "UTMALDG", "SYNCS", "BAR", "USETMAXREG", "LDL", "STL")


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


def planning_passes(spec: GemmSpec | AttentionSpec) -> list[str]:
    """The target pipeline up to the resource-assigned level, with the spec's tile options (an attention's key block,
    stages, schedule and overlap)."""
    from warploom.passes import pipeline_for
    target = "" if spec.target == targets.DEFAULT else f" target={spec.target}"
    takes_m = isinstance(spec, GemmSpec) or targets.get(spec.target).accumulator == "regs"   # TMEM attention: Q tiles, not rows
    block_m = f" block-m={spec.block_m}" if takes_m and spec.block_m not in (None, 128) else ""
    shared = " shared-kv=true" if isinstance(spec, AttentionSpec) and spec.shared_kv else ""
    if isinstance(spec, AttentionSpec) and spec.exp2_poly != default_attention_exp2_poly(spec.target, spec.head_dim):
        shared += f" exp2-poly={spec.exp2_poly:g}"
    epilogue = f" epilogue={spec.epilogue}" if isinstance(spec, GemmSpec) and spec.epilogue != "tma" else ""
    cluster = f" cluster-m={spec.cluster_m}" if isinstance(spec, GemmSpec) and spec.cluster_m != 1 else ""
    cluster += f" group-m={spec.group_m}" if isinstance(spec, GemmSpec) and spec.group_m != 1 else ""
    cluster += " swap-ab=true" if isinstance(spec, GemmSpec) and spec.swap_ab else ""
    options = {"wl-tile": f"wl-tile{{block-n={spec.block_n} schedule={spec.schedule}{target}{block_m}{shared}"
                          f"{epilogue}{cluster}}}",
               "wl-pipeline": f"wl-pipeline{{stages={spec.stages}"
                              f"{f' q-stages={spec.q_stages}' if _asks_q_stages(spec) else ''}}}"}
    if isinstance(spec, AttentionSpec) and targets.get(spec.target).accumulator == "regs":
        options["wl-specialize"] = f"wl-specialize{{overlap={str(spec.overlap).lower()}}}"
    names = [n.split("{")[0] for n in pipeline_for(spec.target)]    # the spec's options replace the pipeline's
    return [options.get(n, n) for n in names[: names.index("wl-plan-barriers") + 1]]


def _asks_q_stages(spec) -> bool:
    """Whether wl-pipeline must be told the spec's Q stages (they are not what it picks unasked)."""
    return isinstance(spec, AttentionSpec) and spec.q_stages != default_attention_q_stages(
        spec.target, spec.schedule, spec.head_dim, spec.block_n, spec.stages)


def build_gemm_module(spec: GemmSpec, lower: bool = True):
    """The GEMM graph of `spec` through the planning passes (and the target's lowering pass when `lower`)."""
    from warploom.passes import pipeline_for, run_pipeline
    passes = planning_passes(spec) + ([pipeline_for(spec.target)[-1]] if lower else [])
    module, _ = run_pipeline(gemm_graph(spec), passes)
    return module


def planned_program(spec: GemmSpec):
    """The resource-assigned kernel of `spec`, as a typed `warploom.kernel.Program`."""
    from warploom.dialect.kernel_ir import kernel_ops
    from warploom.kernel import read_program
    module = build_gemm_module(spec, lower=False)
    with module.context:
        (kernel,) = kernel_ops(module)
        return read_program(kernel)


def role_table(program) -> str:
    """Each role of a typed Program: its warps, who issues, its register budget and its schedule's ops."""
    lines = ["roles"]
    for role in program.roles:
        warps = f"{role.first_warp}-{role.warp_range[-1]}" if role.warps > 1 else str(role.first_warp)
        regs = "-" if role.regs is None else role.regs
        ops = ", ".join(type(op).__name__ for op in role.walk())
        where = "" if role.rank is None else f"  (CTA {role.rank} of the cluster only)"
        lines.append(f"  {role.name:<9} warps {warps:<5} issue {role.issue:<9}  setmaxnreg {regs:>3}  ops: {ops}{where}")
    if program.registers:
        tiles = ", ".join(f"{n} {'x'.join(map(str, shape))}" for n, shape in program.registers.items())
        lines.append(f"  register tiles (per warpgroup): {tiles}")
    return "\n".join(lines)


def barrier_table(program) -> str:
    """The mbarriers of a typed Program (with the ring each serves), then the rings they pace."""
    from warploom.kernel import Arrive, Copy, Wait
    how = {"commit": "tcgen05.commit", "thread": "each thread", "warpgroup": "a thread per warpgroup", "role": "one thread"}
    arrive, wait = {}, {}
    for role, op in program.ops():       # who arrives (and how, on which CTA's instance) and who waits, per barrier
        if isinstance(op, Arrive):
            where = {"own": "", "leader": " on the leader's", "pair": " on both CTAs'"}[op.cta]
            what = "expect_tx" if op.tx_bytes else how[op.per]
            arrive.setdefault(op.barrier, []).append(f"{role.name} ({what}{where})")
        elif isinstance(op, Copy) and op.barrier:
            arrive.setdefault(op.barrier, []).append(f"TMA of {op.region}")
        elif isinstance(op, Wait):
            wait.setdefault(op.barrier, []).append(role.name)
    lines = ["mbarriers        offset  count  arrivals  tx bytes  ring     arrived at by -> waited on by"]
    for b in program.barriers.values():
        ring = program.ring_of_barrier(b.name)
        offset = "-" if b.offset is None else str(b.offset)
        who = (", ".join(dict.fromkeys(arrive.get(b.name, []))) or "-") + " -> " + \
            (", ".join(dict.fromkeys(wait.get(b.name, []))) or "-")
        lines.append(f"  {b.name:<12} {offset:>8} {b.count:>6} {b.arrivals:>9} {b.tx_bytes:>9}  "
                     f"{ring.name if ring else '-':<8} {who}")
    lines.append("rings            stages  regions          full        empty       producer -> consumers")
    for r in program.rings.values():
        lines.append(f"  {r.name:<12} {r.stages:>8}  {', '.join(r.regions):<16} {r.full or '-':<11} "
                     f"{r.empty or '-':<11} {r.producer or '-'} -> {', '.join(r.consumers) or '-'}")
    if program.named_barriers:
        lines.append("named barriers   ids      threads  used by")
        for nb in program.named_barriers.values():
            users = sorted({role.name + (" (its staged stores)" if type(op).__name__ == "Store" else "")
                            for role, op in program.ops() if getattr(op, "barrier", None) == nb.name
                            and type(op).__name__ in ("Sync", "Store")})
            ids = str(nb.id) if nb.count == 1 else f"{nb.id}..{nb.ids[-1]}"
            each = " (one per warpgroup)" if nb.count > 1 else ""
            lines.append(f"  {nb.name:<12} {ids:<8} {nb.threads:>8}  {', '.join(users) or '-'}{each}")
    return "\n".join(lines)


def compile_gemm(spec: GemmSpec) -> KernelArtifact:
    """sm_90a (wgmma) or sm_100a (tcgen05; assembled and checked here, never run on a Blackwell GPU)."""
    from warploom.dialect.kernel_ir import kernel_ops
    from warploom.kernel import read_program
    from warploom.lowering import kernel_name
    from warploom.passes import run_pipeline

    module, records = run_pipeline(gemm_graph(spec), planning_passes(spec))
    with module.context:
        (kernel,) = kernel_ops(module)
        program = read_program(kernel)       # what the lowering, the plans and the explain tables read
    return _build_artifact(spec, program, records, kernel_name(program))


def sass_summary(artifact: KernelArtifact) -> dict:
    """The count of each of SASS_OPCODES in the artifact's cubin (nvdisasm): computed when asked (the demo, a
    report), not on the compile path, where disassembling cost about as much as ptxas (a new score modifier's cold
    compile, benchmarks/NOTES.md "Compile speed")."""
    from warploom.lowering.assemble import disassemble, sass_counts
    return sass_counts(disassemble(artifact.cubin), SASS_OPCODES)


def _build_artifact(spec, program, records, name: str) -> KernelArtifact:
    """A planned kernel program -> NVVM (lower_kernel) -> PTX -> cubin (ptxas), with its plans and reports."""
    from warploom.lowering.assemble import assemble
    from warploom.lowering.ptx import gpu_module_to_ptx
    from warploom.lowering import lower_program
    from warploom.passes.plan_smem import plan_smem
    from warploom.passes.plan_tmem import plan_tmem

    t0 = time.perf_counter()
    lowered = lower_program(program, name)
    ptx = gpu_module_to_ptx(lowered.gpu_module)
    t1 = time.perf_counter()
    asm = assemble(ptx, spec.target, "ptxas")
    t2 = time.perf_counter()
    meta = {
        "spec": spec.lookup_id, "description": spec.describe(),
        "tile": program.attrs["tile"], "stages": program.attrs["stages"],
        "smem_plan": plan_smem(program).table(),     # the limit of the kernel's target
        "tmem_plan": plan_tmem(program).table() if any(r.space == "tmem" for r in program.regions.values()) else "",
        "barrier_plan": barrier_table(program), "roles": role_table(program),
        "passes": [{"name": r.name, "ms": round(r.seconds * 1e3, 3)} for r in records[1:]]
                  + [{"name": f"lower-{program.target.removesuffix('a').replace('_', '')} + ptx",
                      "ms": round((t1 - t0) * 1e3, 3)},
                     {"name": "ptxas", "ms": round((t2 - t1) * 1e3, 3)}],
        "ptxas": {"registers": asm.registers, "spill_bytes": asm.spill_stores + asm.spill_loads,
                  "stack_bytes": asm.stack_bytes},
    }
    key = cache_key(records[-1].ir + "\n" + str(lowered.gpu_module), spec.target, toolchain())
    return KernelArtifact(name=name, target=spec.target, cubin=asm.cubin, ptx=ptx, smem_bytes=lowered.smem_bytes,
                          block=lowered.block, cluster=lowered.cluster, grid=lowered.grid, params=lowered.params,
                          tensor_maps=lowered.tensor_maps, meta=meta, key=key)


# ---- attention ----------------------------------------------------------------------------
# One graph per AttentionSpec. The kernel reads q, k, v through 4-D tensor maps built from the caller's strides,
# so one kernel serves both layouts: the spec's graph is written in "bhsd", the layout the long way (batched
# matmuls over (B, H)) produces after wl-fuse, so both graphs reach the same wl.attention, the same IR and the
# same cache key. Batch, sequence lengths and head counts are dynamic (named dims), the head dim is static.
ATTENTION_GRAPH = "attn"
ATTENTION_DIMS = {"q": ("B", "Hq", "Sq"), "k": ("B", "Hkv", "Sk"), "v": ("B", "Hkv", "Sk")}


def attention_inputs(g, spec: AttentionSpec):
    return tuple(g.input(name, dims + (spec.head_dim,), spec.elem) for name, dims in ATTENTION_DIMS.items())


def attention_graph(spec: AttentionSpec):
    """The graph of `spec`: one wl.attention with the default scale 1/sqrt(D) (the kernel takes the scale
    it uses at run time, as scale_log2)."""
    g = warploom.Graph(ATTENTION_GRAPH)
    q, k, v = attention_inputs(g, spec)
    g.output(g.attention(q, k, v, causal=spec.causal, layout="bhsd", mods=spec.mods, varlen=spec.varlen))
    return g


def attention_long_way_graph(spec: AttentionSpec):
    """The same attention written the long way: matmul, scale, (causal_mask), softmax, matmul; wl-fuse turns
    it into the one wl.attention of `attention_graph(spec)`."""
    g = warploom.Graph(ATTENTION_GRAPH)
    q, k, v = attention_inputs(g, spec)
    s = g.scale(g.matmul(q, k, transpose_b=True), 1.0 / math.sqrt(spec.head_dim))
    if spec.causal:
        s = g.causal_mask(s)
    g.output(g.matmul(g.softmax(s), v))
    return g


attention_planning_passes = planning_passes


def planned_attention(graph, spec: AttentionSpec):
    """(program, records): `graph` through the attention planning passes, read as a typed Program. ValueError
    when the graph does not become exactly the attention kernel `spec` describes."""
    from warploom.dialect.kernel_ir import kernel_ops
    from warploom.kernel import read_program

    from warploom.passes import run_pipeline
    module, records = run_pipeline(graph, attention_planning_passes(spec))
    with module.context:
        kernels = kernel_ops(module)
        if len(kernels) != 1:
            raise ValueError(f"graph {graph.name}: the planning passes made "
                             f"{len(kernels)} kernels, expected one attention kernel for {spec.describe()} "
                             "(is the graph exactly attention, and are the attention planning passes built?)")
        program = read_program(kernels[0])
    found = attention_spec_of(program, spec.target)
    if found != spec:
        raise ValueError(f"the graph plans to {found.describe()}, not {spec.describe()}")
    return program, records


def attention_spec_of(program, target: str = "sm_90a") -> AttentionSpec:
    """The AttentionSpec a planned attention Program implements (its element type, head dim, mask and tile)."""
    if program.kind != "attention":
        raise ValueError(f"kernel of kind {program.kind!r} is not an attention kernel")
    from warploom.lowering.attention import overlapped
    bm, bn, d = program.attrs["tile"]
    elem = program.inputs["q"].elem
    q = program.rings.get("q")
    return AttentionSpec(elem, int(d), bool(program.attrs.get("causal", False)), int(bn),
                         int(program.attrs["stages"]), target, int(bm), overlapped(program),
                         str(program.attrs.get("schedule", "grid")), bool(program.attrs.get("shared_kv", False)),
                         q_stages=q.stages if q is not None and targets.get(target).accumulator == "regs" else 1,
                         exp2_poly=float(program.attrs.get("exp2_poly", 0.0)), mods=ScoreMods.from_attrs(program.attrs),
                         varlen=bool(program.attrs.get("varlen", False)))


def compile_attention_graph(graph, spec: AttentionSpec) -> KernelArtifact:
    """Compile a graph that fuses to the attention of `spec` (the spec's own graph, or the long way)."""
    from warploom.lowering import kernel_name
    program, records = planned_attention(graph, spec)
    name = kernel_name(program)    # the lowering's name for it, which the contract check compares
    artifact = _build_artifact(spec, program, records, name)
    check_attention_artifact(artifact, spec)
    return artifact


def planned_attention_program(elem: str = "bf16", head_dim: int = 128, causal: bool = False,
                              block_n: int | None = None, stages: int | None = None, overlap: bool = True,
                              schedule: str | None = None, block_m: int | None = None, q_stages: int | None = None,
                              exp2_poly: float | None = None, mods: ScoreMods = NO_MODS, varlen: bool = False):
    """The planning passes' program for the standard attention kernel of (elem, head dim, causal) (or the tile
    given; `mods`: its score/mask modifiers; varlen: packed sequences): what warploom.emulate.emulate_attention runs
    by default."""
    spec = AttentionSpec(elem, head_dim, causal, block_n, stages or AttentionSpec.stages, block_m=block_m,
                         overlap=overlap, schedule=schedule or AttentionSpec.schedule, q_stages=q_stages,
                         exp2_poly=exp2_poly, mods=mods, varlen=varlen)
    return planned_attention(attention_graph(spec), spec)[0]


def compile_attention(spec: AttentionSpec) -> KernelArtifact:
    return compile_attention_graph(attention_graph(spec), spec)


# ---- warploom.compile(graph): a graph's kernel, and everything the compiler decided on the way ---------------------

def gemm_spec_of(program) -> GemmSpec:
    """The GemmSpec a planned GEMM Program implements (element type, B layout, tile, stages, target, schedule)."""
    if program.kind != "gemm":
        raise ValueError(f"kernel of kind {program.kind!r} is not a GEMM kernel")
    bm, bn, _ = program.attrs["tile"]
    b_layout = "nk" if program.regions["b"].dims == ("N", "K") else "kn"
    return GemmSpec(program.inputs["a"].elem, b_layout, int(bn), int(program.attrs["stages"]), program.target,
                    str(program.attrs.get("schedule", "grid")), int(bm))


class CompiledKernel:
    """The kernel `warploom.compile(graph, target=...)` built, and what the compiler decided on the way.

        kernel.passes                   [(pass, seconds), ...] in order, from the input
        kernel.ir(after="wl-plan-smem") the IR after that pass (the last pass's by default; "input" for the graph)
        kernel.resources                the plan as data: smem regions, TMEM, mbarriers, roles, ptxas's report
        kernel.ptx, kernel.sass, kernel.cubin
        kernel(a, b), kernel(q, k, v)   run it on a GPU (a GEMM; an attention through warploom.ops.attention)

    The compile driver builds kernels and never launches them: running one is the launch API's (warploom.ops), which
    `warploom.compile` (warploom.ops.compile_kernel) hands in as `runner`.
    """

    def __init__(self, graph_name: str, target: str, records, program, graph_attrs: dict | None = None,
                 runner=None):
        self.name, self.target, self._records, self.program = graph_name, target, records, program
        self._graph_attrs = graph_attrs or {}       # what the graph declared that the kernel takes at run time
        self._artifact = None
        self._runner = runner                       # runner(kernel, *tensors, out=None): warploom.ops.run_compiled

    def __repr__(self) -> str:
        kind = self.program.kind if self.program else "no kernel"
        return f"<CompiledKernel {self.name} ({kind}, {self.target}): {len(self._records) - 1} passes>"

    @property
    def passes(self) -> list[tuple[str, float]]:
        return [(r.name, r.seconds) for r in self._records[1:]]

    def ir(self, after: str | None = None) -> str:
        """The IR after pass `after` (its name, with or without options: "wl-tile" finds "wl-tile{...}")."""
        if after is None:
            return self._records[-1].ir
        for r in self._records:
            if after in (r.name, r.name.split("{")[0]):
                return r.ir
        raise ValueError(f"no pass {after!r} ran; the passes were: input, "
                         + ", ".join(r.name for r in self._records[1:]))

    @property
    def artifact(self) -> KernelArtifact:
        """The compiled kernel (PTX, cubin, launch contract), built on first use."""
        if self._artifact is None:
            if self.program is None:
                raise ValueError(f"graph {self.name!r}: the {self.target} pipeline planned no kernel (warploom builds "
                                 "kernels from wl.matmul (2-D) and wl.attention)")
            from warploom.lowering import kernel_name
            if self.program.kind == "attention":
                spec = attention_spec_of(self.program, self.target)
            else:
                spec = gemm_spec_of(self.program)
            planned = [r for r in self._records if r.name.split("{")[0] == "wl-plan-barriers"]
            self._artifact = _build_artifact(spec, self.program, self._records[: self._records.index(planned[-1]) + 1],
                                             kernel_name(self.program))
        return self._artifact

    @property
    def ptx(self) -> str:
        return self.artifact.ptx

    @property
    def cubin(self) -> bytes:
        return bytes(self.artifact.cubin)

    @property
    def sass(self) -> str:
        from warploom.lowering.assemble import disassemble
        return disassemble(self.artifact.cubin)

    @property
    def resources(self) -> dict:
        """The plan as data: target, threads, smem bytes, TMEM columns, every region, mbarrier, named barrier and
        role, and ptxas's registers, spills and stack."""
        from dataclasses import asdict
        p, meta = self.program, self.artifact.meta
        return {"kernel": self.artifact.name, "target": p.target, "threads": p.threads, "smem_bytes": p.smem_bytes,
                "tmem_columns": p.attrs.get("tmem_columns"), "cluster": list(p.attrs.get("cluster", [1, 1, 1])),
                "regions": [asdict(r) for r in p.regions.values()],
                "barriers": [asdict(b) for b in p.barriers.values()],
                "named_barriers": [asdict(b) for b in p.named_barriers.values()],
                "roles": [{"name": r.name, "first_warp": r.first_warp, "warps": r.warps, "issue": r.issue,
                           "regs": r.regs, "rank": r.rank} for r in p.roles],
                "ptxas": meta["ptxas"]}

    @property
    def graph_attrs(self) -> dict:
        """What the graph declared that the kernel takes at run time (an attention's layout and scale)."""
        return dict(self._graph_attrs)

    def __call__(self, *tensors, out=None, scalars: dict | None = None):
        """Run the kernel on the tensors' GPU: a GEMM kernel takes (a, b), an attention kernel (q, k, v) and returns
        out, in the layout, mask and scale its graph declared, with `scalars` the values of its modifiers' runtime
        scalars (warploom.ops.run_compiled)."""
        if self._runner is None:
            raise TypeError(f"kernel {self.name!r} was built by warploom.build.compile_graph, which launches nothing: "
                            "build it with warploom.compile(graph) to run it, or call "
                            "warploom.ops.run_compiled(kernel, *tensors)")
        return self._runner(self, *tensors, out=out, scalars=scalars)


def compile_graph(graph, target: str = "sm_90a", *, dump_dir=None, runner=None) -> CompiledKernel:
    """Run `target`'s pipeline on `graph` (a warploom.Graph) up to the resource-assigned kernel; the returned
    CompiledKernel lowers and assembles it on demand, and runs it through `runner` (warploom.compile, which is
    warploom.ops.compile_kernel, passes the launch API's). PassError / MLIRError when a pass refuses the graph (their
    messages name the op, the value, the limit and the way out)."""
    from warploom.dialect import op_attrs
    from warploom.dialect.kernel_ir import kernel_ops
    from warploom.kernel import read_program
    from warploom.passes import pipeline_for, run_pipeline
    names = pipeline_for(target)
    module, records = run_pipeline(graph, names[:-1], dump_dir=dump_dir)      # up to the plan; lowering on demand
    with module.context:
        kernels = kernel_ops(module)
        program = read_program(kernels[0]) if len(kernels) == 1 else None
        attrs = op_attrs(kernels[0]) if len(kernels) == 1 else {}
    if len(kernels) > 1:
        raise ValueError(f"graph {graph.name!r} plans {len(kernels)} kernels; warploom.compile builds one: compile "
                         "each matmul or attention as its own graph")
    if not kernels:             # refused now, not when .ptx is first read (issue 37)
        with module.context:
            left = sorted({op.name for op in module.body.operations[0].regions[0].blocks[0].operations
                           if op.name.startswith("wl.")} if len(module.body.operations) else set())
        raise ValueError(f"graph {graph.name!r} plans no kernel for {target}: warploom.compile builds one from a "
                         "wl.matmul (2-D) or a wl.attention (or the matmul, softmax, matmul that wl-fuse makes one "
                         f"of), and the graph has {', '.join(left) or 'no wl op'}; add one, or evaluate the graph on "
                         "the CPU with warploom.reference.interpret.evaluate"
                         + "".join(f"\n  {line}" for line in _unfused(module)))
    return CompiledKernel(graph.name, target, records, program,
                          {key: attrs[key] for key in ("layout", "scale") if key in attrs}, runner)


def _unfused(module) -> list[str]:
    """Why wl-fuse left each softmax chain of `module` alone (warploom.passes.fuse.explain)."""
    from warploom.passes.fuse import explain
    with module.context:
        return explain(module)


def planned_sm100_attention(elem: str = "bf16", head_dim: int = 128, causal: bool = False, shared_kv: bool = False,
                            stages: int | None = None, mods: ScoreMods = NO_MODS, varlen: bool = False):
    """The sm_100a (FA4-style) attention's typed Program after the planning passes (everything but wl-lower-sm100):
    its smem, TMEM, rings, hand-offs and roles (docs/attention-sm100.md). shared_kv: K and V share one ring of
    `stages` slots (default: the standard kernel's stages; 3 for a shared ring); varlen: packed sequences."""
    stages = stages or default_attention_stages(shared_kv)
    spec = AttentionSpec(elem, head_dim, causal, stages=stages, target="sm_100a", shared_kv=shared_kv, mods=mods,
                         varlen=varlen)
    return planned_attention(attention_graph(spec), spec)[0]
