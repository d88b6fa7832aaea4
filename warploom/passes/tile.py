"""wl-tile: turn each 2-D `wl.matmul` into a `wl.kernel` that loops over K tiles, and each `wl.attention` into an
attention `wl.kernel` that loops over key blocks.

    %c = "wl.matmul"(%a, %b) {transpose_b = false}          (a [M,K], b [K,N])
becomes
    %c = "wl.kernel"(%a, %b) ({
      "wl.k_loop"() ({
        "wl.load_tile"() {dims = ["M", "K"], operand = "a", tile = [128, 64]}
        "wl.load_tile"() {dims = ["K", "N"], operand = "b", tile = [64, 256]}
        "wl.mma"() {a = "a", b = "b", acc = "acc", shape = [128, 256, 64]}
      }) {trip = ["cdiv", "K", 64]}
      "wl.store_tile"() {operand = "c", acc = "acc", tile = [128, 256]}
    }) {kind = "gemm", tile = [128, 256, 64], grid = [["cdiv", "N", 256], ["cdiv", "M", 128], ["const", 1]], ...}

M, N and K stay runtime values: the grid and the trip count are rules over them (warploom/runtime/rules.py:
the runtime, the lowering and the emulator all evaluate these same tuples).

schedule = "grid" launches one CTA per output tile (grid cdiv(N, bn) x cdiv(M, bm)).
schedule = "persistent" launches min(tiles, SMS) CTAs (SMS: the GPU's SM count, a
launch size) and gives the kernel `schedule = "persistent"`: each role's body then
runs once per tile, for tiles t = ctaid.x, ctaid.x + nctaid.x, ... in row-major
order (n fastest), and the K iterations count on across tiles, so the producer
loads the next tile while the consumers store this one.
schedule = "streamk" (sm_90a GEMM, C by TMA) launches min(tiles x K tiles, SMS) CTAs, each taking an equal run of
the (tile, K tile) iterations (rules.streamk_start); a tile whose K tiles several CTAs share is summed in f32 by
the last of them to finish, through a workspace (the stream-K fix-up, warploom/lowering/gemm.py). It fills the
SMs where whole tiles would leave a wave partly idle: few tiles (M = 128 or less) or a fractional last wave.

An attention (rank-4 q, k, v; bf16/f16; head dim D in 64/128/256; Dv = D) becomes one CTA per 128 query rows
of one head of one batch (grid cdiv(Sq, 128) x Hq x B) whose body loads the Q tile once, loops over blocks of
block_n keys (`("cdiv", "Sk", bn)`, or under the causal mask `("causal_blocks", "Sq", "Sk", "m", 128, bn)`:
only the blocks query block m sees), computing S = Q K^T, the online softmax and O += P V per block, then
normalizes O and stores it and the LSE (a second result, f32 [B, Hq, Sq]). With schedule = "persistent" the grid
is min(tiles, SMS) CTAs, each walking (query block, head, batch) tiles in the static order of
`rules.attention_tile` (the tile order a runtime argument), the key blocks counting on across its tiles; with
schedule = "streamk" (non-causal) the grid is min(tiles x key blocks, SMS) CTAs, which walk whole tiles for all
waves but the last two and then split those tiles' key blocks in equal runs (`rules.attention_streamk_run`), the
last piece of a split tile to finish merging the others' partial O (warploom/lowering/attention_regs.py). Sizes, strides, GQA and the scale
are runtime arguments, so the kernel takes tensors of any B, S, H (a `tensor.cast` to `?` dims where the
graph's are static); `scale` and `layout` stay on the kernel for the launch but the kernel program ignores them.
"""
from __future__ import annotations

import math

from mlir import ir

from warploom import targets
from warploom.dialect import mlir_tensor_type, op_attrs, tensor_type
from warploom.dialect.kernel_ir import kernel_ops, make_op
from warploom.dialect.shapes import TensorType
from warploom.kernel import Compute, Load, Loop, Mma, Operand, Region, Store
from warploom.layout import SWIZZLE_128B
from warploom.kernel.contract import (ATTENTION_BLOCK_M, ATTENTION_ELEMENTS, ATTENTION_HEAD_DIMS, FA4_BLOCK_N,
                                      FA4_HEAD_DIMS, FA4_Q_TILES, FA4_RESCALE_THRESHOLD, GEMM_BLOCK_K, GEMM_BLOCK_M,
                                      GEMM_BLOCK_N, check_exp2_poly, default_attention_exp2_poly)
from warploom.kernel.contract import default_attention_block_n as default_block_n
from warploom.runtime import rules
from warploom.score import ModError, ScoreMods

from .registry import PassError, edit_program, register


def _regs(target: str) -> bool:
    """The target's MMA keeps its accumulators in a warpgroup's registers (the wgmma kernels' forms)."""
    return targets.get(target).accumulator == "regs"


def _tmem(target: str) -> bool:
    """The target's MMA keeps its accumulators in Tensor Memory (the tcgen05 kernels' forms)."""
    return targets.get(target).accumulator == "tmem"

