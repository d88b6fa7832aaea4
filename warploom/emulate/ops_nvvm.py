"""The nvvm dialect (all but tcgen05, which is tcgen05.py): special registers, elect.sync, named barriers (bar.sync,
bar.arrive, bar.red.or), fences, setmaxnreg, clusters (mapa, barrier.cluster), mbarriers, TMA loads and stores with
their bulk groups, wgmma, warp shuffles and reductions, conversions. Each handler turns the op into calls on the
CTA's units (machine.py) and cites the PTX ISA section it follows.
"""
from __future__ import annotations

import re

import numpy as np
from mlir import ir

from . import order, semantics as sem, tmem_fence
from .compiler import (FLOATS, PREFIX_HANDLERS, TypeInfo, active_ints, enum_attr, handles, inline_asm, int_attr, lanes,
                       operand_slots, per_lane, result_slot, signed, uniform)
from .core import WARP, LazyText, Pending, Wait, lane_list
from .errors import DivergenceError, EmulationError, MbarrierError, ScopeError, UnknownOpError
from .floats import MAX_FINITE, as_f32, canonical, round_float, to_elem
from .semantics import minmax

SREGS = {"tid", "ntid", "ctaid", "nctaid", "laneid", "warpid"}
# PTX ISA "Special Registers" of a cluster: op suffix -> (Launch.sreg name, axis)
CLUSTER_SREGS = {"cluster.ctarank": ("cluster_ctarank", 0), "cluster.nctarank": ("cluster_nctarank", 0)}
for _a, _k in (("x", 0), ("y", 1), ("z", 2)):
    CLUSTER_SREGS.update({f"clusterid.{_a}": ("clusterid", _k), f"nclusterid.{_a}": ("nclusterid", _k),
                          f"cluster.ctaid.{_a}": ("cluster_ctaid", _k), f"cluster.nctaid.{_a}": ("cluster_nctaid", _k)})


# ---- nvvm: special registers, warp and CTA synchronisation ------------------------------------------

def sreg(c, op, info):
    # PTX ISA 10 "Special Registers": %tid, %ntid, %ctaid, %nctaid (x, y, z), %laneid, %warpid
    reg = op.name[len("nvvm.read.ptx.sreg."):]
    r, _ = result_slot(c, op)
    if reg in CLUSTER_SREGS:
        # %cluster_ctarank, %cluster_nctarank, %clusterid, %nclusterid, %cluster_ctaid, %cluster_nctaid
        name, k = CLUSTER_SREGS[reg]

        def fn_cluster(w):
            w.env[r] = w.cta.launch.sreg(name, k, w.cta)
        return False, fn_cluster
    base, _, axis = reg.partition(".")
    if base not in SREGS or (axis and axis not in "xyz"):
        raise UnknownOpError(f"special register %{reg} is not modelled")
    k = "xyz".index(axis) if axis else 0
    if base == "tid":
        if k:
            def fn(w):
                w.env[r] = 0          # blocks are 1-D (block = (threads, 1, 1))
        else:
            def fn(w):
                w.env[r] = w.tid
    elif base == "laneid":
        def fn(w):
            w.env[r] = w.tid % WARP
    elif base == "warpid":
        def fn(w):
            w.env[r] = w.index
    else:
        def fn(w):
            w.env[r] = w.cta.launch.sreg(base, k, w.cta)
    return False, fn


@handles("nvvm.elect.sync")
def _elect(c, op, info):
    # PTX ISA 9.7.13 "elect.sync": one active leader lane of the membermask (the lowest), all of whose lanes
    # must execute it
    if op.operands:
        raise UnknownOpError("nvvm.elect.sync with a membermask operand: only the full warp is modelled")
    r, _ = result_slot(c, op)
    lane = np.arange(WARP)

    def fn(w):
        if not w.mask.all():
            raise DivergenceError(f"elect.sync with lanes {np.flatnonzero(~w.mask).tolist()} inactive; its membermask "
                                  "(the full warp) must all execute it")
        w.env[r] = lane == 0
    return False, fn


@handles("nvvm.barrier")
def _barrier(c, op, info):
    # PTX ISA 9.7.13 "bar, barrier" (bar.sync): wait until the barrier's expected threads (default: the whole CTA) arrive
    v = op.opview
    if v.reductionPredicate is not None:
        raise UnknownOpError("nvvm.barrier with a reduction: not modelled")
    bid = c.slot(v.barrierId) if v.barrierId is not None else None
    cnt = c.slot(v.numberOfThreads) if v.numberOfThreads is not None else None

    def gen(w):
        e = w.env
        b = 0 if bid is None else uniform(e[bid], w.mask, "barrier id")
        n = None if cnt is None else uniform(e[cnt], w.mask, "barrier thread count")
        w.last_op = info
        cta = w.cta
        if cta.trace is not None:
            t = cta.note(w.index, "bar", f"bar.sync {b}" + (f" ({n} threads)" if n is not None else ""))
        wait = cta.named.sync(w, b, n)
        if wait is not None:
            yield wait
        if cta.trace is not None:
            cta.note_passed(t)
    return True, gen


