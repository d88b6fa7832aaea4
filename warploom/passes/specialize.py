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

from dataclasses import replace

from warploom import targets
from warploom.dialect.kernel_ir import kernel_ops
from warploom.kernel import Copy, Loop, Mma, MmaWait, Program, Role, Store
from warploom.targets import Target

from .registry import PassError, edit_program, register


def check_budget(target: Target, producer_regs: int, consumer_regs: int, consumers: int) -> None:
    for name, regs in (("producer-regs", producer_regs), ("consumer-regs", consumer_regs)):
        try:
            target.check_setmaxnreg(regs)
        except ValueError as e:
            raise PassError(f"{name}: {e}") from None
    threads, file, step = target.warpgroup_threads, target.register_file, target.setmaxnreg[2]
    used = threads * (producer_regs + consumers * consumer_regs)
    if used > file:
        raise PassError(f"register budget {producer_regs} + {consumers} x {consumer_regs} per thread needs "
                        f"{used} registers; the register file holds {file}: lower consumer-regs to "
                        f"{(file // threads - producer_regs) // consumers // step * step}")


def specialize(program: Program, producer_regs: int, consumer_regs: int, mma_in_flight: int) -> None:
    """The kernel-level loop and store become two roles: the producer copies, the consumers multiply and store."""
    target = targets.get(program.target)
    rows = target.mma_rows_per_warpgroup
    consumers = program.attrs["tile"][0] // rows
    check_budget(target, producer_regs, consumer_regs, consumers)
    stages = program.attrs["stages"]
    if not 0 <= mma_in_flight < stages:
        raise PassError(f"mma-in-flight = {mma_in_flight}: must be 0..{stages - 1} (stages - 1), since a "
                        "stage is refilled only after its MMAs retire")
    loops = [op for op in program.body if isinstance(op, Loop)]
    stores = [op for op in program.body if isinstance(op, Store)]
    if len(loops) != 1 or len(stores) != 1:
        raise PassError(f"wl-specialize splits a GEMM-shaped kernel (one K loop, one store); this one has "
                        f"{len(loops)} loops and {len(stores)} stores")
    (loop,), (store,) = loops, stores
    copies = tuple(op for op in loop.body if isinstance(op, Copy))
    (mma,) = [op for op in loop.body if isinstance(op, Mma)]
    _, n, k = mma.shape
    warps_per_wg = target.warpgroup_threads // target.warp_size
    consumer_body = [replace(loop, body=(replace(mma, shape=(rows, n, k)), MmaWait(mma_in_flight)))]
    if mma_in_flight:
        consumer_body.append(MmaWait(0))       # the accumulators are final only now
    consumer_body.append(replace(store, tile=(rows, store.tile[1])))
    program.roles = [
        Role("producer", 0, warps_per_wg, "thread", producer_regs, body=(replace(loop, body=copies),)),
        Role("consumer", warps_per_wg, warps_per_wg * consumers, "warpgroup", consumer_regs,
             body=tuple(consumer_body)),
    ]
    program.body = ()
    for name, ring in program.rings.items():      # the producer fills every ring, the consumers drain it
        program.rings[name] = replace(ring, producer="producer", consumers=("consumer",))
    program.threads = target.warpgroup_threads * (1 + consumers)


@register("wl-specialize", "Warp roles: a TMA producer warpgroup and wgmma consumer warpgroups, with setmaxnreg budgets",
          options={"producer-regs": int, "consumer-regs": int, "mma-in-flight": int},
          after=("wl-tile", "wl-pipeline"))
def run(module, producer_regs: int = 40, consumer_regs: int = 232, mma_in_flight: int = 1):
    for kernel in kernel_ops(module):
        edit_program(kernel, lambda p: specialize(p, producer_regs, consumer_regs, mma_in_flight))
