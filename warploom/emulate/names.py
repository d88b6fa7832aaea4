"""Names for shared-memory addresses in the emulator's messages and timelines: each stage of a planned region
(`a[2]`, `b[0]+2048`) and each mbarrier (`full[1]`), placed as the kernel program's plan places them.

The kernels round the dynamic smem window's base up to the target's `smem_base_align` and lay the plan's
offsets from there, so a name is found from an absolute address once that base is known.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SmemNames:
    align: int                               # the kernel rounds its smem base up to this
    spans: tuple = ()                        # (offset from the rounded base, bytes, name)
    # ring stages and the barrier that hands each back to its producer: (offset of empty[s], ((offset of the
    # stage of each of the ring's regions, bytes), ...)), offsets from the rounded base
    releases: tuple = ()

    @classmethod
    def of_program(cls, program, target) -> SmemNames:
        """The names of a planned program's regions and barriers, for its target (a warploom.targets.Target)."""
        spans = []
        for r in program.regions.values():
            if r.space == "smem" and r.offset is not None and r.name != "mbarriers":
                stage = r.size // r.stages
                spans += [(r.offset + s * stage, stage, f"{r.name}[{s}]") for s in range(r.stages)]
        for bar in program.barriers.values():
            if bar.offset is not None:
                spans += [(bar.offset + target.mbarrier_bytes * i, target.mbarrier_bytes, f"{bar.name}[{i}]")
                          for i in range(bar.count)]
        releases = []
        for ring in program.rings.values():
            bar = program.barriers.get(ring.empty) if ring.empty else None
            if bar is None or bar.offset is None:
                continue
            regions = [program.regions[r] for r in ring.regions]
            for s in range(ring.stages):
                stage = tuple((r.offset + s * (r.size // r.stages), r.size // r.stages) for r in regions
                              if r.offset is not None and r.space == "smem")     # a TMEM ring hands back columns
                if not stage:
                    continue
                releases.append((bar.offset + target.mbarrier_bytes * s, stage))
        return cls(target.smem_base_align, tuple(sorted(spans)), tuple(releases))

    def base(self, window: int) -> int:
        """Where the kernel's plan starts, for a dynamic smem window at `window`."""
        return -(-window // self.align) * self.align

    def name(self, addr: int, window: int) -> str | None:
        """'full[1]', 'a[0]+32' for an absolute smem address, or None outside the plan."""
        off = addr - self.base(window)
        for start, size, what in self.spans:
            if start <= off < start + size:
                return what + (f"+{off - start}" if off > start else "")
        return None

    def annotate(self, text: str, window: int) -> str:
        """text with every hex number that is a planned smem address followed by its name: '0x20420(full[0])'."""
        if not self.spans:
            return text

        def sub(m):
            what = self.name(int(m.group(1), 16), window)
            return m.group(0) if what is None else f"{m.group(0)}({what})"
        return re.sub(r"0x([0-9a-f]+)\b(?!\()", sub, text)
