"""Per-target atoms: the few things the target-neutral lowering asks a target for, chosen from its `Target` record.

The lowering of a kernel program (`warploom.lowering.core` and the family modules `gemm`, `attention`) writes roles,
rings, waits, arrivals, copies, tile walks and stores once. What differs between tensor-core generations sits
behind one `Atoms` object per target:

    smem_descriptor         the MMA's shared-memory descriptor encoder (warploom.layout)
    accumulator             where an MMA's accumulator lives: "regs" (a warpgroup's fragment) or "tmem"
    issue                   who issues an MMA: "warpgroup" or "thread"
    mma_smem(...)           D (+)= A B for one MMA tile, A and B from smem descriptors, k-block by k-block
    mma_regs_a(...)         the same with A in registers (a warpgroup's register-A fragment)
    mma_tmem_a(...)         the same with A in Tensor Memory
    mma_wait(pending)       wait until at most `pending` MMA groups are in flight (register accumulators)
    commit(...)             arrive on an mbarrier once this thread's MMAs are done (Tensor Memory accumulators)
    after_sync() / before_sync()
                            the fences that order the MMA unit's work around a thread barrier or mbarrier
    tmem_alloc / tmem_relinquish / tmem_dealloc / tmem_load / tmem_wait_load
                            Tensor Memory management and read-out
    row_chunks(n, chunk)    how a thread holds an MMA accumulator of n columns, as rows (`RowChunk`s)
    rows_resident           whether those rows stay in registers between two reads (else each read loads them)
    read_rows / row_reduce / write_probs
                            read a chunk of an accumulator (S, O) as f32 values, combine a value over the threads
                            that share its row, write P (16-bit) where the P V MMA reads its A operand

`atoms_for(target)` picks the set from the target's capabilities (where its MMA keeps the accumulator), never from
its name. An atom a target lacks raises `AtomMissing` (a NotImplementedError) naming the atom and the target, so a new
target's lowering fails at the first thing it has not written (tests/unit/test_atoms.py runs the neutral lowering on
a stub target to show it).
"""
from __future__ import annotations

from warploom.targets import Target

from .base import ATOM_NAMES, AtomMissing, Atoms, RowChunk  # noqa: F401  (the interface, for the lowering, new sets)
from .tcgen05 import TensorMemoryAtoms
from .wgmma import WarpgroupAtoms

# where a target's MMA keeps its accumulator (Target.mma_sources["acc"]) -> the atom set that lowers it; a new
# target whose accumulator lives somewhere new registers its set here
ATOM_SETS: dict[str, type[Atoms]] = {"regs": WarpgroupAtoms, "tmem": TensorMemoryAtoms}


def atoms_for(target: Target) -> Atoms:
    """The atom set of `target`, by where its MMA keeps the accumulator (`Target.mma_sources["acc"]`), never by name."""
    for place in target.mma_sources.get("acc", ()):
        if place in ATOM_SETS:
            return ATOM_SETS[place](target)
    raise AtomMissing(f"target {target.name} keeps MMA accumulators in {list(target.mma_sources.get('acc', ()))}; "
                      f"warploom has atom sets for {sorted(ATOM_SETS)}: write one in warploom/lowering/atoms/ and "
                      "register it in ATOM_SETS")