MMA_ELEMENTS = ("bf16", "f16")        # what the sm_90a GEMM kernels take today
SWIZZLE_BYTES = SWIZZLE_128B.bytes   # a K tile row fills one swizzle span (the GEMM's operand layout)
CONSUMER_WARPGROUPS = (2, 3)         # the attention schedule: two (block-m 128) or three (192) consumer warpgroups
#                                      share the query tile, taking turns at the tensor cores
GEMM_CONSUMER_WARPGROUPS = (1, 2)    # the sm_90a GEMM: one consumer warpgroup per 64 rows (block-m 64 for small M)


def check_block_k(block_k: int, elem_bytes: int, op) -> None:
    """A GEMM's K tile row fills one 128-byte swizzle span (the operand layout every GEMM kernel uses)."""
    if block_k * elem_bytes != SWIZZLE_BYTES:
        raise PassError(f"block-k = {block_k}: a K tile row must be {SWIZZLE_BYTES} bytes for the 128-byte "
                        f"swizzle, so block-k = {SWIZZLE_BYTES // elem_bytes} for {elem_bytes}-byte elements", op)


def warpgroup_extents() -> list[int]:
    """The sm_90a GEMM tile extents its consumer warpgroups split, m64 each: block-m (block-n in a swap-AB GEMM)."""
    mma_m = targets.get("sm_90a").mma_shapes[0].m[0]
    return [n * mma_m for n in GEMM_CONSUMER_WARPGROUPS]


def check_tile(block_m: int, block_n: int, block_k: int, elem_bytes: int, op, target_name: str = "sm_90a") -> None:
    if _tmem(target_name):
        check_tile_sm100(block_m, block_n, block_k, elem_bytes, op)
        return
    target = targets.get("sm_90a")
    mma_m, allowed = target.mma_shapes[0].m[0], warpgroup_extents()
    if block_m not in allowed:
        raise PassError(f"block-m = {block_m}: the sm_90a GEMM gives each consumer warpgroup m{mma_m} rows, with "
                        f"{' or '.join(map(str, GEMM_CONSUMER_WARPGROUPS))} of them; use block-m="
                        f"{' or '.join(map(str, allowed))}", op)
    box = SWIZZLE_BYTES // elem_bytes            # one TMA box of the contiguous dim
    n_max = target.mma_shapes[0].n_max
    if not (box <= block_n <= n_max and block_n % box == 0):
        raise PassError(f"block-n = {block_n}: must be a multiple of {box} up to {n_max} (wgmma n <= {n_max}, "
                        f"whole {box}-column TMA boxes)", op)
    check_block_k(block_k, elem_bytes, op)


def check_swap_tile(block_m: int, block_n: int, block_k: int, elem_bytes: int, op) -> None:
    """sm_90a swap-AB GEMM (C^T = B^T A^T): the wgmma's 64 rows run along N (block-n: 64 per consumer warpgroup) and
    its n along M (block-m: one wgmma n, 8..256 in steps of 8), so a decode-size M wastes no MMA rows."""
    target = targets.get("sm_90a")
    mma_m, allowed = target.mma_shapes[0].m[0], warpgroup_extents()
    if block_n not in allowed:
        raise PassError(f"block-n = {block_n}: the swap-AB GEMM gives each consumer warpgroup m{mma_m} columns of C "
                        f"(the wgmma's rows run along N), with {' or '.join(map(str, GEMM_CONSUMER_WARPGROUPS))} of "
                        f"them; use block-n={' or '.join(map(str, allowed))}", op)
    try:
        target.check_mma_shape(mma_m, block_m, "bf16")
    except ValueError as e:
        raise PassError(f"block-m = {block_m}: the swap-AB GEMM's rows of C are the wgmma's n: {e}", op) from None
    check_block_k(block_k, elem_bytes, op)


def cta_group_of(block_m: int) -> int:
    """sm_100a: 1 when one CTA's tcgen05.mma covers block-m rows (all 128 TMEM lanes), 2 when a CTA pair's does
    (cta_group::2: 128 rows in each CTA's TMEM)."""
    lanes = targets.get("sm_100a").tmem.lanes
    return block_m // lanes if block_m in (lanes, 2 * lanes) else 0


def check_tile_sm100(block_m: int, block_n: int, block_k: int, elem_bytes: int, op) -> None:
    """sm_100a: one tcgen05.mma covers the whole tile: M = 128 lanes of one CTA's TMEM (cta_group::1) or of both
    CTAs of a pair (M = 256, cta_group::2, each CTA loading half of B), N columns."""
    target = targets.get("sm_100a")
    group = cta_group_of(block_m)
    if not group:
        raise PassError(f"block-m = {block_m}: an sm_100a tcgen05.mma covers 128 rows (one CTA, all TMEM lanes) or "
                        "256 (a CTA pair, cta_group::2); use block-m=128 or block-m=256", op)
    form = next(s for s in target.mma_shapes if s.cta_group == group)
    box = SWIZZLE_BYTES // elem_bytes
    per_cta = block_n // group                      # each CTA of a pair loads half of B's columns
    if not (box <= per_cta and block_n <= form.n_max and per_cta % box == 0 and form.accepts(block_m, block_n)):
        raise PassError(f"block-n = {block_n}: must be a multiple of {box * group} up to {form.n_max} (tcgen05.mma "
                        f"n <= {form.n_max}, whole {box}-column TMA boxes{' in each CTA of the pair' * (group > 1)})",
                        op)
    check_block_k(block_k, elem_bytes, op)