BAR_RED_OR = "llvm.nvvm.barrier.cta.red.or.aligned.count"


def bar_red_or(c, op, info, name: str):
    # PTX ISA 9.7.13 "bar, barrier" (bar.red.or.pred d, a, b, c): bar.sync a with b threads that also ORs predicate c
    # over every thread taking part; d is the OR, in each of them
    bid, cnt, pred = operand_slots(c, op)
    r, _ = result_slot(c, op)

    def gen(w):
        e = w.env
        if not w.mask.all():
            raise DivergenceError(f"{name} with lanes {np.flatnonzero(~w.mask).tolist()} inactive: the .aligned form "
                                  "must be executed by every thread of the warp")
        b = uniform(e[bid], w.mask, "barrier id")
        n = uniform(e[cnt], w.mask, "barrier thread count")
        w.last_op = info
        cta = w.cta
        gen_at = cta.named.bars[b][1] if b in cta.named.bars else 0
        if cta.trace is not None:
            t = cta.note(w.index, "bar", f"bar.red.or {b} ({n} threads)")
        wait = cta.named.sync(w, b, n, lanes(e[pred], bool))
        if wait is not None:
            yield wait
        if cta.trace is not None:
            cta.note_passed(t)
        e[r] = np.full(WARP, cta.named.bar_or[(b, gen_at)])
    return True, gen


@handles("nvvm.barrier.arrive")
def _barrier_arrive(c, op, info):
    # PTX ISA 9.7.13 "bar, barrier" (bar.arrive a, b): count the threads at barrier a (b threads expected, a
    # multiple of the warp size) without waiting; a bar.sync with the same id and count waits for the rest
    v = op.opview
    bid = c.slot(v.barrierId) if v.barrierId is not None else None
    cnt = c.slot(v.numberOfThreads)

    def gen(w):
        e = w.env
        b = 0 if bid is None else uniform(e[bid], w.mask, "barrier id")
        n = uniform(e[cnt], w.mask, "barrier thread count")
        w.last_op = info
        cta = w.cta
        if cta.trace is not None:
            cta.note(w.index, "bar", f"bar.arrive {b} ({n} threads)")
        cta.named.arrive(w, b, n)
        yield None
    return True, gen


@handles("nvvm.setmaxregister")
def _setmaxnreg(c, op, info):
    # PTX ISA "setmaxnreg" (miscellaneous instructions): a warpgroup's register budget, 24..256 in steps of 8; no effect on values
    n = int_attr(op, "regCount")
    if not 24 <= n <= 256 or n % 8:
        raise EmulationError(f"setmaxnreg {n}: must be a multiple of 8 in 24..256")
    inc = "increase" in str(op.attributes["action"])

    def gen(w):
        if not w.mask.all():
            raise DivergenceError("setmaxnreg is .sync.aligned: every lane of the warp must execute it")
        w.last_op = info
        wait = w.cta.registers.setmaxnreg(w, n, inc)
        while wait is not None:                  # .inc blocks until the CTA's pool has the registers
            yield wait
            wait = w.cta.registers.take(w, n)
    return True, gen


@handles("nvvm.fence.mbarrier.init", "nvvm.wgmma.fence.aligned", "nvvm.fence.proxy", "nvvm.fence.sc.cluster",
         "nvvm.fence.sync_restrict", "nvvm.fence.proxy.sync_restrict")
def _ordering_fence(c, op, info):
    # fence.mbarrier_init, fence.proxy.async{.shared::cta,.shared::cluster,.global}, fence.sc.cluster and the
    # .sync_restrict fences (PTX ISA "Parallel synchronization and communication instructions: membar/fence"), and
    # wgmma.fence (9.7.15.6.1), order memory and register accesses. The emulator executes ops of one warp in order,
    # makes every generic store visible to every CTA of the cluster at once, and makes async results visible only
    # at their waits. wgmma.fence and fence.mbarrier_init are checked to be there (WgmmaUnit.fence,
    # Mbarriers.fence_init); the others are ordering points only, and a missing one is NOT detected.
    if op.name == "nvvm.wgmma.fence.aligned":
        def fn(w):
            w.cta.wgmma.fence(w)
    elif op.name == "nvvm.fence.mbarrier.init":
        def fn(w):
            w.cta.mbar.fence_init(w.index)
    elif op.name == "nvvm.fence.proxy" and enum_attr(op.attributes["kind"]) in ("async", "async.shared"):
        # fence.proxy.async(.shared::cta): checked, by the TMA store that reads what the generic proxy wrote
        def fn(w):
            w.cta.shared.fence_proxy_async(w.index)
    else:
        def fn(w):
            pass
    return False, fn


# ---- nvvm: clusters (PTX ISA "Cluster of cooperative thread arrays", "Distributed shared memory") ---------------

