"""MMA descriptor encoders and decoders: fields worked out by hand from the PTX ISA tables, round trips,
refusals, today's GEMM constants, and the sm_100 smem descriptor against upstream MLIR's
nvvm.tcgen05.mma_smem_desc (lowered and run on the host by MLIR's ExecutionEngine)."""
import ctypes
import random

import numpy as np
import pytest

from warploom.layout import (SWIZZLES, Sm100InstrDescriptor, Sm100SmemDescriptor, SmemTile, WgmmaSmemDescriptor,
                             canonical_element_address)
from warploom.layout.swizzle import from_sm100_code
from warploom.targets import get as get_target

HOPPER_SWIZZLES = ["none", "32B", "64B", "128B"]


def field(value: int, lo: int, width: int) -> int:
    return (value >> lo) & ((1 << width) - 1)


# ---- WgmmaSmemDescriptor: PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format" -------------------------
# start address [0,14) = (addr & 0x3FFFF) >> 4; LBO [16,30) >> 4; SBO [32,46) >> 4; base offset [49,52);
# swizzle [62,64): 0 none, 1 128B, 2 64B, 3 32B.

def wgmma(**kw):
    base = dict(start_address=0, lbo=0, sbo=0, swizzle="none", base_offset=0)
    return WgmmaSmemDescriptor(**{**base, **kw}).encode()


@pytest.mark.parametrize("kw, bits", [
    # "Matrix Descriptor Format", start address: 0x400 >> 4 = 0x40 in bits [0,14)
    (dict(start_address=0x400), 0x40),
    (dict(start_address=0x1230), 0x123),
    (dict(start_address=0x3FFF0), 0x3FFF),
    # LBO [16,30): 16 >> 4 = 1 -> 0x1_0000; 8192 >> 4 = 0x200 -> 0x200_0000; 0x3FFF0 >> 4 = 0x3FFF -> 0x3FFF_0000
    (dict(lbo=16), 0x10000),
    (dict(lbo=8192), 0x2000000),
    (dict(lbo=0x3FFF0), 0x3FFF0000),
    # SBO [32,46): 1024 >> 4 = 0x40 -> 0x40_0000_0000; 256 -> 0x10_0000_0000; 512 -> 0x20_0000_0000
    (dict(sbo=1024), 0x4000000000),
    (dict(sbo=256), 0x1000000000),
    (dict(sbo=512), 0x2000000000),
    # base offset [49,52): 1 -> 0x2_0000_0000_0000; 3 -> 0x6_0000_0000_0000; 7 -> 0xE_0000_0000_0000
    (dict(base_offset=1), 0x2000000000000),
    (dict(base_offset=3), 0x6000000000000),
    (dict(base_offset=7), 0xE000000000000),
    # swizzle [62,64): 128B = 1 -> 0x4000..., 64B = 2 -> 0x8000..., 32B = 3 -> 0xC000..., none = 0
    (dict(swizzle="128B"), 0x4000000000000000),
    (dict(swizzle="64B"), 0x8000000000000000),
    (dict(swizzle="32B"), 0xC000000000000000),
    (dict(swizzle="none"), 0),
])
def test_wgmma_fields_by_hand(kw, bits):
    assert wgmma(**kw) == bits


def test_wgmma_whole_descriptor_by_hand():
    # 128B K-major bf16 tile at smem 0x400: 0x40 | 1 << 16 | 64 << 32 | 1 << 62
    assert wgmma(start_address=0x400, lbo=16, sbo=1024, swizzle="128B") == 0x4000004000010040


def test_wgmma_round_trip():
    rng = random.Random(90)
    for _ in range(300):
        d = WgmmaSmemDescriptor(start_address=rng.randrange(1 << 14) << 4, lbo=rng.randrange(1 << 14) << 4,
                                sbo=rng.randrange(1 << 14) << 4, swizzle=rng.choice(HOPPER_SWIZZLES),
                                base_offset=rng.randrange(8))
        assert WgmmaSmemDescriptor.decode(d.encode()) == d


