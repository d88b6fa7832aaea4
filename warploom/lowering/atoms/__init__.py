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

`atoms_for(target)` picks the set from the target's capabilities (where its MMA keeps the accumulator), never from
its name. An atom a target lacks raises `AtomMissing` (a NotImplementedError) naming the atom and the target, so a new
target's lowering fails at the first thing it has not written (tests/unit/test_atoms.py runs the neutral lowering on
a stub target to show it).
"""
from __future__ import annotations

from warploom.targets import Target


class AtomMissing(NotImplementedError):
    """A target's atom set does not implement an atom the lowering needs."""


class Atoms:
    """The atom interface. Subclasses implement what their target has; the rest raise AtomMissing."""
    accumulator: str = ""           # "regs" or "tmem": which family lowering (gemm.py, attention.py) applies
    issue: str = ""                 # "warpgroup" or "thread"

    def __init__(self, target: Target):
        self.target = target

    def __getattr__(self, name: str):
        # only reached for names the class does not define: every atom of the interface not written for this target
        if name in ATOM_NAMES:
            raise AtomMissing(f"atom {name!r} is not implemented for target {self.target.name} "
                              f"({type(self).__name__}): write it in warploom/lowering/atoms/ (docs/design.md, "
                              "\"Adding a target\")")
        raise AttributeError(name)


# every atom a target may provide (docs/design.md, "Adding a target")
ATOM_NAMES = ("smem_descriptor", "acc_type", "zero_acc", "undef_acc", "mma_smem", "mma_regs_a", "mma_tmem_a",
              "mma_wait", "commit", "after_sync", "before_sync", "tmem_alloc", "tmem_relinquish", "tmem_dealloc",
              "tmem_load", "tmem_wait_load", "tmem_store", "tmem_wait_store", "instr_descriptor")


def atoms_for(target: Target) -> Atoms:
    """The atom set of `target`, by where its MMA keeps the accumulator (`Target.mma_sources["acc"]`), never by name."""
    for place in target.mma_sources.get("acc", ()):
        if place in ATOM_SETS:
            return ATOM_SETS[place](target)
    raise AtomMissing(f"target {target.name} keeps MMA accumulators in {list(target.mma_sources.get('acc', ()))}; "
                      f"warploom has atom sets for {sorted(ATOM_SETS)}: write one in warploom/lowering/atoms/ and "
                      "register it in ATOM_SETS")


from .tcgen05 import TensorMemoryAtoms  # noqa: E402  (the sets import the interface above)
from .wgmma import WarpgroupAtoms  # noqa: E402

# where a target's MMA keeps its accumulator (Target.mma_sources["acc"]) -> the atom set that lowers it; a new
# target whose accumulator lives somewhere new registers its set here
ATOM_SETS: dict[str, type[Atoms]] = {"regs": WarpgroupAtoms, "tmem": TensorMemoryAtoms}
