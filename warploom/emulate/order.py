"""Happens-before between warps, as far as the Tensor Memory checks need it: which TMEM accesses of which warps are
ordered before a point in another warp.

Each warp carries `knows`: {warp: n}, meaning "the first n TMEM accesses (tcgen05.alloc / ld / st / mma / dealloc)
of that warp happen before this warp's next op". A warp's own accesses count up its own entry (`access`). The
synchronisations hand knowledge from their signallers to their waiters (PTX ISA "Memory Consistency Model":
release / acquire patterns, and 9.7.16.6 for the tcgen05 ops they order):
  - mbarrier.arrive (local, remote through shared::cluster, with expect_tx) adds the arriving warp's knowledge to the
    phase it counts toward; a try_wait.parity that passes takes the knowledge of the phase it waited for
    (mbarrier.py, ops_nvvm.py); a tcgen05.commit's arrival carries the committing thread's knowledge when the
    commit was issued (its MMAs are that thread's accesses);
  - bar.sync / bar.arrive: the knowledge of every arrival goes to every bar.sync participant (named_barriers.py);
  - barrier.cluster.arrive / wait: the same for the cluster's phase (cluster.py).
TMA completions carry no knowledge (no warp's TMEM access is ordered by them). Warps are the unit, not lanes: what one
lane learned, the warp knows (coarse: it can miss a bug where only another lane waited, never report one falsely).
Scopes are not modelled here: a wait that takes another CTA's .release.cluster arrival at .cta scope is refused before
its knowledge is taken (ops_nvvm._parity_wait: ScopeError; docs/emulator.md). A kernel without TMEM accesses carries empty dicts and pays one truth test per sync.
"""
from __future__ import annotations


def access(warp) -> int:
    """Count one TMEM access of `warp`; returns how many it has made (its own entry in `knows`)."""
    n = warp.knows.get(warp, 0) + 1
    warp.knows[warp] = n
    return n


def merge(into: dict, other: dict | None) -> None:
    """into |= other, keeping the larger count per warp."""
    if other:
        for w, n in other.items():
            if into.get(w, 0) < n:
                into[w] = n


def unknown(knows: dict, users: dict) -> list:
    """The (warp, (count, what)) of `users` ({warp: (access count at its last access, what that access was)}) whose
    last access `knows` does not order before."""
    return [(w, last) for w, last in users.items() if knows.get(w, 0) < last[0]]
