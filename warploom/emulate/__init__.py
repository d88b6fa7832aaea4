"""The CPU emulator of lowered kernels: every thread of every CTA, real smem bytes and swizzle, mbarriers,
TMA copies and wgmma groups under seeded interleavings, thread-block clusters (the CTAs of a cluster in one
interleaving, distributed shared memory, barrier.cluster, TMA multicast) and (sm_100a) Tensor Memory with
tcgen05 ops (tcgen05.py), with checks that name the CTA, warp and op at fault.

    from warploom.emulate import emulate_gemm, emulate_attention, emulate_launch, EmulatedKernel
"""
from .compiler import compile_kernel  # noqa: F401
from . import tcgen05  # noqa: F401  (registers the tcgen05 / Tensor Memory handlers)
from .errors import (AccumulatorReadError, AsyncLeakError, BarrierError, DeadlockError, DivergenceError,  # noqa: F401
                     EmulationError, MbarrierError, OutOfBoundsError, PairDeallocError, RegisterBudgetError, ScopeError,
                     SmemRaceError, TmemError, TmemFenceError, TmemRaceError, UnknownOpError, WgmmaFenceError)
from .front import attention_kernel, emulate_attention, emulate_attention_varlen, emulate_gemm, gemm_kernel  # noqa: F401  (builds, then runs)
from .launch import EmulatedKernel, EmulationReport, emulate_launch  # noqa: F401
from . import ops_arith, ops_llvm, ops_math, ops_nvvm, ops_scf, ops_vector, regwgmma  # noqa: F401,E402  (handlers register on import)