@handles("nvvm.mapa")
def _mapa(c, op, info):
    # PTX ISA "Parallel synchronization and communication instructions: mapa" (.shared::cluster): the address, in the
    # shared::cluster window of CTA rank b, of the shared memory variable at a (same offset in that CTA)
    v = op.opview
    src, dst = TypeInfo(v.a.type).space, TypeInfo(op.results[0].type).space
    if (src, dst) != (3, 7):
        raise UnknownOpError(f"nvvm.mapa from address space {src} to {dst}: only the shared::cluster form "
                             "(!llvm.ptr<3> -> !llvm.ptr<7>) is modelled, not generic addresses")
    a, b = c.slot(v.a), c.slot(v.b)
    r = c.slot(op.results[0])

    def fn(w):
        e = w.env
        cta = w.cta
        av, bv = e[a], e[b]
        if not isinstance(av, np.ndarray) and not isinstance(bv, np.ndarray):
            e[r] = cta.cluster.mapa(cta, av, bv)
            return
        out = np.zeros(WARP, np.uint64)
        av, bv = lanes(av, np.uint64), lanes(bv, np.uint64)
        for lane in np.flatnonzero(w.mask):
            try:
                out[lane] = cta.cluster.mapa(cta, int(av[lane]), int(bv[lane]))
            except EmulationError as err:
                err.detail += f" (lane {lane})"
                raise
        e[r] = out
    return False, fn


def _cluster_aligned(op, w, what: str) -> None:
    # .aligned: every (non-exited) thread of the warp executes the same barrier.cluster instruction
    if "aligned" in op.attributes and not w.mask.all() and (w.mask != w.cta.cluster.launch_lanes(w)).any():
        raise DivergenceError(f"{what}.aligned with lanes {lane_list(~w.mask)} inactive: every thread "
                              "of the warp must execute it (drop .aligned for divergent code)")


@handles("nvvm.cluster.arrive", "nvvm.cluster.arrive.relaxed")
def _cluster_arrive(c, op, info):
    # PTX ISA "Parallel synchronization and communication instructions: barrier.cluster": barrier.cluster.arrive
    # {.release (default), .relaxed}{.aligned} marks the executing threads' arrival in the current phase and does not
    # wait. The memory semantics differ, which the emulator models only for TMEM happens-before (cluster.py, order.py).
    def gen(w):
        _cluster_aligned(op, w, "barrier.cluster.arrive")
        w.cta.cluster.barrier_arrive(w, release=op.name != "nvvm.cluster.arrive.relaxed")
        w.last_op = info
        yield None                       # let the arrival be seen before this warp goes on
    return True, gen


@handles("nvvm.cluster.wait")
def _cluster_wait(c, op, info):
    # PTX ISA "... barrier.cluster": barrier.cluster.wait{.acquire}{.aligned} waits until every non-exited thread of
    # the cluster arrived in the phase this thread arrived in
    def gen(w):
        _cluster_aligned(op, w, "barrier.cluster.wait")
        cl = w.cta.cluster
        phase = cl.barrier_wait_target(w)
        w.last_op = info
        if cl.barrier_phase <= phase:
            yield Wait(lambda: cl.barrier_phase > phase, LazyText(lambda: cl.barrier_state(phase)))
        cl.barrier_waited(w, phase)
    return True, gen


@handles("nvvm.prefetch")
def _prefetch(c, op, info):
    # PTX ISA 9.7.9 "prefetch, prefetchu" (prefetch.tensormap): a cache hint; the operand must be a tensor map
    v = op.opview
    if "tensormap" not in op.attributes:
        raise UnknownOpError("nvvm.prefetch of anything but a tensor map is not modelled")
    a = c.slot(v.addr)

    def fn(w):
        for addr in active_ints(w.env[a], w.mask):
            w.cta.launch.tensor_map_at(addr)
    return False, fn


# ---- nvvm: mbarriers, PTX ISA 9.7.13.15 --------------------------------------------------------------

def no_extras(op, *names):
    for n in names:
        if getattr(op.opview, n) is not None:
            raise UnknownOpError(f"{op.name} with a {n} operand: not modelled")


@handles("nvvm.mbarrier.init")
def _mbar_init(c, op, info):
    # 9.7.13.15 "mbarrier.init"
    no_extras(op, "predicate")
    a, n = (c.slot(x) for x in (op.opview.addr, op.opview.count))

    def fn(w):
        e = w.env
        for lane, addr in per_lane(e[a], w.mask):
            w.cta.mbar.init(addr, int(lanes(e[n])[lane]), w.index)
            if w.cta.trace is not None:
                w.cta.note(w.index, "init", f"mbarrier.init 0x{addr:x} count {int(lanes(e[n])[lane])}")
    return False, fn


