"""The emulator's float arithmetic, conversions, vector/struct element ops and warp shuffles, op by op, against
numpy (or an exact reference) on random lane vectors with NaN, inf, subnormal and signed-zero lanes.

Each test compiles a tiny `llvm.func` with the emulator's compiler and runs its ops on one warp."""
from fractions import Fraction
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from mlir import ir

from warploom.emulate import DivergenceError, EmulationError, UnknownOpError
from warploom.emulate.compiler import _Compiler
from warploom.emulate.machine import WARP
from warploom.emulate.mufu import ex2_approx_ftz_f32

BF16 = ml_dtypes.bfloat16
DT = {"f32": np.float32, "bf16": BF16, "f16": np.float16}
UI = {"f32": np.uint32, "bf16": np.uint16, "f16": np.uint16}
CANON = {"f32": 0x7FFFFFFF, "bf16": 0x7FFF, "f16": 0x7FFF}
# the references overflow to inf on purpose
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def run(args: str, body: str, *values, mask=None, threads=WARP):
    """Run the ops of `llvm.func @f(<args>) { <body> llvm.return }` on one warp with arguments `values`; the
    results of the last op (one value, or a list when it has several)."""
    with ir.Context():
        module = ir.Module.parse(f"llvm.func @f({args}) {{\n{body}\n  llvm.return\n}}")
        func = module.body.operations[0]
        block = func.regions[0].blocks[0]
        c = _Compiler({})
        slots = [c.slot(a) for a in block.arguments]
        ops = [o.operation for o in block.operations][:-1]
        steps = [c.op(o) for o in ops]
        last = [c.slot(r) for r in ops[-1].results]
        launch = SimpleNamespace(kernel=SimpleNamespace(block=(threads, 1, 1)))
        w = SimpleNamespace(env=[None] * len(c.slots), mask=np.ones(WARP, bool) if mask is None else mask,
                            tid=np.arange(WARP, dtype=np.uint64), index=0, unfenced=None, last_op=None,
                            cta=SimpleNamespace(launch=launch))
        for s, v in zip(slots, values):
            w.env[s] = v
        with np.errstate(all="ignore"):
            for is_gen, fn, _ in steps:
                if is_gen:
                    for _ in fn(w):
                        pass
                else:
                    fn(w)
        out = [w.env[s] for s in last]
    return out[0] if len(out) == 1 else out


def bits(v, elem):
    return np.asarray(v, DT[elem]).view(UI[elem])


def special_lanes(elem, rng):
    """32 lanes: random normals of mixed magnitude, then NaN, +-inf, +-0, subnormals, the largest finite."""
    dt = DT[elem]
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(WARP) * 2.0 ** rng.integers(-20, 20, WARP)).astype(dt)
    fi = np.finfo(dt)
    tiny = float(fi.smallest_subnormal)
    x[:12] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 3 * tiny, float(fi.max), -float(fi.max),
                       float(fi.tiny), 1.0]).astype(dt)
    return x


def canonical(ref, elem):
    """numpy's result with NaN as the GPU's canonical NaN."""
    b = bits(ref, elem).copy()
    b[np.isnan(np.asarray(ref, np.float32))] = CANON[elem]
    return b


# ---- add/sub/mul/div -------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("op,ufunc", [("addf", np.add), ("subf", np.subtract), ("mulf", np.multiply),
                                      ("divf", np.divide)])
def test_binary_arith_rounds_once_to_nearest_even(op, ufunc, elem):
    rng = np.random.default_rng(sum(map(ord, op + elem)))
    for trial in range(4):
        x, y = special_lanes(elem, rng), rng.permutation(special_lanes(elem, rng))
        got = run(f"%a: {elem}, %b: {elem}", f"%r = arith.{op} %a, %b : {elem}", x, y)
        with np.errstate(all="ignore"):
            exact = ufunc(x.astype(np.float64), y.astype(np.float64))
            # the float64 result, rounded once more to the 16-bit type: the correctly rounded result (53 >= 2p + 2)
            ref = exact.astype(np.float32) if elem == "f32" else exact.astype(DT[elem])
            if elem == "bf16":      # via float32: still correctly rounded (24 >= 2 * 8 + 2)
                ref = exact.astype(np.float32).astype(BF16)
        np.testing.assert_array_equal(bits(got, elem), canonical(ref, elem))


def test_llvm_float_ops_and_uniform_scalars():
    got = run("%a: f32, %b: f32", "%r = llvm.fmul %a, %b : f32", np.float32(1.5), np.float32(-2.0))
    assert isinstance(got, np.float32) and got == -3.0
    got = run("%a: f32, %b: f32", "%r = llvm.fdiv %a, %b : f32", np.float32(0), np.float32(0))
    assert np.asarray(got).view(np.uint32) == 0x7FFFFFFF            # 0/0: the canonical NaN
    v = np.arange(WARP * 2, dtype=np.float32).reshape(WARP, 2)
    got = run("%a: vector<2xf32>, %b: vector<2xf32>", "%r = arith.addf %a, %b : vector<2xf32>", v, v)
    np.testing.assert_array_equal(got, 2 * v)


