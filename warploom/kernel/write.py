"""Write a typed `Program` back into a `wl.kernel` op: the planning passes read the program, change it, write it.

The kernel op's body becomes the program's printed form, in a fixed order:
regions (`wl.buffer`), rings (`wl.ring`), mbarriers (`wl.mbarrier`), named
barriers (`wl.named_barrier`), the register tiles no MMA accumulates into
(`wl.register`), roles (`wl.role`, each holding its schedule), then the
kernel-level schedule that no role owns yet. `read_program(write_program(k, p))`
gives `p` back (tested).

What the reader can derive is not printed, so a GEMM reads as tiles and names:
an MMA prints its operands' `*_source` / `*_major` only when they are not the
named region's space and major-ness (or it contracts another dim than K: then
both are printed, for the reader of the IR), a `wl.k_loop` its `name` and
`carries` only when they are not "k_loop" and its MMAs' accumulators; a `lag` (wl.wait, wl.mma) only when
not 0. A software-pipelined loop's `first` and `last` sections are `wl.loop_first` / `wl.loop_last` ops, the
first and last ops of the `wl.k_loop`'s region.
The kernel attributes the planners own (`stages`, `threads`, `smem_bytes`) are
set from the program; the launch rules wl-tile wrote stay as they are.
"""
from __future__ import annotations

from dataclasses import replace


from warploom.dialect.kernel_ir import before_terminator, body_block, make_op, set_attrs

from .program import (Arrive, Compute, Copy, Load, Loop, Mma, MmaWait, Opaque, Program, Role, Store, Sync,
                      Wait, walk)
from .read import ARRIVE_PER, LOOP_NAME, SECTION_OPS, implied_carries, implied_operand

ISSUE = {"thread": "one_thread", "warpgroup": "warpgroup", "warp": "warp"}
PARITY = {"phase": "consumer", "phase^1": "producer"}
ARRIVE_ISSUE = {per: issue for issue, per in ARRIVE_PER.items()}
WARPGROUP_WARPS = 4


def wl_name(op) -> str:
    """The wl op an op of the kernel program prints as ("wl.k_loop", "wl.async_load", ...)."""
    if isinstance(op, Opaque):
        return f"wl.{op.kind}"
    if isinstance(op, Arrive):
        return "wl.arrive_expect_tx" if op.tx_bytes else "wl.arrive"
    if isinstance(op, Sync):
        return "wl.named_barrier_arrive" if op.arrive_only else "wl.named_barrier_sync"
    return "wl." + {Loop: "k_loop", Load: "load_tile", Copy: "async_load", Wait: "wait", Mma: "mma",
                    MmaWait: "mma_wait", Store: "store_tile", Compute: "compute"}.get(type(op), type(op).__name__)


def write_program(kernel_op, program: Program) -> None:
    """Replace the body of `kernel_op` by `program` (ValueError for what the wl IR cannot hold yet)."""
    block = body_block(kernel_op)
    for op in list(block.operations)[:-1]:          # everything but the gpu.yield terminator
        op.operation.erase()
    with before_terminator(kernel_op), kernel_op.operation.location:
        for r in program.regions.values():
            attrs = {"name": r.name, "shape": list(r.shape), "elem": r.elem, "stages": r.stages}
            if r.dims:
                attrs["dims"] = list(r.dims)
            if r.space != "smem":
                attrs["space"] = r.space
            if r.aliases:
                attrs["aliases"] = list(r.aliases)
            if r.offset is not None and r.space == "tmem":      # a first column and a column count
                attrs.update(offset=r.offset, columns=r.size)
            elif r.offset is not None:
                attrs.update(offset=r.offset, bytes=r.size, align=r.align, swizzle=r.swizzle)
            make_op("buffer", attrs)
        for ring in program.rings.values():
            attrs = {"name": ring.name, "stages": ring.stages, "regions": list(ring.regions)}
            if ring.producer is not None:
                attrs.update(producer=ring.producer, consumers=list(ring.consumers))
            if ring.full is not None:
                attrs["full"] = ring.full
            if ring.empty is not None:
                attrs["empty"] = ring.empty
            if ring.counts != "iteration":
                attrs["counts"] = ring.counts
            if ring.relay is not None:
                attrs["relay"] = ring.relay
            if ring.peer is not None:
                attrs["peer"] = ring.peer
            if ring.uses != 1:
                attrs["uses"] = ring.uses
            make_op("ring", attrs)
        for bar in program.barriers.values():
            ring = program.ring_of_barrier(bar.name)
            attrs = {"name": bar.name, "count": bar.count, "arrivals": bar.arrivals, "tx_bytes": bar.tx_bytes,
                     "offset": bar.offset}
            if ring is not None:
                attrs["ring"] = ring.name
            if bar.scope != "cta":
                attrs["scope"] = bar.scope
            make_op("mbarrier", attrs)
        for nb in program.named_barriers.values():
            make_op("named_barrier", {"name": nb.name, "id": nb.id, "threads": nb.threads, "count": nb.count})
        implied = implied_registers(program)
        for name, shape in program.registers.items():
            if implied.get(name) != tuple(shape):
                make_op("register", {"name": name, "shape": list(shape)})
        for role in program.roles:
            _role(role, program)
        for op in program.body:
            _op(op, program)
    planned = {"stages": program.attrs.get("stages"), "threads": program.threads, "smem_bytes": program.smem_bytes,
               "tmem_columns": program.attrs.get("tmem_columns")}
    set_attrs(kernel_op, **{k: v for k, v in planned.items() if v is not None})