@pytest.mark.parametrize("kw, match", [
    (dict(start_address=0x40000), "start address = 262144 B"),      # needs 15 bits after >> 4
    (dict(start_address=0x408), "start address = 1032 B: must be a multiple of 16"),
    (dict(lbo=1 << 18), "LBO = 262144 B"),
    (dict(lbo=-16), "LBO = -16 B"),
    (dict(sbo=1000), "SBO = 1000 B"),
    (dict(base_offset=8), "base offset = 8: must be an integer in 0..7"),
    (dict(swizzle="128B_base32B"), "Hopper has none, 32B, 64B and 128B only"),
])
def test_wgmma_refuses_what_it_cannot_encode(kw, match):
    with pytest.raises(ValueError, match=match):
        wgmma(**kw)


@pytest.mark.parametrize("bits", [1 << 14, 1 << 31, 1 << 46, 1 << 52, 1 << 61, 1 << 64])
def test_wgmma_decode_refuses_reserved_bits(bits):
    with pytest.raises(ValueError, match="reserved bits|not a 64-bit"):
        WgmmaSmemDescriptor.decode(bits)


def test_todays_gemm_descriptor_constants():
    """The sm_90 GEMM's constants (the values the H200-checked prototype used, and the lowering emits):
    A 128x64 bf16 K-major -> LBO 16, SBO 1024; B [K, N] 64x256 -> LBO 8192, SBO 1024."""
    a = WgmmaSmemDescriptor.for_tile(SmemTile(("M", "K"), (128, 64), "bf16", "128B"), "K")
    b = WgmmaSmemDescriptor.for_tile(SmemTile(("K", "N"), (64, 256), "bf16", "128B"), "K")
    assert a.static_bits() == 0x4000004000010000
    assert b.static_bits() == 0x4000004002000000
    assert (a.lbo, a.sbo, b.lbo, b.sbo) == (16, 1024, 8192, 1024)


def test_static_bits_plus_address_is_the_descriptor():
    d = WgmmaSmemDescriptor.for_tile(SmemTile(("M", "K"), (64, 64), "bf16", "64B"), "K", start_address=0x2400)
    assert d.static_bits() | (0x2400 >> 4) == d.encode()
    assert (d.lbo, d.sbo) == (16, 512)


# ---- Sm100SmemDescriptor: PTX ISA 9.7.16.4.1 "Shared memory descriptor" ---------------------------
# address/LBO/SBO as Hopper; [46,49) = 0b001; base offset [49,52); LBO mode bit 52;
# swizzle [61,64): 0 none, 1 128B with 32B atomic, 2 128B, 4 64B, 6 32B.

VERSION = 1 << 46      # 0x4000_0000_0000


def sm100(**kw):
    base = dict(start_address=0, lbo=0, sbo=0, swizzle="none", base_offset=0, lbo_mode=0)
    return Sm100SmemDescriptor(**{**base, **kw}).encode()


@pytest.mark.parametrize("kw, bits", [
    (dict(), VERSION),                                          # the version field is always 0b001
    (dict(start_address=0x400), VERSION | 0x40),
    (dict(start_address=0x3FFF0), VERSION | 0x3FFF),
    (dict(start_address=0x10), VERSION | 0x1),
    (dict(lbo=16), VERSION | 0x10000),
    (dict(lbo=8192), VERSION | 0x2000000),
    (dict(lbo=0x3FFF0), VERSION | 0x3FFF0000),
    (dict(sbo=1024), VERSION | 0x4000000000),
    (dict(sbo=128), VERSION | 0x800000000),
    (dict(sbo=0x3FFF0), VERSION | 0x3FFF00000000),
    (dict(base_offset=2), VERSION | 0x4000000000000),
    (dict(base_offset=5), VERSION | 0xA000000000000),
    (dict(base_offset=7), VERSION | 0xE000000000000),
    (dict(lbo_mode=1), VERSION | 0x10000000000000),             # bit 52
    (dict(lbo_mode=1, base_offset=1), VERSION | 0x12000000000000),
    (dict(lbo_mode=0, lbo=32), VERSION | 0x20000),
    (dict(swizzle="128B_base32B"), VERSION | 0x2000000000000000),   # 1 << 61
    (dict(swizzle="128B"), VERSION | 0x4000000000000000),           # 2 << 61
    (dict(swizzle="64B"), VERSION | 0x8000000000000000),            # 4 << 61
    (dict(swizzle="32B"), VERSION | 0xC000000000000000),            # 6 << 61
])
def test_sm100_smem_fields_by_hand(kw, bits):
    assert sm100(**kw) == bits