@pytest.mark.parametrize("elem", ["f32", "bf16"])
def test_neg_and_abs_move_only_the_sign_bit(elem):
    x = special_lanes(elem, np.random.default_rng(1))
    neg = run(f"%a: {elem}", f"%r = arith.negf %a : {elem}", x)
    np.testing.assert_array_equal(bits(neg, elem), bits(x, elem) ^ (0x80000000 if elem == "f32" else 0x8000))
    ab = run(f"%a: {elem}", f"%r = math.absf %a : {elem}", x)
    np.testing.assert_array_equal(bits(ab, elem), bits(x, elem) & (0x7FFFFFFF if elem == "f32" else 0x7FFF))
    neg2 = run(f"%a: {elem}", f"%r = llvm.fneg %a : {elem}", x)
    np.testing.assert_array_equal(bits(neg2, elem), bits(neg, elem))


# ---- fma ----------------------------------------------------------------------------------------------

def exact_round(q: Fraction, elem: str) -> int:
    """The bits of the rational q rounded to nearest even in `elem` (finite, no overflow)."""
    dt = DT[elem]
    f = np.asarray(float(q), np.float64).astype(dt)
    cands = {float(f), float(np.nextafter(f, dt(np.inf))), float(np.nextafter(f, dt(-np.inf)))}
    best = min(cands, key=lambda v: (abs(Fraction(v) - q), int(np.asarray(v, np.float64).astype(dt)
                                                              .view(UI[elem])) & 1))
    return int(np.asarray(best, np.float64).astype(dt).view(UI[elem]))


@pytest.mark.parametrize("elem", ["f32", "f16", "bf16"])
def test_fma_rounds_once(elem):
    rng = np.random.default_rng(5)
    dt = DT[elem]
    fails = 0
    for trial in range(40):
        a = (rng.standard_normal(WARP) * 2.0 ** rng.integers(-8, 8, WARP)).astype(dt)
        b = (rng.standard_normal(WARP) * 2.0 ** rng.integers(-8, 8, WARP)).astype(dt)
        # c close to -a*b: cancellation, where a double-rounded a*b + c goes wrong
        c = (-(a.astype(np.float64) * b.astype(np.float64)) * (1 + rng.standard_normal(WARP) * 2.0 ** -rng.integers(
            5, 30, WARP))).astype(dt)
        got = run(f"%a: {elem}, %b: {elem}, %c: {elem}", f"%r = llvm.intr.fma(%a, %b, %c) : ({elem}, {elem}, {elem}) "
                  f"-> {elem}", a, b, c)
        ref = [exact_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), elem) for x, y, z in
               zip(a, b, c)]
        fails += int((bits(got, elem) != np.array(ref)).sum())
    assert fails == 0


def test_fma_beats_double_rounding():
    # a*b = 2^-24 (1 + 2^-12)(1 - 2^-12 + 2^-24) = 2^-24 + 2^-60, so a*b + 1 = 1 + 2^-24 + 2^-60 exactly: a float64
    # sum rounds to the tie 1 + 2^-24, which then rounds to 1.0 in f32; the fused result is 1 + 2^-23
    a = np.float32(1 + 2.0 ** -12)
    b = np.float32(2.0 ** -24 * (1 - 2.0 ** -12 + 2.0 ** -24))
    c = np.float32(1.0)
    assert np.float32(float(a) * float(b) + float(c)) == 1.0
    got = run("%a: f32, %b: f32, %c: f32", "%r = math.fma %a, %b, %c : f32", a, b, c)
    ref = exact_round(Fraction(float(a)) * Fraction(float(b)) + 1, "f32")
    assert int(np.asarray(got).view(np.uint32)) == ref == int(np.float32(1 + 2.0 ** -23).view(np.uint32))
    nan = run("%a: f32, %b: f32, %c: f32", "%r = llvm.intr.fmuladd(%a, %b, %c) : (f32, f32, f32) -> f32",
              np.float32(np.inf), np.float32(0), np.float32(1))
    assert np.asarray(nan).view(np.uint32) == 0x7FFFFFFF


