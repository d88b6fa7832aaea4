"""One CTA's register file as setmaxnreg sees it (PTX ISA "setmaxnreg"): per-warp budgets moved within the CTA's pool.

The pool is what the CTA got at launch (launch_regs x threads, within the register file). .dec returns registers to
it; .inc takes them and blocks until the pool has them (never granted -> RegisterBudgetError at the deadlock, via
the Wait's `error`); every warp of a warpgroup must run the same setmaxnreg sequence.
"""
from __future__ import annotations

from .core import WARP, WARPGROUP_WARPS, Wait, Warp
from .errors import DivergenceError, RegisterBudgetError


class RegisterBudgets:
    """The setmaxnreg state of one CTA."""

    def __init__(self, cta):
        self.cta = cta
        self.budget: dict[int, int] = {}                      # warp -> setmaxnreg budget (absent: the launch's)
        self.calls: dict[int, int] = {}                       # warp -> setmaxnreg instructions run
        self.log: dict[int, list] = {}                        # warpgroup -> [(count, inc)] in order

    def setmaxnreg(self, warp: Warp, count: int, inc: bool) -> Wait | None:
        """setmaxnreg.{inc,dec}.sync.aligned.u32 count: the warp's per-thread register budget becomes `count`.
        .dec returns registers to the CTA's pool; .inc takes them from it and blocks until the pool has them. The
        pool is what the CTA got at launch (launch_regs x threads, within the register file); .inc below the
        current count or .dec above it is undefined (an error here). Every warp of a warpgroup must run the
        same setmaxnreg sequence."""
        launch = self.cta.launch
        have = self.budget.get(warp.index, launch.launch_regs)
        verb = "inc" if inc else "dec"
        if (inc and count < have) or (not inc and count > have):
            raise RegisterBudgetError(f"setmaxnreg.{verb} to {count} registers per thread, but warp {warp.index} "
                                      f"holds {have}: .inc must not lower the count and .dec must not raise it (the "
                                      f"launch gives {launch.launch_regs}); use setmaxnreg.{'dec' if inc else 'inc'}")
        k = self.calls.get(warp.index, 0)
        self.calls[warp.index] = k + 1
        log = self.log.setdefault(warp.index // WARPGROUP_WARPS, [])
        if k == len(log):
            log.append((count, inc))
        elif log[k] != (count, inc):
            raise DivergenceError(f"warp {warp.index} runs setmaxnreg.{verb} {count} as setmaxnreg #{k} of warpgroup "
                                  f"{warp.index // WARPGROUP_WARPS}; another warp of it ran "
                                  f"setmaxnreg.{'inc' if log[k][1] else 'dec'} {log[k][0]}: it is warpgroup-collective")
        return self.take(warp, count)

    def take(self, warp: Warp, count: int) -> Wait | None:
        """Grant `count` registers per thread to the warp if the pool has them, else a Wait for them."""
        if self._regs_after(warp, count) <= self._reg_pool():
            self.budget[warp.index] = count
            return None
        return Wait(lambda: self._regs_after(warp, count) <= self._reg_pool(),
                    f"setmaxnreg.inc {count}: {self._regs_after(warp, count)} registers needed, the CTA holds "
                    f"{self._reg_pool()}", error=lambda: self._budget_error(warp, count))

    def _reg_pool(self) -> int:
        return self.cta.launch.launch_regs * WARP * len(self.cta.warps)

    def _regs_after(self, warp: Warp, count: int) -> int:
        regs = {w.index: self.budget.get(w.index, self.cta.launch.launch_regs) for w in self.cta.warps}
        regs[warp.index] = count
        return WARP * sum(regs.values())

    def _budget_error(self, warp: Warp, count: int) -> RegisterBudgetError:
        launch = self.cta.launch
        budgets = {}
        for w in self.cta.warps:
            budgets.setdefault(w.index // WARPGROUP_WARPS, set()).add(self.budget.get(w.index, launch.launch_regs))
        held = ", ".join(f"warpgroup {g}: {'/'.join(map(str, sorted(b)))}" for g, b in sorted(budgets.items()))
        return RegisterBudgetError(
            f"setmaxnreg.inc to {count} registers per thread for warp {warp.index} (warpgroup "
            f"{warp.index // WARPGROUP_WARPS}) is never granted: it needs {self._regs_after(warp, count)} registers "
            f"in all, but the CTA holds {self._reg_pool()} ({launch.launch_regs} per thread x {WARP * len(self.cta.warps)} "
            f"threads at launch, of the {launch.register_file}-register file) and the others keep theirs ({held}): "
            "lower the budgets (or .dec more in the other warpgroups)")
