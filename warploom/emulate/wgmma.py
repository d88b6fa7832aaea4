"""One CTA's wgmma unit (sm_90a, PTX ISA 9.7.15): warpgroup-collective MMAs, their commit groups and wait_group.

A wgmma is warpgroup-collective: the i-th mma_async of each of the 4 warps forms one MMA, issued when the last warp
reaches it (its smem operand bytes are then owned until a wait_group retires the group); a group completes after a
scheduler-chosen delay, computing every MMA of the group with the tensor core's measured arithmetic (tensorcore.py),
and a warp's accumulator registers become readable at its wait_group. Operands come through smem descriptors decoded
bit by bit (`warploom.layout.WgmmaSmemDescriptor`), or A from registers (the register-A inline asm, regwgmma.py,
placed by layout.fragments.wgmma_a_k16); accumulators are in the ISA fragment layout (layout.fragments). A wgmma
needs a wgmma.fence after its warp touched accumulator / A-fragment registers (Warp.unfenced).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from warploom.layout import WgmmaSmemDescriptor
from warploom.layout.fragments import wgmma_a_k16, wgmma_accumulator

from .core import NUMPY_ELEMS, WARP, WARPGROUP_WARPS, OpInfo, Pending, Wait, Warp
from .errors import AsyncLeakError, DivergenceError, SmemRaceError, UnknownOpError, WgmmaFenceError
from .tensorcore import mma_f32


@dataclass
class WgmmaSlot:
    """The i-th wgmma.mma_async of a warpgroup: each warp's (descriptors, input accumulator, result)."""
    info: OpInfo
    attrs: dict
    parts: dict = field(default_factory=dict)       # warp in warpgroup -> (desc_a, desc_b, acc_in, Pending)
    reads: np.ndarray | None = None                 # smem offsets of the operand bytes, once issued
    a_addr: np.ndarray | None = None
    b_addr: np.ndarray | None = None
    a_regs: dict = field(default_factory=dict)      # A from registers: warp in warpgroup -> (32, 4) b32 registers


@dataclass
class WgmmaGroup:
    index: int
    slots: tuple                                    # slot indices [lo, hi)
    committed: set = field(default_factory=set)
    done: bool = False
    released: bool = False


@dataclass
class Warpgroup:
    index: int
    slots: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    issued: list = field(default_factory=lambda: [0] * WARPGROUP_WARPS)     # mma_async count per warp
    commits: list = field(default_factory=lambda: [0] * WARPGROUP_WARPS)    # commit_group count per warp
    committed_to: list = field(default_factory=lambda: [0] * WARPGROUP_WARPS)


