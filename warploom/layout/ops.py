"""Arithmetic namespaces: a layout formula is written once over `ops` and evaluated on Python ints (`INT`: the
host, the emulator, tests) or on IR values (the lowering's `emit.Builder`, or `Builder.typed(i64)` for 64-bit
values), as warploom/runtime/rules.py does for sizes. A namespace has const, add, sub, mul, divu, remu, and_, or_,
xor, shl and shru (unsigned), all on non-negative ints here."""
from __future__ import annotations


class IntOps:
    """Python ints."""

    @staticmethod
    def const(v: int) -> int:
        return v

    add = staticmethod(lambda a, b: a + b)
    sub = staticmethod(lambda a, b: a - b)
    mul = staticmethod(lambda a, b: a * b)
    divu = staticmethod(lambda a, b: a // b)
    remu = staticmethod(lambda a, b: a % b)
    and_ = staticmethod(lambda a, b: a & b)
    or_ = staticmethod(lambda a, b: a | b)
    xor = staticmethod(lambda a, b: a ^ b)
    shl = staticmethod(lambda a, b: a << b)
    shru = staticmethod(lambda a, b: a >> b)


INT = IntOps()
