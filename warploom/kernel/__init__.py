"""The typed kernel program (`Program`), its reader from wl IR and its verifier; the kernel contract.

    from warploom.kernel import read_program, verify
    verify(read_program(kernel_op))          # raises KernelError naming each broken invariant

The names below load on first use: `warploom.kernel.contract` (the kernel ABI, no MLIR) is read by the runtime's
side of the package (kernels.py, ops, the emulator) on machines without MLIR, and importing it must not pull in
the program's reader (which reads wl IR, so MLIR).
"""
from __future__ import annotations

import sys
import types

_LAZY = {
    **{name: "program" for name in ("Arrive", "Compute", "Copy", "Load", "Loop", "MBarrier", "Mma", "MmaWait",
                                    "NamedBarrier", "Opaque", "Operand", "Program", "Region", "Ring", "Role", "Store",
                                    "Sync", "Wait")},
    "read_program": "read",
    **{name: "verify" for name in ("KernelError", "Problem", "problems", "verify")},
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    """`warploom.kernel.verify` is the verifier function, as it was when this package imported it eagerly: the
    import system binds a submodule to its package's attribute once it has loaded it (`from warploom.kernel.verify
    import problems` would then leave the module under the function's name)."""

    def __setattr__(self, name, value):
        if name == "verify" and isinstance(value, types.ModuleType):
            value = value.verify
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
__all__ = sorted(_LAZY)
