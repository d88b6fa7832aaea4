"""One CTA's named barriers (PTX ISA 9.7.13 "bar, barrier"): bar.sync, bar.arrive and bar.red.or with ids 0..15.

A barrier completes when its thread count (without one: every live thread of the CTA; exited threads no longer
count) arrived; its bar.sync waiters then go on. It also publishes what its participants carry: fenced mbarrier
inits (to every warp that took part), tcgen05 work (its waiters owe a tcgen05.fence::after_thread_sync,
tmem_fence.py), and what the arrivals knew happened before (order.py). Checks: ids and counts, a warp arriving twice
in one generation, the CTA exiting with a barrier partly arrived.
"""
from __future__ import annotations

from . import order, tmem_fence
from .core import WARP, Wait, Warp
from .errors import BarrierError, DivergenceError


class NamedBarriers:
    """The 16 named barriers of one CTA (`bars`: id -> state) and bar.red.or's results (`bar_or`)."""

    def __init__(self, cta):
        self.cta = cta
        self.bars: dict[int, list] = {}                       # bar.sync id -> [arrived threads, generation, ...]
        self.bar_or: dict = {}                                # (bar id, generation) -> bar.red.or's result

    def _state(self, warp: Warp, barrier: int, threads: int | None, what: str) -> list:
        # state: arrived threads, generation, expected threads, arrived warps, fenced mbarriers they publish
        if not 0 <= barrier <= 15:
            raise BarrierError(f"{what} {barrier}: barrier ids are 0..15")
        if threads is not None and (threads <= 0 or threads % WARP or threads > WARP * len(self.cta.warps)):
            raise BarrierError(f"{what} {barrier} with {threads} threads: the count must be a positive multiple of "
                               f"{WARP} and at most the CTA's {WARP * len(self.cta.warps)} threads")
        # state[5]: warps that arrived (bar.sync or bar.arrive) in this generation
        # state[6]: an arrival carried tcgen05 work (its bar.sync waiters must fence::after_thread_sync)
        # state[7]: bar.red.or: whether any arriving thread's predicate held (its result, by generation, in bar_or)
        # state[8]: what the arrivals knew happened before (order.py), handed to the bar.sync waiters
        state = self.bars.setdefault(barrier, [0, 0, threads, set(), [], set(), False, None, {}])
        if state[2] != threads:
            raise DivergenceError(f"{what} {barrier} with {threads} threads; an earlier arrival said {state[2]}")
        if threads is not None and warp.index in state[5]:
            # stricter than the ISA spells out: the count would be met by fewer distinct threads than it names
            raise BarrierError(f"warp {warp.index} arrives at named barrier {barrier} twice in one generation "
                               f"({state[0]} of {threads} threads there): its count would complete with fewer "
                               "distinct threads than it names (a hand-off taken by the warpgroup that gave it)")
        state[5].add(warp.index)
        return state

    def arrive(self, warp: Warp, barrier: int, threads: int) -> None:
        """bar.arrive id, threads (PTX ISA 9.7.13 "bar, barrier"): count the warp's threads at the barrier and go
        on; the barrier completes (releasing its bar.sync waiters) when `threads` threads arrived."""
        state = self._state(warp, barrier, threads, "bar.arrive")
        state[6] |= tmem_fence.signal(warp, warp.mask, f"bar.arrive {barrier}")
        order.merge(state[8], warp.knows)
        state[0] += int(warp.mask.sum())
        state[4] += self.cta.mbar.fenced_by(warp.index)
        self.release()

    def check_at_exit(self) -> None:
        """Every named barrier's arrivals must have completed when the CTA's last warp exits: a partial count left
        behind is a hand-off nobody took (an unbalanced bar.arrive / bar.sync protocol, e.g. a ping-pong)."""
        for bid, state in sorted(self.bars.items()):
            if state[0] and state[2] is not None:
                raise BarrierError(f"the CTA exits with named barrier {bid} at {state[0]} of {state[2]} threads "
                                   f"(generation {state[1]}): an arrival no bar.sync took; every bar.arrive / bar.sync "
                                   "hand-off must balance").locate(self.cta.id)

    def sync(self, warp: Warp, barrier: int, threads: int | None, pred=None) -> Wait | None:
        """bar.sync id, threads; with `pred` (a lane mask) bar.red.or.pred: the OR over every arriving thread is
        then `bar_or[(barrier, generation)]` once the barrier completes (generation: state[1] at arrival)."""
        state = self._state(warp, barrier, threads, "bar.sync")
        if pred is not None:
            state[7] = bool(state[7]) or bool((pred & warp.mask).any())
        state[6] |= tmem_fence.signal(warp, warp.mask, f"bar.sync {barrier}")
        order.merge(state[8], warp.knows)
        state[0] += int(warp.mask.sum())
        state[3].add(warp.index)
        state[4] += self.cta.mbar.fenced_by(warp.index)
        gen = state[1]
        self.release()
        if state[1] != gen:
            return None
        return Wait(lambda: state[1] != gen, f"bar.sync {barrier} ({state[0]} of "
                    f"{threads or 'all live'} threads arrived)")

    def release(self) -> None:
        # Without a thread count, bar.sync waits for every thread of the CTA; threads that exited no longer count.
        live = WARP * sum(1 for w in self.cta.warps if not w.exited)
        for state in self.bars.values():
            if state[0] and state[0] >= (state[2] or live):
                state[0] = 0
                state[1] += 1
                for bar in state[4]:          # fence.mbarrier_init + this barrier: the init is visible to all of them
                    if bar.visible is not None:   # (None: already visible to every warp)
                        bar.visible |= state[3]
                if state[6]:
                    bid = next(b for b, s in self.bars.items() if s is state)
                    for w in state[3]:
                        tmem_fence.passed(self.cta.warps[w], self.cta.warps[w].mask, f"bar.sync {bid}, which a thread that "
                                       "accessed TMEM took part in")
                if state[7] is not None:
                    bid = next(b for b, s in self.bars.items() if s is state)
                    self.bar_or[(bid, state[1] - 1)] = state[7]
                if state[8]:
                    for w in state[3]:
                        order.merge(self.cta.warps[w].knows, state[8])
                state[3], state[4], state[5], state[6], state[7], state[8] = set(), [], set(), False, None, {}