def implied_registers(program: Program) -> dict[str, tuple[int, ...]]:
    """The register tiles the reader derives from the MMAs (the first MMA into an accumulator gives its m x n)."""
    out: dict[str, tuple[int, ...]] = {}
    for op in [*(o for r in program.roles for o in r.walk()), *walk(program.body)]:
        if isinstance(op, Mma) and op.acc.source == "regs":
            out.setdefault(op.acc.name, op.shape[:2])
    return out


def _role(role: Role, program: Program) -> None:
    """A role of whole warpgroups prints `warpgroups = [..]`, any other `warps = [first, count]`."""
    attrs = {"name": role.name}
    if role.first_warp % WARPGROUP_WARPS or role.warps % WARPGROUP_WARPS:
        attrs["warps"] = [role.first_warp, role.warps]
    else:
        first = role.first_warp // WARPGROUP_WARPS
        attrs["warpgroups"] = list(range(first, first + role.warps // WARPGROUP_WARPS))
    if role.regs is not None:
        attrs["regs"] = role.regs
    if role.rank is not None:
        attrs["rank"] = role.rank
    op = make_op("role", {**attrs, "issue": ISSUE[role.issue]}, region=True)
    with before_terminator(op):
        for child in role.body:
            _op(child, program)


def _op(op, program: Program) -> None:
    if isinstance(op, Loop):
        attrs = {"trip": list(op.trip)}
        if op.name != LOOP_NAME:
            attrs["name"] = op.name
        if tuple(op.carries) != implied_carries(list(op.body)):
            attrs["carries"] = list(op.carries)
        loop = make_op("k_loop", attrs, region=True)
        with before_terminator(loop):
            for section, ops in op.sections:
                if section == "body":
                    for child in ops:
                        _op(child, program)
                    continue
                part = make_op(SECTION_OPS[section], {}, region=True)     # wl.loop_first / wl.loop_last
                with before_terminator(part):
                    for child in ops:
                        _op(child, program)
    elif isinstance(op, Load):
        attrs = {"operand": op.source, "tile": list(op.tile), "dims": list(op.dims)}
        if op.region is not None:
            attrs["buffer"] = op.region
        if op.use:
            attrs["use"] = op.use
        if op.multicast:
            attrs["multicast"] = True
        make_op("load_tile", attrs)
    elif isinstance(op, Copy):
        attrs = {"operand": op.source, "buffer": op.region, "tile": list(program.regions[op.region].shape)}
        if op.barrier is not None:
            attrs["barrier"] = op.barrier
        if op.use:
            attrs["use"] = op.use
        if op.multicast:
            attrs["multicast"] = True
        make_op("async_load", attrs)
    elif isinstance(op, Wait):
        attrs = {"barrier": op.barrier, "parity": PARITY[op.parity]}
        if op.lag:
            attrs["lag"] = op.lag
        if op.use:
            attrs["use"] = op.use
        make_op("wait", attrs)
    elif isinstance(op, Arrive) and op.tx_bytes:
        make_op("arrive_expect_tx", {"barrier": op.barrier, "bytes": op.tx_bytes, **({"use": op.use} if op.use else {})})
    elif isinstance(op, Arrive):
        attrs = {"barrier": op.barrier, "lag": op.lag, "issue": ARRIVE_ISSUE[op.per]}
        if op.cta != "own":
            attrs["cta"] = op.cta
        if op.use:
            attrs["use"] = op.use
        make_op("arrive", attrs)
    elif isinstance(op, Mma):
        attrs = {"a": op.a.name, "b": op.b.name, "acc": op.acc.name, "shape": list(op.shape)}
        if op.k_dim != "K":
            attrs["k_dim"] = op.k_dim
        for which in ("a", "b"):
            operand = getattr(op, which)
            if op.k_dim != "K" or replace(operand, use=0) != implied_operand(program, operand.name, op.k_dim):
                attrs.update({f"{which}_source": operand.source, f"{which}_major": operand.major})
            if operand.use:
                attrs[f"{which}_use"] = operand.use
        if op.acc.source != "regs":
            attrs["acc_source"] = op.acc.source
        if not op.accumulate:
            attrs["accumulate"] = False
        if op.lag:
            attrs["lag"] = op.lag
        make_op("mma", attrs)
    elif isinstance(op, MmaWait):
        make_op("mma_wait", {"pending": op.pending})
    elif isinstance(op, Store):
        attrs = {"operand": op.output, "acc": op.value, "tile": list(op.tile)}
        if op.region is not None:
            attrs["buffer"] = op.region
        if op.barrier is not None:
            attrs["barrier"] = op.barrier
        make_op("store_tile", attrs)
    elif isinstance(op, Compute):
        make_op("compute", {"kind": op.kind, "reads": list(op.reads), "writes": list(op.writes)})
    elif isinstance(op, Sync):
        attrs = {"barrier": op.barrier, "slot": op.slot}
        if op.warpgroup is not None:
            attrs["warpgroup"] = op.warpgroup
        if op.tiles != "each":
            attrs["tiles"] = op.tiles
        make_op("named_barrier_arrive" if op.arrive_only else "named_barrier_sync", attrs)
    elif isinstance(op, Opaque):
        raise ValueError(f"wl.{op.kind} has no kernel-program form to write back")
    else:
        raise TypeError(f"not a kernel-program op: {op!r}")
