"""The tcgen05 fences around thread synchronisation (PTX ISA 9.7.16.6 "tcgen05-memory-consistency-model";
TmemFenceError), tracked per warp and lane.

A thread that accessed TMEM (ld, st, mma, alloc, dealloc) owes a tcgen05.fence::before_thread_sync before it signals
other threads (mbarrier.arrive, local or remote, bar.arrive, bar.sync); a thread that passed a synchronisation
carrying tcgen05 work (a commit arrival, an arrival or barrier of a thread that accessed TMEM) owes a
tcgen05.fence::after_thread_sync before it touches TMEM. The state lives on the Warp (tc_unpublished, tc_unordered,
tc_touched); these functions are called by the op handlers and the barrier units.
"""
from __future__ import annotations

import numpy as np

from .core import OpInfo, Warp
from .errors import TmemFenceError


def access(warp: Warp, lanes, info: OpInfo, what: str) -> None:
    """Lanes `lanes` (a bool mask) of `warp` access TMEM with `info` (tcgen05.ld/st/mma/alloc/dealloc): they must
    have run tcgen05.fence::after_thread_sync since passing a synchronisation that carried tcgen05 work, and
    now owe a fence::before_thread_sync before they signal."""
    if warp.tc_unordered is not None and (warp.tc_unordered[0] & lanes).any():
        lane = int(np.flatnonzero(warp.tc_unordered[0] & lanes)[0])
        raise TmemFenceError(f"{what} by lane {lane} of warp {warp.index} after {warp.tc_unordered[1]}, with no "
                             "tcgen05.fence::after_thread_sync in between: the TMEM access is not ordered after "
                             "the tcgen05 work that synchronisation published; add the fence after the wait")
    held = lanes.copy() if warp.tc_unpublished is None else (warp.tc_unpublished[0] | lanes)
    warp.tc_unpublished = (held, info)
    warp.tc_touched = True


def signal(warp: Warp, lanes, what: str) -> bool:
    """Lanes `lanes` of `warp` signal other threads (`what`: an mbarrier arrive, bar.arrive, bar.sync): none may
    hold TMEM accesses not yet fenced with tcgen05.fence::before_thread_sync. True when the signal carries
    tcgen05 work (the warp accessed TMEM): whoever it releases must fence::after_thread_sync before TMEM."""
    if warp.tc_unpublished is not None and (warp.tc_unpublished[0] & lanes).any():
        lane = int(np.flatnonzero(warp.tc_unpublished[0] & lanes)[0])
        raise TmemFenceError(f"{what} by lane {lane} of warp {warp.index} after its {warp.tc_unpublished[1].text} "
                             "with no tcgen05.fence::before_thread_sync in between: the threads this releases may "
                             "see the TMEM work unfinished; add the fence before the signal")
    return warp.tc_touched


def passed(warp: Warp, lanes, what: str) -> None:
    """Lanes `lanes` of `warp` passed `what`, a synchronisation carrying tcgen05 work."""
    held = lanes.copy() if warp.tc_unordered is None else (warp.tc_unordered[0] | lanes)
    warp.tc_unordered = (held, what)


def fence(warp: Warp, lanes, before: bool) -> None:
    """tcgen05.fence::before_thread_sync (before) / ::after_thread_sync by lanes `lanes` of `warp`."""
    attr = "tc_unpublished" if before else "tc_unordered"
    state = getattr(warp, attr)
    if state is not None:
        left = state[0] & ~lanes
        setattr(warp, attr, (left, state[1]) if left.any() else None)