def test_sm100_whole_descriptor_by_hand():
    # 128B K-major bf16 tile at 0x400: 0x40 | 1 << 16 | 64 << 32 | 1 << 46 | 2 << 61
    assert sm100(start_address=0x400, lbo=16, sbo=1024, swizzle="128B") == 0x4000404000010040
    d = Sm100SmemDescriptor.for_tile(SmemTile(("M", "K"), (128, 64), "bf16", "128B"), "K", start_address=0x400)
    assert d.encode() == 0x4000404000010040


def test_sm100_round_trip():
    rng = random.Random(100)
    for _ in range(300):
        d = Sm100SmemDescriptor(start_address=rng.randrange(1 << 14) << 4, lbo=rng.randrange(1 << 14) << 4,
                                sbo=rng.randrange(1 << 14) << 4, swizzle=rng.choice(list(SWIZZLES)),
                                base_offset=rng.randrange(8), lbo_mode=rng.randrange(2))
        assert Sm100SmemDescriptor.decode(d.encode()) == d


@pytest.mark.parametrize("kw, match", [
    (dict(start_address=1 << 18), "start address"),
    (dict(lbo=24), "LBO = 24 B"),
    (dict(sbo=1 << 20), "SBO = 1048576 B"),
    (dict(base_offset=-1), "base offset = -1"),
    (dict(lbo_mode=2), "LBO mode = 2: must be an integer in 0..1"),
])
def test_sm100_smem_refuses_what_it_cannot_encode(kw, match):
    with pytest.raises(ValueError, match=match):
        sm100(**kw)


@pytest.mark.parametrize("bits, match", [
    (0, "bits \\[46,49\\) = 0b0, must be 0b001"),                   # version missing
    (0b011 << 46, "must be 0b001"),
    (VERSION | 1 << 53, "reserved bits"),
    (VERSION | 1 << 15, "reserved bits"),
    (VERSION | 3 << 61, "code 3"),                                  # swizzle codes 3, 5, 7 are invalid
    (VERSION | 7 << 61, "code 7"),
])
def test_sm100_smem_decode_refuses(bits, match):
    with pytest.raises(ValueError, match=match):
        Sm100SmemDescriptor.decode(bits)


@pytest.mark.parametrize("mode", HOPPER_SWIZZLES)
@pytest.mark.parametrize("major", ["K", "MN"])
def test_sm100_descriptor_walks_the_canonical_layouts_like_wgmma(mode, major):
    """PTX ISA 9.7.16.3.3 lists the same canonical layouts as 9.7.15.5.1.2: a tcgen05 descriptor decoded from
    its bits reads the bytes the wgmma descriptor with the same fields reads (what the emulator relies on)."""
    i, j = np.meshgrid(np.arange(128), np.arange(16), indexing="ij")
    fields = dict(start_address=0x2400, lbo=2048, sbo=1024, swizzle=mode)
    tc = Sm100SmemDescriptor.decode(Sm100SmemDescriptor(**fields).encode())
    want = canonical_element_address(WgmmaSmemDescriptor(**fields), i, j, 2, major)
    assert (canonical_element_address(tc, i, j, 2, major) == want).all()