@handles("nvvm.mbarrier.arrive", "nvvm.mbarrier.arrive.expect_tx")
def _mbar_arrive(c, op, info):
    # 9.7.13.15 "mbarrier.arrive" (each active thread arrives once) and "mbarrier.arrive.expect_tx"
    # (expect-tx of txCount bytes, then arrive-on)
    v = op.opview
    expect = op.name.endswith("expect_tx")
    if expect:
        no_extras(op, "predicate")
    a = c.slot(v.addr)
    tx = c.slot(v.txcount) if expect else None
    r = c.slot(op.results[0]) if len(op.results) else None
    cnt = c.slot(v.count) if not expect and v.count is not None else None
    if TypeInfo(v.addr.type).space == 7 or cnt is not None:
        return True, _mbar_arrive_cluster(op, info, a, tx, cnt, r, TypeInfo(v.addr.type).space == 7)

    def gen(w):
        e = w.env
        token = np.zeros(WARP, np.uint64)
        carries = tmem_fence.signal(w, w.mask, "mbarrier.arrive")
        for lane, addr in per_lane(e[a], w.mask):
            if carries:                    # its waiters must order their TMEM accesses after this thread's
                w.cta.mbar.get(addr, w.index).tc_phases.add(w.cta.mbar.get(addr, w.index).phase)
            token[lane] = w.cta.mbar.arrive(addr, 1, int(lanes(e[tx])[lane]) if expect else 0, w.index, w.knows)
        if r is not None:
            e[r] = token
        w.last_op = info
        if w.cta.trace is not None:
            arrivals = [(addr, int(lanes(e[tx])[lane]) if expect else 0) for lane, addr in per_lane(e[a], w.mask)]
            for addr in sorted({addr for addr, _ in arrivals}):
                bar = w.cta.mbar.table[addr]
                tx_bytes = sum(n for x, n in arrivals if x == addr)
                tx_text = f" expect_tx {tx_bytes} B" if expect else ""
                w.cta.note(w.index, "arrive", f"mbarrier 0x{addr:x} x{sum(x == addr for x, _ in arrivals)}{tx_text} (now phase "
                                              f"{bar.phase}, {bar.pending} arrivals and {bar.tx} tx B pending)")
        yield None                       # let the arrival be seen before this warp goes on
    return True, gen


def _mbar_arrive_cluster(op, info, a: int, tx, cnt, r, cluster_space: bool):
    # 9.7.13.15 "mbarrier.arrive" on a .shared::cluster address (e.g. mbarrier.arrive.release.cluster.shared::cluster:
    # a remote arrive on another CTA's mbarrier, which returns no state), and the count operand (pending -= count)
    name = op.name[len("nvvm."):]
    cluster_release = "scope" in op.attributes and "cluster" in str(op.attributes["scope"])

    def gen(w):
        e = w.env
        cta = w.cta
        token = np.zeros(WARP, np.uint64)
        carries = tmem_fence.signal(w, w.mask, name)      # tcgen05 fences: as for a local arrive (_mbar_arrive)
        for lane, addr in per_lane(e[a], w.mask):
            n = int(lanes(e[cnt])[lane]) if cnt is not None else 1
            if cluster_space:
                target, local = cta.cluster.remote_mbarrier(cta, addr, name)
            else:
                target, local = cta, addr
            if n < 1:
                raise MbarrierError(f"{name} with count {n} on mbarrier 0x{local:x}: the count must be at least 1")
            if carries:
                target.mbar.get(local).tc_phases.add(target.mbar.get(local).phase)
            if cluster_release and target is not cta:       # another CTA's barrier, released at cluster scope
                target.mbar.get(local).cluster_phases.add(target.mbar.get(local).phase)
            token[lane] = target.mbar.arrive(local, n, int(lanes(e[tx])[lane]) if tx is not None else 0, knows=w.knows)
        if r is not None:
            e[r] = token
        w.last_op = info
        yield None
    return gen


@handles("nvvm.mbarrier.try_wait.parity")
def _mbar_wait(c, op, info):
    # 9.7.13.15 "mbarrier.test_wait/try_wait": .parity P succeeds once the phase with parity P has completed;
    # the NVVM op loops on try_wait until it does
    v = op.opview
    return _parity_wait(c, info, c.slot(v.addr), c.slot(v.phase), "cta")


# the same wait with .acquire.cluster, as inline PTX (the NVVM op has no scope): a loop on
# mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 over $0 (the barrier's shared::cta address, i32), $1 (the
# parity), $2 (the suspend-time hint), until it succeeds. Read here from the PTX text itself, not from the lowering's
# template. It waits as the NVVM op does, and may pass phases another CTA released at cluster scope.
_WAIT_CLUSTER = re.compile(r"\{\s*\.reg \.pred (?P<p>\w+);\s*(?P<l>\w+):\s*"
                           r"mbarrier\.try_wait\.parity\.acquire\.cluster\.shared::cta\.b64 (?P=p), \[\$0\], \$1, \$2;\s*"
                           r"@!(?P=p) bra (?P=l);\s*\}")