SCHEDULES = ("persistent", "grid", "streamk")
EPILOGUES = ("tma", "direct")   # C through smem and TMA stores (the default), or stored from registers (sm_90a)


CLUSTER_M = (1, 2)      # sm_90a GEMM: CTAs per cluster along M (2: the pair shares B, each loading half, multicast)


def tile_matmul(matmul, block_m: int, block_n: int, block_k: int, schedule: str, target: str = "sm_90a",
                epilogue: str = "tma", cluster_m: int = 1, group_m: int = 1, swap_ab: bool = False) -> None:
    if swap_ab:
        if not (_regs(target) and (schedule, epilogue, cluster_m, group_m) == ("grid", "direct", 1, 1)):
            raise PassError(f"swap-ab = true: built for the sm_90a GEMM with schedule=grid and epilogue=direct (C^T "
                            f"is stored from registers), no cluster-m or group-m (got target = {target}, schedule = "
                            f"{schedule}, epilogue = {epilogue}, cluster-m = {cluster_m}, group-m = {group_m})",
                            matmul)
        check_swap_tile(block_m, block_n, block_k, 2, matmul)
    else:
        check_tile(block_m, block_n, block_k, 2, matmul, target)    # bad options are wrong for every matmul
    if group_m not in rules.GROUP_M:
        raise PassError(f"group-m = {group_m}: use one of {', '.join(map(str, rules.GROUP_M))} (bands of that many "
                        "rows of tiles in the persistent walk; 1: row by row)", matmul)
    if group_m > 1 and (not _regs(target) or schedule != "persistent"):
        raise PassError(f"group-m = {group_m}: the tile order of the sm_90a persistent GEMM (target = {target}, "
                        f"schedule = {schedule}); leave group-m out otherwise", matmul)
    if cluster_m not in CLUSTER_M:
        raise PassError(f"cluster-m = {cluster_m}: use 1 (no cluster) or 2 (a 2x1 cluster sharing B by TMA multicast)",
                        matmul)
    if cluster_m > 1 and (not _regs(target) or schedule != "persistent" or epilogue != "tma"):
        raise PassError(f"cluster-m = {cluster_m}: built for the sm_90a GEMM with schedule=persistent and C stored by "
                        f"TMA (target = {target}, schedule = {schedule}, epilogue = {epilogue}); leave cluster-m out "
                        "otherwise (sm_100a pairs CTAs with block-m=256)", matmul)
    if schedule not in SCHEDULES:
        raise PassError(f"schedule = {schedule!r}: use one of {', '.join(SCHEDULES)}", matmul)
    if epilogue not in EPILOGUES:
        raise PassError(f"epilogue = {epilogue!r}: use one of {', '.join(EPILOGUES)}", matmul)
    if epilogue == "direct" and not _regs(target):
        raise PassError(f"epilogue = direct: the {target} GEMM stores C from Tensor Memory through smem by TMA only; "
                        "leave the option out", matmul)
    attrs = op_attrs(matmul)
    a_type, b_type = (tensor_type(v.type) for v in matmul.operation.operands)
    c_type = tensor_type(matmul.operation.results[0].type)
    if a_type.rank != 2:
        raise PassError(f"wl-tile: batched matmul (rank {a_type.rank}) has no GEMM kernel yet; "
                        "reshape to 2-D [M, K] x [K, N]", matmul)
    if attrs["transpose_a"]:
        raise PassError("wl-tile: transpose_a is not supported by the GEMM kernels; pass a as [M, K]", matmul)
    if a_type.elem not in MMA_ELEMENTS or c_type.elem != a_type.elem:
        raise PassError(f"wl-tile: GEMM kernels take {' or '.join(MMA_ELEMENTS)} in and out, "
                        f"got {a_type.elem} -> {c_type.elem}", matmul)
    b_layout = "nk" if attrs["transpose_b"] else "kn"
    # a CTA pair (sm_100a, block-m 256): each CTA loads 128 rows of A and half of B's columns, and keeps its 128
    # rows of the accumulator; the pair's MMA covers the whole tile
    group = cta_group_of(block_m) if _tmem(target) else 1
    if schedule == "streamk" and (not _regs(target) or epilogue != "tma"):
        raise PassError(f"schedule = streamk: built for the sm_90a GEMM with C stored by TMA (target = {target}, "
                        f"epilogue = {epilogue}); use schedule=persistent there", matmul)
    if group == 2 and schedule != "persistent":
        raise PassError(f"schedule = {schedule!r}: the sm_100a CTA-pair GEMM (block-m 256) is built persistent only; "
                        "use schedule=persistent", matmul)
    rows, b_cols = block_m // group, block_n // group
    b_tile = [b_cols, block_k] if b_layout == "nk" else [block_k, b_cols]
    b_dims = ["N", "K"] if b_layout == "nk" else ["K", "N"]
    # a 2x1 cluster (sm_90a, cluster-m 2) walks tiles of 2 x block-m rows as one, as a CTA pair does: each CTA takes
    # its block-m rows; B's tile is the same for both, so each loads half of its boxes and multicasts them
    pairs = group == 2 or cluster_m == 2
    walk = "persistent_pairs" if pairs else "persistent"
    walk_m = block_m * cluster_m
    grid = ([[walk, "M", walk_m, "N", block_n, "SMS"], ["const", 1], ["const", 1]] if schedule == "persistent" else
            [["streamk", "M", block_m, "N", block_n, "K", block_k, "SMS"], ["const", 1], ["const", 1]]
            if schedule == "streamk" else [["cdiv", "N", block_n], ["cdiv", "M", block_m], ["const", 1]])
    with ir.InsertionPoint(matmul), matmul.operation.location:
        kernel = make_op("kernel", {
            "kind": "gemm", "tile": [block_m, block_n, block_k], "cluster": [group * cluster_m, 1, 1], "grid": grid,
            "schedule": schedule, "input_names": ["a", "b"], "acc_elem": "f32",
            **({"target": target} if target != targets.DEFAULT else {}),   # no target: the default (targets.of_kernel)
            **({"cta_group": group} if group > 1 else {}),
            **({"epilogue": epilogue} if epilogue != "tma" else {}),       # no epilogue: C by TMA
            **({"group_m": group_m} if group_m > 1 else {}),               # no group_m: row by row
            **({"swap_ab": True} if swap_ab else {})},                     # the MMA's rows run along N
            operands=matmul.operation.operands, result_types=[matmul.operation.results[0].type], region=True)
    # the kernel level: a loop over K tiles loading one tile of each input and multiplying them, then the store
    # sm_100a: the accumulator lives in Tensor Memory, a region of block-m lanes x block-n f32 columns
    acc_space = "tmem" if _tmem(target) else "regs"
    # swap-AB: the MMA computes C^T = B^T A^T, B's tile as its A (block-n rows of N) and A's as its B (n = block-m);
    # the accumulator is C^T's tile, [block-n, block-m], stored transposed
    loads = (Load("a", (rows, block_k), ("M", "K")), Load("b", tuple(b_tile), tuple(b_dims), multicast=cluster_m > 1))
    mma = (Mma(Operand("smem", "b"), Operand("smem", "a"), Operand(acc_space, "acc"), (block_n, block_m, block_k))
           if swap_ab else
           Mma(Operand("smem", "a"), Operand("smem", "b"), Operand(acc_space, "acc"), (block_m, block_n, block_k)))
    k_loop = Loop(("cdiv", "K", block_k), name="k_loop", carries=("acc",) if acc_space == "regs" else (),
                  body=(*loads, mma))

    def body(p):
        p.body = (k_loop, Store("acc", "c", (block_n, block_m) if swap_ab else (rows, block_n)))
        if acc_space == "tmem":
            p.regions["acc"] = Region("acc", "tmem", "f32", (rows, block_n), ("M", "N"))

    edit_program(kernel, body)
    matmul.operation.results[0].replace_all_uses_with(kernel.results[0])
    matmul.operation.erase()


