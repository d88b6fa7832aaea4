"""Read a `wl.kernel` op (the IR the planning passes print) into a typed `Program`.

The wl IR is the kernel program's printed form: `wl.buffer` ops are regions,
`wl.ring` declares a pipeline, `wl.mbarrier` ops are barriers, `wl.named_barrier`
ops named barriers, `wl.register` ops the register tiles no MMA accumulates into,
`wl.role` ops hold each role's schedule (`wl.compute`, `wl.named_barrier_sync` and
`wl.named_barrier_arrive` among its ops; a software-pipelined `wl.k_loop` holds its first and last
sections as `wl.loop_first` / `wl.loop_last`). The kernel's results are its outputs,
named by `output_names` (a GEMM: one, `c`). Whatever a pass has not planned yet
is left None, so the verifier can run after every planning pass. What the IR
leaves out is derived (see write.py): an MMA operand's source and major from its
region, a loop's carries from its MMAs' accumulators.
"""
from __future__ import annotations

from warploom import targets
from warploom.dialect import tensor_type
from warploom.dialect.kernel_ir import KOp, read_kernel

from .program import (Arrive, Compute, Copy, Load, Loop, MBarrier, Mma, MmaWait, NamedBarrier, Opaque, Operand,
                      Program, Region, Ring, Role, Store, Sync, Wait)

ISSUE = {"one_thread": "thread", "warp": "warp", "warpgroup": "warpgroup"}
PARITY = {"consumer": "phase", "producer": "phase^1"}
ARRIVE_PER = {"one_thread": "role", "one_thread_per_warpgroup": "warpgroup", "each_thread": "thread",
              "mma_commit": "commit"}
RESOURCE_OPS = ("buffer", "ring", "mbarrier", "named_barrier", "register", "role")   # not schedule ops
LOOP_NAME = "k_loop"                 # a wl.k_loop without `name`
SECTION_OPS = {"first": "loop_first", "last": "loop_last"}     # a pipelined loop's sections, inside its wl.k_loop
LAUNCH_ATTRS = ("tile", "grid", "schedule", "cluster", "stages", "causal", "acc_elem", "tmem_columns", "cta_group",
                "q_tiles", "rescale_threshold", "exp2_poly", "shared_kv", "rope_depth", "scale_dtype",
                "epilogue", "group_m", "swap_ab", "score_mod", "mask_mod", "mod_scalars", "mod_tensors",
                "mod_sorted", "varlen")  # kept


def read_program(kernel_op, target: str | None = None) -> Program:
    """The typed program of a wl.kernel op; `target` defaults to the kernel's (warploom.targets.of_kernel)."""
    k = read_kernel(kernel_op)
    a = k.attrs
    program = Program(
        kind=a.get("kind", "?"), target=target or targets.of_kernel(a).name,
        inputs=dict(zip(k.input_names, k.inputs)),
        outputs=dict(zip(a.get("output_names", [a.get("output_name", "c")]),
                         (tensor_type(r.type) for r in kernel_op.operation.results))),
        threads=a.get("threads"), smem_bytes=a.get("smem_bytes"),
        attrs={key: a[key] for key in LAUNCH_ATTRS if key in a})
    warpgroup_warps = 4
    for op in k.body:
        b = op.attrs
        if op.kind == "buffer":
            program.regions[b["name"]] = Region(
                name=b["name"], space=b.get("space", "smem"), elem=b["elem"], shape=tuple(b["shape"]),
                dims=tuple(b.get("dims", ())), stages=b["stages"], swizzle=b.get("swizzle", 0),
                offset=b.get("offset"), size=b.get("columns", b.get("bytes")), align=b.get("align", 1),
                aliases=tuple(b.get("aliases", ())))
        elif op.kind == "ring":
            program.rings[b["name"]] = Ring(
                name=b["name"], stages=b["stages"], regions=tuple(b["regions"]), producer=b.get("producer"),
                consumers=tuple(b.get("consumers", ())), full=b.get("full"), empty=b.get("empty"),
                counts=b.get("counts", "iteration"), relay=b.get("relay"), peer=b.get("peer"), uses=b.get("uses", 1))
        elif op.kind == "mbarrier":
            program.barriers[b["name"]] = MBarrier(
                name=b["name"], count=b["count"], arrivals=b["arrivals"], tx_bytes=b.get("tx_bytes", 0),
                offset=b.get("offset"), scope=b.get("scope", "cta"))
        elif op.kind == "named_barrier":
            program.named_barriers[b["name"]] = NamedBarrier(b["name"], b["id"], b["threads"], b.get("count", 1))
        elif op.kind == "register":
            program.registers[b["name"]] = tuple(b["shape"])
        elif op.kind == "role":
            if "warps" in b:
                first, count = b["warps"]
            else:
                first, count = warpgroup_warps * min(b["warpgroups"]), warpgroup_warps * len(b["warpgroups"])
            program.roles.append(Role(name=b["name"], first_warp=first, warps=count,
                                      issue=ISSUE.get(b.get("issue", "warpgroup"), b.get("issue")),
                                      regs=b.get("regs"), body=tuple(_ops(op.body, program)), rank=b.get("rank")))
    program.body = tuple(_ops([op for op in k.body if op.kind not in RESOURCE_OPS], program))
    return program


