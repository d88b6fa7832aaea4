"""The planned FA3-style sm_90a attention program, written out by hand: the contract between the attention
planning passes (wl-tile .. wl-plan-barriers on a wl.attention) and the sm_90a attention lowering.

The passes must produce exactly this Program from `wl.attention` (tests compare them), and the lowering is
tested on it directly (so either side can change only together with this file). docs/attention-sm90.md
explains the schedule; every number below follows from (elem, head_dim, block_n, stages, causal).

    producer  (warpgroup 0, one elected thread, 24 regs): Q once; per key block: K then V through 2-stage rings
    consumer  (warpgroups 1-2, 240 regs each): per key block, S = Q K^T (wgmma, smem x smem), masked online
              softmax in registers, O += P V (wgmma, P from registers); the two warpgroups take turns at the
              tensor cores through the named barriers turn[0], turn[1]; then O / rowsum written into the
              staging tile o and stored by TMA (each warpgroup its 64 rows, synced on epilogue[w]), LSE stored

With schedule="persistent" the grid is one CTA per SM (at most), each walking (query block, head, batch) tiles
(runtime/rules.py: `attention_tile`, the order a kernel argument); every role runs its body once per tile, the
K/V rings counting on across tiles; Q gets an empty barrier (q_empty) that the consumers arrive on after their
key loop and the closing turn sync, and that the producer waits for before loading the next tile's Q; with
q_stages = 2 Q's ring has two stages advancing once per tile (tile t's stage t % 2), so the next tile's Q loads
while this one runs: the standard persistent kernels' (head dim 64 and 128 on their own key block and 2 stages;
measured in run 49, benchmarks/NOTES.md), the default here too.

With `overlap` (the default: FA3's intra-warpgroup overlap) the consumer's key loop is software pipelined: block
0 (S_0 and its softmax) is the loop's first section; each later block j issues S_j, then O += P_{j-1} V_{j-1}
(the V ring one block behind the K ring: lag 1), waits for S_j only (wgmma.wait_group 1) and runs the softmax of
block j while that P V is in flight, then waits for it (wait_group 0) and rescales O; the last section issues
the last block's P V. Without it (overlap=False) each block runs S, softmax, P V with every MMA retired at once.
"""
from __future__ import annotations

from warploom import targets
from warploom.dialect.shapes import TensorType
from warploom.kernel import (Arrive, Compute, Copy, Loop, MBarrier, Mma, MmaWait, NamedBarrier, Operand, Program,
                             Region, Ring, Role, Store, Sync, Wait)
from warploom.kernel.program import BARRIER_STORAGE

BLOCK_M = 128                   # query rows per CTA: 64 per consumer warpgroup (wgmma m64)
STAGES = 2


def default_block_n(head_dim: int, schedule: str = "grid") -> int:
    """Keys per block: measured best on the H200 for the grid schedule (benchmarks/NOTES.md, run 8) and the
    persistent one (run 42; warploom/kernels.py); wl-tile's default must agree."""
    return {"grid": {64: 128, 128: 176, 256: 80}, "persistent": {64: 128, 128: 128, 256: 80}}[schedule][head_dim]


