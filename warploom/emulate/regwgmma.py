"""wgmma with A in registers (inline PTX), and which ops touch wgmma registers (the wgmma.fence rule).

MLIR 22's `nvvm.wgmma.mma_async` takes A only as a shared-memory descriptor, so warploom emits the
register-A form (FlashAttention's P @ V) as `llvm.inline_asm`, built by
`warploom.lowering.emit.wgmma.mma_async_reg_a`:

    {
    .reg .pred p;
    setp.ne.b32 p, $<2h+5>, 0;
    wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<t>.<t> {$0, .., $<h-1>}, {$<2h>, .., $<2h+3>}, $<2h+4>,
        p, 1, 1, <trans-b>;
    }
    constraints "=f" x h, "0".."h-1" (the accumulators in, tied to the outputs), "r" x 4 (A), "l" (B), "r" (scale-d)

(h = N / 2 accumulator registers per thread). `parse_register_a` reads such an op once, at compile time:
shape, types, the scale and transpose immediates, and which operand is which per the constraints; the
handler routes it into the CTA's wgmma unit (wgmma.py, WgmmaUnit.issue) with the warp's four A registers (PTX ISA 9.7.15.5.2
"wgmma.mma_async": d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b, A from registers), so
groups, commit, wait, the smem race checks on B and the accumulator checks all apply. Any other inline
asm is an UnknownOpError naming its asm string.

`register_accesses` finds, once per kernel, the ops other than wgmmas that read or write accumulator or
A-fragment registers: the SSA values a wgmma takes or gives as accumulator (followed through scf.for
iter_args and scf.if results) and the values it takes as A registers. Running such an op marks the warp
as needing a wgmma.fence before its next wgmma (PTX ISA 9.7.15.6.1 "wgmma.fence"; see machine.Warp.unfenced).
The flag is per warp, not per register: the ISA asks for the fence between an access and a wgmma using
the same registers, so a kernel that touches one accumulator and then, unfenced, issues a wgmma on another
is flagged here though the ISA allows it (CUTLASS-style code fences before every wgmma batch anyway).
Chained wgmmas on the same accumulator need no fence (the ISA's exception for same-shape accumulators).
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from mlir import ir

from .compiler import TypeInfo, analyses, inline_asm, lanes, uniform
from .errors import AccumulatorReadError, DivergenceError, UnknownOpError
from .machine import PendingPart

_ASM = re.compile(r"""
    \{ \s* \.reg \s+ \.pred \s+ (?P<p>\w+) \s* ; \s*
    setp\.ne\.b32 \s+ (?P=p) \s* , \s* \$(?P<scale>\d+) \s* , \s* 0 \s* ; \s*
    wgmma\.mma_async\.sync\.aligned\.m(?P<m>\d+)n(?P<n>\d+)k(?P<k>\d+)\.(?P<td>\w+)\.(?P<ta>\w+)\.(?P<tb>\w+) \s+
    \{ (?P<d>[^}]*) \} \s* , \s* \{ (?P<a>[^}]*) \} \s* , \s* \$(?P<b>\d+) \s* , \s* (?P=p) \s* , \s*
    (?P<sa>-?1) \s* , \s* (?P<sb>-?1) \s* , \s* (?P<tr>[01]) \s* ; \s* \} \s*$""", re.X)


@dataclass(frozen=True)
class RegisterAForm:
    """A register-A wgmma inline asm, decoded: operand indices (into the op's operands) of each role."""
    n: int
    elem: str
    trans_b: int
    scale_a: float
    scale_b: float
    acc: tuple          # the h tied accumulator inputs, register 0 first
    a: tuple            # the 4 A registers
    b: int              # the B descriptor (i64)
    scale_d: int        # the scale-d flag (i32, != 0: accumulate)


def _asm(op) -> str:
    return ir.StringAttr(op.attributes["asm_string"]).value


def parse_register_a(op) -> RegisterAForm:
    """The register-A wgmma an llvm.inline_asm op holds, or UnknownOpError naming its asm string (parsed once per
    distinct asm string, constraints and types)."""
    key = (_asm(op), ir.StringAttr(op.attributes["constraints"]).value, tuple(str(v.type) for v in op.operands),
           tuple(str(r.type) for r in op.results))
    if key not in _FORMS:
        try:
            _FORMS[key] = _parse(op)
        except UnknownOpError as e:
            _FORMS[key] = e
    form = _FORMS[key]
    if isinstance(form, UnknownOpError):
        raise UnknownOpError(form.detail)
    return form


_FORMS: dict = {}


def _parse(op) -> RegisterAForm:
    asm = _asm(op)
    constraints = ir.StringAttr(op.attributes["constraints"]).value.split(",")

    def unknown(why: str) -> UnknownOpError:
        return UnknownOpError(f"llvm.inline_asm {asm!r} (constraints {','.join(constraints)!r}): {why}; the emulator "
                              "models only the register-A wgmma that warploom.lowering.emit.wgmma.mma_async_reg_a "
                              "emits")

    m = _ASM.fullmatch(asm.strip())
    if m is None:
        raise unknown("not a register-A wgmma.mma_async")
    shape = (int(m["m"]), int(m["n"]), int(m["k"]))
    n = shape[1]
    if shape[0] != 64 or shape[2] != 16 or not (8 <= n <= 256 and n % 8 == 0):
        raise unknown(f"shape m{shape[0]}n{n}k{shape[2]}: only m64nNk16 (N 8..256 in steps of 8) is modelled")
    if m["td"] != "f32" or m["ta"] != m["tb"] or m["ta"] not in ("bf16", "f16"):
        raise unknown(f"types .{m['td']}.{m['ta']}.{m['tb']}: only f32 += bf16 x bf16 or f16 x f16 is modelled")
    outs = [c for c in constraints if c.startswith("=")]
    ins = constraints[len(outs):]
    nout, h = len(outs), n // 2
    if len(ins) != len(op.operands) or any(c.startswith("=") for c in ins):
        raise unknown(f"{len(ins)} input constraints for {len(op.operands)} operands")

    def regs(text: str) -> list[int]:
        found = re.fullmatch(r"\s*\$\d+(\s*,\s*\$\d+)*\s*", text)
        if found is None:
            raise unknown(f"register list {{{text}}}")
        return [int(x) for x in re.findall(r"\$(\d+)", text)]

    d = regs(m["d"])
    if d != list(range(h)) or outs != ["=f"] * h:
        raise unknown(f"D must be the {h} '=f' outputs $0..${h - 1} in order")
    res = TypeInfo(op.results[0].type) if len(op.results) == 1 else None
    if res is None or res.kind != "struct" or res.count != h:
        raise unknown(f"the result must be a struct of {h} f32 (the accumulator)")
    tied = {int(c): j for j, c in enumerate(ins) if c.isdigit()}
    if sorted(tied) != list(range(h)):
        raise unknown(f"every accumulator output needs one tied input ('0'..'{h - 1}')")

    def operand(k: int, constraint: str, ty: str) -> int:
        j = k - nout
        if not 0 <= j < len(ins) or ins[j] != constraint or str(op.operands[j].type) != ty:
            raise unknown(f"${k} must be an input with constraint {constraint!r} of type {ty}")
        return j

    a = [operand(k, "r", "i32") for k in regs(m["a"])]
    if len(a) != 4:
        raise unknown(f"A takes 4 b32 registers, got {len(a)}")
    b = operand(int(m["b"]), "l", "i64")
    scale = operand(int(m["scale"]), "r", "i32")
    used = set(tied.values()) | set(a) | {b, scale}
    if used != set(range(len(ins))):
        raise unknown(f"operands {sorted(set(range(len(ins))) - used)} are not used by the wgmma")
    for j in tied.values():
        if str(op.operands[j].type) != "f32":
            raise unknown("the tied accumulator inputs must be f32")
    return RegisterAForm(n, m["ta"], int(m["tr"]), float(m["sa"]), float(m["sb"]), tuple(tied[i] for i in range(h)),
                         tuple(a), b, scale)


def _inline_asm(c, op, info):
    form = parse_register_a(op)
    attrs = {
        "m": 64, "n": form.n, "k": 16, "type_a": form.elem, "a_regs": True, "major_a": None,
        # imm-trans-b: 0 = B K-major, 1 = B MN-major (transposed)
        "major_b": "MN" if form.trans_b else "K",
        "scale_a": form.scale_a, "scale_b": form.scale_b, "scale_d": True,
    }
    accs = [c.slot(op.operands[j]) for j in form.acc]
    a_slots = [c.slot(op.operands[j]) for j in form.a]
    b_slot, scale_slot = c.slot(op.operands[form.b]), c.slot(op.operands[form.scale_d])
    r = c.slot(op.results[0])

    def fn(w):
        e = w.env
        if not w.mask.all():
            raise DivergenceError("wgmma.mma_async is .sync.aligned: every lane of the warp must execute it")
        b_bits = uniform(e[b_slot], w.mask, "wgmma descriptor B")
        accumulate = uniform(e[scale_slot], w.mask, "wgmma scale-d") != 0
        a_regs = np.stack([lanes(e[s], np.uint64) for s in a_slots], axis=1)           # (32, 4)
        acc_in = _accumulator([e[s] for s in accs]) if accumulate else None
        e[r] = w.cta.wgmma.issue(w, info, attrs, None, b_bits, acc_in, a_regs=a_regs)
    return False, fn


def _accumulator(parts: list):
    """The accumulator registers a register-A wgmma takes: the in-flight result of an earlier wgmma passed on whole
    (chained wgmmas, as PTX allows without a wait), or values."""
    first = parts[0]
    if isinstance(first, PendingPart) and all(isinstance(p, PendingPart) and p.pending is first.pending
                                              and p.index == i for i, p in enumerate(parts)):
        return first.pending
    cols = []
    for i, p in enumerate(parts):
        if isinstance(p, PendingPart):
            if not p.pending.retired:
                raise AccumulatorReadError(f"accumulator register {i} of a register-A wgmma comes from register "
                                           f"{p.index} of an unretired wgmma that does not feed this one whole: wait "
                                           "(wgmma.wait_group) for it first")
            p = p.pending.value[:, p.index]
        cols.append(lanes(p, np.float32))
    return np.stack(cols, axis=1)


inline_asm(None)(_inline_asm)        # the fallback: anything else must be a register-A wgmma, or is named unknown


# ---- which ops access wgmma registers ------------------------------------------------------------------

def _op(owner):
    """The Operation of a Value's owner, or None for a block argument."""
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if hasattr(owner, "operation") else owner


@analyses
def register_accesses(func) -> dict:
    """{op: what it accesses} for each op, other than a wgmma, reading or writing accumulator or A-fragment
    registers of a wgmma in `func` (the llvm.func of a kernel)."""
    wgmmas, plumbing = set(), set()
    seeds, a_values = [], set()
    links = defaultdict(list)

    def link(*values):
        for i, x in enumerate(values):
            links[x].extend(y for j, y in enumerate(values) if j != i)

    def visit(op):
        op = op.operation
        name = op.name
        if name == "nvvm.wgmma.mma_async":
            wgmmas.add(op)
            seeds.extend([op.opview.inouts, op.results[0]])
        elif name == "llvm.inline_asm":
            try:
                form = parse_register_a(op)
            except UnknownOpError:
                return ir.WalkResult.ADVANCE         # reported when the op is compiled
            wgmmas.add(op)
            seeds.append(op.results[0])
            for j in form.acc:
                v = op.operands[j]
                src = _op(v.owner)
                if src is not None and src.name == "llvm.extractvalue" and all(
                        u.owner.name == "llvm.inline_asm" for u in v.uses):
                    plumbing.add(src)                 # the struct register passed on, not read
                    seeds.append(src.operands[0])
                else:
                    seeds.append(v)
            a_values.update(op.operands[j] for j in form.a)
        elif name == "scf.for":
            body = op.regions[0].blocks[0]
            yields = list(body.operations)[-1].operands
            for i, res in enumerate(op.results):
                link(op.operands[3 + i], body.arguments[1 + i], yields[i], res)
        elif name == "scf.if":
            for i, res in enumerate(op.results):
                group = [res] + [list(r.blocks[0].operations)[-1].operands[i] for r in op.regions if len(r.blocks)]
                link(*group)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)
    accs, todo = set(), list(seeds)
    while todo:
        v = todo.pop()
        if v in accs:
            continue
        accs.add(v)
        todo.extend(links.get(v, ()))

    touches = {}

    def classify(op):
        op = op.operation
        if op in wgmmas or op in plumbing or op.name in ("scf.for", "scf.if", "scf.yield"):
            return ir.WalkResult.ADVANCE
        what = []
        if any(v in accs for v in op.operands):
            what.append("read accumulator registers")
        if any(v in accs for v in op.results):
            what.append("wrote accumulator registers")
        if any(v in a_values for v in op.operands):
            what.append("read A-fragment registers")
        if any(v in a_values for v in op.results):
            what.append("wrote A-fragment registers")
        if what:
            if op.name in ("llvm.extractvalue", "llvm.insertvalue"):
                what[0] += f" (struct position {list(ir.DenseI64ArrayAttr(op.attributes['position']))[0]})"
            touches[op] = " and ".join(what)
        return ir.WalkResult.ADVANCE

    func.walk(classify, ir.WalkOrder.PRE_ORDER)
    return touches