# ---- max/min -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", ["f32", "bf16"])
def test_maximum_propagates_nan_maxnum_ignores_it(elem):
    nan, inf = np.nan, np.inf
    x = np.array([nan, 1, nan, -0.0, 0.0, -inf, 2, -1] * 4).astype(DT[elem])
    y = np.array([1, nan, nan, 0.0, -0.0, 3, -5, -1] * 4).astype(DT[elem])
    ops = {"maximumf": [nan, nan, nan, 0.0, 0.0, 3, 2, -1], "minimumf": [nan, nan, nan, -0.0, -0.0, -inf, -5, -1],
           "maxnumf": [1, 1, nan, 0.0, 0.0, 3, 2, -1], "minnumf": [1, 1, nan, -0.0, -0.0, -inf, -5, -1]}
    for op, want in ops.items():
        got = run(f"%a: {elem}, %b: {elem}", f"%r = arith.{op} %a, %b : {elem}", x, y)
        np.testing.assert_array_equal(bits(got, elem), canonical(np.array(want * 4).astype(DT[elem]), elem), op)
    llvm = run(f"%a: {elem}, %b: {elem}", f"%r = llvm.intr.maxnum(%a, %b) : ({elem}, {elem}) -> {elem}", x, y)
    np.testing.assert_array_equal(bits(llvm, elem), canonical(np.array(ops["maxnumf"] * 4).astype(DT[elem]), elem))


def test_maximum_random_against_numpy():
    rng = np.random.default_rng(3)
    x, y = special_lanes("f32", rng), rng.permutation(special_lanes("f32", rng))
    got = run("%a: f32, %b: f32", "%r = llvm.intr.maximum(%a, %b) : (f32, f32) -> f32", x, y)
    ref = np.fmax(x, y)         # no NaN in both; NaN in either -> NaN
    ref[np.isnan(x) | np.isnan(y)] = np.nan
    zero = (x == 0) & (y == 0)
    ref[zero] = np.where(np.signbit(x) & np.signbit(y), -0.0, 0.0)[zero]
    np.testing.assert_array_equal(bits(got, "f32"), canonical(ref, "f32"))


# ---- compare, select -------------------------------------------------------------------------------

PREDICATES = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une",
              "uno", "true"]


@pytest.mark.parametrize("pred", PREDICATES)
def test_cmpf_ordered_and_unordered(pred):
    rng = np.random.default_rng(4)
    x = special_lanes("f32", rng)
    y = x.copy()
    y[16:] = rng.permutation(x)[16:]
    got = run("%a: f32, %b: f32", f"%r = arith.cmpf {pred}, %a, %b : f32", x, y)
    unord = np.isnan(x) | np.isnan(y)
    rel = {"eq": x == y, "gt": x > y, "ge": x >= y, "lt": x < y, "le": x <= y, "ne": (x < y) | (x > y)}
    if pred in ("false", "true"):
        want = np.full(WARP, pred == "true")
    elif pred in ("ord", "uno"):
        want = ~unord if pred == "ord" else unord
    else:
        r = rel[pred[1:]]
        want = (r & ~unord) if pred[0] == "o" else (r | unord)
    np.testing.assert_array_equal(np.broadcast_to(got, (WARP,)), want)
    name = f"_{pred}" if pred in ("false", "true") else pred          # the LLVM dialect spells these _false, _true
    llvm = run("%a: f32, %b: f32", f'%r = llvm.fcmp "{name}" %a, %b : f32', x, y)
    np.testing.assert_array_equal(np.broadcast_to(llvm, (WARP,)), want)


def test_select_per_lane_and_uniform():
    cond = np.arange(WARP) % 3 == 0
    x, y = np.arange(WARP, dtype=np.float32), -np.arange(WARP, dtype=np.float32)
    got = run("%c: i1, %a: f32, %b: f32", "%r = arith.select %c, %a, %b : f32", cond, x, y)
    np.testing.assert_array_equal(got, np.where(cond, x, y))
    got = run("%c: i1, %a: i32, %b: i32", "%r = llvm.select %c, %a, %b : i1, i32", True, 5, 7)
    assert got == 5
    got = run("%c: i1, %a: i32, %b: i32", "%r = arith.select %c, %a, %b : i32", cond, 5,
              np.arange(WARP, dtype=np.uint64))
    np.testing.assert_array_equal(got, np.where(cond, 5, np.arange(WARP)))


# ---- conversions -----------------------------------------------------------------------------------

MODES = {"to_nearest_even": "rne", "downward": "rm", "upward": "rp", "toward_zero": "rz", "to_nearest_away": "rna"}


def bf16_reference(x: np.ndarray, mode: str) -> np.ndarray:
    """f32 -> bf16 by integer arithmetic on the bits (bf16 is the top half of f32)."""
    u = x.view(np.uint32).astype(np.uint64)
    hi, lo, neg = u >> 16, u & 0xFFFF, (u >> 31) == 1
    if mode == "rne":
        r = (u + 0x7FFF + (hi & 1)) >> 16
    elif mode == "rna":
        r = (u + 0x8000) >> 16
    elif mode == "rz":
        r = hi
    elif mode == "rm":                   # toward -inf: negative values grow in magnitude
        r = hi + ((lo != 0) & neg)
    else:
        r = hi + ((lo != 0) & ~neg)
    r = r.astype(np.uint16)
    r[np.isnan(x)] = 0x7FFF
    inf = np.isinf(x)
    r[inf] = hi[inf]
    return r