@inline_asm(lambda asm: _WAIT_CLUSTER.fullmatch(asm.strip()) is not None)
def _mbar_wait_cluster(c, op, info):
    constraints = ir.StringAttr(op.attributes["constraints"]).value
    if constraints != "r,r,r" or len(op.results) or [str(v.type) for v in op.operands] != ["i32"] * 3:
        raise UnknownOpError(f"the cluster-scope mbarrier wait takes three i32 inputs ('r,r,r') and gives nothing; got "
                             f"constraints {constraints!r}, operands {[str(v.type) for v in op.operands]}")
    return _parity_wait(c, info, c.slot(op.operands[0]), c.slot(op.operands[1]), "cluster")


def _parity_wait(c, info, a, p, scope: str):
    """Wait until the phase of parity e[p] of the barrier at e[a] completed (per lane), then take what it ordered. A
    wait at CTA scope may not pass a phase another CTA's thread released at cluster scope (ScopeError)."""
    def gen(w):
        e = w.env
        waits = sorted({(addr, int(lanes(e[p])[lane]) & 1) for lane, addr in per_lane(e[a], w.mask)})
        cta = w.cta
        bars = [(cta.mbar.get(addr, w.index), parity) for addr, parity in waits]
        w.last_op = info
        if cta.trace is not None:
            t = cta.note(w.index, "wait", ", ".join(f"mbarrier 0x{b.addr:x} parity {par}" for b, par in bars))
        if not all(b.passed(par) for b, par in bars):
            what = ", ".join(f"mbarrier 0x{b.addr:x} (byte {b.addr - cta.base} of dynamic smem) parity {par}: phase {b.phase}, "
                             f"{b.pending} arrivals and {b.tx} tx bytes pending" for b, par in bars)
            yield Wait(lambda: all(b.passed(par) for b, par in bars), what)
        for b, par in bars:          # the last phase of parity `par` completed: did it carry tcgen05 work?
            done = b.phase - 1 if (b.phase - 1) & 1 == par else b.phase - 2
            if scope == "cta" and done in b.cluster_phases:
                raise ScopeError(f"a wait at CTA scope (nvvm.mbarrier.try_wait.parity) passed phase {done} of mbarrier "
                                 f"0x{b.addr:x} (byte {b.addr - cta.base} of dynamic smem), which another CTA's thread "
                                 "released at cluster scope (mbarrier.arrive.release.cluster): the acquire must be at "
                                 "cluster scope too (mbarrier.try_wait.parity.acquire.cluster)")
            order.merge(w.knows, b.hb_done.get(done))
            if done in b.tc_phases:
                tmem_fence.passed(w, w.mask, f"its wait on mbarrier 0x{b.addr:x} (phase {done}, completed by a "
                                         "tcgen05.commit or a thread that accessed TMEM)")
        if cta.trace is not None:
            cta.note_passed(t)
    return True, gen


# ---- nvvm: TMA, PTX ISA 9.7.9.25 ----------------------------------------------------------------------

@handles("nvvm.cp.async.bulk.tensor.shared.cluster.global")
def _tma_load(c, op, info):
    # 9.7.9.25 cp.async.bulk.tensor.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    # .multicast::cluster (multicastMask operand, 16-bit ctaMask): the box lands at the same CTA-relative offset in
    # every CTA of the mask, and complete_tx goes to the mbarrier at the same offset in each (TmaUnit.load, tma.py)
    v = op.opview
    no_extras(op, "l2CacheHint", "predicate")
    if len(v.im2colOffsets) or ("mode" in op.attributes and enum_attr(op.attributes["mode"]) != "tile"):
        raise UnknownOpError("TMA load in im2col (or another non-tile) mode: only tile mode is modelled")
    if "group" in op.attributes:
        raise UnknownOpError(f"TMA load with {op.attributes['group']} (.cta_group): the mbarrier of a CTA pair is not "
                             "modelled")
    if TypeInfo(v.mbar.type).space != 3:
        raise UnknownOpError("TMA load with an mbarrier outside shared::cta: not modelled")
    dst, tmap, bar = c.slot(v.dstMem), c.slot(v.tmaDescriptor), c.slot(v.mbar)
    mask = c.slot(v.multicastMask) if v.multicastMask is not None else None
    coords = [(c.slot(x), TypeInfo(x.type).width) for x in v.coordinates]

    def gen(w):
        e = w.env
        for lane, d in per_lane(e[dst], w.mask):
            box = [signed(int(lanes(e[s])[lane]), width) for s, width in coords]
            m = None if mask is None else int(lanes(e[mask])[lane]) & 0xFFFF
            w.cta.tma.load(info, d, int(lanes(e[tmap])[lane]), int(lanes(e[bar])[lane]), box, m, w.index)
        w.last_op = info
        yield None
    return True, gen


