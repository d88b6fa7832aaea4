"""emit: small helpers over the `mlir.dialects` builders, so a lowering reads like the kernel's schedule.

    builder    Builder (kernel gpu.module + llvm.func, hoisted constants, arith, scf if/else/for, llvm ptrs)
    sync       setmaxnreg per role, mbarrier rings, CTA/named barriers, fences, elect.sync
    staging    the runs of a row one st.shared writes into a swizzled staging tile (the C and O epilogues)
    tma        TMA load/store, bulk commit/wait groups, tensormap prefetch
    wgmma      fence, mma_async on smem descriptors, commit, wait; A-from-registers via inline PTX
    tcgen05    sm_100a: TMEM alloc/relinquish/dealloc, the one-thread MMA, commit, ld 32x32b, wait::ld, fences
    exp2       exp2 on the FMA units (FA4's polynomial, beside the MUFU's ex2.approx)
    inline     the one llvm.inline_asm helper (instructions MLIR 22's NVVM lacks)
    nobuilder  the few types/attributes MLIR 22's Python bindings cannot build
"""
from .builder import Builder, ForLoop, ptr_type, text  # noqa: F401