# ---- attention -----------------------------------------------------------------------------------------

F32_NORMAL = (2.0 ** -126, (2 - 2.0 ** -23) * 2.0 ** 127)   # the positive normal f32 range




def check_attention_tile(block_m: int, block_n: int, elem: str, op) -> None:
    target = targets.get("sm_90a")
    mma_m = target.mma_shapes[0].m[0]
    allowed = [n * mma_m for n in CONSUMER_WARPGROUPS]
    if block_m not in allowed:
        raise PassError(f"block-m = {block_m}: the sm_90a attention gives each of its "
                        f"{' or '.join(map(str, CONSUMER_WARPGROUPS))} consumer warpgroups m{mma_m} query rows; use "
                        f"block-m={' or '.join(map(str, allowed))}", op)
    k_step, box_max = target.mma_k_of(elem), target.tma.box_dim_max
    try:
        target.check_mma_shape(mma_m, block_n, elem)     # S = Q K^T: n = block_n
    except ValueError as e:
        raise PassError(f"block-n = {block_n}: {e}", op) from None
    if block_n % k_step or block_n > box_max:
        raise PassError(f"block-n = {block_n}: must be a multiple of {k_step} (O += P V contracts block_n keys, "
                        f"{k_step} per wgmma) up to {box_max} (the rows of one TMA box of K or V)", op)