@pytest.mark.parametrize("kw, match", [(dict(lbo_mode=1), "LBO mode 1"),
                                       (dict(swizzle="128B_base32B"), "32-byte atoms")])
def test_canonical_walk_refuses_sm100_forms_it_does_not_model(kw, match):
    d = Sm100SmemDescriptor(**{**dict(start_address=0x400, lbo=16, sbo=1024, swizzle="128B"), **kw})
    with pytest.raises(ValueError, match=match):
        canonical_element_address(d, 0, 0, 2, "K")


def test_sm100_swizzle_code_5_is_invalid():
    with pytest.raises(ValueError, match="3, 5 and 7 are invalid"):
        from_sm100_code(5)


def _mlir_smem_descs(cases):
    """Run upstream nvvm.tcgen05.mma_smem_desc on constant operands: one func per case, lowered to the LLVM
    dialect and executed on the host by MLIR's ExecutionEngine (the op lowers to plain shifts and ors)."""
    from mlir import ir
    from mlir.dialects import arith, func, nvvm
    from mlir.execution_engine import ExecutionEngine
    from mlir.passmanager import PassManager

    from warploom.dialect import make_context

    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        i1, i8, i32, i64 = (ir.IntegerType.get_signless(w) for w in (1, 8, 32, 64))
        with ir.InsertionPoint(module.body):
            for i, (addr, lbo, sbo, base, mode, swz) in enumerate(cases):
                f = func.FuncOp(f"desc{i}", ir.FunctionType.get([], [i64]))
                f.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
                with ir.InsertionPoint(f.add_entry_block()):
                    operands = [arith.constant(t, v) for t, v in
                                ((i32, addr), (i32, lbo), (i32, sbo), (i8, base), (i1, mode), (i8, swz))]
                    func.return_([nvvm.tcgen05_mma_smem_desc(i64, *operands)])
        PassManager.parse("builtin.module(convert-func-to-llvm,convert-arith-to-llvm,reconcile-unrealized-casts)"
                          ).run(module.operation)
        engine = ExecutionEngine(module, opt_level=0)
        results = []
        for i in range(len(cases)):
            out = ctypes.c_uint64(0)
            engine.invoke(f"desc{i}", ctypes.pointer(out))
            results.append(out.value)
        return results


def test_sm100_smem_descriptor_equals_upstream_mlir():
    pytest.importorskip("mlir.execution_engine")
    rng = random.Random(2025)
    descs = [Sm100SmemDescriptor(start_address=rng.randrange(1 << 14) << 4, lbo=rng.randrange(1 << 14) << 4,
                                 sbo=rng.randrange(1 << 14) << 4, swizzle=rng.choice(list(SWIZZLES)),
                                 base_offset=rng.randrange(8), lbo_mode=rng.randrange(2)) for _ in range(24)]
    descs.append(Sm100SmemDescriptor.for_tile(SmemTile(("K", "N"), (64, 256), "bf16", "128B"), "K", 0x8400))
    # the op takes address, LBO and SBO already >> 4, and the 3-bit swizzle code
    cases = [(d.start_address >> 4, d.lbo >> 4, d.sbo >> 4, d.base_offset, d.lbo_mode, d.swizzle.sm100_code)
             for d in descs]
    assert _mlir_smem_descs(cases) == [d.encode() for d in descs]


# ---- Sm100InstrDescriptor: PTX ISA 9.7.16.4.2 "Instruction descriptor" (kind::tf32/f16/f8f6f4/i8) -------
# [0,2) sparsity selector, 2 sparse, 3 saturate, [4,6) D (F16 0, F32 1, S32 2), 6 reserved, [7,10) A,
# [10,13) B (f16: F16 0 BF16 1; tf32: 2; f8f6f4: E4M3 0 E5M2 1 E2M3 3 E3M2 4 E2M1 5; i8: U8 0 S8 1),
# 13/14 negate A/B, 15/16 transpose A/B, [17,23) N >> 3, 23 reserved, [24,29) M >> 4, 29 reserved,
# [30,32) max shift.

