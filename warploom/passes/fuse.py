"""wl-fuse: rewrite an attention written out (q kᵀ -> score and mask ops -> softmax -> @ v) into one wl.attention.

The chain is fused when it is attention over rank-4 [B, H, S, D] tensors: the first matmul contracts q with k
transposed (transpose_b), the softmax runs over the last (key) axis and feeds the second matmul as its left operand,
and every op between the scores and the softmax is one warploom.score can hold:

- a positive `wl.scale` right on the scores is the attention's scale;
- the ops of a score modifier (arithmetic, comparisons, `where`, `tanh`, `exp2`/`log2`, casts of indices, the index
  values `wl.index`, runtime scalars `wl.scalar`, constants, reads of captured tensors `wl.gather`) become its
  `score_mod`, the score standing for the scaled scores;
- masks on top, `wl.where(keep, s, -inf)` (or `wl.where(drop, -inf, s)`) whose condition does not read the scores,
  become its `mask_mod` (several are and-ed), and `wl.causal_mask` its causal flag; a positive scale on top of them
  commutes with them.

Anything else is left alone, and the softmax says why in a `wl.unfused` attribute (`warploom explain GRAPH.mlir` and
`warploom compile` print it): a graph op that is not a score operation, a causal mask under score arithmetic
(the kernel masks after the modifier), a value also used outside the chain, a chain that changes element type.
"""
from __future__ import annotations

import math
import os

from mlir import ir

from warploom.dialect import make_attr, op_attrs, op_kind, source_of, tensor_type
from warploom.dialect.definition import SCORE_UNARY
from warploom.score import ScoreMods
from warploom.score import expr as E

from .registry import register

UNFUSED = "wl.unfused"        # the softmax's attribute saying why its attention was left alone

# graph op -> warploom.score operator, where the names differ
_EXPR_OP = {"max": "maximum", "min": "minimum"}
_LEAF_OPS = ("index", "scalar", "constant")     # pure leaves: shared with other chains, erased once unused


class Unfusable(Exception):
    """Why a softmax's chain is not one attention (the message `wl.unfused` carries)."""


def single_user(value: ir.Value):
    """The one op using `value`, or None if it has zero or several uses."""
    uses = list(value.uses)
    return uses[0].owner if len(uses) == 1 else None


