"""Register fragments: which matrix element each thread's register holds.

- `wgmma_accumulator(n)`: the m64nN f32 accumulator of wgmma (PTX ISA 9.7.15.5.1.1.1, "Matrix
  Fragments for wgmma.mma_async.m64nNk16", accumulator D). Warp w = t // 32 owns rows 16w..16w+15;
  lane l has r0 = 16w + l // 4, and register 4j + 2h + e holds (r0 + 8h, 8j + 2(l % 4) + e).
- `wgmma_a_k16()`: the m64k16 16-bit A operand held in registers (same section, multiplicand A;
  four .f16x2 registers a0..a7). Per warp it is the mma.m16n8k16 A fragment: element 2i + e of
  register i holds row 16w + l // 4 + 8 (i % 2), column 2 (l % 4) + 8 (i // 2) + e. The ISA gives
  this as a figure (wgmma-64N16-A); the row rule is shared with the accumulator.
- `tcgen05_ldst_registers(shape, num)`: 32-bit registers per thread of tcgen05.ld/st (PTX ISA
  9.7.16.8.3 "Matrix fragments" / "tcgen05-data-movement-shape"), and the lane-quadrant rule:
  warp w reaches TMEM lanes 32 (w % 4) .. 32 (w % 4) + 31 only.

Fragments are numpy arrays indexed [thread, element] so the lowering, the emulator and tests
read one table.
"""
from __future__ import annotations

import numpy as np

from warploom.layout.ops import INT
from warploom.targets import get as get_target

_SM90 = get_target("sm_90a")
_SM100 = get_target("sm_100a")
WARPGROUP = _SM90.warpgroup_threads
WARP = _SM90.warp_size
MMA_M = _SM90.mma_shapes[0].m[0]


# The fragment rule, written once over an arithmetic namespace (warploom/layout/ops.py): ints or numpy arrays through
# INT (the tables below, the emulator, tests), IR values through the lowering's builder.
FRAGMENT_ROWS_PER_WARP = 16       # warp w of the warpgroup holds rows 16w .. 16w + 15
FRAGMENT_QUAD = 4                 # 4 lanes share a row; each holds 2 adjacent columns of every 8
FRAGMENT_HALF_ROWS = 8            # a thread's second row (h = 1) is 8 below its first


def fragment_row(warp, lane, ops=INT, half: int | None = None):
    """The row a thread's fragment registers hold within the warpgroup's 64: 16 warp + lane / 4 (+ 8 half when `half`
    is given, 0 or 1). The accumulator of wgmma and its 16-bit register-A operand share it."""
    row = ops.add(ops.mul(warp, ops.const(FRAGMENT_ROWS_PER_WARP)), ops.divu(lane, ops.const(FRAGMENT_QUAD)))
    return row if half is None else ops.add(row, ops.const(FRAGMENT_HALF_ROWS * half))


def fragment_col(lane, ops=INT):
    """The first of the two adjacent columns a thread holds in every 8 columns of a fragment: 2 (lane % 4)."""
    return ops.mul(ops.remu(lane, ops.const(FRAGMENT_QUAD)), ops.const(2))


def accumulator_register(j: int, h: int, e: int) -> int:
    """The accumulator register holding column 8j + fragment_col + e of row half h: 4j + 2h + e."""
    return 4 * j + 2 * h + e


