"""wl-plan-barriers: the mbarriers of a specialized kernel, and the waits and arrives that use them.

For each ring of `stages` operand buffers there are two barrier rings:
  full[s]   arrivals 1 (the producer's arrive.expect_tx) + the stage's TMA bytes;
            consumers wait on it before their MMAs read stage s;
  empty[s]  arrivals = consumer warpgroups (one elected thread each, after its
            MMAs on stage s retired); the producer waits on it before refilling s.
K tile i uses stage s = i % stages and phase (i / stages) & 1; the consumer waits
for that phase of full[s], the producer for the opposite phase of empty[s], so its
first lap over fresh barriers does not block. When consumers keep `pending` MMA
groups in flight (wl.mma_wait {pending}), the stage they may free at iteration i
is the one of iteration i - pending: the arrive carries that `lag`. The size of one mbarrier
comes from the kernel's target, element sizes from `warploom.targets.ELEMENT_BITS`.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from warploom import targets
from warploom.dialect import op_attrs
from warploom.dialect.kernel_ir import children, kernel_ops, make_op, read_kernel, set_attrs

from .registry import PassError, register


@dataclass(frozen=True)
class BarrierRing:
    name: str
    count: int          # one mbarrier per stage
    arrivals: int       # arrivals that complete a phase
    tx_bytes: int       # async-copy bytes that must land too (0: none)
    notes: str


def buffer_stage_bytes(buf: dict) -> int:
    """Bytes of one stage of a `wl.buffer`: what one TMA fill of it brings in."""
    elems = 1
    for d in buf["shape"]:
        elems *= d
    return elems * targets.ELEMENT_BITS[buf["elem"]] // 8


def barrier_names(ring: str, rings: int) -> tuple[str, str]:
    """(full, empty) barrier names of `ring`; a kernel with a single ring keeps the plain names."""
    return ("full", "empty") if rings == 1 else (f"{ring}_full", f"{ring}_empty")


def barrier_rings(program) -> list[BarrierRing]:
    """The full/empty mbarrier rings of every `wl.ring` of a specialized program; the smem planner sizes their
    storage from this. full: the producer's one expect_tx arrival plus the bytes of one stage of the ring's
    regions; empty: one arrival per consumer warpgroup."""
    rings = program.top("ring")
    roles = {r.attrs["name"]: r for r in program.roles}
    out = []
    for op in rings:
        ring = op.attrs
        buffers = [program.buffers[name] for name in ring["regions"]]
        consumers = sum(len(roles[c].attrs["warpgroups"]) for c in ring["consumers"])
        tx = sum(buffer_stage_bytes(b) for b in buffers)
        full, empty = barrier_names(ring["name"], len(rings))
        out += [BarrierRing(full, ring["stages"], 1, tx, f"TMA of {' + '.join(ring['regions'])} landed"),
                BarrierRing(empty, ring["stages"], consumers, 0, "consumers' MMAs on the stage retired")]
    return out


def plan_barriers(kernel) -> None:
    program = read_kernel(kernel)
    region = program.buffers.get("mbarriers")
    if region is None or "offset" not in region:
        raise PassError("wl-plan-barriers needs the smem plan (run wl-plan-smem first)", kernel)
    rings = barrier_rings(program)
    mbarrier_bytes = targets.of_kernel(program.attrs).mbarrier_bytes
    offset = region["offset"]
    roles = {op_attrs(r)["name"]: r for r in children(kernel, "role")}
    if len(rings) != 2:
        raise PassError(f"wl-plan-barriers: the GEMM schedule moves one ring of operand tiles; this kernel "
                        f"declares {len(rings) // 2}", kernel)
    full, empty = rings
    (ring_op,) = children(kernel, "ring")       # the GEMM schedule below has one ring
    ring_name = op_attrs(ring_op)["name"]
    with ir.InsertionPoint(roles["producer"]), kernel.operation.location:
        for ring in rings:
            make_op("mbarrier", {"name": ring.name, "count": ring.count, "arrivals": ring.arrivals,
                                 "tx_bytes": ring.tx_bytes, "offset": offset, "ring": ring_name})
            offset += ring.count * mbarrier_bytes
    set_attrs(ring_op, full=full.name, empty=empty.name)

    (ploop,) = children(roles["producer"], "k_loop")
    loads = children(ploop, "async_load")
    with ir.InsertionPoint(loads[0]), kernel.operation.location:
        make_op("wait", {"barrier": empty.name, "parity": "producer"})
        make_op("arrive_expect_tx", {"barrier": full.name, "bytes": full.tx_bytes})
    for load in loads:
        set_attrs(load, barrier=full.name)

    (cloop,) = children(roles["consumer"], "k_loop")
    (mma,) = children(cloop, "mma")
    (mma_wait,) = children(cloop, "mma_wait")
    with ir.InsertionPoint(mma), kernel.operation.location:
        make_op("wait", {"barrier": full.name, "parity": "consumer"})
    lag = op_attrs(mma_wait)["pending"]
    with ir.InsertionPoint.after(mma_wait), kernel.operation.location:
        make_op("arrive", {"barrier": empty.name, "issue": "one_thread_per_warpgroup", "lag": lag})


@register("wl-plan-barriers", "mbarriers per stage (full/empty), arrival counts, tx bytes; waits and arrives in each role",
          after=("wl-tile", "wl-pipeline", "wl-specialize", "wl-plan-smem"))
def run(module):
    for kernel in kernel_ops(module):
        plan_barriers(kernel)
