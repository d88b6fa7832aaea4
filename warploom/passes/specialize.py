"""wl-specialize: split a pipelined kernel into warp roles with register budgets.

Warpgroup 0 becomes the producer: one elected thread issues every async copy.
Warpgroups 1..n are consumers: each issues the MMAs for its 64-row slice of the
tile (wgmma is m64 per warpgroup) and stores that slice. A consumer keeps
`mma-in-flight` MMA groups running while it waits for the next stage (so the
tensor cores never idle on the wait), and drains them after the loop. Registers move from the
producer to the consumers with setmaxnreg, so the budgets must fit the file:
warpgroup threads * (producer_regs + consumers * consumer_regs) <= the register file
(128 * (40 + 2 * 232) <= 65536 on sm_90a). Every hardware number comes from the kernel's target.
"""
from __future__ import annotations

from mlir import ir

from warploom import targets
from warploom.dialect import op_attrs
from warploom.dialect.kernel_ir import before_terminator, children, kernel_ops, make_op, set_attrs
from warploom.targets import Target

from .registry import PassError, register


def check_budget(target: Target, producer_regs: int, consumer_regs: int, consumers: int, op) -> None:
    for name, regs in (("producer-regs", producer_regs), ("consumer-regs", consumer_regs)):
        try:
            target.check_setmaxnreg(regs)
        except ValueError as e:
            raise PassError(f"{name}: {e}", op) from None
    threads, file, step = target.warpgroup_threads, target.register_file, target.setmaxnreg[2]
    used = threads * (producer_regs + consumers * consumer_regs)
    if used > file:
        raise PassError(f"register budget {producer_regs} + {consumers} x {consumer_regs} per thread needs "
                        f"{used} registers; the register file holds {file}: lower consumer-regs to "
                        f"{(file // threads - producer_regs) // consumers // step * step}", op)


def specialize(kernel, producer_regs: int, consumer_regs: int, mma_in_flight: int) -> None:
    attrs = op_attrs(kernel)
    if "stages" not in attrs:
        raise PassError("wl-specialize needs a pipelined kernel: run wl-pipeline first", kernel)
    target = targets.of_kernel(attrs)
    rows = target.mma_rows_per_warpgroup
    consumers = attrs["tile"][0] // rows
    check_budget(target, producer_regs, consumer_regs, consumers, kernel)
    if not 0 <= mma_in_flight < attrs["stages"]:
        raise PassError(f"mma-in-flight = {mma_in_flight}: must be 0..{attrs['stages'] - 1} (stages - 1), since a "
                        "stage is refilled only after its MMAs retire", kernel)
    (loop,) = children(kernel, "k_loop")
    loads = children(loop, "async_load")
    (mma,) = children(loop, "mma")
    (store,) = children(kernel, "store_tile")
    loop_attrs, mma_attrs, store_attrs = op_attrs(loop), op_attrs(mma), op_attrs(store)
    _, n, k = mma_attrs["shape"]
    with ir.InsertionPoint(loop), kernel.operation.location:
        producer = make_op("role", {"name": "producer", "warpgroups": [0], "regs": producer_regs,
                                    "issue": "one_thread"}, region=True)
        with before_terminator(producer):
            ploop = make_op("k_loop", loop_attrs, region=True)
            with before_terminator(ploop):
                for load in loads:
                    make_op("async_load", op_attrs(load))
        consumer = make_op("role", {"name": "consumer", "warpgroups": list(range(1, consumers + 1)),
                                    "regs": consumer_regs, "issue": "warpgroup"}, region=True)
        with before_terminator(consumer):
            cloop = make_op("k_loop", loop_attrs, region=True)
            with before_terminator(cloop):
                make_op("mma", {**mma_attrs, "shape": [rows, n, k],
                                "a_rows": "per_warpgroup"})
                make_op("mma_wait", {"pending": mma_in_flight})
            if mma_in_flight:
                make_op("mma_wait", {"pending": 0})       # the accumulators are final only now
            make_op("store_tile", {**store_attrs, "tile": [rows, store_attrs["tile"][1]],
                                   "rows": "per_warpgroup"})
    store.operation.erase()
    loop.operation.erase()
    for ring in children(kernel, "ring"):      # the producer fills every ring, the consumers drain it
        set_attrs(ring, producer="producer", consumers=["consumer"])
    set_attrs(kernel, threads=target.warpgroup_threads * (1 + consumers))


@register("wl-specialize", "Warp roles: a TMA producer warpgroup and wgmma consumer warpgroups, with setmaxnreg budgets",
          options={"producer-regs": int, "consumer-regs": int, "mma-in-flight": int},
          after=("wl-tile", "wl-pipeline"))
def run(module, producer_regs: int = 40, consumer_regs: int = 232, mma_in_flight: int = 1):
    for kernel in kernel_ops(module):
        specialize(kernel, producer_regs, consumer_regs, mma_in_flight)