def implied_operand(program: Program, name: str, k_dim: str) -> Operand:
    """The operand an MMA that names only `name` reads: the region's space and its major-ness for contraction
    over `k_dim` (an unplanned name: smem, K-major). `wl.mma` prints a_source/a_major only where they differ."""
    region = program.regions.get(name)
    if region is None:
        return Operand("smem", name)
    return Operand(region.space, name, region.major_of(k_dim) if region.dims else "K")


def implied_carries(body: list) -> tuple[str, ...]:
    """The values a loop carries when its `wl.k_loop` does not list them: its MMAs' register accumulators."""
    return tuple(sorted({o.acc.name for o in body if isinstance(o, Mma) and o.acc.source == "regs"}))


def _ops(body: list[KOp], program: Program) -> list:
    out = []
    for op in body:
        a = op.attrs
        if op.kind == "k_loop":
            sections = {s: next((_ops(o.body, program) for o in op.body if o.kind == kind), [])
                        for s, kind in SECTION_OPS.items()}
            body = _ops([o for o in op.body if o.kind not in SECTION_OPS.values()], program)
            carries = tuple(a["carries"]) if "carries" in a else implied_carries(body)
            out.append(Loop(trip=tuple(a["trip"]), body=tuple(body), name=a.get("name", LOOP_NAME), carries=carries,
                            first=tuple(sections["first"]), last=tuple(sections["last"])))
        elif op.kind == "load_tile":
            out.append(Load(source=a["operand"], tile=tuple(a["tile"]), dims=tuple(a.get("dims", ())),
                            region=a.get("buffer"), use=a.get("use", 0),
                            multicast=bool(a.get("multicast", False))))
        elif op.kind == "wait":
            out.append(Wait(a["barrier"], PARITY.get(a["parity"], a["parity"]), lag=a.get("lag", 0),
                            use=a.get("use", 0)))
        elif op.kind == "arrive_expect_tx":
            out.append(Arrive(a["barrier"], tx_bytes=a["bytes"], use=a.get("use", 0)))
        elif op.kind == "arrive":
            out.append(Arrive(a["barrier"], lag=a.get("lag", 0), per=ARRIVE_PER.get(a.get("issue"), "role"),
                              cta=a.get("cta", "own"), use=a.get("use", 0)))
        elif op.kind == "async_load":
            out.append(Copy(source=a["operand"], region=a["buffer"], barrier=a.get("barrier"), use=a.get("use", 0),
                            multicast=bool(a.get("multicast", False))))
        elif op.kind == "mma":
            m, n, k = a["shape"]
            k_dim = a.get("k_dim", "K")
            acc = Operand(a.get("acc_source", "regs"), a["acc"])
            if acc.source == "regs":
                program.registers.setdefault(acc.name, (m, n))
            ab = []
            for which in ("a", "b"):
                implied = implied_operand(program, a[which], k_dim)
                ab.append(Operand(a.get(f"{which}_source", implied.source), a[which],
                                  a.get(f"{which}_major", implied.major), use=a.get(f"{which}_use", 0)))
            out.append(Mma(*ab, acc, (m, n, k), k_dim=k_dim, accumulate=a.get("accumulate", True),
                           lag=a.get("lag", 0)))
        elif op.kind == "mma_wait":
            out.append(MmaWait(a["pending"]))
        elif op.kind == "compute":
            out.append(Compute(a["kind"], tuple(a["reads"]), tuple(a["writes"])))
        elif op.kind in ("named_barrier_sync", "named_barrier_arrive"):
            out.append(Sync(a["barrier"], arrive_only=op.kind == "named_barrier_arrive", slot=a.get("slot", "own"),
                            warpgroup=a.get("warpgroup"), tiles=a.get("tiles", "each")))
        elif op.kind == "store_tile":
            out.append(Store(value=a["acc"], output=a["operand"], tile=tuple(a["tile"]), region=a.get("buffer"),
                             barrier=a.get("barrier")))
        else:
            out.append(Opaque(op.kind, tuple(sorted(a.items()))))
    return out
