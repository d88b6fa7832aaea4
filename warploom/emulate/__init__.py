"""The CPU emulator of lowered kernels: every thread of every CTA, real smem bytes and swizzle, mbarriers,
TMA copies and wgmma groups under seeded interleavings, with checks that name the CTA, warp and op at fault.

    from warploom.emulate import emulate_gemm, emulate_launch, EmulatedKernel
"""
from .compiler import compile_kernel  # noqa: F401
from .errors import (AccumulatorReadError, AsyncLeakError, DeadlockError, DivergenceError,  # noqa: F401
                     EmulationError, MbarrierError, OutOfBoundsError, RegisterBudgetError, SmemRaceError,
                     UnknownOpError, WgmmaFenceError)
from .launch import EmulatedKernel, EmulationReport, emulate_gemm, emulate_launch, gemm_kernel  # noqa: F401
from . import arith, regwgmma  # noqa: F401,E402  (their handlers register on import)