@handles("nvvm.cp.async.bulk.tensor.global.shared.cta")
def _tma_store(c, op, info):
    # 9.7.9.25 cp.async.bulk.tensor.global.shared::cta.tile.bulk_group: smem box -> global through the tensor map,
    # completing in the issuing thread's bulk async-group (TmaUnit.store, tma.py)
    v = op.opview
    no_extras(op, "l2CacheHint", "predicate")
    if "mode" in op.attributes and enum_attr(op.attributes["mode"]) != "tile":
        raise UnknownOpError("TMA store in a non-tile mode: only tile mode is modelled")
    src, tmap = c.slot(v.srcMem), c.slot(v.tmaDescriptor)
    coords = [(c.slot(x), TypeInfo(x.type).width) for x in v.coordinates]

    def gen(w):
        e = w.env
        for lane, s_ in per_lane(e[src], w.mask):
            box = [signed(int(lanes(e[x])[lane]), width) for x, width in coords]
            w.cta.tma.store(info, s_, int(lanes(e[tmap])[lane]), box, w.index, lane)
        w.last_op = info
        yield None
    return True, gen


@handles("nvvm.cp.async.bulk.commit.group")
def _bulk_commit(c, op, info):
    # 9.7.9.27 cp.async.bulk.commit_group: per thread
    def fn(w):
        for lane in np.flatnonzero(w.mask):
            w.cta.tma.bulk_commit(w.index, int(lane))
    return False, fn


@handles("nvvm.cp.async.bulk.wait_group")
def _bulk_wait(c, op, info):
    # 9.7.9.28 cp.async.bulk.wait_group[.read] N: per thread
    n = int_attr(op, "group")
    read = "read" in op.attributes

    def gen(w):
        w.last_op = info
        for lane in np.flatnonzero(w.mask):
            while True:
                wait = w.cta.tma.bulk_wait(w.index, int(lane), n, read)
                if wait is None:
                    break
                yield wait
    return True, gen


# ---- nvvm: wgmma, PTX ISA 9.7.15 ----------------------------------------------------------------------

@handles("nvvm.wgmma.mma_async")
def _wgmma(c, op, info):
    # 9.7.15.5.2 wgmma.mma_async.sync.aligned.shape.dtype.atype.btype d, a-desc, b-desc, scale-d, imm-scale-a,
    # imm-scale-b, imm-trans-a, imm-trans-b: A and B from smem descriptors, D in registers
    v = op.opview
    shape = str(op.attributes["shape"])
    m, n, k = (int(x) for x in re.findall(r"= (\d+)", shape))
    ta, tb, td = (enum_attr(op.attributes[x]) for x in ("typeA", "typeB", "typeD"))
    if ta != tb or ta not in ("bf16", "f16") or td != "f32":
        raise UnknownOpError(f"wgmma {ta} x {tb} -> {td}: only bf16/f16 inputs with f32 accumulators are modelled")
    if (m, k) != (64, 16):
        raise UnknownOpError(f"wgmma shape m{m}n{n}k{k}: only m64nNk16 is modelled for {ta}")
    if "satfinite" in op.attributes and enum_attr(op.attributes["satfinite"]) not in ("wrapped", "none"):
        raise UnknownOpError(f"wgmma satfinite {op.attributes['satfinite']}: not modelled")
    scale = {"one": 1.0, "neg": -1.0}
    attrs = {
        "m": m, "n": n, "k": k, "type_a": ta,
        # MMALayout: A row = K-major (col = transposed, M-major); B col = K-major, row = N-major (imm-trans-b)
        "major_a": {"row": "K", "col": "MN"}[enum_attr(op.attributes["layoutA"])],
        "major_b": {"col": "K", "row": "MN"}[enum_attr(op.attributes["layoutB"])],
        "scale_a": scale[enum_attr(op.attributes["scaleA"])], "scale_b": scale[enum_attr(op.attributes["scaleB"])],
        "scale_d": enum_attr(op.attributes["scaleD"]) == "one",
    }
    acc, da, db = c.slot(v.inouts), c.slot(v.descriptorA), c.slot(v.descriptorB)
    r = c.slot(op.results[0])

    def fn(w):
        e = w.env
        if not w.mask.all():
            raise DivergenceError("wgmma.mma_async is .sync.aligned: every lane of the warp must execute it")
        a_bits = uniform(e[da], w.mask, "wgmma descriptor A")
        b_bits = uniform(e[db], w.mask, "wgmma descriptor B")
        acc_in = e[acc]
        if not isinstance(acc_in, Pending):
            acc_in = lanes(acc_in)
        e[r] = w.cta.wgmma.issue(w, info, attrs, a_bits, b_bits, acc_in)
    return False, fn


@handles("nvvm.wgmma.commit.group.sync.aligned")
def _wgmma_commit(c, op, info):
    # 9.7.15.6.2 wgmma.commit_group
    def gen(w):
        if not w.mask.all():
            raise DivergenceError("wgmma.commit_group is .sync.aligned: every lane of the warp must execute it")
        w.cta.wgmma.commit(w)
        w.last_op = info
        yield None
    return True, gen


