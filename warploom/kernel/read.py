"""Read a `wl.kernel` op (the IR the planning passes print) into a typed `Program`.

The wl IR is the kernel program's printed form: `wl.buffer` ops are regions,
`wl.ring` declares a pipeline, `wl.mbarrier` ops are barriers, `wl.role` ops
hold each role's schedule. Whatever a pass has not planned yet is left None,
so the verifier can run after every planning pass.
"""
from __future__ import annotations

from warploom import targets
from warploom.dialect import tensor_type
from warploom.dialect.kernel_ir import KOp, read_kernel

from .program import (Arrive, Copy, Load, Loop, MBarrier, Mma, MmaWait, Opaque, Operand, Program, Region, Ring,
                      Role, Store, Wait)

ISSUE = {"one_thread": "thread", "warp": "warp", "warpgroup": "warpgroup"}
PARITY = {"consumer": "phase", "producer": "phase^1"}
RESOURCE_OPS = ("buffer", "ring", "mbarrier", "role")        # kernel-body ops that are not schedule ops


def read_program(kernel_op, target: str | None = None) -> Program:
    """The typed program of a wl.kernel op; `target` defaults to the kernel's (warploom.targets.of_kernel)."""
    k = read_kernel(kernel_op)
    a = k.attrs
    program = Program(
        kind=a.get("kind", "?"), target=target or targets.of_kernel(a).name,
        inputs=dict(zip(k.input_names, k.inputs)),
        outputs={a.get("output_name", "c"): tensor_type(kernel_op.operation.results[0].type)},
        threads=a.get("threads"), smem_bytes=a.get("smem_bytes"),
        attrs={key: a[key] for key in ("tile", "grid", "schedule", "cluster", "stages", "acc_elem") if key in a})
    warpgroup_warps = 4
    for op in k.body:
        b = op.attrs
        if op.kind == "buffer":
            program.regions[b["name"]] = Region(
                name=b["name"], space=b.get("space", "smem"), elem=b["elem"], shape=tuple(b["shape"]),
                dims=tuple(b.get("dims", ())), stages=b["stages"], swizzle=b.get("swizzle", 0),
                offset=b.get("offset"), size=b.get("bytes"), align=b.get("align", 1),
                aliases=tuple(b.get("aliases", ())))
        elif op.kind == "ring":
            program.rings[b["name"]] = Ring(
                name=b["name"], stages=b["stages"], regions=tuple(b["regions"]), producer=b.get("producer"),
                consumers=tuple(b.get("consumers", ())), full=b.get("full"), empty=b.get("empty"))
        elif op.kind == "mbarrier":
            program.barriers[b["name"]] = MBarrier(
                name=b["name"], count=b["count"], arrivals=b["arrivals"], tx_bytes=b.get("tx_bytes", 0),
                offset=b.get("offset"))
        elif op.kind == "role":
            if "warps" in b:
                first, count = b["warps"]
            else:
                first, count = warpgroup_warps * min(b["warpgroups"]), warpgroup_warps * len(b["warpgroups"])
            program.roles.append(Role(name=b["name"], first_warp=first, warps=count,
                                      issue=ISSUE.get(b.get("issue", "warpgroup"), b.get("issue")),
                                      regs=b.get("regs"), body=tuple(_ops(op.body, program))))
    program.body = tuple(_ops([op for op in k.body if op.kind not in RESOURCE_OPS], program))
    return program


def _operand(program: Program, name: str, k_dim: str) -> Operand:
    region = program.regions.get(name)
    if region is None:
        return Operand("smem", name)
    return Operand(region.space, name, region.major_of(k_dim) if region.dims else "K")


def _ops(body: list[KOp], program: Program) -> list:
    out = []
    for op in body:
        a = op.attrs
        if op.kind == "k_loop":
            out.append(Loop(trip=tuple(a["trip"]), body=tuple(_ops(op.body, program)), name="k_loop",
                            carries=tuple(sorted({o.attrs["acc"] for o in op.body if o.kind == "mma"}))))
        elif op.kind == "load_tile":
            out.append(Load(source=a["operand"], tile=tuple(a["tile"]), dims=tuple(a.get("dims", ()))))
        elif op.kind == "wait":
            out.append(Wait(a["barrier"], PARITY.get(a["parity"], a["parity"])))
        elif op.kind == "arrive_expect_tx":
            out.append(Arrive(a["barrier"], tx_bytes=a["bytes"]))
        elif op.kind == "arrive":
            out.append(Arrive(a["barrier"], lag=a.get("lag", 0),
                              per="warpgroup" if a.get("issue") == "one_thread_per_warpgroup" else "role"))
        elif op.kind == "async_load":
            out.append(Copy(source=a["operand"], region=a["buffer"], barrier=a.get("barrier")))
        elif op.kind == "mma":
            m, n, k = a["shape"]
            program.registers.setdefault(a["acc"], (m, n))
            k_dim = a.get("k_dim", "K")
            out.append(Mma(_operand(program, a["a"], k_dim), _operand(program, a["b"], k_dim),
                           Operand("regs", a["acc"]), (m, n, k), k_dim=k_dim))
        elif op.kind == "mma_wait":
            out.append(MmaWait(a["pending"]))
        elif op.kind == "store_tile":
            out.append(Store(value=a["acc"], output=a["operand"], tile=tuple(a["tile"])))
        else:
            out.append(Opaque(op.kind, tuple(sorted(a.items()))))
    return out