def planned_fa3(elem: str = "bf16", head_dim: int = 128, causal: bool = False, block_n: int | None = None,
                stages: int = STAGES, overlap: bool = True, schedule: str = "grid",
                q_stages: int | None = None) -> Program:
    t = targets.get("sm_90a")
    if q_stages is None:        # the standard persistent tiles prefetch the next tile's Q
        q_stages = 2 if schedule == "persistent" and head_dim in (64, 128) and block_n is None and \
            stages == STAGES else 1
    d, bm = head_dim, BLOCK_M
    bn = default_block_n(d, schedule) if block_n is None else block_n
    esize = targets.ELEMENT_BITS[elem] // 8
    q_bytes, kv_bytes = bm * d * esize, bn * d * esize
    persistent = schedule == "persistent"          # Q is loaded once per tile: the Q ring gets an empty barrier
    mb, slack, limit = t.mbarrier_bytes, t.smem_base_align, t.smem_limit
    # Q's stages: one, or (q_stages = 2, a persistent kernel) two beside K, V and O's own staging tile, the next
    # tile's Q loading during this one (wl-pipeline{q-stages=2})
    count = q_stages * (1 + persistent) + 4 * stages
    kv0 = q_stages * q_bytes
    regions = {
        "q": Region("q", "smem", elem, (bm, d), ("M", "D"), q_stages, 128, 0, kv0, 1024),
        "k": Region("k", "smem", elem, (bn, d), ("N", "D"), stages, 128, kv0, stages * kv_bytes, 1024),
        "v": Region("v", "smem", elem, (bn, d), ("N", "D"), stages, 128, kv0 + stages * kv_bytes,
                    stages * kv_bytes, 1024),
    }
    # O's staging tile for the TMA store: on Q's bytes in the grid schedule (Q is dead after the key loop); its own
    # in the persistent one (the next tile's Q loads while O is stored) where that fits, else Q's again, and then Q
    # is freed (q_empty) only after O's store
    own = persistent and kv0 + q_bytes + 2 * stages * kv_bytes + count * mb + slack <= limit
    o_at = kv0 + 2 * stages * kv_bytes if own else 0
    regions["o"] = Region("o", "smem", elem, (bm, d), ("M", "D"), 1, 128, o_at, q_bytes, 1024,
                          aliases=() if own else ("q",))
    bar0 = kv0 + 2 * stages * kv_bytes + (q_bytes if own else 0)
    regions[BARRIER_STORAGE] = Region(BARRIER_STORAGE, "smem", "i64", (count,), offset=bar0, size=count * mb,
                                      align=mb)
    barriers, off = {}, bar0
    for name, n, arrivals, tx in (("q_full", q_stages, 1, q_bytes),
                                  *((("q_empty", q_stages, 2, 0),) if persistent else ()),
                                  ("k_full", stages, 1, kv_bytes), ("k_empty", stages, 2, 0),
                                  ("v_full", stages, 1, kv_bytes), ("v_empty", stages, 2, 0)):
        barriers[name] = MBarrier(name, n, arrivals, tx, offset=off)
        off += n * mb
    rings = {
        "q": Ring("q", q_stages, ("q",), "producer", ("consumer",), full="q_full",
                  empty="q_empty" if persistent else None, counts="tile" if q_stages > 1 else "iteration"),
        "k": Ring("k", stages, ("k",), "producer", ("consumer",), full="k_full", empty="k_empty"),
        "v": Ring("v", stages, ("v",), "producer", ("consumer",), full="v_full", empty="v_empty"),
    }
    trip = ("causal_blocks", "Sq", "Sk", "m", bm, bn) if causal else ("cdiv", "Sk", bn)
    producer = Role("producer", 0, 4, "thread", 24, body=(
        *((Wait("q_empty", "phase^1"),) if persistent else ()),        # the last tile's consumers are done with Q
        Arrive("q_full", tx_bytes=q_bytes), Copy("q", "q", "q_full"),
        Loop(trip, name="kv", body=(
            Wait("k_empty", "phase^1"), Arrive("k_full", tx_bytes=kv_bytes), Copy("k", "k", "k_full"),
            Wait("v_empty", "phase^1"), Arrive("v_full", tx_bytes=kv_bytes), Copy("v", "v", "v_full"))),
    ))
    qk = Mma(Operand("smem", "q", "K"), Operand("smem", "k", "K"), Operand("regs", "s"), (64, bn, d), k_dim="D",
             accumulate=False)
    pv = Mma(Operand("regs", "p", "K"), Operand("smem", "v", "MN"), Operand("regs", "o_acc"), (64, d, bn), k_dim="N",
             lag=1)                                                    # P_{j-1} V_{j-1}: the V ring's previous stage
    softmax = Compute("softmax", ("s", "row_max", "row_sum"), ("p", "row_max", "row_sum", "corr"))
    overlapped = Loop(trip, name="kv", carries=("o_acc", "row_max", "row_sum", "p"), first=(
        # key block 0: S_0 and its softmax; no P V yet (O is 0)
        Wait("k_full"), Sync("turn"), qk, Sync("turn", arrive_only=True, slot="next"), MmaWait(0),
        Arrive("k_empty", per="warpgroup"),
        softmax,
    ), body=(
        # key block j >= 1: S_j, then P_{j-1} V_{j-1}, both in this warpgroup's turn
        Wait("k_full"),
        Sync("turn"),
        qk,
        Wait("v_full", lag=1),
        pv,
        Sync("turn", arrive_only=True, slot="next"),
        MmaWait(1),                                                    # S_j retired; P_{j-1} V_{j-1} in flight
        Arrive("k_empty", per="warpgroup"),
        softmax,                                                       # of block j, while P_{j-1} V_{j-1} runs
        MmaWait(0),                                                    # P_{j-1} V_{j-1} retired
        Arrive("v_empty", lag=1, per="warpgroup"),
        Compute("rescale", ("o_acc", "corr"), ("o_acc",)),             # before P_j V_j accumulates into O
    ), last=(
        # after the last block n-1: its P V
        Wait("v_full", lag=1), pv, MmaWait(0), Arrive("v_empty", lag=1, per="warpgroup"),
    ))
    serial = Loop(trip, name="kv", carries=("o_acc", "row_max", "row_sum"), body=(
        Wait("k_full"),
        Sync("turn"),                                              # this warpgroup's turn at the tensor cores
        Mma(Operand("smem", "q", "K"), Operand("smem", "k", "K"), Operand("regs", "s"), (64, bn, d),
            k_dim="D", accumulate=False),
        Sync("turn", arrive_only=True, slot="next"),               # the other warpgroup's turn
        MmaWait(0),
        Arrive("k_empty", per="warpgroup"),
        Compute("online_softmax", ("s", "row_max", "row_sum", "o_acc"), ("p", "row_max", "row_sum", "o_acc")),
        Wait("v_full"),
        Mma(Operand("regs", "p", "K"), Operand("smem", "v", "MN"), Operand("regs", "o_acc"), (64, d, bn),
            k_dim="N"),
        MmaWait(0),
        Arrive("v_empty", per="warpgroup")))
    consumer = Role("consumer", 4, 8, "warpgroup", 240, body=(
        Wait("q_full"),
        Sync("turn", arrive_only=True, slot="next", warpgroup=1, tiles="first"),    # warpgroup 0 goes first
        overlapped if overlap else serial,
        Sync("turn", warpgroup=0, tiles="last"),           # takes warpgroup 1's last hand-over (the CTA's last tile)
        *((Arrive("q_empty", per="warpgroup"),) if persistent and own else ()),    # the next tile's Q may load
        Compute("normalize", ("o_acc", "row_max", "row_sum"), ("o_acc", "lse")),
        Store("o_acc", "out", (64, d), region="o", barrier="epilogue"),     # through smem o, by TMA
        *((Arrive("q_empty", per="warpgroup"),) if persistent and not own else ()),   # O's store read Q's bytes
        Store("lse", "lse", (64,)),
    ))
    seq = TensorType((None, None, None, d), elem)
    return Program(
        kind="attention", target="sm_90a", inputs={"q": seq, "k": seq, "v": seq},
        outputs={"out": seq, "lse": TensorType((None, None, None), "f32")}, threads=384,
        roles=[producer, consumer], regions=regions, barriers=barriers,
        named_barriers={"turn": NamedBarrier("turn", 1, 256, count=2),
                        "epilogue": NamedBarrier("epilogue", 3, 128, count=2)}, rings=rings,
        registers={"s": (64, bn), "p": (64, bn), "o_acc": (64, d), "row_max": (64,), "row_sum": (64,),
                   "lse": (64,), **({"corr": (64,)} if overlap else {})},
        smem_bytes=off + t.smem_base_align,
        attrs={"tile": [bm, bn, d],
               "grid": ([["attention_persistent", "Sq", bm, "Hq", "B", "SMS"], ["const", 1], ["const", 1]]
                        if persistent else [["cdiv", "Sq", bm], ["cdiv", "Hq", 1], ["cdiv", "B", 1]]),
               "schedule": schedule, "cluster": [1, 1, 1], "stages": stages, "causal": causal, "acc_elem": "f32"})