@handles("nvvm.wgmma.wait.group.sync.aligned")
def _wgmma_wait(c, op, info):
    # 9.7.15.6.3 wgmma.wait_group N
    n = int_attr(op, "group")

    def gen(w):
        if not w.mask.all():
            raise DivergenceError("wgmma.wait_group is .sync.aligned: every lane of the warp must execute it")
        w.last_op = info
        cta = w.cta
        if cta.trace is not None:
            t = cta.note(w.index, "wait", f"wgmma.wait_group {n}")
        while True:
            wait = cta.wgmma.wait(w, n)
            if wait is None:
                break
            yield wait
        if cta.trace is not None:
            cta.note_passed(t)
    return True, gen


def cvt_pair(c, op, info):
    # nvvm.convert.f32x2.to.{bf16x2,f16x2} = cvt.{rn,rz}{.relu}{.satfinite}.{bf16x2,f16x2}.f32 d, a, b
    # (PTX ISA 9.7.9 "cvt"): d's upper half is cvt(a) = src_hi, the lower half cvt(b) = src_lo; in the
    # vector<2 x T> result element 0 is the low half. .relu: negative results become +0, NaN canonical;
    # .satfinite: +-inf and out-of-range results become +-MAX_NORM, NaN stays NaN
    v = op.opview
    hi, lo = c.slot(v.src_hi), c.slot(v.src_lo)
    if v.random_bits is not None:
        raise UnknownOpError(f"{op.name} with stochastic rounding (.rs): not modelled")
    r, t = result_slot(c, op)
    elem = "bf16" if "bf16x2" in op.name else "f16"
    if t.kind != "vector" or t.count != 2 or t.elem != elem:
        raise UnknownOpError(f"{op.name} to {op.results[0].type}: only vector<2x{elem}> is modelled")
    rnd = str(op.attributes["rnd"]) if "rnd" in op.attributes else "#nvvm.fp_rnd_mode<rn>"
    mode = {"rn": "rne", "rz": "rz"}.get(rnd[rnd.index("<") + 1:rnd.rindex(">")])
    if mode is None:
        raise UnknownOpError(f"{op.name} rounding {rnd}: only rn and rz are modelled")
    relu = "relu" in op.attributes and ir.BoolAttr(op.attributes["relu"]).value
    sat = "sat" in op.attributes and "satfinite" in str(op.attributes["sat"])
    big = MAX_FINITE[elem]

    def convert(x):
        y = to_elem(np.asarray(x, np.float32), elem) if mode == "rne" else round_float(
            np.asarray(x, np.float64), elem, mode)
        y = np.asarray(y)
        if sat:
            y = np.where(np.isinf(as_f32(y)) | (np.abs(as_f32(y)) > big),
                         np.copysign(np.asarray(big, np.float32), as_f32(y)).astype(y.dtype), y)
        if relu:
            y = np.where(as_f32(y) <= 0, np.zeros_like(y), y)
        return canonical(y, elem)

    def fn(w):
        e = w.env
        out = np.empty((WARP, 2), FLOATS[elem])
        out[:, 0] = lanes(convert(e[lo]))
        out[:, 1] = lanes(convert(e[hi]))
        e[r] = out
    return False, fn


# ---- warp-collective: shfl.sync, redux.sync (PTX ISA 9.7.9 "shfl.sync", 9.7.13 "redux.sync") ---------------

LANE = np.arange(WARP)


def _members(w, member: int, what: str) -> np.ndarray:
    """The membermask as a lane mask, checked: every executing lane is in it, and every non-exited lane in it
    executes the instruction now (the emulator runs the lanes of a warp that execute one op together)."""
    bits = ((member >> LANE) & 1).astype(bool)
    block = w.cta.launch.kernel.block
    exists = w.tid < block[0] * block[1] * block[2]
    outside = w.mask & ~bits
    if outside.any():
        raise DivergenceError(f"{what}: lanes {np.flatnonzero(outside).tolist()} execute it but are not in its "
                              f"membermask 0x{member:08x} (undefined: a thread must be in the membermask)")
    missing = bits & exists & ~w.mask
    if missing.any():
        raise DivergenceError(f"{what}: membermask 0x{member:08x} names lanes {np.flatnonzero(missing).tolist()}, "
                              "which are inactive here: every non-exited thread of the membermask must execute it "
                              "together (move it out of the divergent branch or narrow the membermask)")
    return bits


