"""The typed kernel program (`Program`), its reader from wl IR and its verifier.

    from warploom.kernel import read_program, verify
    verify(read_program(kernel_op))          # raises KernelError naming each broken invariant
"""
from .program import (Arrive, Compute, Copy, Load, Loop, MBarrier, Mma, MmaWait, NamedBarrier, Opaque, Operand, Program, Region,
                      Ring, Role, Store, Sync, Wait)
from .read import read_program
from .verify import KernelError, Problem, problems, verify

__all__ = ["Arrive", "Compute", "Copy", "KernelError", "Load", "Loop", "MBarrier", "Mma", "MmaWait", "NamedBarrier",
           "Opaque", "Operand", "Problem", "Program", "Region", "Ring", "Role", "Store", "Sync", "Wait", "problems",
           "read_program", "verify"]