def idesc(**kw):
    base = dict(a_dtype="bf16", b_dtype="bf16", d_dtype="f32", m=128, n=256)
    return Sm100InstrDescriptor(**{**base, **kw}).encode()


def test_instr_whole_descriptors_by_hand():
    # bf16 x bf16 -> f32, 128x256: D 1 << 4 | A 1 << 7 | B 1 << 10 | (256 >> 3 = 32) << 17 | (128 >> 4 = 8) << 24
    assert idesc() == 0x10 | 0x80 | 0x400 | 0x400000 | 0x8000000 == 0x08400490
    # f16 x f16 -> f16, 64x8: all formats 0, N 1 << 17, M 4 << 24
    assert idesc(a_dtype="f16", b_dtype="f16", d_dtype="f16", m=64, n=8) == 0x04020000
    # tf32 -> f32, 128x128: A 2 << 7, B 2 << 10, D 1 << 4, N 16 << 17, M 8 << 24
    assert idesc(a_dtype="tf32", b_dtype="tf32", n=128) == 0x08200910


@pytest.mark.parametrize("kw, lo, width, value", [
    # D format [4,6)
    (dict(d_dtype="f32"), 4, 2, 1),
    (dict(a_dtype="f16", b_dtype="f16", d_dtype="f16"), 4, 2, 0),
    (dict(a_dtype="i8", b_dtype="u8", d_dtype="i32"), 4, 2, 2),
    # A format [7,10)
    (dict(a_dtype="f16", b_dtype="f16"), 7, 3, 0),
    (dict(a_dtype="f4E2M1FN", b_dtype="f8E4M3FN"), 7, 3, 5),
    (dict(a_dtype="f6E3M2FN", b_dtype="f8E4M3FN"), 7, 3, 4),
    (dict(a_dtype="f6E2M3FN", b_dtype="f8E4M3FN"), 7, 3, 3),
    (dict(a_dtype="i8", b_dtype="i8", d_dtype="i32"), 7, 3, 1),
    # B format [10,13)
    (dict(a_dtype="f8E4M3FN", b_dtype="f8E5M2"), 10, 3, 1),
    (dict(a_dtype="tf32", b_dtype="tf32"), 10, 3, 2),
    (dict(a_dtype="f8E4M3FN", b_dtype="f4E2M1FN"), 10, 3, 5),
    (dict(a_dtype="i8", b_dtype="u8", d_dtype="i32"), 10, 3, 0),
    # sparse selector [0,2) and sparse bit 2
    (dict(sparse=True, sparse_selector=3), 0, 3, 0b111),
    (dict(sparse=True, sparse_selector=2), 0, 3, 0b110),
    (dict(sparse=True), 0, 3, 0b100),
    # saturate bit 3 (kind::i8)
    (dict(a_dtype="i8", b_dtype="i8", d_dtype="i32", saturate=True), 3, 1, 1),
    (dict(a_dtype="u8", b_dtype="u8", d_dtype="i32"), 3, 1, 0),
    (dict(), 3, 1, 0),
    # negate A bit 13, negate B bit 14
    (dict(negate_a=True), 13, 2, 0b01),
    (dict(negate_b=True), 13, 2, 0b10),
    (dict(negate_a=True, negate_b=True), 13, 2, 0b11),
    # transpose A bit 15, transpose B bit 16 (MN-major)
    (dict(a_major="MN"), 15, 2, 0b01),
    (dict(b_major="MN"), 15, 2, 0b10),
    (dict(a_major="MN", b_major="MN"), 15, 2, 0b11),
    # N >> 3 in [17,23)
    (dict(n=8), 17, 6, 1),
    (dict(n=136), 17, 6, 17),
    (dict(n=256), 17, 6, 32),
    # M >> 4 in [24,29)
    (dict(m=64), 24, 5, 4),
    (dict(m=128), 24, 5, 8),
    (dict(m=256), 24, 5, 16),
    # max shift [30,32)
    (dict(max_shift=1), 30, 2, 1),
    (dict(max_shift=2), 30, 2, 2),
    (dict(max_shift=3), 30, 2, 3),
])
def test_instr_fields_by_hand(kw, lo, width, value):
    assert field(idesc(**kw), lo, width) == value