def accumulator_rows(n: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The m64nN accumulator a thread holds, row by row: for its row half h (0, 1), (register, column past
    fragment_col) of each of its n / 4 values in that row, in column order."""
    groups = n // (2 * FRAGMENT_QUAD)
    return tuple(tuple((accumulator_register(j, h, e), 2 * FRAGMENT_QUAD * j + e) for j in range(groups) for e in range(2))
                 for h in range(2))


def a_fragment_pairs(n: int) -> list[list[tuple[int, int]]]:
    """The register-A fragments of the m64k16 A operand (wgmma_a_k16) made from an m64nN accumulator of the same rows
    (P from S): k-block t, register i takes the accumulator registers (a, a + 1) of row half i % 2 and columns
    16 t + 8 (i // 2) + fragment_col + e, e = 0, 1."""
    return [[(accumulator_register(2 * t + i // 2, i % 2, 0), accumulator_register(2 * t + i // 2, i % 2, 1))
             for i in range(4)] for t in range(n // 16)]


def wgmma_accumulator(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each [128 threads, n // 2 registers]: the element register r of thread t holds."""
    _SM90.check_mma_shape(MMA_M, n, "bf16")
    t = np.arange(WARPGROUP)[:, None]
    r = np.arange(n // 2)[None, :]
    warp, lane = t // WARP, t % WARP
    j, h, e = r // 4, (r // 2) % 2, r % 2
    rows = fragment_row(warp, lane) + FRAGMENT_HALF_ROWS * h
    cols = 8 * j + fragment_col(lane) + e
    return np.broadcast_to(rows, (WARPGROUP, n // 2)).copy(), np.broadcast_to(cols, (WARPGROUP, n // 2)).copy()


def wgmma_a_k16() -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each [128 threads, 8 elements a0..a7] (element 2i + e is half e of register i):
    the 64 x 16 A operand of wgmma with A in registers (f16/bf16)."""
    t = np.arange(WARPGROUP)[:, None]
    a = np.arange(8)[None, :]
    warp, lane = t // WARP, t % WARP
    reg, e = a // 2, a % 2
    rows = fragment_row(warp, lane) + FRAGMENT_HALF_ROWS * (reg % 2)
    cols = fragment_col(lane) + 8 * (reg // 2) + e
    return rows, cols


# tcgen05.ld/st shape -> 32-bit registers per thread for .num = 1 (they scale with .num)
TCGEN05_LDST_REGS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
TCGEN05_MAX_REGS = 128


def tcgen05_ldst_registers(shape: str, num: int) -> int:
    """32-bit registers each thread gets from tcgen05.ld (or gives to tcgen05.st) `shape`.x`num`."""
    if shape not in TCGEN05_LDST_REGS:
        raise ValueError(f"tcgen05.ld/st shape {shape!r}: the shapes are {', '.join(TCGEN05_LDST_REGS)}")
    if num < 1 or num & (num - 1) or num > TCGEN05_MAX_REGS:
        raise ValueError(f"tcgen05.ld/st .num = x{num}: must be a power of two in 1..{TCGEN05_MAX_REGS}")
    regs = TCGEN05_LDST_REGS[shape] * num
    if regs > TCGEN05_MAX_REGS:
        raise ValueError(f"tcgen05.ld/st {shape}.x{num} needs {regs} registers per thread; at most "
                         f"{TCGEN05_MAX_REGS}: use .x{TCGEN05_MAX_REGS // TCGEN05_LDST_REGS[shape]} or less")
    return regs


def tmem_lanes_of_warp(warp: int) -> range:
    """TMEM lanes warp `warp` of the CTA may read or write with tcgen05.ld/st."""
    if warp < 0:
        raise ValueError(f"warp index {warp} is negative")
    q = _SM100.tmem.lanes_per_warp
    quadrant = warp % (_SM100.tmem.lanes // q)
    return range(q * quadrant, q * quadrant + q)


def check_tmem_lane_access(warp: int, lane_base: int) -> None:
    """Raise unless warp `warp` may run tcgen05.ld/st at TMEM lane `lane_base`."""
    lanes = tmem_lanes_of_warp(warp)
    if lane_base not in lanes:
        raise ValueError(f"warp {warp} touches TMEM lane {lane_base}; warp {warp} (quadrant {warp % 4}) reaches lanes "
                         f"{lanes.start}..{lanes.stop - 1} only: issue it from warp {lane_base // 32} (mod 4)")