def f16_reference(x: np.ndarray, mode: str) -> np.ndarray:
    """f32 -> f16: numpy's round to nearest even, then one step where the mode rounds the other way."""
    out = []
    for v in x:
        r = np.float16(v)
        if np.isnan(v) or np.isinf(v) or float(r) == float(v):
            out.append(r)
            continue
        up, down = (r, np.nextafter(r, np.float16(-np.inf))) if float(r) > float(v) else (
            np.nextafter(r, np.float16(np.inf)), r)
        if mode == "rm":
            r = down
        elif mode == "rp":
            r = up
        elif mode == "rz":
            r = down if v > 0 else up
        elif mode == "rna":
            lo_d, hi_d = float(v) - float(down), float(up) - float(v)
            if lo_d != hi_d:
                r = down if lo_d < hi_d else up
            else:
                r = up if v > 0 else down
        out.append(r)
    r = np.array(out, np.float16).view(np.uint16)
    r[np.isnan(x)] = 0x7FFF
    return r


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("elem", ["bf16", "f16"])
def test_truncf_every_rounding_mode(mode, elem):
    rng = np.random.default_rng(6)
    for trial in range(8):
        x = special_lanes("f32", rng)
        if trial % 2:   # ties: the low bits exactly half an ulp of the target
            u = x.view(np.uint32).copy()
            u[12:] = (u[12:] & ~np.uint32(0xFFFF if elem == "bf16" else 0x1FFF)) | np.uint32(
                0x8000 if elem == "bf16" else 0x1000)
            x = u.view(np.float32)
        if elem == "f16":
            x[20:24] = np.array([65520.0, -65520.0, 70000.0, 2.0 ** -25], np.float32)  # overflow tie, beyond, tiny
        attr = "" if mode == "to_nearest_even" else f" {mode}"
        got = run("%a: f32", f"%r = arith.truncf %a{attr} : f32 to {elem}", x)
        ref = bf16_reference(x, MODES[mode]) if elem == "bf16" else f16_reference(x, MODES[mode])
        if elem == "f16":           # overflow: rz and the directed modes toward zero give the largest finite
            big = np.abs(x) > 65504
            ref[big & np.isfinite(x)] = bits(np.array(
                [_f16_overflow(v, MODES[mode]) for v in x[big & np.isfinite(x)]], np.float16), "f16")
        np.testing.assert_array_equal(bits(got, elem), ref, f"{mode} {x}")
    assert bits(run("%a: f32", f"%r = llvm.fptrunc %a : f32 to {elem}", np.float32(1 / 3)), elem) == (
        bits(np.float32(1 / 3).astype(DT[elem]), elem))


def _f16_overflow(v, mode):
    mx = 65504.0
    if mode in ("rne", "rna"):
        return np.copysign(np.inf, v) if abs(v) >= 65520 else np.copysign(mx, v)
    if mode == "rz":
        return np.copysign(mx, v)
    if mode == "rm":
        return mx if v > 0 else -np.inf
    return np.inf if v > 0 else -mx


def test_extf_is_exact_and_nan_canonical():
    rng = np.random.default_rng(7)
    for elem in ("bf16", "f16"):
        x = special_lanes(elem, rng)
        got = run(f"%a: {elem}", f"%r = arith.extf %a : {elem} to f32", x)
        np.testing.assert_array_equal(bits(got, "f32"), canonical(x.astype(np.float32), "f32"))
        got = run(f"%a: {elem}", f"%r = llvm.fpext %a : {elem} to f32", x)
        np.testing.assert_array_equal(bits(got, "f32"), canonical(x.astype(np.float32), "f32"))


def test_int_to_float_rounds_to_nearest_even():
    v = np.array([0, 1, 2**24 + 1, 2**24 + 3, 2**31 - 1, 2**31, 2**32 - 1, 257, 259, 65535] + [7] * 22, np.uint64)
    s = run("%a: i32", "%r = arith.sitofp %a : i32 to f32", v)
    np.testing.assert_array_equal(s, v.astype(np.uint32).view(np.int32).astype(np.float32))
    u = run("%a: i32", "%r = arith.uitofp %a : i32 to f32", v)
    np.testing.assert_array_equal(u, v.astype(np.float32))
    b = run("%a: i32", "%r = llvm.sitofp %a : i32 to bf16", v)
    want = [exact_round(Fraction(int(x) - (1 << 32) if x >= 2**31 else int(x)), "bf16") for x in v]
    np.testing.assert_array_equal(bits(b, "bf16"), want)
    assert run("%a: i1", "%r = arith.sitofp %a : i1 to f32", True) == -1.0
    assert run("%a: i32", "%r = arith.uitofp %a : i32 to f16", 3) == 3.0


