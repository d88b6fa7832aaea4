"""The Tensor Memory MMA atoms (sm_100a: Blackwell's tcgen05): one thread issues an MMA whose accumulator lives in
Tensor Memory; completion is an mbarrier arrival (tcgen05.commit); TMEM is allocated, read and written by warps.

    atoms.tmem_alloc(b, slot, 512, group)            # the allocating warp; the address lands in smem
    atoms.mma_smem(b, d, desc_a, desc_b, a_steps, b_steps, idesc, first, group)
    atoms.commit(b, barrier, group, multicast)
    v = atoms.tmem_load(b, taddr, 32); atoms.tmem_wait_load()
    atoms.before_sync(); <barrier or arrive>; atoms.after_sync()

Fences (PTX ISA 9.7.16.6 "tcgen05-memory-consistency-model"): tcgen05.fence::after_thread_sync after every wait or
barrier a Tensor Memory role passes, ::before_thread_sync before every arrive or barrier that publishes its work.
Instructions come from `warploom.lowering.emit.tcgen05`. No Blackwell GPU exists here: code built from these atoms
is checked by ptxas, its SASS and the emulator, and has not run on hardware.
"""
from __future__ import annotations

from mlir import ir

from warploom.layout import Sm100InstrDescriptor, Sm100SmemDescriptor
from warploom.lowering.emit import tcgen05

from .base import Atoms, RowChunk


class TensorMemoryAtoms(Atoms):
    accumulator = "tmem"
    issue = "thread"
    smem_descriptor = Sm100SmemDescriptor

    def instr_descriptor(self, elem: str, m: int, n: int, a_major: str, b_major: str) -> int:
        """The 32-bit instruction descriptor of an f32-accumulating MMA of shape m x n on `elem` inputs (checked
        against the target's shapes by the caller; raises ValueError on what it cannot encode)."""
        self.target.check_mma_major(elem, a_major)
        self.target.check_mma_major(elem, b_major)
        return Sm100InstrDescriptor(elem, elem, "f32", m, n, a_major=a_major, b_major=b_major).encode()

    def mma_smem(self, b, d: ir.Value, desc_a: ir.Value, desc_b: ir.Value, a_steps: list[int], b_steps: list[int],
                 idesc: int, accumulate_first: ir.Value, group: int = 1) -> None:
        """D (+)= A B over len(a_steps) k-blocks into TMEM address d, A and B from smem descriptors advanced by their
        k-block steps; the first k-block accumulates when `accumulate_first` (i1, or a function making it where the
        first MMA is issued) is true, the others always."""
        c = b.const
        on = b.cmp("eq", c(0), c(0))
        for kk, (sa, sb) in enumerate(zip(a_steps, b_steps)):
            da = desc_a if kk == 0 else b.add(desc_a, c(sa, b.i64))
            db = desc_b if kk == 0 else b.add(desc_b, c(sb, b.i64))
            if kk == 0:
                first = accumulate_first() if callable(accumulate_first) else accumulate_first
            tcgen05.mma(b, d, da, db, idesc, first if kk == 0 else on, group)

    def mma_tmem_a(self, b, d: ir.Value, a_column, desc_b: ir.Value, b_steps: list[int], idesc: int,
                   accumulate_first: ir.Value) -> None:
        """D (+)= A B with k-block kk of A in Tensor Memory at address a_column(kk) (i32), B from smem."""
        c = b.const
        on = b.cmp("eq", c(0), c(0))
        for kk, sb in enumerate(b_steps):
            db = desc_b if kk == 0 else b.add(desc_b, c(sb, b.i64))
            tcgen05.mma_tmem_a(b, d, a_column(kk), db, idesc, accumulate_first if kk == 0 else on)

    def commit(self, b, barrier: ir.Value, group: int = 1, multicast: int | None = None) -> None:
        """One arrival on `barrier` once this thread's MMAs so far are done (to each CTA of `multicast`)."""
        tcgen05.commit(b, barrier, group, multicast)

    def after_sync(self) -> None:
        tcgen05.fence_after()

    def before_sync(self) -> None:
        tcgen05.fence_before()

    def tmem_alloc(self, b, slot: ir.Value, columns: int, group: int = 1) -> None:
        tcgen05.alloc(b, slot, columns, group)

    def tmem_relinquish(self, group: int = 1) -> None:
        tcgen05.relinquish(group)

    def tmem_dealloc(self, b, taddr: ir.Value, columns: int, group: int = 1) -> None:
        tcgen05.dealloc(b, taddr, columns, group)

    def tmem_load(self, b, taddr: ir.Value, columns: int) -> ir.Value:
        """A warp's 32 lanes x `columns` cells from taddr, one row a thread (vector of i32)."""
        return tcgen05.ld_32x32b(b, taddr, columns)

    def tmem_wait_load(self) -> None:
        tcgen05.wait_ld()

    def tmem_store(self, b, taddr: ir.Value, values: ir.Value) -> None:
        tcgen05.st_32x32b(b, taddr, values)

    def tmem_wait_store(self) -> None:
        tcgen05.wait_st()

    # ---- an accumulator in Tensor Memory as rows (the attention's softmax and epilogue) -------------------------
    rows_resident = False         # a row is read from TMEM chunk by chunk; a second pass reads it again

    def row_chunks(self, n: int, chunk: int | None = None) -> list[RowChunk]:
        """A thread's row (its TMEM lane) of an n-column accumulator in chunks of `chunk` columns (what the role's
        registers hold at once; the whole row without one)."""
        chunk = chunk or n
        if n % chunk:
            raise ValueError(f"{n} columns do not split into chunks of {chunk}")
        return [RowChunk((tuple((j, first + j) for j in range(chunk)),), first, chunk)
                for first in range(0, n, chunk)]

    def read_rows(self, b, source: tuple, chunk: RowChunk, name: str = "s", load: int | None = None) -> list:
        """`source` = (the thread's lane address, the accumulator's first column): the chunk's columns as f32
        (tcgen05.ld, `load` columns each, the whole chunk in one without it; one wait::ld after them all)."""
        lane_addr, column = source
        load = load or chunk.size
        if chunk.size % load:
            raise ValueError(f"a chunk of {chunk.size} columns does not split into loads of {load}")
        raw = [self.tmem_load(b, b.add(lane_addr, b.const(column + chunk.first + k)), load)
               for k in range(0, chunk.size, load)]
        self.tmem_wait_load()
        return [b.bitcast(b.extractelement(r, j, name), b.f32) for r in raw for j in range(load)]

    def row_reduce(self, b, values: list, combine) -> list:
        """Nothing to combine: a thread holds its whole row."""
        return values

    def write_probs(self, b, dest: tuple, chunk: RowChunk, probs: list, pack) -> None:
        """`dest` = (the thread's lane address, P's first column): the chunk's probabilities as 16-bit pairs (`pack`),
        two a 32-bit column, tcgen05.st at P's column first / 2 (the P V MMA reads A from there). Not waited for
        here (tmem_wait_store)."""
        lane_addr, column = dest
        packed = b.undef(ir.VectorType.get([chunk.size // 2], b.i32))
        for j in range(chunk.size // 2):
            packed = b.insertelement(packed, b.bitcast(pack(probs[2 * j], probs[2 * j + 1]), b.i32), b.const(j))
        self.tmem_store(b, b.add(lane_addr, b.const(column + chunk.first // 2)), packed)