def check_attention(attention, head_dims: tuple[int, ...], target: str) -> tuple[str, int]:
    """(element type, head dim) of a `wl.attention` the `target` kernels take; PassError naming the fix otherwise."""
    attrs = op_attrs(attention)
    q_type, k_type, v_type = (tensor_type(v.type) for v in attention.operation.operands)
    for name, t in (("q", q_type), ("k", k_type), ("v", v_type)):
        if t.rank != 4:
            raise PassError(f"wl-tile: attention {name} has rank {t.rank}; the attention kernel takes rank-4 q, k, v "
                            "([B, S, H, D] or [B, H, S, D]): add the missing batch or head dim of size 1", attention)
    elem = q_type.elem
    if elem not in ATTENTION_ELEMENTS or {k_type.elem, v_type.elem} != {elem}:
        raise PassError(f"wl-tile: attention kernels take {' or '.join(ATTENTION_ELEMENTS)} q, k, v, got "
                        f"{q_type.elem}, {k_type.elem}, {v_type.elem}: cast them to bf16 or f16", attention)
    d, dv = q_type.shape[-1], v_type.shape[-1]
    supported = ", ".join(map(str, head_dims))
    if d is None:
        raise PassError(f"wl-tile: the head dim of q is dynamic (?); attention kernels are compiled per head dim "
                        f"({supported}): give q, k, v a static last dim", attention)
    if d not in head_dims:
        up = next((h for h in head_dims if h > d), None)
        fix = f"zero-pad q, k and v to head dim {up}" if up else f"split the heads into head dims of {supported}"
        raise PassError(f"wl-tile: head dim {d}: the {target} attention kernels take head dims {supported}; {fix}",
                        attention)
    if dv != d:
        raise PassError(f"wl-tile: v has head dim {dv}, q and k {d}: the attention kernel computes O with the q/k "
                        f"head dim (Dv = D); zero-pad v to {d} and slice the output", attention)
    scale = attrs["scale"]
    scale_log2 = scale * math.log2(math.e) if math.isfinite(scale) else scale
    if not scale > 0:
        raise PassError(f"wl-tile: attention scale = {scale}: the kernel's online softmax takes row maxima of the "
                        "unscaled scores, which order like the scaled ones only for scale > 0; for a negative scale "
                        "negate k and use -scale", attention)
    if not F32_NORMAL[0] <= scale_log2 <= F32_NORMAL[1]:
        raise PassError(f"wl-tile: attention scale = {scale}: the kernel takes scale * log2(e) = {scale_log2} as an "
                        f"f32 runtime argument, which must be a positive normal f32 ({F32_NORMAL[0]:.3g} .. "
                        f"{F32_NORMAL[1]:.3g}); fold part of the scale into q", attention)
    return elem, d


def attention_mods(attention) -> dict:
    """The wl.attention's score/mask modifiers (warploom.score), checked, as the kernel's attributes."""
    try:
        return ScoreMods.from_attrs(op_attrs(attention)).attrs()
    except ModError as e:
        raise PassError(f"wl-tile: the attention's modifiers: {e}", attention) from None


def attention_varlen(attention, schedule: str) -> dict:
    """{"varlen": True} for a wl.attention of packed sequences (schedule grid only), else {}."""
    if not op_attrs(attention).get("varlen", False):
        return {}
    if schedule != "grid":
        raise PassError(f"wl-tile: a packed variable-length attention (varlen) with schedule = {schedule}: it is "
                        "built with schedule=grid only (a CTA per query block of the longest sequence, head and "
                        "sequence); the persistent walks count tiles of one length", attention)
    return {"varlen": True}


def tile_attention(attention, block_m: int, block_n: int | None, schedule: str,
                   exp2_poly: float | None = None) -> None:
    attrs = op_attrs(attention)
    out_type = attention.operation.results[0].type
    elem, d = check_attention(attention, ATTENTION_HEAD_DIMS, "sm_90a")
    poly = exp2_poly_share(exp2_poly, "sm_90a", d, attention)
    if schedule not in SCHEDULES:
        raise PassError(f"wl-tile: schedule = {schedule!r}: use one of {', '.join(SCHEDULES)}", attention)
    bm, bn = block_m, default_block_n(d, schedule) if block_n is None else block_n
    check_attention_tile(bm, bn, elem, attention)
    causal = bool(attrs["causal"])
    if schedule == "streamk" and causal:
        raise PassError("wl-tile: schedule = streamk splits the last waves' tiles evenly over their key blocks, "
                        "which needs tiles of one length: a causal attention's differ; use schedule=persistent (it "
                        "deals causal tiles heaviest first)", attention)
    # the kernel is generic in B, S and H (runtime sizes): its tensors have only the head dim static
    seq = TensorType((None, None, None, d), elem)
    grid = {"persistent": [["attention_persistent", "Sq", bm, "Hq", "B", "SMS"], ["const", 1], ["const", 1]],
            "streamk": [["attention_streamk", "Sq", bm, "Sk", bn, "Hq", "B", "SMS"], ["const", 1], ["const", 1]]
            }.get(schedule, [["cdiv", "Sq", bm], ["cdiv", "Hq", 1], ["cdiv", "B", 1]])
    with ir.InsertionPoint(attention), attention.operation.location:
        generic, lse = mlir_tensor_type(seq), mlir_tensor_type(TensorType((None, None, None), "f32"))
        inputs = [_cast(v, generic) for v in attention.operation.operands]
        kernel = make_op("kernel", {
            "kind": "attention", "tile": [bm, bn, d], "cluster": [1, 1, 1], "grid": grid, "schedule": schedule,
            "input_names": ["q", "k", "v"], "output_names": ["out", "lse"], "acc_elem": "f32", "causal": causal,
            # for the launch only (scale_log2 and the strides are runtime arguments): the program ignores them
            "scale": attrs["scale"], "layout": attrs["layout"],
            # the softmax's share of exp2 by the FMA polynomial: only when it has one
            **({"exp2_poly": poly} if poly else {}), **attention_mods(attention),
            **attention_varlen(attention, schedule)},
            operands=inputs, result_types=[generic, lse], region=True)
        out = _cast(kernel.results[0], out_type)
    trip = ("causal_blocks", "Sq", "Sk", "m", bm, bn) if causal else ("cdiv", "Sk", bn)
    stats = ("row_max", "row_sum")
    kv_loop = Loop(trip, name="kv", carries=("o_acc", *stats), body=(
        Load("k", (bn, d), ("N", "D")),
        Mma(Operand("smem", "q", "K"), Operand("smem", "k", "K"), Operand("regs", "s"), (bm, bn, d), k_dim="D",
            accumulate=False),
        Compute("online_softmax", ("s", *stats, "o_acc"), ("p", *stats, "o_acc")),
        Load("v", (bn, d), ("N", "D")),
        Mma(Operand("regs", "p", "K"), Operand("smem", "v", "MN"), Operand("regs", "o_acc"), (bm, d, bn),
            k_dim="N")))

    def body(p):
        p.body = (Load("q", (bm, d), ("M", "D")), kv_loop,
                  Compute("normalize", ("o_acc", *stats), ("o_acc", "lse")),
                  Store("o_acc", "out", (bm, d)), Store("lse", "lse", (bm,)))
        p.registers.update({"p": (bm, bn), "row_max": (bm,), "row_sum": (bm,), "lse": (bm,)})

    edit_program(kernel, body)
    attention.operation.results[0].replace_all_uses_with(out)
    attention.operation.erase()