class WgmmaUnit:
    """The warpgroups of one CTA and their wgmmas, groups and waits."""

    def __init__(self, cta):
        self.cta = cta
        self.warpgroups: dict[int, Warpgroup] = {}

    def reader_of(self, offset: int) -> str:
        for wg in self.warpgroups.values():
            for slot in wg.slots:
                if slot.reads is not None and not self._slot_released(wg, slot) and offset in slot.reads:
                    return f"{slot.info.text} of warpgroup {wg.index}"
        return "an unknown wgmma"

    def warpgroup(self, warp: Warp) -> Warpgroup:
        cta = self.cta
        index = warp.index // WARPGROUP_WARPS
        if index not in self.warpgroups:
            if (index + 1) * WARPGROUP_WARPS > len(cta.warps):
                raise DivergenceError(f"wgmma in warpgroup {index}, which has fewer than {WARPGROUP_WARPS} warps in a "
                                      f"block of {len(cta.warps)} warps: launch whole warpgroups")
            self.warpgroups[index] = Warpgroup(index)
        return self.warpgroups[index]

    def fence(self, warp: Warp) -> None:
        """9.7.15.6.1 wgmma.fence: orders this warp's earlier register accesses before its next wgmma."""
        warp.unfenced = None

    def issue(self, warp: Warp, info: OpInfo, attrs: dict, desc_a: int | None, desc_b: int, acc_in,
              a_regs: np.ndarray | None = None) -> Pending:
        """9.7.15.5.2 wgmma.mma_async: warp `warp`'s part of the warpgroup's next MMA. With A in registers
        (attrs["a_regs"]), desc_a is None and a_regs is the warp's (32, 4) b32 A fragment; acc_in None means
        scale-d = 0 (D = A B, the input accumulator ignored)."""
        cta = self.cta
        if warp.unfenced is not None:
            u = warp.unfenced          # a reason, or (OpInfo of the access, what it accessed)
            why = u if isinstance(u, str) else f"{u[0].text} {u[1]}"
            raise WgmmaFenceError(f"warp {warp.index} issues a wgmma after {why}, with no wgmma.fence in "
                                  "between: PTX ISA 9.7.15.6.1 requires wgmma.fence before the first wgmma and between "
                                  "any other access to accumulator or A-fragment registers and the wgmma using them")
        wg = self.warpgroup(warp)
        w = warp.index % WARPGROUP_WARPS
        i = wg.issued[w]
        wg.issued[w] += 1
        if i == len(wg.slots):
            wg.slots.append(WgmmaSlot(info, attrs))
        slot = wg.slots[i]
        if slot.info.op != info.op:
            raise DivergenceError(f"warp {warp.index} issues {info.text} as wgmma #{i} of warpgroup {wg.index}, other "
                                  f"warps issued {slot.info.text}: wgmma is warpgroup-collective (.aligned)")
        result = Pending()
        slot.parts[w] = (desc_a, desc_b, acc_in, result)
        if a_regs is not None:
            slot.a_regs[w] = a_regs
        if len(slot.parts) == WARPGROUP_WARPS:
            self._issue_slot(wg, i, slot)
        if cta.trace is not None:
            cta.note(warp.index, "mma", f"wgmma #{i} m{attrs['m']}n{attrs['n']}k{attrs['k']} A {_operand_text(desc_a)} "
                                         f"B {_operand_text(desc_b)}" + ("  -> issued (the warpgroup's last warp)"
                                                                         if slot.reads is not None else ""))
        return result

    def _issue_slot(self, wg: Warpgroup, i: int, slot: WgmmaSlot) -> None:
        cta = self.cta
        sm = cta.shared
        descs = {(p[0], p[1]) for p in slot.parts.values()}
        if len(descs) != 1:
            raise DivergenceError(f"the warps of warpgroup {wg.index} give wgmma #{i} different descriptors "
                                  f"{sorted((hex(a), hex(b)) for a, b in descs)}: every warp must pass the same ones")
        (desc_a, desc_b), = descs
        a = slot.attrs
        eb = np.dtype(NUMPY_ELEMS[a["type_a"]]).itemsize
        if not a.get("a_regs"):
            slot.a_addr = self._operand_addresses(desc_a, a["m"], a["k"], eb, a["major_a"], "A")
        slot.b_addr = self._operand_addresses(desc_b, a["n"], a["k"], eb, a["major_b"], "B")
        key = ("reads", desc_a, desc_b, a["m"], a["n"], a["k"], eb, a.get("major_a"), a["major_b"], cta.base)
        cache = cta.launch.address_cache
        if key not in cache:
            smem_operands = [slot.b_addr] if slot.a_addr is None else [slot.a_addr, slot.b_addr]
            reads = np.concatenate([x.reshape(-1) for x in smem_operands]) - cta.base
            cache[key] = np.unique(np.concatenate([reads, reads + (eb - 1)]))
        reads = cache[key]
        pending = np.flatnonzero(sm.tma_pending[reads])
        if pending.size:
            off = int(reads[pending[0]])
            raise SmemRaceError(f"wgmma #{i} of warpgroup {wg.index} reads smem 0x{cta.base + off:x}, which an "
                                f"in-flight TMA copy has not written yet ({sm.writer_of(off)}): wait on the "
                                "stage's full barrier (try_wait.parity) before issuing the MMA")
        unwritten = np.flatnonzero(~sm.written[reads])
        if unwritten.size:
            off = int(reads[unwritten[0]])
            raise SmemRaceError(f"wgmma #{i} of warpgroup {wg.index} reads smem 0x{cta.base + off:x} (byte {off} of dynamic smem), "
                                "which no TMA copy has written yet: the MMA ran before its stage's copy was issued; "
                                "wait on the stage's full barrier before issuing it")
        self.cta.shared.mma_reading[reads] += 1
        sm.unread[reads] = False
        slot.reads = reads
        cta.stats["wgmma"] += 1

    def _operand_addresses(self, bits: int, mn: int, k: int, eb: int, major: str, which: str) -> np.ndarray:
        """Absolute smem addresses [mn, k] of a wgmma operand's elements, cached per descriptor."""
        cta = self.cta
        key = (bits, mn, k, eb, major, cta.base)
        cache = cta.launch.address_cache
        if key not in cache:
            try:
                desc = WgmmaSmemDescriptor.decode(bits)
            except ValueError as e:
                raise UnknownOpError(f"wgmma operand {which} descriptor 0x{bits:x}: {e}") from None
            cache[key] = cta.shared.operand_addresses(desc, bits, mn, k, eb, major, f"wgmma operand {which}")
        return cache[key]

    def commit(self, warp: Warp) -> None:
        """9.7.15.6.2 wgmma.commit_group: this warp's uncommitted wgmmas become the warpgroup's next group."""
        cta = self.cta
        wg = self.warpgroup(warp)
        w = warp.index % WARPGROUP_WARPS
        j = wg.commits[w]
        span = (wg.committed_to[w], wg.issued[w])
        wg.commits[w] += 1
        wg.committed_to[w] = wg.issued[w]
        if j == len(wg.groups):
            wg.groups.append(WgmmaGroup(j, span))
        group = wg.groups[j]
        if group.slots != span:
            raise DivergenceError(f"warp {warp.index} commits wgmmas #{span[0]}..{span[1] - 1} as group {j} of "
                                  f"warpgroup {wg.index}; another warp committed #{group.slots[0]}.."
                                  f"{group.slots[1] - 1}: every warp must issue and commit the same wgmmas")
        group.committed.add(w)
        if cta.trace is not None:
            cta.note(warp.index, "commit", f"wgmma.commit_group: group {j} = wgmmas #{span[0]}..{span[1] - 1}")
        if len(group.committed) == WARPGROUP_WARPS:
            prev = wg.groups[j - 1] if j else None
            slot = wg.slots[span[0]] if span[1] > span[0] else None
            origin = slot.info if slot else OpInfo("nvvm.wgmma.commit.group.sync.aligned", None)
            cta._async(origin, f"wgmma group {j} of warpgroup {wg.index} (wgmmas #{span[0]}..{span[1] - 1})",
                        lambda: self._complete_group(wg, group),
                        eligible=None if prev is None else (lambda: prev.done))

    def _complete_group(self, wg: Warpgroup, group: WgmmaGroup) -> None:
        cta = self.cta
        for i in range(*group.slots):
            slot = wg.slots[i]
            a = slot.attrs
            elem = NUMPY_ELEMS[a["type_a"]]
            smem16 = cta.shared.bytes.view(np.uint16)
            a16 = _register_a(slot.a_regs) if slot.a_addr is None else smem16[(slot.a_addr - cta.base) // 2]
            av = a16.view(elem).astype(np.float64) * a["scale_a"]   # [m, k]
            bv = smem16[(slot.b_addr - cta.base) // 2].view(elem).astype(np.float64) * a["scale_b"]   # [n, k]
            # The tensor core's own arithmetic (warploom.emulate.tensorcore, measured bit for bit): the k16 step's
            # products and the accumulator aligned to the largest exponent, truncated, summed, truncated to f32.
            # The accumulator is the warpgroup's: the four warps' fragments put together in the m64 x n tile.
            rows, cols = _fragment(a["n"])
            acc = None
            if a["scale_d"]:
                acc = np.zeros((av.shape[0], bv.shape[0]), np.float32)
                for w, (_, _, acc_in, _) in slot.parts.items():
                    if acc_in is not None:
                        v = acc_in.value if isinstance(acc_in, Pending) else acc_in
                        acc[rows[WARP * w:WARP * (w + 1)], cols[WARP * w:WARP * (w + 1)]] = v
            d = mma_f32(av, bv, acc)
            for w, (_, _, _, result) in slot.parts.items():
                result.value = d[rows[WARP * w:WARP * (w + 1)], cols[WARP * w:WARP * (w + 1)]]
        group.done = True
        if cta.trace is not None:
            for w in range(WARPGROUP_WARPS):
                cta.note(wg.index * WARPGROUP_WARPS + w, "done", f"wgmma group {group.index} complete "
                          f"(wgmmas #{group.slots[0]}..{group.slots[1] - 1}); its smem operands stay owned until wait_group")

    def wait(self, warp: Warp, pending: int) -> Wait | None:
        """9.7.15.6.3 wgmma.wait_group N: until at most N of this warp's committed groups are pending; then their
        accumulator registers may be read and their smem operands reused."""
        wg = self.warpgroup(warp)
        w = warp.index % WARPGROUP_WARPS
        must = wg.groups[:max(0, wg.commits[w] - pending)]
        if all(g.done for g in must):
            self._retire(wg, w, must)
            return None
        return Wait(lambda: all(g.done for g in must), f"wgmma.wait_group {pending} (groups "
                    f"{[g.index for g in must if not g.done]} of warpgroup {wg.index} not complete)")

    def _retire(self, wg: Warpgroup, w: int, groups) -> None:
        for g in groups:
            for i in range(*g.slots):
                wg.slots[i].parts[w][3].retired = True
            if not g.released:
                g.released = True
                for i in range(*g.slots):
                    self.cta.shared.mma_reading[wg.slots[i].reads] -= 1

    def _slot_released(self, wg: Warpgroup, slot: WgmmaSlot) -> bool:
        i = next(j for j, s in enumerate(wg.slots) if s is slot)    # (list.index compares the numpy fields)
        return any(g.released for g in wg.groups if g.slots[0] <= i < g.slots[1])

    def check_warp_exit(self, warp: Warp) -> None:
        cta = self.cta
        wg = self.warpgroups.get(warp.index // WARPGROUP_WARPS)
        if wg is None:
            return
        w = warp.index % WARPGROUP_WARPS
        unwaited = [g.index for g in wg.groups[:wg.commits[w]] if not all(
            wg.slots[i].parts[w][3].retired for i in range(*g.slots))]
        if wg.issued[w] > wg.committed_to[w] or unwaited:
            first = wg.groups[unwaited[0]].slots[0] if unwaited else wg.committed_to[w]
            op = wg.slots[first].info.text if first < len(wg.slots) else None
            raise AsyncLeakError(f"warp {warp.index} exits with wgmmas #{wg.committed_to[w]}..{wg.issued[w] - 1} "
                                 f"uncommitted and groups {unwaited} not waited for (wgmma #{first} of warpgroup "
                                 f"{wg.index} still owns this warp's accumulator registers): end with commit_group "
                                 "and wait_group 0").locate(cta.id, warp.index, op)


def _operand_text(bits: int | None) -> str:
    """A wgmma operand for a trace record: the smem address its descriptor starts at (None: A in registers)."""
    if bits is None:
        return "registers"
    try:
        return f"smem 0x{WgmmaSmemDescriptor.decode(bits).start_address:x}"
    except ValueError:
        return f"descriptor 0x{bits:x}"


_FRAGMENTS: dict = {}


def _fragment(n: int):
    """layout.fragments.wgmma_accumulator(n), computed once per n."""
    if n not in _FRAGMENTS:
        _FRAGMENTS[n] = wgmma_accumulator(n)
    return _FRAGMENTS[n]


_A_FRAGMENT = wgmma_a_k16()


def _register_a(a_regs: dict) -> np.ndarray:
    """The 64 x 16 A operand (uint16 bits) a register-A wgmma reads from its warpgroup's registers: warp w's
    (32, 4) b32 registers, element 2i + e of thread t being half e (e = 0 the low 16 bits) of register i,
    placed by layout.fragments.wgmma_a_k16 (PTX ISA 9.7.15.5.1.1 "Matrix Fragments for wgmma.mma_async", A)."""
    rows, cols = _A_FRAGMENT
    regs = np.concatenate([np.asarray(a_regs[w], np.uint64) for w in range(WARPGROUP_WARPS)])    # [128, 4]
    halves = np.stack([regs & 0xFFFF, regs >> 16], axis=-1).reshape(WARP * WARPGROUP_WARPS, 8)   # [128, 8]
    a = np.zeros((int(rows.max()) + 1, int(cols.max()) + 1), np.uint16)
    a[rows, cols] = halves.astype(np.uint16)
    return a