def test_instr_round_trip():
    rng = random.Random(7)
    kinds = {"f16": (["f16", "bf16"], ["f16", "f32"]), "tf32": (["tf32"], ["f32"]),
             "f8f6f4": (["f8E4M3FN", "f8E5M2", "f6E2M3FN", "f6E3M2FN", "f4E2M1FN"], ["f16", "f32"]),
             "i8": (["u8", "i8"], ["i32"])}
    for _ in range(400):
        kind = rng.choice(list(kinds))
        ab, d = kinds[kind]
        sparse = rng.random() < 0.3
        desc = Sm100InstrDescriptor(
            a_dtype=rng.choice(ab), b_dtype=rng.choice(ab), d_dtype=rng.choice(d),
            m=16 * rng.randrange(1, 32), n=8 * rng.randrange(1, 64),
            a_major=rng.choice(["K", "MN"]), b_major=rng.choice(["K", "MN"]),
            negate_a=kind != "i8" and rng.random() < 0.5, negate_b=kind != "i8" and rng.random() < 0.5,
            sparse=sparse, sparse_selector=rng.randrange(4) if sparse else 0,
            saturate=kind == "i8" and rng.random() < 0.5, max_shift=rng.randrange(4))
        bits = desc.encode()
        assert 0 <= bits < 1 << 32
        assert field(bits, 6, 1) == field(bits, 23, 1) == field(bits, 29, 1) == 0
        assert Sm100InstrDescriptor.decode(bits, kind) == desc


@pytest.mark.parametrize("kw, match", [
    (dict(b_dtype="f16", a_dtype="f8E4M3FN"), "both operands must be of one kind"),
    (dict(d_dtype="f16", a_dtype="tf32", b_dtype="tf32"), "kind::tf32 accumulates into \\['f32'\\]"),
    (dict(d_dtype="f32", a_dtype="i8", b_dtype="i8"), "kind::i8 accumulates into"),
    (dict(a_dtype="i8", b_dtype="i8", d_dtype="i32", negate_a=True), "cannot negate"),
    (dict(saturate=True), "saturate applies to kind::i8 only"),
    (dict(m=120), "M = 120: must be a multiple of 16"),
    (dict(m=512), "M = 512"),
    (dict(n=260), "N = 260: must be a multiple of 8"),
    (dict(n=512), "N = 512"),
    (dict(n=0), "N = 0"),
    (dict(max_shift=4), "max shift = 4"),
    (dict(sparse_selector=1), "on a dense MMA"),
    (dict(sparse=True, sparse_selector=4), "sparsity selector = 4"),
    (dict(a_major="T"), "'K' or 'MN'"),
    (dict(a_dtype="f32", b_dtype="f32"), "dense kinds take"),
])
def test_instr_refuses_what_it_cannot_encode(kw, match):
    with pytest.raises(ValueError, match=match):
        idesc(**kw)


@pytest.mark.parametrize("bits, kind, match", [
    (0x08400490 | 1 << 6, "f16", "reserved bits"),
    (0x08400490 | 1 << 23, "f16", "reserved bits"),
    (0x08400490 | 1 << 29, "f16", "reserved bits"),
    (0x08400490 | 2 << 7, "f16", "A format code 3"),       # A = 3 is not an f16-kind format
    (0x08400490, "f8f6f4", None),                           # the same bits are valid f8f6f4: A E5M2, B E5M2
    (0x08400490, "mxf4", "covers"),
    (1 << 32, "f16", "not a 32-bit"),
])
def test_instr_decode_needs_kind_and_refuses_reserved(bits, kind, match):
    if match is None:
        d = Sm100InstrDescriptor.decode(bits, kind)
        assert (d.a_dtype, d.b_dtype, d.d_dtype, d.m, d.n) == ("f8E5M2", "f8E5M2", "f32", 128, 256)
        return
    with pytest.raises(ValueError, match=match):
        Sm100InstrDescriptor.decode(bits, kind)