# ---- attention, sm_100a (FA4-style; docs/attention-sm100.md) ----------------------------------------------------

# the FA4-style kernel's head dims, Q tiles per CTA (each with its own S, P and O in TMEM and its softmax warpgroup)
# and keys per block: warploom.kernel.contract
SM100_ATTENTION_HEAD_DIMS, Q_TILES, SM100_ATTENTION_BLOCK_N = FA4_HEAD_DIMS, FA4_Q_TILES, FA4_BLOCK_N
RESCALE_THRESHOLD = FA4_RESCALE_THRESHOLD


def exp2_poly_share(exp2_poly: float | None, target: str, head_dim: int, attention) -> float:
    """The softmax's share of exp2 by the FMA polynomial (warploom.lowering.emit.exp2): the option, else the
    target's default for the head dim (warploom.kernel.contract.default_attention_exp2_poly)."""
    default = default_attention_exp2_poly(target, head_dim)
    poly = default if exp2_poly is None else exp2_poly
    if check_exp2_poly(poly):
        raise PassError(f"wl-tile: exp2-poly = {poly}: {check_exp2_poly(poly)}; {default:g} by default ({target}, "
                        f"head dim {head_dim})", attention)
    return float(poly)


def tile_attention_sm100(attention, block_n: int | None, schedule: str, shared_kv: bool = False,
                         rescale_threshold: float | None = None, exp2_poly: float | None = None,
                         rope_depth: int = 0, scale_dtype: str = "") -> None:
    """An FA4-style kernel: each CTA takes Q_TILES tiles of 128 query rows (one per TMEM lane), and per key block
    computes S_i = Q_i K^T into TMEM, the online softmax writes P_i (16-bit) into S_i's columns, and the MMA
    accumulates O_i += P_i V into TMEM with P_i read from there (docs/attention-sm100.md). Grid schedule only;
    the kernel-level program names each tile's regions (q0, s0, p0, o0, ...)."""
    attrs = op_attrs(attention)
    out_type = attention.operation.results[0].type
    elem, d = check_attention(attention, SM100_ATTENTION_HEAD_DIMS, "sm_100a")
    if schedule != "grid":
        raise PassError(f"wl-tile: schedule = {schedule!r}: the sm_100a attention is built with the grid schedule "
                        "only so far; use schedule=grid", attention)
    target = targets.get("sm_100a")
    rows = target.tmem.lanes
    bn = SM100_ATTENTION_BLOCK_N if block_n is None else block_n
    try:
        target.check_mma_shape(rows, bn, elem)            # S = Q K^T: n = block_n
        target.check_mma_shape(rows, d, elem)             # O += P V: n = head dim
    except ValueError as e:
        raise PassError(f"block-n = {bn}: {e}", attention) from None
    if bn % target.mma_k_of(elem) or bn > target.tma.box_dim_max:
        raise PassError(f"block-n = {bn}: must be a multiple of {target.mma_k_of(elem)} (P V contracts block_n keys) "
                        f"up to {target.tma.box_dim_max} (the rows of one TMA box of K or V)", attention)
    causal = bool(attrs["causal"])
    threshold = RESCALE_THRESHOLD if rescale_threshold is None else rescale_threshold
    poly = exp2_poly_share(exp2_poly, "sm_100a", d, attention)
    if not 0.0 <= threshold <= 64.0:
        raise PassError(f"wl-tile: rescale-threshold = {threshold}: the growth of a row's max (log2 units) past which O "
                        "is rescaled; use 0 (every growth: the classic online softmax) .. 64 (P <= 2^64 stays finite "
                        "in f32); 8 by default", attention)
    if rope_depth < 0 or rope_depth % 16 or scale_dtype not in ("", "f32"):
        raise PassError(f"wl-tile: rope-depth = {rope_depth}, scale-dtype = {scale_dtype!r}: the seed's rope columns "
                        "(a multiple of 16, 0 for none) and per-token scale type ('f32', or '' for none)", attention)
    bm = Q_TILES * rows
    seq = TensorType((None, None, None, d), elem)
    with ir.InsertionPoint(attention), attention.operation.location:
        generic, lse = mlir_tensor_type(seq), mlir_tensor_type(TensorType((None, None, None), "f32"))
        inputs = [_cast(v, generic) for v in attention.operation.operands]
        kernel = make_op("kernel", {
            "kind": "attention", "tile": [bm, bn, d], "cluster": [1, 1, 1], "schedule": schedule,
            "grid": [["cdiv", "Sq", bm], ["cdiv", "Hq", 1], ["cdiv", "B", 1]], "target": "sm_100a",
            "input_names": ["q", "k", "v"], "output_names": ["out", "lse"], "acc_elem": "f32", "causal": causal,
            "q_tiles": Q_TILES, "scale": attrs["scale"], "layout": attrs["layout"],
            "rescale_threshold": threshold, "exp2_poly": poly, "shared_kv": shared_kv,
            "rope_depth": rope_depth, "scale_dtype": scale_dtype, **attention_mods(attention),
            **attention_varlen(attention, schedule)},
            operands=inputs, result_types=[generic, lse], region=True)
        out = _cast(kernel.results[0], out_type)
    trip = ("causal_blocks", "Sq", "Sk", "m", bm, bn) if causal else ("cdiv", "Sk", bn)
    tiles = range(Q_TILES)
    stats = [(f"row_max{i}", f"row_sum{i}") for i in tiles]
    # K and V each in their own ring, or (shared_kv) both in one region "kv" taking its slots in turn
    k_at, v_at = (("kv", 0), ("kv", 1)) if shared_kv else (("k", 0), ("v", 0))
    kv_loop = Loop(trip, name="kv", carries=tuple(n for s in stats for n in s), body=(
        Load("k", (bn, d), ("N", "D"), region=k_at[0] if shared_kv else None, use=k_at[1]),
        *(Mma(Operand("smem", f"q{i}", "K"), Operand("smem", k_at[0], "K", use=k_at[1]), Operand("tmem", f"s{i}"),
              (rows, bn, d), k_dim="D", accumulate=False) for i in tiles),
        *(Compute("online_softmax", (f"s{i}", *stats[i]), (f"p{i}", *stats[i], f"corr{i}")) for i in tiles),
        Load("v", (bn, d), ("N", "D"), region=v_at[0] if shared_kv else None, use=v_at[1]),
        *(Mma(Operand("tmem", f"p{i}", "K"), Operand("smem", v_at[0], "MN", use=v_at[1]), Operand("tmem", f"o{i}"),
              (rows, d, bn), k_dim="N") for i in tiles),
        *(Compute("rescale", (f"corr{i}", f"o{i}"), (f"o{i}",)) for i in tiles)))

    def body(p):
        p.body = (*(Load("q", (rows, d), ("M", "D"), region=f"q{i}") for i in tiles), kv_loop,
                  *(op for i in tiles for op in (
                      Compute("lse", stats[i], (f"lse{i}",)), Store(f"lse{i}", "lse", (rows,)))),
                  *(op for i in tiles for op in (
                      Compute("normalize", (f"o{i}", stats[i][1]), (f"o{i}",)), Store(f"o{i}", "out", (rows, d)))))
        # TMEM per Q tile: S (f32), P (16-bit, in S's columns), O (f32)
        for i in tiles:
            p.regions[f"s{i}"] = Region(f"s{i}", "tmem", "f32", (rows, bn), ("M", "N"))
        for i in tiles:
            p.regions[f"p{i}"] = Region(f"p{i}", "tmem", elem, (rows, bn), ("M", "N"), aliases=(f"s{i}",))
        for i in tiles:
            p.regions[f"o{i}"] = Region(f"o{i}", "tmem", "f32", (rows, d), ("M", "D"))
        p.registers.update({n: (rows,) for s in stats for n in s})
        p.registers.update({f"corr{i}": (rows,) for i in tiles})
        p.registers.update({f"lse{i}": (rows,) for i in tiles})

    edit_program(kernel, body)
    attention.operation.results[0].replace_all_uses_with(out)
    attention.operation.erase()