def defining(value: ir.Value, kind: str | None = None):
    """The wl op defining `value` (of `kind` when given), or None (a block argument, another dialect's op)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or op_kind(owner) is None or (kind is not None and op_kind(owner) != kind):
        return None
    return owner


def describe_op(op) -> str:
    """`wl.tanh (attn.py:12)`: the op and where it was written (its file and line when its location has them)."""
    name, line, _ = source_of(op.operation.location)
    base = os.path.basename(name) if name else ""
    where = (f"{base}:{line}" if base not in ("", "-", "<stdin>") else f"line {line}") if line is not None else ""
    return f"wl.{op_kind(op)}" + (f" ({where})" if where else "")


class _Chain:
    """One softmax's attention chain, read upward from the softmax (raises Unfusable)."""

    def __init__(self, softmax):
        self.softmax = softmax
        rank = ir.RankedTensorType(softmax.operation.results[0].type).rank
        if rank != 4:
            raise Unfusable(f"the softmax is over a rank-{rank} tensor; attention's scores are [B, H, Sq, Sk]")
        if op_attrs(softmax)["axis"] not in (-1, rank - 1):
            raise Unfusable(f"the softmax runs over axis {op_attrs(softmax)['axis']}, not the keys (-1)")
        pv = single_user(softmax.operation.results[0])
        if pv is None or op_kind(pv) != "matmul" or pv.operation.operands[0] != softmax.operation.results[0]:
            raise Unfusable("the probabilities do not feed one matmul as its left operand (softmax(s) @ v)")
        if op_attrs(pv)["transpose_a"] or op_attrs(pv)["transpose_b"]:
            raise Unfusable("the second matmul transposes an operand (attention is softmax(s) @ v)")
        self.pv = pv
        self.region: dict = {}                 # the ops the attention replaces, by op
        self.memo: dict = {}                   # value -> Expr
        self.sorted_inputs: set = set()        # the gathered tables declared nondecreasing (wl.nondecreasing)
        self.qk = self._scores(softmax.operation.operands[0])
        self.score_value, self.scale = self._scaled(self.qk)

    # -- the first matmul and its scale ---------------------------------------------------------------------
    def _scores(self, top: ir.Value):
        """The one matmul q kᵀ upstream of the softmax through score operations."""
        found, seen, todo = [], set(), [top]
        while todo:
            value = todo.pop()
            op = defining(value)
            if op is None or op in seen:
                continue
            seen.add(op)
            if op_kind(op) == "matmul":
                found.append(op)
                continue
            if op_kind(op) == "gather":              # its table is a graph input, not a score
                todo += list(op.operation.operands)[1:]
            else:
                todo += list(op.operation.operands)
        if len(found) != 1:
            raise Unfusable("the scores do not come from one matmul" + (f" ({len(found)} feed the softmax)"
                                                                          if found else ""))
        qk = found[0]
        attrs = op_attrs(qk)
        if attrs["transpose_a"] or not attrs["transpose_b"]:
            raise Unfusable("the first matmul is not q kᵀ (transpose_b = true, transpose_a = false)")
        self.region[qk.operation] = None
        return qk

    def _scaled(self, qk):
        """(the value the modifiers call `score`, the attention's scale): a positive wl.scale that is the scores'
        only use (beside index ops reading their grid) is the scale."""
        scores = qk.operation.results[0]
        users = [u.owner for u in scores.uses if op_kind(u.owner) != "index"]
        if len(users) == 1 and op_kind(users[0]) == "scale" and op_attrs(users[0])["factor"] > 0:
            self.region[users[0].operation] = None
            return users[0].operation.results[0], float(op_attrs(users[0])["factor"])
        return scores, 1.0

    # -- the masks on top ------------------------------------------------------------------------------------
    def read(self):
        """(causal, scale, ScoreMods) of the chain."""
        value, pending, causal, keeps = self.softmax.operation.operands[0], 1.0, False, []
        while value != self.score_value:
            op = defining(value)
            kind = op_kind(op) if op is not None else None
            if kind == "causal_mask":
                causal = True
                value = op.operation.operands[0]
            elif kind == "scale" and op_attrs(op)["factor"] > 0:      # commutes with the masks below it
                pending *= float(op_attrs(op)["factor"])
                value = op.operation.operands[0]
            elif kind == "where" and self._mask(op) is not None:
                keep, value = self._mask(op)
                keeps.append(keep)
            else:
                break
            self.region[op.operation] = None
        score = self.expr(value)
        mask = None
        for keep in reversed(keeps):             # in the order written, innermost first
            mask = keep if mask is None else E.apply("and", mask, keep)
        if score.op == "score":
            score, scale = None, self.scale * pending
        else:
            scale = self.scale
            if pending != 1.0:
                score = E.apply("mul", E.const(pending), score)
        try:
            scalars = {}
            for node in (n for e in (score, mask) if e is not None for n in e.walk() if n.op == "scalar"):
                if scalars.setdefault(node.value, node.type) != node.type:
                    raise E.ModError(f"scalar {node.value!r} is used as {scalars[node.value]} and as {node.type}: "
                                     "one wl.scalar name is one kernel parameter of one type")
            tensors = {}
            for e in (score, mask):
                tensors.update(e.tensors() if e is not None else {})
            mods = ScoreMods(score, mask, tuple(sorted(scalars.items())),
                             tuple((n, t, r) for n, (t, r) in sorted(tensors.items())),
                             tuple(sorted(n for n in tensors if n in self.sorted_inputs)))
        except E.ModError as e:
            raise Unfusable(str(e)) from None
        return causal, scale, mods

    def _mask(self, where):
        """(the keep condition, the masked value) of a wl.where with -inf on one side and a condition that does not
        read the scores; None for any other where (it is score arithmetic)."""
        cond, on_true, on_false = where.operation.operands
        for value, other, negate in ((on_false, on_true, False), (on_true, on_false, True)):
            if _is_neg_inf(value) and not _is_neg_inf(other):
                keep = self.expr(cond)
                if "score" in keep.leaves():
                    return None
                self.region[defining(value).operation] = None
                return (E.apply("not", keep) if negate else keep), other
        return None

    # -- the score and mask expressions --------------------------------------------------------------------
    def expr(self, value: ir.Value) -> E.Expr:
        if value in self.memo:
            return self.memo[value]
        if value == self.score_value:
            return E.leaf("score")
        op = defining(value)
        if op is None:
            raise Unfusable(f"{value.get_name()}, a graph input, enters the scores other than as a wl.gather's "
                            "table")
        try:
            e = self._translate(op)
        except E.ModError as err:
            raise Unfusable(f"{describe_op(op)}: {err}") from None
        self.region[op.operation] = None
        self.memo[value] = e
        return e

    def _translate(self, op) -> E.Expr:
        kind, attrs = op_kind(op), op_attrs(op)
        args = list(op.operation.operands)
        elem = tensor_type(op.operation.results[0].type).elem
        if kind in ("add", "sub", "mul", "div", "max", "min"):
            return E.apply(_EXPR_OP.get(kind, kind), *(self.expr(a) for a in args))
        if kind in SCORE_UNARY:
            return E.apply(kind, self.expr(args[0]))
        if kind == "scale":
            return E.apply("mul", self.expr(args[0]), E.const(float(attrs["factor"])))
        if kind == "compare":
            return E.apply(attrs["predicate"], *(self.expr(a) for a in args))
        if kind in ("and", "or", "not"):
            return E.apply(kind, *(self.expr(a) for a in args))
        if kind == "where":
            return E.apply("where", *(self.expr(a) for a in args))
        if kind == "cast":
            source = tensor_type(args[0].type).elem
            if source == "i32":
                return E.apply("f32", self.expr(args[0]))
            if elem == "f32":                     # widening: the kernel computes in f32
                return self.expr(args[0])
            raise Unfusable(f"{describe_op(op)} rounds the scores to {elem}; the kernel computes its modifiers "
                            "in f32 (drop the cast, or cast to f32)")
        if kind == "index":
            grid = tensor_type(args[0].type).shape
            scores = tensor_type(self.qk.operation.results[0].type).shape
            if any(a is not None and b is not None and a != b for a, b in zip(grid, scores)):
                raise Unfusable(f"{describe_op(op)} indexes a grid of shape {grid}, not the scores' {scores}")
            return E.leaf(attrs["dim"])
        if kind == "scalar":
            return E.scalar(attrs["name"], "i32" if elem == "i32" else "f32")
        if kind == "constant":
            value = attrs["value"]
            return E.const(bool(value) if elem == "i1" else int(value) if elem == "i32" else float(value))
        if kind == "gather":
            table = args[0]
            if not isinstance(table.owner, ir.Block):
                raise Unfusable(f"{describe_op(op)} reads a computed table; a captured tensor is a graph input")
            name = _input_name(table)
            if _input_attr(table, "wl.nondecreasing"):
                self.sorted_inputs.add(name)
            t = tensor_type(table.type).elem
            return E.load(name, t, *(self.expr(a) for a in args[1:]))
        if kind == "causal_mask":
            raise Unfusable(f"{describe_op(op)} sits under score arithmetic; the kernel masks after the score "
                            "modifier: apply the causal mask last, just before the softmax")
        raise Unfusable(f"{describe_op(op)} between the scores and the softmax is not a score operation")

    def kv_heads(self, k: ir.Value, v: ir.Value) -> tuple:
        """(k, v) the attention reads: k and v themselves, or where both are wl.repeat of their heads (axis 1) by one
        factor (grouped-query attention written out, torch's repeat_interleave) the tensors before the repeat, whose
        fewer heads the attention takes as its kv heads. A repeat used only here goes with the chain."""
        rk, rv = defining(k, "repeat"), defining(v, "repeat")
        if rk is None and rv is None:
            return k, v
        if rk is None or rv is None:
            raise Unfusable(f"{describe_op(rk or rv)} repeats the heads of {'k' if rk else 'v'} only: repeat both "
                            "k and v (GQA) or neither")
        factors = []
        for r in (rk, rv):
            attrs = op_attrs(r)
            rank = tensor_type(r.operation.operands[0].type).rank
            if attrs["axis"] % rank != 1:
                raise Unfusable(f"{describe_op(r)} repeats axis {attrs['axis']}, not the heads (axis 1 of "
                                "[B, H, S, D]): only k and v's heads repeat in grouped-query attention")
            factors.append(attrs["times"])
        if factors[0] != factors[1]:
            raise Unfusable(f"k's heads are repeated {factors[0]} times and v's {factors[1]}: one factor for both")
        for r, user in ((rk, self.qk), (rv, self.pv)):
            if single_user(r.operation.results[0]) is not None and \
                    single_user(r.operation.results[0]).operation == user.operation:
                self.region[r.operation] = None
        return rk.operation.operands[0], rv.operation.operands[0]

    # -- the checks before the rewrite -----------------------------------------------------------------------
    def check(self, q, k, v) -> None:
        self.region[self.softmax.operation] = None
        self.region[self.pv.operation] = None
        elems = {tensor_type(x.type).elem for x in (q, k, v)}
        elems |= {tensor_type(o.operation.results[0].type).elem for o in (self.qk, self.softmax, self.pv)}
        elems.add(tensor_type(self.softmax.operation.operands[0].type).elem)
        if len(elems) != 1:
            # attention computes in the inputs' element type end to end: a chain that widens (bf16 scores -> f32
            # probabilities) is a different computation, left alone
            raise Unfusable(f"the chain changes element type ({', '.join(sorted(elems))}); attention keeps the "
                            "inputs' type from q, k, v to the output")
        for op in self.region:
            if op == self.pv.operation or op_kind(op) in _LEAF_OPS:
                continue
            for result in op.operation.results:
                for use in result.uses:
                    if use.owner.operation not in self.region:
                        raise Unfusable(f"the result of {describe_op(op)} is also used outside the attention "
                                        f"(by {describe_op(use.owner) if op_kind(use.owner) else use.owner.name})")