def test_float_to_int_truncates_and_poison_is_an_error():
    x = np.linspace(-40.7, 40.7, WARP).astype(np.float32)
    got = run("%a: f32", "%r = arith.fptosi %a : f32 to i32", x)
    np.testing.assert_array_equal(got, np.trunc(x).astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF))
    assert run("%a: f32", "%r = llvm.fptoui %a : f32 to i32", np.float32(7.9)) == 7
    with pytest.raises(EmulationError, match="poison"):
        run("%a: f32", "%r = arith.fptoui %a : f32 to i32", x)
    x[3] = np.nan
    mask = np.ones(WARP, bool)
    mask[3] = False           # an inactive lane may hold anything
    run("%a: f32", "%r = arith.fptosi %a : f32 to i32", x, mask=mask)


def test_cvt_f32x2_to_bf16x2_halves_relu_satfinite():
    rng = np.random.default_rng(8)
    a, b = special_lanes("f32", rng), rng.permutation(special_lanes("f32", rng))
    got = run("%a: f32, %b: f32",
              "%r = nvvm.convert.f32x2.to.bf16x2 %a, %b {rnd = #nvvm.fp_rnd_mode<rn>} : vector<2xbf16>", a, b)
    assert got.shape == (WARP, 2) and got.dtype == BF16
    # element 0 is the low half = cvt(b) (src_lo), element 1 the high half = cvt(a) (src_hi)
    np.testing.assert_array_equal(bits(got[:, 0], "bf16"), bf16_reference(b, "rne"))
    np.testing.assert_array_equal(bits(got[:, 1], "bf16"), bf16_reference(a, "rne"))
    packed = run("%a: f32, %b: f32", "%p = nvvm.convert.f32x2.to.bf16x2 %a, %b {rnd = #nvvm.fp_rnd_mode<rn>} : "
                 "vector<2xbf16>\n%r = llvm.bitcast %p : vector<2xbf16> to i32", a, b)
    np.testing.assert_array_equal(packed, (bf16_reference(a, "rne").astype(np.uint64) << 16)
                                  | bf16_reference(b, "rne").astype(np.uint64))
    rz = run("%a: f32, %b: f32", "%r = nvvm.convert.f32x2.to.bf16x2 %a, %b {rnd = #nvvm.fp_rnd_mode<rz>, relu = "
             "true, sat = #nvvm.sat_mode<satfinite>} : vector<2xbf16>", a, b)
    ref = bf16_reference(b, "rz").view(BF16).astype(np.float32)
    ref = np.where(np.isinf(ref), np.copysign(np.float32(BF16(3.3895314e38)), ref), ref)
    ref = np.where(ref <= 0, np.float32(0), ref)
    np.testing.assert_array_equal(bits(rz[:, 0], "bf16"), canonical(ref.astype(BF16), "bf16"))
    h = run("%a: f32, %b: f32",
            "%r = nvvm.convert.f32x2.to.f16x2 %a, %b {rnd = #nvvm.fp_rnd_mode<rn>} : vector<2xf16>", a, b)
    np.testing.assert_array_equal(bits(h[:, 1], "f16"), canonical(a.astype(np.float16), "f16"))


# ---- bitcasts, vectors, structs ---------------------------------------------------------------------

def test_bitcasts_are_little_endian_and_round_trip():
    rng = np.random.default_rng(9)
    x = special_lanes("f32", rng)
    i = run("%a: f32", "%r = llvm.bitcast %a : f32 to i32", x)
    np.testing.assert_array_equal(i, x.view(np.uint32).astype(np.uint64))
    back = run("%a: i32", "%r = arith.bitcast %a : i32 to f32", i)
    np.testing.assert_array_equal(bits(back, "f32"), x.view(np.uint32))
    assert run("%a: i32", "%r = llvm.bitcast %a : i32 to f32", 0x3F800000) == 1.0
    v = run("%a: i32", "%r = llvm.bitcast %a : i32 to vector<2xbf16>", 0x40003F80)
    np.testing.assert_array_equal(v.astype(np.float32), np.tile([1.0, 2.0], (WARP, 1)))
    w = run("%a: vector<2xf16>", "%r = vector.bitcast %a : vector<2xf16> to vector<1xi32>",
            np.tile(np.array([1.0, -2.0], np.float16), (WARP, 1)))
    assert w.shape == (WARP, 1) and int(w[0, 0]) == (0xC000 << 16) | 0x3C00


