"""The scf dialect: structured control flow. Divergent `scf.if` runs each side under a lane mask (and merges the
yielded values lane by lane); `scf.for` bounds must be uniform across the active lanes.
"""
from __future__ import annotations

import numpy as np

from .compiler import TypeInfo, handles, lanes, operand_slots, signed, uniform
from .core import WARP, Pending
from .errors import DivergenceError, EmulationError


# ---- scf ----------------------------------------------------------------------------------------------

@handles("scf.if")
def _if(c, op, info):
    (cond,) = operand_slots(c, op)
    then = c.block(op.regions[0].blocks[0])
    orelse = c.block(op.regions[1].blocks[0]) if len(op.regions[1].blocks) else None
    results = [c.slot(v) for v in op.results]

    def gen(w):
        e = w.env
        cv = e[cond]
        saved = w.mask
        if not isinstance(cv, np.ndarray):        # uniform condition: one side, all active lanes
            if cv:
                vals = yield from then(w)
            elif orelse is not None:
                vals = yield from orelse(w)
            else:
                vals = []
        else:
            tmask, emask = saved & cv, saved & ~cv
            vals = tvals = evals = None
            if tmask.any():
                w.mask = tmask
                vals = tvals = yield from then(w)
            if orelse is not None and emask.any():
                w.mask = emask
                vals = evals = yield from orelse(w)
            w.mask = saved
            if results and tvals is not None and evals is not None:
                vals = [_merge(cv, x, y) for x, y in zip(tvals, evals)]
        for s, v in zip(results, vals or []):
            e[s] = v
    return True, gen


def _merge(cond: np.ndarray, x, y):
    if isinstance(x, Pending) or isinstance(y, Pending):
        raise DivergenceError("scf.if yields a wgmma accumulator from divergent lanes")
    xa, ya = lanes(x), lanes(y)
    return np.where(cond.reshape((WARP,) + (1,) * (xa.ndim - 1)), xa, ya)


@handles("scf.for")
def _for(c, op, info):
    ops = list(op.operands)
    lb, ub, step = (c.slot(v) for v in ops[:3])
    inits = [c.slot(v) for v in ops[3:]]
    width = TypeInfo(ops[0].type).width
    unsigned_cmp = "unsignedCmp" in op.attributes
    block = op.regions[0].blocks[0]
    args = [c.slot(a) for a in block.arguments]
    body = c.block(block)
    results = [c.slot(v) for v in op.results]

    def gen(w):
        e = w.env
        lo = uniform(e[lb], w.mask, "scf.for lower bound")
        hi = uniform(e[ub], w.mask, "scf.for upper bound")
        st = uniform(e[step], w.mask, "scf.for step")
        if not unsigned_cmp:
            lo, hi, st = signed(lo, width), signed(hi, width), signed(st, width)
        if st <= 0:
            raise EmulationError(f"scf.for step {st}: must be positive")
        carried = [e[s] for s in inits]
        m = (1 << width) - 1
        iv = lo
        while iv < hi:
            e[args[0]] = iv & m
            for s, v in zip(args[1:], carried):
                e[s] = v
            carried = yield from body(w)
            iv += st
        for s, v in zip(results, carried):
            e[s] = v
    return True, gen
