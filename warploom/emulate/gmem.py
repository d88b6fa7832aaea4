"""Global memory as the emulator sees it: the launch's numpy arrays at made-up, widely spaced device addresses.

ld.global / st.global of scalars and vectors and atom.add (the stream-K workspace and counters) go through
`GlobalMemory`, bounds and alignment checked (PTX ISA "ld", "st", "atom"). TMA boxes read and write the arrays
directly (tma.py).
"""
from __future__ import annotations

import numpy as np

from .errors import OutOfBoundsError


class GlobalMemory:
    """Global memory: the launch's numpy arrays at made-up, widely spaced device addresses."""
    SPACING = 1 << 36

    def __init__(self):
        self.regions: list[tuple[str, int, np.ndarray]] = []

    def add(self, name: str, array: np.ndarray) -> int:
        if not array.flags.c_contiguous:
            raise ValueError(f"global array {name!r} must be C-contiguous (np.ascontiguousarray) to be addressed")
        base = self.SPACING * (len(self.regions) + 1)
        self.regions.append((name, base, array.reshape(-1).view(np.uint8)))
        return base

    def _places(self, addr: np.ndarray, mask: np.ndarray, nbytes: int, align: int, what: str):
        """(lanes, their array, their byte offsets in it (lanes x nbytes)) per array the active lanes' accesses of
        nbytes at addr[lane] fall in; OutOfBoundsError for a misaligned access or one outside every array."""
        lanes = np.flatnonzero(mask)
        bad = lanes[addr[lanes] % max(align, 1) != 0]
        if bad.size:
            raise OutOfBoundsError(f"{what} of {nbytes} B at 0x{int(addr[bad[0]]):x} (lane {bad[0]}) is not "
                                   f"{align}-byte aligned as its alignment attribute promises; fix the address "
                                   "arithmetic or the alignment attribute")
        places, left = [], lanes
        for name, base, buf in self.regions:
            inside = (addr[left] >= base) & (addr[left] + nbytes <= base + buf.size)
            hit = left[inside]
            if hit.size:
                places.append((hit, buf, (addr[hit] - base).astype(np.int64)[:, None] + np.arange(nbytes)))
            left = left[~inside]
        if left.size:
            a = int(addr[left[0]])
            near = min(self.regions, key=lambda r: abs(a - r[1]))
            raise OutOfBoundsError(f"{what} of {nbytes} B at 0x{a:x} (lane {left[0]}) is outside every array; "
                                   f"nearest is {near[0]!r} at 0x{near[1]:x}..0x{near[1] + near[2].size:x} "
                                   f"(offset {a - near[1]}): check the row/column bounds of the access")
        return places

    def store(self, addr: np.ndarray, data: np.ndarray, mask: np.ndarray, align: int) -> None:
        """Write data[lane] (uint8 rows) at addr[lane] for the active lanes."""
        for hit, buf, offs in self._places(addr, mask, data.shape[1], align, "global store"):
            buf[offs] = data[hit]

    def load(self, addr: np.ndarray, mask: np.ndarray, nbytes: int, align: int) -> np.ndarray:
        """(32, nbytes) uint8: the bytes at addr[lane] for the active lanes (zeros for the others)."""
        out = np.zeros((len(addr), nbytes), np.uint8)
        for hit, buf, offs in self._places(addr, mask, nbytes, align, "global load"):
            out[hit] = buf[offs]
        return out

    def atomic_add(self, addr: np.ndarray, value: np.ndarray, mask: np.ndarray, nbytes: int) -> np.ndarray:
        """atom.add of value[lane] at addr[lane], lane by lane in lane order (one at a time, as atomics are); the old
        values (unsigned, as uint64)."""
        old = np.zeros(len(addr), np.uint64)
        dt = np.dtype(f"u{nbytes}")
        for lane in np.flatnonzero(mask):
            one = np.zeros(len(addr), bool)
            one[lane] = True
            was = self.load(addr, one, nbytes, nbytes)[lane].view(dt)[0]
            old[lane] = int(was)
            new = np.array([(int(was) + int(value[lane])) & ((1 << (8 * nbytes)) - 1)], dt).view(np.uint8)
            data = np.zeros((len(addr), nbytes), np.uint8)
            data[lane] = new
            self.store(addr, data, one, nbytes)
        return old
