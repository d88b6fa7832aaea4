"""The warpgroup MMA atoms (sm_90a: Hopper's wgmma): accumulators in a warpgroup's registers, groups of MMAs
committed and waited for, no Tensor Memory.

    acc = atoms.zero_acc(b, n)
    acc = atoms.mma_smem(b, acc, desc_a, desc_b, a_steps, b_steps, (64, n, 16), "bf16", "K", "K")
    acc = atoms.mma_regs_a(b, acc, p_fragments, desc_b, b_steps, n, "bf16", "MN")
    atoms.mma_wait(1)

Each MMA call issues one wgmma per k-block (the descriptors advanced by the layout's k-block steps, in the
descriptor's 16-byte units), fenced before (wgmma.fence orders the accumulator registers) and committed as one
group after. Instructions come from `warploom.lowering.emit.wgmma`.
"""
from __future__ import annotations

from mlir import ir

from warploom.layout import WgmmaSmemDescriptor
from warploom.layout.fragments import FRAGMENT_QUAD, a_fragment_pairs, accumulator_rows
from warploom.lowering.emit import sync, wgmma

from .base import Atoms, RowChunk

# wgmma's operand layouts are MMALayout names: A "row" = K-major, "col" = MN-major (imm-trans-a); B "col" = K-major,
# "row" = MN-major
A_LAYOUT = {"K": "row", "MN": "col"}
B_LAYOUT = {"K": "col", "MN": "row"}


class WarpgroupAtoms(Atoms):
    accumulator = "regs"
    issue = "warpgroup"
    smem_descriptor = WgmmaSmemDescriptor

    def acc_type(self, b, n: int) -> ir.Type:
        """The m64nN f32 accumulator fragment: N/2 registers a thread."""
        return wgmma.acc_type(b, n)

    def zero_acc(self, b, n: int) -> ir.Value:
        return b.zero(wgmma.acc_type(b, n), "acc")

    def undef_acc(self, b, n: int) -> ir.Value:
        """An accumulator whose input the first MMA ignores (scale-d 0)."""
        return b.undef(wgmma.acc_type(b, n))

    def mma_smem(self, b, acc: ir.Value, desc_a: ir.Value, desc_b: ir.Value, a_steps: list[int], b_steps: list[int],
                 shape: tuple[int, int, int], elem: str, a_major: str, b_major: str,
                 overwrite: bool = False) -> ir.Value:
        """acc (+)= A B over len(a_steps) k-blocks, A and B from smem descriptors; k-block kk reads each descriptor
        advanced by its step kk (16-byte units; step 0 is the descriptor itself). `overwrite`: the first k-block
        ignores the accumulator's input (scale-d 0). Returns the new accumulator (one committed group)."""
        c = b.const
        wgmma.fence()
        for kk, (sa, sb) in enumerate(zip(a_steps, b_steps)):
            da = desc_a if kk == 0 else b.add(desc_a, c(sa, b.i64))
            db = desc_b if kk == 0 else b.add(desc_b, c(sb, b.i64))
            scale = "zero" if kk == 0 and overwrite else "one"
            acc = wgmma.mma_async(b, acc, da, db, shape, elem, B_LAYOUT[b_major], A_LAYOUT[a_major], scale_d=scale)
        wgmma.commit()
        return acc

    def mma_regs_a(self, b, acc: ir.Value, fragments: list, desc_b: ir.Value, b_steps: list[int], n: int, elem: str,
                   b_major: str) -> ir.Value:
        """acc += A B with A in registers: fragments[kk] is k-block kk's register-A fragment (4 b32 a thread), B an
        smem descriptor advanced by b_steps[kk]. Returns the new accumulator (one committed group)."""
        c = b.const
        wgmma.fence()
        for kk, sb in enumerate(b_steps):
            db = desc_b if kk == 0 else b.add(desc_b, c(sb, b.i64))
            acc = wgmma.mma_async_reg_a(b, acc, fragments[kk], db, n, elem, trans_b=1 if b_major == "MN" else 0)
        wgmma.commit()
        return acc

    # ---- an accumulator fragment as rows (the attention's softmax and epilogue) ----------------------------------
    rows_resident = True          # the fragment is the thread's registers: a second pass reads them again for free

    def row_chunks(self, n: int, chunk: int | None = None) -> list[RowChunk]:
        """One chunk, the whole m64nN fragment: the thread's two rows (r0 and r0 + 8), n / 4 values each
        (layout.fragments.accumulator_rows); `chunk` does not apply (the registers hold it all anyway)."""
        return [RowChunk(accumulator_rows(n), 0, n // 2)]

    def read_rows(self, b, acc: ir.Value, chunk: RowChunk, name: str = "s", load: int | None = None) -> list:
        """The fragment's registers as f32 values, in register order (`name`: the values' name in the IR; `load`
        does not apply)."""
        return [b.extractvalue(acc, i, b.f32, name) for i in range(chunk.size)]

    def row_reduce(self, b, values: list, combine) -> list:
        """`combine` over the lanes of a quad, which share a fragment row, for each of `values` (one a row): shfl.bfly
        xor 1, then xor 2, the rows' shuffles side by side so one's latency hides behind the other's."""
        lane_xor = 1
        while lane_xor < FRAGMENT_QUAD:
            shuffled = [sync.shfl_bfly(b, v, lane_xor) for v in values]
            values = [combine(v, o) for v, o in zip(values, shuffled)]
            lane_xor *= 2
        return values

    def write_probs(self, b, dest, chunk: RowChunk, probs: list, pack) -> list:
        """P as the register-A fragments of the P V wgmma (layout.fragments.a_fragment_pairs): k-block t holds S
        columns 16t .. 16t + 15, 4 b32 of two 16-bit values (`pack`) a thread. `dest` does not apply: returned."""
        return [[b.bitcast(pack(probs[lo], probs[hi]), b.i32) for lo, hi in block]
                for block in a_fragment_pairs(2 * chunk.size)]

    def mma_wait(self, pending: int) -> None:
        """Until at most `pending` committed MMA groups of this warpgroup are in flight (wgmma.wait_group)."""
        if not 0 <= pending <= 7:
            raise ValueError(f"wl.mma_wait pending = {pending}: wgmma.wait_group takes 0..7")
        wgmma.wait(pending)

    def after_sync(self) -> None:
        """Nothing: wgmma reads smem through the async proxy only after its own fence (in mma_smem)."""

    def before_sync(self) -> None:
        """Nothing: a register accumulator is complete once mma_wait returns."""
