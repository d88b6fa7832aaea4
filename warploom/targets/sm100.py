"""sm_100a (Blackwell: B200/GB200): tcgen05.mma issued by one thread, accumulators in Tensor Memory.

Sources: PTX ISA 9.7.16 "TensorCore 5th Generation Family Instructions" ("Matrix shape", "Tensor
Memory", "Instruction descriptor"); gpu-facts.md section 4. Only the dense kinds f16, tf32, f8f6f4
and i8 are listed; the block-scaled kinds (mxf8f6f4, mxf4, mxf4nvf4) have their own descriptor.
"""
from types import MappingProxyType

from warploom.targets.record import MmaShapes, Target, TmemGeometry

_F8F6F4 = ("f8E4M3FN", "f8E5M2", "f6E2M3FN", "f6E3M2FN", "f4E2M1FN")

SM100 = Target(
    name="sm_100a",
    chip="Blackwell (B200/GB200)",
    compute_capability=(10, 0),
    ptx_features="+ptx86",
    mma_instruction="tcgen05.mma",
    smem_limit=232448,
    register_file=65536,
    warp_size=32,
    warpgroup_threads=128,
    max_threads_per_block=1024,
    setmaxnreg=(24, 256, 8),
    mbarrier_bytes=8,
    smem_base_align=1024,
    cluster_max_portable=8,
    swizzles=("none", "32B", "64B", "128B", "128B_base32B"),
    mma_k=MappingProxyType({"bf16": 16, "f16": 16, "tf32": 8, "i8": 32, "u8": 32, **{d: 32 for d in _F8F6F4}}),
    mma_kind=MappingProxyType({"bf16": "f16", "f16": "f16", "tf32": "tf32", "i8": "i8", "u8": "i8",
                               **{d: "f8f6f4" for d in _F8F6F4}}),
    mma_shapes=(
        MmaShapes(cta_group=1, m=(64, 128), n_min=8, n_max=256, n_step=8,
                  note="CUTLASS may require N % 16 == 0 at M = 128 (unverified)"),
        MmaShapes(cta_group=2, m=(128, 256), n_min=16, n_max=256, n_step=16),
    ),
    # Transpose A/B bits of the instruction descriptor; sub-byte f6/f4 MN-major is left out (unverified).
    mma_mn_major=frozenset({"bf16", "f16", "tf32", "f8E4M3FN", "f8E5M2", "i8", "u8"}),
    # tcgen05.mma: A from smem (descriptor) or TMEM, B from smem, D in TMEM
    mma_sources=MappingProxyType({"a": ("smem", "tmem"), "b": ("smem",), "acc": ("tmem",)}),
    tmem=TmemGeometry(),
    packed_f32x2=True,
    sm_count=148,              # B200
)
