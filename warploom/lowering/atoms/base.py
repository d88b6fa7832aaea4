"""The atom interface every target's atom set implements (`Atoms`), the error a missing atom raises and the atom
names; the sets (wgmma.py, tcgen05.py) and `atoms_for` are in this package's __init__ (warploom.lowering.atoms)."""
from __future__ import annotations

from dataclasses import dataclass

from warploom.targets import Target


@dataclass(frozen=True)
class RowChunk:
    """A share of an MMA accumulator (S, O) one thread reads at a time (`Atoms.row_chunks`): `rows[h]` lists, for the
    h-th row the thread holds, (the value's index in what `read_rows` returns, its column counted from the thread's
    first column), columns ascending (the order a row's reductions take them); `first` is the chunk's first column
    (for a chunk of whole rows), `size` how many values `read_rows` returns."""
    rows: tuple[tuple[tuple[int, int], ...], ...]
    first: int
    size: int


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
              "tmem_load", "tmem_wait_load", "tmem_store", "tmem_wait_store", "instr_descriptor",
              "row_chunks", "rows_resident", "read_rows", "row_reduce", "write_probs")