def test_vector_element_ops():
    v = np.arange(WARP * 4, dtype=np.float32).reshape(WARP, 4)
    np.testing.assert_array_equal(run("%v: vector<4xf32>", "%r = vector.extract %v[2] : f32 from vector<4xf32>", v),
                                  v[:, 2])
    got = run("%v: vector<4xf32>, %x: f32", "%r = vector.insert %x, %v[1] : f32 into vector<4xf32>", v,
              np.float32(-1))
    want = v.copy()
    want[:, 1] = -1
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run("%v: vector<4xf32>, %i: i32",
                                      "%r = llvm.extractelement %v[%i : i32] : vector<4xf32>", v, 3), v[:, 3])
    np.testing.assert_array_equal(run("%x: f32", "%r = vector.broadcast %x : f32 to vector<2xf32>", np.float32(5)),
                                  np.full((WARP, 2), 5, np.float32))
    got = run("%x: bf16, %y: bf16", "%r = vector.from_elements %x, %y : vector<2xbf16>", BF16(1), BF16(2))
    assert got.dtype == BF16 and got.shape == (WARP, 2)
    with pytest.raises(EmulationError, match="position 4 of a vector of 4"):
        run("%v: vector<4xf32>, %i: i32", "%r = llvm.extractelement %v[%i : i32] : vector<4xf32>", v, 4)


def test_insertvalue_into_an_accumulator_struct():
    s = np.zeros((WARP, 4), np.float32)
    got = run("%s: !llvm.struct<(f32, f32, f32, f32)>, %x: f32",
              "%r = llvm.insertvalue %x, %s[2] : !llvm.struct<(f32, f32, f32, f32)>", s,
              np.arange(WARP, dtype=np.float32))
    np.testing.assert_array_equal(got[:, 2], np.arange(WARP))
    assert not s.any()


# ---- ex2, rcp (approximate) ------------------------------------------------------------------------

def test_ex2_approx_special_values_and_accuracy():
    x = np.array([-np.inf, -0.0, 0.0, np.inf, np.nan, 1e-45, -1e-45, 1.0, -126.5, -149.0, 127.9, 128.0, 0.5, -3.25]
                 + list(np.linspace(-20, 20, 18)), np.float32)
    got = run("%a: f32", "%r = llvm.intr.exp2(%a) : (f32) -> f32", x)
    assert list(got[:4]) == [0.0, 1.0, 1.0, np.inf] and bits(got[4:5], "f32")[0] == 0x7FFFFFFF
    assert got[5] == 1.0 and got[6] == 1.0 and got[11] == np.inf
    assert got[8] != 0 and got[9] == 2.0 ** -149       # subnormal results kept without .ftz
    fin = np.isfinite(x) & (x > -126) & (x < 128)
    rel = np.abs(got[fin].astype(np.float64) / np.exp2(x[fin].astype(np.float64)) - 1)
    assert rel.max() <= 2.0 ** -22                      # PTX ISA: ex2.approx.f32 max relative error ~2^-22
    ftz = run("%a: f32", '%r = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%a) : (f32) -> f32', x)
    assert ftz[8] == 0.0 and ftz[9] == 0.0 and not np.signbit(ftz[8])     # subnormal results flushed to +0
    assert list(ftz[:4]) == [0.0, 1.0, 1.0, np.inf] and np.isnan(ftz[4]) and ftz[11] == np.inf
    # .ftz.f32 is the sm_90a MUFU's own table (warploom.emulate.mufu): within ex2.approx's 2^-22, not correctly
    # rounded everywhere (here 2^-3.25 and 2^0.5 are not), and exactly the table's values
    rel = np.abs(ftz[fin].astype(np.float64) / np.exp2(x[fin].astype(np.float64)) - 1)
    assert rel.max() <= 2.0 ** -22
    assert (ftz[10:] != got[10:]).any()
    np.testing.assert_array_equal(ftz.view(np.uint32), ex2_approx_ftz_f32(x).view(np.uint32))
    assert ftz[13] == np.float32(0.105112046) and ftz[12] == np.float32(1.4142135)
    bf = run("%a: bf16", "%r = math.exp2 %a : bf16", np.array([-130.0, 1.5] * 16, BF16))
    assert bf[0] == 0 and bf[1] == BF16(2.0 ** 1.5)      # ex2.approx.ftz.bf16 flushes the subnormal 2^-130


def test_rcp_approx_ftz():
    x = np.array([2.0, -0.0, 0.0, np.inf, 1e-40, 3.0, 1e38, np.nan] * 4, np.float32)
    got = run("%a: f32", "%r = nvvm.rcp.approx.ftz.f %a : f32", x)
    assert got[0] == 0.5 and got[1] == -np.inf and got[2] == np.inf and got[3] == 0.0
    assert got[4] == np.inf          # 1e-40 is subnormal: flushed to +0 first
    assert got[5] == np.float32(1 / 3) and got[6] == 0.0  # 1e-38 would be subnormal: flushed
    assert bits(got, "f32")[7] == 0x7FFFFFFF


