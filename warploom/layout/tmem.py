"""Tensor Memory (sm_100a) addresses, column ranges and allocation sizes.

TMEM is 128 lanes x 512 columns of 32-bit cells per CTA (PTX ISA 9.7.16.2 "Tensor Memory");
an address is (lane << 16) | column, and tcgen05.alloc takes a power-of-two column count
in 32..512. The geometry comes from `warploom.targets.sm100`.
"""
from __future__ import annotations

from dataclasses import dataclass

from warploom.layout.ops import INT
from warploom.targets import get as get_target

GEOMETRY = get_target("sm_100a").tmem


LANE_SHIFT = 16          # an address is lane << 16 | column


def tmem_address(lane: int, column: int) -> int:
    """The 32-bit TMEM address of (lane, column)."""
    if not 0 <= lane < GEOMETRY.lanes:
        raise ValueError(f"TMEM lane {lane}: lanes are 0..{GEOMETRY.lanes - 1}")
    if not 0 <= column < GEOMETRY.columns:
        raise ValueError(f"TMEM column {column}: columns are 0..{GEOMETRY.columns - 1}")
    return lane << LANE_SHIFT | column


def lane_offset(lane, ops=INT):
    """What a TMEM address moves by to reach `lane` (added to a lane-0 address), on an int or through `ops` (an IR
    builder: warploom/layout/ops.py)."""
    return ops.mul(lane, ops.const(1 << LANE_SHIFT))


def decode_tmem_address(address: int) -> tuple[int, int]:
    """(lane, column) of a TMEM address."""
    lane, column = address >> LANE_SHIFT, address & ((1 << LANE_SHIFT) - 1)
    tmem_address(lane, column)
    return lane, column


def alloc_columns(columns: int) -> int:
    """The column count to pass tcgen05.alloc for `columns` needed columns: the next power of two, at least 32."""
    if columns <= 0:
        raise ValueError(f"TMEM allocation of {columns} columns: ask for at least 1")
    if columns > GEOMETRY.alloc_max_columns:
        raise ValueError(f"TMEM allocation of {columns} columns: a CTA has {GEOMETRY.alloc_max_columns}; "
                         "alias tiles (P over S) or use fewer accumulator stages")
    n = GEOMETRY.alloc_min_columns
    while n < columns:
        n *= 2
    return n


@dataclass(frozen=True)
class TmemColumns:
    """Columns [start, start + count) of TMEM, all 128 lanes."""
    start: int
    count: int

    def __post_init__(self):
        if self.count <= 0 or self.start < 0 or self.start + self.count > GEOMETRY.columns:
            raise ValueError(f"TMEM columns {self.start}..{self.start + self.count - 1} are outside "
                             f"0..{GEOMETRY.columns - 1}")

    @property
    def end(self) -> int:
        return self.start + self.count

    def address(self, lane: int = 0, column: int = 0) -> int:
        """TMEM address of `column` of this range (relative) at `lane`, from an allocation based at 0."""
        if not 0 <= column < self.count:
            raise ValueError(f"column {column} of TMEM range {self.start}+{self.count}: "
                             f"columns are 0..{self.count - 1}")
        return tmem_address(lane, self.start + column)

    def overlaps(self, other: TmemColumns) -> bool:
        return self.start < other.end and other.start < self.end

    def contains(self, other: TmemColumns) -> bool:
        return self.start <= other.start and other.end <= self.end


def tmem_fields(address: int) -> tuple[int, int]:
    """(lane, column) of a TMEM address, bits 31..16 and 15..0 of (lane << 16) | column, unchecked: for a reader that
    reports an out-of-range lane or column in its own terms (the emulator's TmemError names the op and the
    allocation), where `decode_tmem_address` raises ValueError."""
    return address >> LANE_SHIFT, address & ((1 << LANE_SHIFT) - 1)