def _cast(value, to: ir.Type):
    """`value` as type `to` (a tensor.cast where the static dims differ)."""
    if value.type == to:
        return value
    return ir.Operation.create("tensor.cast", results=[to], operands=[value]).results[0]


@register("wl-tile", "Tile each 2-D matmul into a wl.kernel over K tiles, each attention into a wl.kernel over "
          "key blocks (grid and trip count are runtime rules)",
          options={"block-m": int, "block-n": int, "block-k": int, "schedule": str, "target": str, "shared-kv": bool,
                   "rescale-threshold": float, "exp2-poly": float, "rope-depth": int, "scale-dtype": str,
                   "epilogue": str, "cluster-m": int, "group-m": int, "swap-ab": bool},
          after=())
def run(module, block_m: int | None = None, block_n: int | None = None, block_k: int = GEMM_BLOCK_K,
        schedule: str = "grid", target: str = "sm_90a", shared_kv: bool = False,
        rescale_threshold: float | None = None, exp2_poly: float | None = None, rope_depth: int = 0,
        scale_dtype: str = "", epilogue: str = "", cluster_m: int = 1, group_m: int = 1, swap_ab: bool = False):
    """block-m defaults to GEMM_BLOCK_M for a GEMM and ATTENTION_BLOCK_M for an attention, block-n to GEMM_BLOCK_N
    and `default_block_n(head dim, schedule)` (warploom.kernel.contract, both); block-k is the
    GEMM's (an attention contracts the whole head dim). `target` (sm_90a or sm_100a) is the kernel's: it decides
    the tile's limits and where the accumulator lives; the later passes read it from the kernel. `shared-kv` (the
    sm_100a attention): K and V tiles share one ring of slots (wl-pipeline's `stages`), K's then V's each block;
    `rescale-threshold` (8): its softmax's conditional rescaling; `exp2-poly` (an attention's; 0.25 on sm_100a,
    warploom.kernel.contract.ATTENTION_EXP2_POLY on sm_90a): the softmax's share of exp2 by the FMA polynomial;
    `rope-depth`, `scale-dtype`: the seed's rope columns (MLA) and per-token scales (FP8), planned (wl-specialize
    reserves their smem) but not lowered yet. `epilogue` (a GEMM's): "tma" (the default) stages C through smem in
    64-column chunks stored by TMA; "direct" (sm_90a) stores it from the accumulator registers. `cluster-m` (the
    sm_90a persistent GEMM's): 2 runs the CTAs in 2x1 clusters over tiles of 2 x block-m rows, each CTA loading
    half of the B tile both need and multicasting it to both (half the B traffic from L2). `group-m` (the sm_90a
    persistent GEMM's tile order, `rules.tile_origin`): 1 walks the tiles row by row, G > 1 in bands of G rows of
    tiles (of 2 x block-m rows in a cluster kernel), column by column inside a band. `swap-ab` (the sm_90a grid GEMM
    with epilogue=direct, for decode-size M): the kernel computes C^T = B^T A^T, B's tile feeding the wgmma's A (its
    64 rows along N, block-n = 64 per consumer warpgroup) and A's tile its B (n = block-m, 8..256 in steps of 8), and
    stores the accumulator transposed."""
    if target not in targets.TARGETS:
        raise PassError(f"wl-tile: target = {target!r}; use one of {', '.join(targets.TARGETS)}")
    fa4_only = [n for n, v in (("shared-kv", shared_kv or None), ("rescale-threshold", rescale_threshold),
                                ("rope-depth", rope_depth or None),
                                ("scale-dtype", scale_dtype or None)) if v is not None]
    if shared_kv and (not _tmem(target) or kernel_ops(module, "matmul")):
        raise PassError("wl-tile: shared-kv = true shares one smem ring between an attention's K and V tiles; only "
                        "the sm_100a attention takes it (target=sm_100a, no matmul)")
    if exp2_poly is not None and kernel_ops(module, "matmul"):
        raise PassError(f"wl-tile: exp2-poly = {exp2_poly}: an option of the attention's softmax (its share of exp2 "
                        "by the FMA polynomial); a matmul has no exp2")
    if fa4_only and (not _tmem(target) or kernel_ops(module, "matmul")):
        raise PassError(f"wl-tile: {', '.join(fa4_only)}: options of the sm_100a (FA4-style) attention's softmax; "
                        "use them with target=sm_100a on an attention")
    for name, value in (("cluster-m", cluster_m), ("group-m", group_m), ("swap-ab", "true" if swap_ab else 1)):
        if value != 1 and not kernel_ops(module, "matmul"):
            raise PassError(f"wl-tile: {name} = {value}: an option of the sm_90a GEMM kernels")
    if epilogue and not kernel_ops(module, "matmul"):
        raise PassError(f"wl-tile: epilogue = {epilogue}: an option of the GEMM kernels (how C is stored); an "
                        "attention stores O through smem by TMA")
    for matmul in kernel_ops(module, "matmul"):
        tile_matmul(matmul, GEMM_BLOCK_M if block_m is None else block_m, GEMM_BLOCK_N if block_n is None else block_n,
                    block_k, schedule, target, epilogue or "tma", cluster_m, group_m, swap_ab)
    for attention in kernel_ops(module, "attention"):
        if _tmem(target):
            tile_attention_sm100(attention, block_n, schedule, shared_kv, rescale_threshold, exp2_poly,
                                 rope_depth, scale_dtype)
        else:
            tile_attention(attention, ATTENTION_BLOCK_M if block_m is None else block_m, block_n, schedule, exp2_poly)