def test_other_intrinsics_are_unknown():
    with pytest.raises(UnknownOpError, match="llvm.nvvm.sin.approx.f"):
        run("%a: f32", '%r = llvm.call_intrinsic "llvm.nvvm.sin.approx.f"(%a) : (f32) -> f32', np.float32(1))
    got = run("%a: f32, %b: f32", '%r = llvm.call_intrinsic "llvm.nvvm.fmax.nan.f"(%a, %b) : (f32, f32) -> f32',
              np.float32(1), np.float32(np.nan))
    assert np.asarray(got).view(np.uint32) == 0x7FFFFFFF


# ---- integer helpers ---------------------------------------------------------------------------------

def test_integer_helpers():
    v = np.arange(WARP, dtype=np.uint64) * np.uint64(0x1234567)
    np.testing.assert_array_equal(run("%a: i32", "%r = arith.trunci %a : i32 to i16", v), v & np.uint64(0xFFFF))
    assert run("%a: i32", "%r = arith.index_cast %a : i32 to index", 0xFFFFFFFF) == (1 << 64) - 1
    assert run("%a: i32", "%r = arith.index_castui %a : i32 to index", 0xFFFFFFFF) == 0xFFFFFFFF
    assert run("%a: i32, %b: i32", "%r = arith.shli %a, %b : i32", 0x80000001, 1) == 2
    assert run("%a: i32, %b: i32", "%r = arith.shrsi %a, %b : i32", 0x80000000, 4) == 0xF8000000
    assert run("%a: i32, %b: i32", "%r = arith.maxsi %a, %b : i32", 0xFFFFFFFF, 3) == 3
    assert run("%a: i32, %b: i32", "%r = arith.maxui %a, %b : i32", 0xFFFFFFFF, 3) == 0xFFFFFFFF
    np.testing.assert_array_equal(run("%a: i32, %b: i32", "%r = arith.minsi %a, %b : i32", v, 5),
                                  np.minimum(v, 5))


# ---- warp shuffles and reductions ----------------------------------------------------------------------

def cuda_shfl(kind: str, values: np.ndarray, b: int, width: int) -> np.ndarray:
    """__shfl_*_sync(0xffffffff, v, b, width) as the CUDA programming guide describes it."""
    lane = np.arange(WARP)
    base = lane - lane % width
    if kind == "idx":
        src = base + b % width
    elif kind == "up":
        src = np.where(lane % width >= b, lane - b, lane)
    elif kind == "down":
        src = np.where(lane % width + b < width, lane + b, lane)
    else:
        src = np.where((lane ^ b) < base + width, lane ^ b, lane)
    return values[src]


@pytest.mark.parametrize("kind", ["bfly", "up", "down", "idx"])
@pytest.mark.parametrize("width,b", [(w, b) for w in (32, 8, 4) for b in (0, 1, 2, 5) if b < w])
def test_shfl_sync_against_cuda_semantics(kind, width, b):
    c = ((WARP - width) << 8) | (0 if kind == "up" else 0x1F)
    x = np.random.default_rng(b).standard_normal(WARP).astype(np.float32)
    got = run("%m: i32, %v: f32, %b: i32, %c: i32", f"%r = nvvm.shfl.sync {kind} %m, %v, %b, %c : f32 -> f32",
              0xFFFFFFFF, x, b, c)
    np.testing.assert_array_equal(got, cuda_shfl(kind, x, b, width))
    ints = np.arange(WARP, dtype=np.uint64) * np.uint64(3)
    got = run("%m: i32, %v: i32, %b: i32, %c: i32", f"%r = nvvm.shfl.sync {kind} %m, %v, %b, %c : i32 -> i32",
              0xFFFFFFFF, ints, b, c)
    np.testing.assert_array_equal(got, cuda_shfl(kind, ints, b, width))


def test_shfl_valid_predicate_and_per_lane_offsets():
    x = np.arange(WARP, dtype=np.float32)
    out = run("%m: i32, %v: f32, %b: i32, %c: i32",
              "%p = nvvm.shfl.sync down %m, %v, %b, %c {return_value_and_is_valid} : f32 -> !llvm.struct<(f32, i1)>\n"
              "%r = llvm.extractvalue %p[1] : !llvm.struct<(f32, i1)>", 0xFFFFFFFF, x, 3, 0x1F)
    np.testing.assert_array_equal(out, np.arange(WARP) + 3 <= 31)
    idx = (np.arange(WARP, dtype=np.uint64) * np.uint64(7)) % np.uint64(WARP)
    got = run("%m: i32, %v: f32, %b: i32, %c: i32", "%r = nvvm.shfl.sync idx %m, %v, %b, %c : f32 -> f32",
              0xFFFFFFFF, x, idx, 0x1F)
    np.testing.assert_array_equal(got, x[idx.astype(int)])


