"""The vector dialect: element extract / insert, broadcast, from_elements, and (semantics.py) fma and bitcast.
vector<n x T> values are (32, n) arrays (integer elements as uint64).
"""
from __future__ import annotations

import numpy as np

from . import semantics as sem
from .compiler import TypeInfo, handles, lanes, operand_slots, result_slot
from .core import WARP
from .errors import UnknownOpError
from .semantics import element, position, vector_dtype


@handles("vector.extract")
def _vextract(c, op, info):
    # vector.extract %v[p] : T from vector<n x T>
    (src,) = [c.slot(op.opview.source)]
    p, pslot = position(op, c, op.name)
    r, _ = result_slot(c, op)
    count = TypeInfo(op.operands[0].type).count

    def fn(w):
        e = w.env
        q = element(e[src], p if pslot is None else e[pslot], count, w, op.name)
        e[r] = lanes(e[src])[:, q]
    return False, fn


@handles("vector.insert")
def _vinsert(c, op, info):
    # vector.insert %x, %v[p]
    v = op.opview
    val, dest = c.slot(v.valueToStore), c.slot(v.dest)
    p, pslot = position(op, c, op.name)
    r, t = result_slot(c, op)

    def fn(w):
        e = w.env
        q = element(e[dest], p if pslot is None else e[pslot], t.count, w, op.name)
        out = np.array(lanes(e[dest]))
        out[:, q] = e[val]
        e[r] = out
    return False, fn



@handles("vector.broadcast")
def _broadcast(c, op, info):
    # vector.broadcast of a scalar (the former vector.splat)
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    if t.kind != "vector" or TypeInfo(op.operands[0].type).kind == "vector":
        raise UnknownOpError("vector.broadcast: only scalar -> rank-1 vector is modelled")
    dt = vector_dtype(t)

    def fn(w):
        e = w.env
        e[r] = np.repeat(lanes(e[a], dt).reshape(WARP, 1), t.count, axis=1)
    return False, fn


@handles("vector.from_elements")
def _from_elements(c, op, info):
    parts = operand_slots(c, op)
    r, t = result_slot(c, op)
    dt = vector_dtype(t)

    def fn(w):
        e = w.env
        e[r] = np.stack([lanes(e[s], dt) for s in parts], axis=1)
    return False, fn


handles("vector.fma")(sem.fma_op)
handles("vector.bitcast")(sem.bitcast_op)
