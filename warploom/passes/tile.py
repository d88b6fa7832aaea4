"""wl-tile: turn each 2-D `wl.matmul` into a `wl.kernel` that loops over K tiles.

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
"""
from __future__ import annotations

from mlir import ir

from warploom import targets
from warploom.dialect import op_attrs, tensor_type
from warploom.dialect.kernel_ir import kernel_ops, make_op
from warploom.kernel import Load, Loop, Mma, Operand, Store
from warploom.layout import SWIZZLE_128B

from .registry import PassError, edit_program, register

MMA_ELEMENTS = ("bf16", "f16")        # what the sm_90a GEMM kernels take today
SWIZZLE_BYTES = SWIZZLE_128B.bytes   # a K tile row fills one swizzle span (the GEMM's operand layout)
CONSUMER_WARPGROUPS = 2              # the GEMM schedule: two consumer warpgroups share the M tile


def check_tile(block_m: int, block_n: int, block_k: int, elem_bytes: int, op) -> None:
    target = targets.get("sm_90a")
    mma_m = target.mma_shapes[0].m[0]
    if block_m != CONSUMER_WARPGROUPS * mma_m:
        raise PassError(f"block-m = {block_m}: the sm_90a GEMM splits {CONSUMER_WARPGROUPS * mma_m} rows over "
                        f"{CONSUMER_WARPGROUPS} consumer warpgroups (m{mma_m} each); use "
                        f"block-m={CONSUMER_WARPGROUPS * mma_m}", op)
    box = SWIZZLE_BYTES // elem_bytes            # one TMA box of the contiguous dim
    n_max = target.mma_shapes[0].n_max
    if not (box <= block_n <= n_max and block_n % box == 0):
        raise PassError(f"block-n = {block_n}: must be a multiple of {box} up to {n_max} (wgmma n <= {n_max}, "
                        f"whole {box}-column TMA boxes)", op)
    if block_k * elem_bytes != SWIZZLE_BYTES:
        raise PassError(f"block-k = {block_k}: a K tile row must be {SWIZZLE_BYTES} bytes for the 128-byte "
                        f"swizzle, so block-k = {SWIZZLE_BYTES // elem_bytes} for {elem_bytes}-byte elements", op)


SCHEDULES = ("persistent", "grid")


def tile_matmul(matmul, block_m: int, block_n: int, block_k: int, schedule: str) -> None:
    check_tile(block_m, block_n, block_k, 2, matmul)    # bad options are wrong for every matmul
    if schedule not in SCHEDULES:
        raise PassError(f"schedule = {schedule!r}: use one of {', '.join(SCHEDULES)}", matmul)
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
    b_tile = [block_n, block_k] if b_layout == "nk" else [block_k, block_n]
    b_dims = ["N", "K"] if b_layout == "nk" else ["K", "N"]
    grid = ([["persistent", "M", block_m, "N", block_n, "SMS"], ["const", 1], ["const", 1]]
            if schedule == "persistent" else [["cdiv", "N", block_n], ["cdiv", "M", block_m], ["const", 1]])
    with ir.InsertionPoint(matmul), matmul.operation.location:
        kernel = make_op("kernel", {
            "kind": "gemm", "tile": [block_m, block_n, block_k], "cluster": [1, 1, 1], "grid": grid,
            "schedule": schedule, "input_names": ["a", "b"], "acc_elem": "f32"},
            operands=matmul.operation.operands, result_types=[matmul.operation.results[0].type], region=True)
    # the kernel level: a loop over K tiles loading one tile of each input and multiplying them, then the store
    k_loop = Loop(("cdiv", "K", block_k), name="k_loop", body=(
        Load("a", (block_m, block_k), ("M", "K")), Load("b", tuple(b_tile), tuple(b_dims)),
        Mma(Operand("smem", "a"), Operand("smem", "b"), Operand("regs", "acc"), (block_m, block_n, block_k))))
    edit_program(kernel, lambda p: setattr(p, "body", (k_loop, Store("acc", "c", (block_m, block_n)))))
    matmul.operation.results[0].replace_all_uses_with(kernel.results[0])
    matmul.operation.erase()


@register("wl-tile", "Tile each 2-D matmul into a wl.kernel over K tiles (grid and trip count are runtime rules)",
          options={"block-m": int, "block-n": int, "block-k": int, "schedule": str}, after=())
def run(module, block_m: int = 128, block_n: int = 256, block_k: int = 64, schedule: str = "grid"):
    for matmul in kernel_ops(module, "matmul"):
        tile_matmul(matmul, block_m, block_n, block_k, schedule)
