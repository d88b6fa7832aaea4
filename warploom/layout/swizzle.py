"""Shared-memory swizzle modes: the byte permutation TMA writes and the MMA units read.

A swizzled tile is stored in rows one span wide (32, 64 or 128 bytes); inside each
`repeat_bytes` block the hardware XORs the granule index (16-byte chunks; 32-byte
chunks for sm_100's 128B_base32B) with the low bits of the row index. In CUTLASS
terms the modes are Swizzle<B,M,S> on byte offsets: 32B = <1,4,3>, 64B = <2,4,3>,
128B = <3,4,3>, and 128B_base32B = <2,5,2>. "none" is the interleaved layout of
8-row x 16-byte core matrices (PTX ISA "Canonical Layouts": Swizzle<0,4,3>), so a
tile without swizzle is stored in rows 16 bytes wide.

Sources: PTX ISA 5.5 "Tensors" (swizzling modes) and 9.7.15.5.1.2 "Shared Memory Matrix
Layout" (canonical layouts, Swizzle<B,4,3>); the descriptor codes from "Matrix Descriptor
Format" (wgmma) and "Shared memory descriptor" (tcgen05). The <2,5,2> pattern of
128B_base32B is taken from CUTLASS (cute Layout_MN_SW128_32B_Atom), not from ISA text.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHUNK_BYTES = 16      # the unit of every descriptor address, LBO and SBO: one core-matrix row


@dataclass(frozen=True)
class Swizzle:
    name: str                 # "none", "32B", "64B", "128B", "128B_base32B"
    span_bytes: int           # bytes of one stored row: the TMA box inner extent
    xor_bits: int             # B: how many granule-index bits are XORed
    granule_log2: int         # M: log2 of the granule moved as a unit (4 -> 16 bytes)
    row_shift: int            # S: distance from the granule bits to the row bits XORed into them
    hopper_code: int | None   # wgmma descriptor bits [62,64); None where Hopper has no such mode
    sm100_code: int           # tcgen05 descriptor bits [61,64)

    @property
    def swizzled(self) -> bool:
        return self.xor_bits > 0

    @property
    def bytes(self) -> int:
        """The swizzle width TMA is told (0 for none)."""
        return self.span_bytes if self.swizzled else 0

    @property
    def repeat_bytes(self) -> int:
        """The block after which the pattern repeats; tiles aligned to it need base offset 0."""
        if not self.swizzled:
            return 8 * CHUNK_BYTES       # one 8 x 16 B core matrix
        return 1 << (self.granule_log2 + self.row_shift + self.xor_bits)

    @property
    def atom_rows(self) -> int:
        """Rows of one repeat: 8, or 4 for 128B_base32B."""
        return self.repeat_bytes // self.span_bytes

    def apply(self, offset):
        """Physical byte offset of logical byte `offset`, counted from a repeat-aligned base (an int, or a
        numpy array of them). The hardware applies this to absolute shared-memory addresses, which is why
        swizzled tiles start on a `repeat_bytes` boundary: then offset and address agree."""
        if np.any(np.asarray(offset) < 0):
            raise ValueError(f"swizzle of a negative byte offset {offset}")
        mask = ((1 << self.xor_bits) - 1) << (self.granule_log2 + self.row_shift)
        return offset ^ ((offset & mask) >> self.row_shift)

    def apply_with(self, ops, offset):
        """`apply` in an arithmetic namespace (the IR builder: const, and_, shru, xor), for run-time offsets."""
        if not self.swizzled:
            return offset
        mask = ((1 << self.xor_bits) - 1) << (self.granule_log2 + self.row_shift)
        return ops.xor(offset, ops.shru(ops.and_(offset, ops.const(mask)), ops.const(self.row_shift)))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Swizzle({self.name})"


SWIZZLE_NONE = Swizzle("none", CHUNK_BYTES, 0, 4, 3, hopper_code=0, sm100_code=0)
SWIZZLE_32B = Swizzle("32B", 32, 1, 4, 3, hopper_code=3, sm100_code=6)
SWIZZLE_64B = Swizzle("64B", 64, 2, 4, 3, hopper_code=2, sm100_code=4)
SWIZZLE_128B = Swizzle("128B", 128, 3, 4, 3, hopper_code=1, sm100_code=2)
SWIZZLE_128B_BASE32B = Swizzle("128B_base32B", 128, 2, 5, 2, hopper_code=None, sm100_code=1)

SWIZZLES = {s.name: s for s in (SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B, SWIZZLE_128B_BASE32B)}


def swizzle(mode: str | int | Swizzle) -> Swizzle:
    """A swizzle by name ("128B"), by TMA byte width (128; 0 = none) or as given."""
    if isinstance(mode, Swizzle):
        return mode
    if isinstance(mode, int) and not isinstance(mode, bool):
        by_bytes = {0: SWIZZLE_NONE, 32: SWIZZLE_32B, 64: SWIZZLE_64B, 128: SWIZZLE_128B}
        if mode not in by_bytes:
            raise ValueError(f"swizzle width {mode} B: TMA swizzles are 0 (none), 32, 64 or 128 bytes")
        return by_bytes[mode]
    if mode not in SWIZZLES:
        raise ValueError(f"swizzle mode {mode!r}: known modes are {', '.join(SWIZZLES)}")
    return SWIZZLES[mode]


def from_hopper_code(code: int) -> Swizzle:
    for s in SWIZZLES.values():
        if s.hopper_code == code:
            return s
    raise ValueError(f"wgmma descriptor swizzle code {code}: valid codes are 0 none, 1 128B, 2 64B, 3 32B")


def from_sm100_code(code: int) -> Swizzle:
    for s in SWIZZLES.values():
        if s.sm100_code == code:
            return s
    raise ValueError(f"tcgen05 descriptor swizzle code {code}: valid codes are 0 none, 1 128B_base32B, "
                     "2 128B, 4 64B, 6 32B (3, 5 and 7 are invalid)")