def test_sm100_gemm_descriptor_constants():
    """The sm_100a GEMM's smem descriptors (tests/lit/lower-sm100/gemm.mlir checks the same constants in the IR).
    PTX ISA 9.7.16.4.1 "Shared memory descriptor": [0,14) address >> 4, [16,30) LBO >> 4, [32,46) SBO >> 4,
    [46,49) = 0b001, [61,64) swizzle (2: 128B); the canonical layouts of 9.7.16.3.3: a K-major 128B-swizzled
    operand's atom is 8 rows x 128 B (SBO 1024 between atoms along M/N, LBO 16: unused within one swizzle span),
    an MN-major one steps LBO between 64-element spans of M/N (one TMA box: 64 rows of K x 128 B = 8192 B)."""
    a = Sm100SmemDescriptor.for_tile(SmemTile(("M", "K"), (128, 64), "bf16", "128B"), "K")
    b_kn = Sm100SmemDescriptor.for_tile(SmemTile(("K", "N"), (64, 128), "bf16", "128B"), "K")
    b_nk = Sm100SmemDescriptor.for_tile(SmemTile(("N", "K"), (256, 64), "bf16", "128B"), "K")
    assert a.static_bits() == 0x4000404000010000 == 4611756662049538048
    assert b_kn.static_bits() == 0x4000404002000000 == 4611756662083026944
    assert b_nk.static_bits() == a.static_bits()          # K-major B is laid out like A
    assert (a.lbo, a.sbo, b_kn.lbo, b_kn.sbo) == (16, 1024, 8192, 1024)
    assert field(a.encode(), 46, 3) == 0b001 and field(a.encode(), 61, 3) == 2


@pytest.mark.parametrize("cta_group, m, n, ok", [
    (1, 128, 256, True), (1, 64, 8, True), (1, 256, 256, False),       # cta_group::1: M 64 or 128
    (2, 256, 256, True), (2, 128, 16, True), (2, 256, 8, False),       # cta_group::2: M 128 or 256, N step 16
    (2, 64, 64, False),
])
def test_instruction_descriptor_shapes_per_cta_group(cta_group, m, n, ok):
    """PTX ISA 9.7.16.2.1 "tcgen05-matrix-shapes" (Table 39), kind::f16 dense: cta_group::1 takes M 64 / 128 and N
    8..256 in steps of 8, cta_group::2 (the CTA pair's MMA) M 128 / 256 and N 16..256 in steps of 16. The
    descriptor itself (9.7.16.4.2) holds M >> 4 and N >> 3 for both: a pair's M = 256 is 16 << 24."""
    target = get_target("sm_100a")
    if ok:
        target.check_mma_shape(m, n, "bf16", cta_group)
        bits = idesc(m=m, n=n)
        assert field(bits, 24, 5) == m >> 4 and field(bits, 17, 6) == n >> 3
        assert Sm100InstrDescriptor.decode(bits, "f16").m == m
    else:
        with pytest.raises(ValueError, match=f"m{m}n{n} .*cta_group {cta_group}"):
            target.check_mma_shape(m, n, "bf16", cta_group)


def test_the_pair_gemm_instruction_descriptor():
    """cta_group::2, M = 256 over the pair, N = 256, bf16 with B [K, N] (MN-major): the bits by hand."""
    assert idesc(m=256, n=256, b_major="MN") == 0x10 | 0x80 | 0x400 | 1 << 16 | 32 << 17 | 16 << 24 == 0x10410490