@handles("nvvm.shfl.sync")
def _shfl(c, op, info):
    # shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask (PTX ISA 9.7.9 "shfl.sync"):
    #   lane = laneid; bval = b[4:0]; cval = c[4:0]; segmask = c[12:8]
    #   maxLane = (lane & segmask) | (cval & ~segmask); minLane = lane & segmask
    #   up: j = lane - bval, p = j >= maxLane   down: j = lane + bval, p = j <= maxLane
    #   bfly: j = lane ^ bval, p = j <= maxLane idx: j = minLane | (bval & ~segmask), p = j <= maxLane
    #   if !p: j = lane; d = a of lane j. Reading a lane that does not execute it is undefined (an error here).
    v = op.opview
    member, val, off, clamp = (c.slot(x) for x in (v.thread_mask, v.val, v.offset, v.mask_and_clamp))
    kind = str(op.attributes["kind"]).split()[-1].rstrip(">")
    pair = "return_value_and_is_valid" in op.attributes
    r = c.slot(op.results[0])
    vt = TypeInfo(op.operands[1].type)
    if not ((vt.kind == "int" and vt.width == 32) or (vt.kind == "float" and vt.elem == "f32")):
        raise UnknownOpError(f"nvvm.shfl.sync of {op.operands[1].type}: only i32 and f32 (b32) are modelled")

    def fn(w):
        e = w.env
        mask = uniform(e[member], w.mask, "shfl.sync membermask")
        _members(w, mask, f"shfl.sync.{kind}")
        b = lanes(e[off], np.uint64).astype(np.int64) & 31
        cv = lanes(e[clamp], np.uint64).astype(np.int64)
        cval, seg = cv & 31, (cv >> 8) & 31
        max_lane = (LANE & seg) | (cval & ~seg)
        if kind == "up":
            j = LANE - b
            ok = j >= max_lane
        elif kind == "down":
            j = LANE + b
            ok = j <= max_lane
        elif kind == "bfly":
            j = LANE ^ b
            ok = j <= max_lane
        else:
            j = (LANE & seg) | (b & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, LANE)
        bad = w.mask & ~w.mask[j]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DivergenceError(f"shfl.sync.{kind}: lane {i} reads lane {int(j[i])}, which does not execute this "
                                  f"shfl.sync (inactive or not in membermask 0x{mask:08x}): its value is undefined")
        x = e[val]
        out = x if not isinstance(x, np.ndarray) else x[j]
        e[r] = (out, ok) if pair else out
    return False, fn


@handles("nvvm.redux.sync")
def _redux(c, op, info):
    # redux.sync.op{.abs}{.NaN}.type d, a, membermask (PTX ISA 9.7.13 "redux.sync"): the reduction over the
    # non-exited threads of the membermask, the same d in each. .u32/.s32 add (wrapping), min/max, umin/umax,
    # and/or/xor; .f32 min/max (sm_100a) with .abs (|a|) and .NaN (NaN if any input is NaN, else NaN inputs
    # are ignored), -0 < +0
    v = op.opview
    val, member = c.slot(v.val), c.slot(v.mask_and_clamp)
    kind = str(op.attributes["kind"]).split()[-1].rstrip(">")
    r, t = result_slot(c, op)
    absolute = "abs" in op.attributes and ir.BoolAttr(op.attributes["abs"]).value
    nan = "nan" in op.attributes and ir.BoolAttr(op.attributes["nan"]).value
    if kind in ("fmin", "fmax"):
        if t.kind != "float" or t.elem != "f32":
            raise UnknownOpError(f"redux.sync {kind} on {op.results[0].type}: f32 only")
        pick = minmax(kind == "fmax", nan)
    elif t.kind != "int" or t.width != 32:
        raise UnknownOpError(f"redux.sync {kind} on {op.results[0].type}: i32 only")

    def fn(w):
        e = w.env
        mask = uniform(e[member], w.mask, "redux.sync membermask")
        _members(w, mask, f"redux.sync.{kind}")
        x = lanes(e[val], np.float32 if kind in ("fmin", "fmax") else np.uint64)[w.mask]
        if kind in ("fmin", "fmax"):
            if absolute:
                x = np.abs(x)
            out = x[0]
            for y in x[1:]:
                out = pick(out, y, "f32")
            e[r] = np.float32(out)
            return
        if kind == "add":
            out = int(x.sum(dtype=np.uint64)) & 0xFFFFFFFF
        elif kind in ("min", "max"):
            s = signed(x, 32)
            out = int(s.min() if kind == "min" else s.max()) & 0xFFFFFFFF
        elif kind in ("umin", "umax"):
            out = int(x.min() if kind == "umin" else x.max())
        else:
            ufunc = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
            out = int(ufunc.reduce(x))
        e[r] = out
    return False, fn


# nvvm.rcp.approx.ftz.f -> rcp.approx.ftz.f32 (PTX ISA 9.7.3 "rcp.approx"): 1/x, subnormals flushed
handles("nvvm.rcp.approx.ftz.f")(sem.unary_approx(sem.rcp, lambda op, elem: True))
handles("nvvm.convert.f32x2.to.bf16x2", "nvvm.convert.f32x2.to.f16x2")(cvt_pair)
PREFIX_HANDLERS["nvvm.read.ptx.sreg."] = sreg