def test_shfl_membermask_rules():
    x = np.arange(WARP, dtype=np.float32)
    half = np.arange(WARP) < 16
    shfl = "%r = nvvm.shfl.sync bfly %m, %v, %b, %c : f32 -> f32"
    # a full membermask while half the warp is inactive (a divergent branch)
    with pytest.raises(DivergenceError, match=r"membermask 0xffffffff names lanes \[16, .*inactive"):
        run("%m: i32, %v: f32, %b: i32, %c: i32", shfl, 0xFFFFFFFF, x, 1, 0x1F, mask=half)
    # an executing lane outside the membermask
    with pytest.raises(DivergenceError, match=r"lanes \[15\] execute it but are not in its membermask 0x00007fff"):
        run("%m: i32, %v: f32, %b: i32, %c: i32", shfl, 0x7FFF, x, 1, 0x1F, mask=half)
    # the right membermask for the branch: fine, as long as no lane reads outside it
    got = run("%m: i32, %v: f32, %b: i32, %c: i32", shfl, 0xFFFF, x, 1, 0x1F, mask=half)
    np.testing.assert_array_equal(got[:16], (np.arange(16) ^ 1).astype(np.float32))
    with pytest.raises(DivergenceError, match=r"lane 0 reads lane 16, which does not execute"):
        run("%m: i32, %v: f32, %b: i32, %c: i32", shfl, 0xFFFF, x, 16, 0x1F, mask=half)
    # lanes of a partial last warp do not exist: a full membermask is fine
    got = run("%m: i32, %v: f32, %b: i32, %c: i32", shfl, 0xFFFFFFFF, x, 1, 0x1F, mask=half, threads=16)
    np.testing.assert_array_equal(got[:16], (np.arange(16) ^ 1).astype(np.float32))


def test_redux_sync():
    v = (np.arange(WARP, dtype=np.uint64) * np.uint64(0x9E3779B9)) & np.uint64(0xFFFFFFFF)
    m = 0xFFFFFFFF
    s = v.astype(np.uint32).view(np.int32).astype(np.int64)
    want = {"add": int(v.sum()) & 0xFFFFFFFF, "umin": int(v.min()), "umax": int(v.max()),
            "min": int(s.min()) & 0xFFFFFFFF, "max": int(s.max()) & 0xFFFFFFFF,
            "and": int(np.bitwise_and.reduce(v)), "or": int(np.bitwise_or.reduce(v)),
            "xor": int(np.bitwise_xor.reduce(v))}
    for kind, w in want.items():
        assert run("%v: i32, %m: i32", f"%r = nvvm.redux.sync {kind} %v, %m : i32 -> i32", v, m) == w, kind
    half = np.arange(WARP) < 16
    assert run("%v: i32, %m: i32", "%r = nvvm.redux.sync add %v, %m : i32 -> i32", v, 0xFFFF, mask=half) == (
        int(v[:16].sum()) & 0xFFFFFFFF)
    f = np.linspace(-3, 2, WARP).astype(np.float32)
    f[5] = np.nan
    assert run("%v: f32, %m: i32", "%r = nvvm.redux.sync fmax %v, %m : f32 -> f32", f, m) == 2.0
    got = run("%v: f32, %m: i32", "%r = nvvm.redux.sync fmax %v, %m {nan = true} : f32 -> f32", f, m)
    assert np.asarray(got).view(np.uint32) == 0x7FFFFFFF
    assert run("%v: f32, %m: i32", "%r = nvvm.redux.sync fmax %v, %m {abs = true} : f32 -> f32",
               np.where(np.isnan(f), 0, f), m) == 3.0
    with pytest.raises(DivergenceError, match="inactive"):
        run("%v: i32, %m: i32", "%r = nvvm.redux.sync add %v, %m : i32 -> i32", v, m, mask=half)


def test_vector_constants_and_per_element_select():
    got = run("", "%r = arith.constant dense<0xFF800000> : vector<2xf32>")
    assert got.shape == (WARP, 2) and (got == -np.inf).all()
    got = run("", "%r = llvm.mlir.constant(dense<[1.5, 2.0]> : vector<2xf32>) : vector<2xf32>")
    np.testing.assert_array_equal(got, np.tile([1.5, 2.0], (WARP, 1)))
    got = run("", "%r = arith.constant dense<[1, -2]> : vector<2xi32>")
    np.testing.assert_array_equal(got[0], [1, 0xFFFFFFFE])
    assert run("", "%r = arith.constant dense<1.0> : vector<2xbf16>").dtype == BF16
    cond = np.tile([True, False], (WARP, 1))
    a, b = np.ones((WARP, 2), np.float32), np.zeros((WARP, 2), np.float32)
    got = run("%c: vector<2xi1>, %a: vector<2xf32>, %b: vector<2xf32>",
              "%r = arith.select %c, %a, %b : vector<2xi1>, vector<2xf32>", cond, a, b)
    np.testing.assert_array_equal(got, cond.astype(np.float32))