def _is_neg_inf(value: ir.Value) -> bool:
    op = defining(value, "constant")
    return op is not None and op_attrs(op)["value"] == -math.inf


def _input_attr(arg: ir.Value, name: str) -> bool:
    """Whether the graph input `arg` carries the argument attribute `name`."""
    fn = arg.owner.owner
    if "arg_attrs" not in fn.attributes:
        return False
    return name in fn.attributes["arg_attrs"][ir.BlockArgument(arg).arg_number]


def _input_name(arg: ir.Value) -> str:
    """The graph input's name (its wl.name), which the captured tensor is passed by at run time."""
    block = arg.owner
    fn = block.owner
    index = ir.BlockArgument(arg).arg_number
    if "arg_attrs" in fn.attributes:
        entry = fn.attributes["arg_attrs"][index]
        if "wl.name" in entry:
            return ir.StringAttr(entry["wl.name"]).value
    return f"arg{index}"


def fuse_one(softmax) -> bool:
    """Fuse the chain ending at `softmax`; False (and the reason in its wl.unfused attribute) when it is not one
    attention."""
    try:
        chain = _Chain(softmax)
        causal, scale, mods = chain.read()
        q, k = chain.qk.operation.operands
        k, v = chain.kv_heads(k, chain.pv.operation.operands[1])
        chain.check(q, k, v)
    except Unfusable as why:
        softmax.operation.attributes[UNFUSED] = ir.StringAttr.get(str(why))
        return False
    block = softmax.operation.block
    order = {op.operation: i for i, op in enumerate(block.operations)}
    ops = sorted(chain.region, key=lambda op: order[op])
    with ir.InsertionPoint(chain.pv), ir.Location.fused([op.location for op in ops]):
        attrs = {"causal": make_attr("bool", causal), "scale": make_attr("float", scale),
                 "layout": make_attr("str", "bhsd")}
        attrs.update({name: make_attr("str", text) for name, text in mods.attrs().items()})
        attention = ir.Operation.create("wl.attention", results=[chain.pv.operation.results[0].type],
                                        operands=[q, k, v], attributes=attrs)
    chain.pv.operation.results[0].replace_all_uses_with(attention.results[0])
    for op in reversed(ops):                     # users first; a shared leaf stays while something uses it
        if all(not list(r.uses) for r in op.results):
            op.erase()
    return True


def explain(module) -> list[str]:
    """One line per softmax of `module` after wl-fuse: why it was left alone (its wl.unfused attribute)."""
    lines = []

    def visit(op):
        if op_kind(op) == "softmax" and UNFUSED in op.operation.attributes:
            lines.append(f"{describe_op(op)}: not fused: "
                         f"{ir.StringAttr(op.operation.attributes[UNFUSED]).value}")
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return lines


@register("wl-fuse", "Fuse an attention written out (matmul -> scale, score and mask ops -> softmax -> matmul) "
          "into wl.attention")
def run(module):
    softmaxes = []

    def collect(op):
        if op_kind(op) == "softmax":
            softmaxes.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    for softmax in softmaxes:
        fuse_one(softmax)
