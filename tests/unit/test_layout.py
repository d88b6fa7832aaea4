"""warploom.layout: swizzles, smem tiles (TMA boxes, byte addresses, MMA operand view), register
fragments and TMEM columns, each checked against a definition written out independently here."""
import numpy as np
import pytest

from warploom.layout import SWIZZLES, SmemTile, WgmmaSmemDescriptor, swizzle
from warploom.layout.descriptors import canonical_element_address
from warploom.layout.fragments import (check_tmem_lane_access, tcgen05_ldst_registers, tmem_lanes_of_warp,
                                       wgmma_a_k16, wgmma_accumulator)
from warploom.layout.tmem import TmemColumns, alloc_columns, decode_tmem_address, tmem_address
from warploom.targets import SM90

ALL_MODES = list(SWIZZLES)
MMA_MODES = ["none", "32B", "64B", "128B"]


# ---- swizzle ----------------------------------------------------------------------------------

def xor_definition(mode: str, off: int) -> int:
    """PTX ISA 5.5 "Tensors" swizzle modes / CUTLASS Swizzle<B,M,S> on byte offsets, written bit by bit."""
    if mode == "none":
        return off
    if mode == "128B":      # bits [4,7) ^= bits [7,10)
        return off ^ (((off >> 7) & 7) << 4)
    if mode == "64B":       # bits [4,6) ^= bits [7,9)
        return off ^ (((off >> 7) & 3) << 4)
    if mode == "32B":       # bit 4 ^= bit 7
        return off ^ (((off >> 7) & 1) << 4)
    if mode == "128B_base32B":   # Swizzle<2,5,2>: bits [5,7) ^= bits [7,9)
        return off ^ (((off >> 7) & 3) << 5)
    raise AssertionError(mode)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_swizzle_matches_xor_definition(mode):
    s = swizzle(mode)
    for off in range(0, 4 * 1024):
        assert s.apply(off) == xor_definition(mode, off)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_swizzle_is_a_bijection_on_each_repeat(mode):
    s = swizzle(mode)
    for rep in range(3):
        base = rep * s.repeat_bytes
        image = sorted(s.apply(base + o) for o in range(s.repeat_bytes))
        assert image == list(range(base, base + s.repeat_bytes))


def test_swizzle_geometry_and_codes():
    expect = {  # name: (TMA bytes, span, repeat, atom rows, Hopper code, sm_100 code)
        "none": (0, 16, 128, 8, 0, 0), "32B": (32, 32, 256, 8, 3, 6), "64B": (64, 64, 512, 8, 2, 4),
        "128B": (128, 128, 1024, 8, 1, 2), "128B_base32B": (128, 128, 512, 4, None, 1)}
    for name, (tma, span, repeat, rows, hopper, sm100) in expect.items():
        s = swizzle(name)
        assert (s.bytes, s.span_bytes, s.repeat_bytes, s.atom_rows, s.hopper_code, s.sm100_code) == \
            (tma, span, repeat, rows, hopper, sm100), name
    assert swizzle(128) is swizzle("128B") and swizzle(0) is swizzle("none")
    with pytest.raises(ValueError, match="0 \\(none\\), 32, 64 or 128"):
        swizzle(256)
    with pytest.raises(ValueError, match="known modes"):
        swizzle("96B")


def test_128b_swizzle_moves_chunk_c_of_row_r_to_chunk_c_xor_r():
    s = swizzle("128B")
    for r in range(8):
        for c in range(8):
            assert s.apply(r * 128 + c * 16 + 5) == r * 128 + (c ^ r) * 16 + 5


# ---- SmemTile storage -------------------------------------------------------------------------

def tile_cases():
    for mode in MMA_MODES:
        span = swizzle(mode).span_bytes
        cols = 2 * span // 2                      # two boxes of bf16
        yield SmemTile(("M", "K"), (64, cols), "bf16", mode)     # K-major
        yield SmemTile(("K", "N"), (32, cols), "bf16", mode)     # MN-major
        yield SmemTile(("N", "K"), (16, span), "f8E4M3FN", mode)
        yield SmemTile(("K", "M"), (16, span // 4), "f32", mode)
    yield SmemTile(("K", "N"), (8, 128), "bf16", "128B_base32B")


@pytest.mark.parametrize("tile", list(tile_cases()), ids=str)
def test_byte_address_is_box_layout_plus_swizzle(tile):
    eb = tile.elem_bits // 8
    span = tile.swizzle.span_bytes
    seen = set()
    for row in range(tile.rows):
        for col in range(tile.shape[1]):
            box, within = divmod(col * eb, span)
            linear = box * (tile.rows * span) + row * span + within
            addr = tile.byte_address(row, col)
            assert addr == xor_definition(tile.swizzle.name, linear)
            seen.add(addr)
    assert seen == set(range(0, tile.bytes, eb))      # every element has its own bytes, none is left over


def test_tile_boxes_bytes_and_alignment():
    a = SmemTile(("M", "K"), (128, 64), "bf16", "128B")
    assert a.box == (64, 128) and a.num_boxes == 1 and a.bytes == 16384 and a.align == 1024
    q = SmemTile(("M", "K"), (128, 128), "bf16", "128B")          # head dim 128: two boxes of 64
    assert q.box == (64, 128) and q.num_boxes == 2 and q.box_bytes == 16384
    assert [q.box_offset(j) for j in range(2)] == [0, 16384] and q.box_start(1) == 64
    b = SmemTile(("K", "N"), (64, 256), "bf16", "128B")
    assert b.box == (64, 64) and b.num_boxes == 4 and [b.box_offset(j) for j in range(4)] == [0, 8192, 16384, 24576]
    assert SmemTile(("M", "K"), (64, 32), "bf16", "32B").align == 256
    assert SmemTile(("M", "K"), (64, 32), "bf16", "none").box == (8, 64)
    assert SmemTile(("M", "K"), (64, 32), "bf16", "none").align == 128     # TMA's destination minimum
    with pytest.raises(ValueError, match="boxes 0..1"):
        q.box_offset(2)


def test_tiles_tma_or_mma_cannot_take_are_refused():
    with pytest.raises(ValueError, match="12 rows is not a positive multiple of 8"):
        SmemTile(("M", "K"), (12, 64), "bf16", "128B")
    with pytest.raises(ValueError, match="96 bytes, not a multiple of the 128-byte span"):
        SmemTile(("M", "K"), (64, 48), "bf16", "128B")
    with pytest.raises(ValueError, match="box dim 1 = 512 is outside 1..256"):
        SmemTile(("M", "K"), (512, 64), "bf16", "128B")
    with pytest.raises(ValueError, match="two distinct dims"):
        SmemTile(("K", "K"), (64, 64), "bf16", "128B")
    with pytest.raises(ValueError, match="outside smem tile"):
        SmemTile(("M", "K"), (64, 64), "bf16", "128B").byte_address(64, 0)


# ---- SmemTile as an MMA operand ---------------------------------------------------------------

def test_todays_gemm_a_tile():
    """128x64 bf16 K-major A, 128B swizzle: LBO 16, SBO 1024, k16 step 32 B, warpgroup w at w*64*128."""
    a = SmemTile(("M", "K"), (128, 64), "bf16", "128B")
    op = a.operand("K")
    assert (op.major, op.lbo, op.sbo) == ("K", 16, 1024)
    assert [a.k_block_offset(kk, SM90.mma_k_of("bf16")) for kk in range(4)] == [0, 32, 64, 96]
    assert [a.sub_tile_offset("M", w, 64) for w in range(2)] == [0, 8192]


def test_todays_gemm_b_tile_mn_major():
    """64x256 bf16 B given [K, N] (MN-major): LBO = 64*128 = 8192, SBO 1024, k16 step 2048 B."""
    b = SmemTile(("K", "N"), (64, 256), "bf16", "128B")
    op = b.operand("K")
    assert (op.major, op.lbo, op.sbo) == ("MN", 8192, 1024)
    assert [b.k_block_offset(kk, 16) for kk in range(4)] == [0, 2048, 4096, 6144]
    assert b.sub_tile_offset("N", 1, 128) == 16384          # the second N half starts two boxes in


def test_k_major_tile_of_several_boxes():
    """Head dim 128 bf16: k-blocks 0..3 walk box 0, k-blocks 4..7 box 1 (the limit the sm_90 lowering had)."""
    q = SmemTile(("M", "K"), (128, 128), "bf16", "128B")
    assert [q.k_block_offset(kk, 16) for kk in range(8)] == [0, 32, 64, 96, 16384, 16416, 16448, 16480]
    op = q.operand("K")
    assert (op.lbo, op.sbo) == (16, 1024)


def test_operand_view_errors():
    a = SmemTile(("M", "K"), (128, 64), "bf16", "128B")
    with pytest.raises(ValueError, match="no dim 'N' to contract over"):
        a.operand("N")
    with pytest.raises(ValueError, match="reaches past K = 64"):
        a.k_block_offset(4, 16)
    with pytest.raises(ValueError, match="groups of 8"):
        a.sub_tile_offset("M", 1, 12)
    with pytest.raises(ValueError, match="reaches past 128"):
        a.sub_tile_offset("M", 2, 64)
    with pytest.raises(ValueError, match="8-row atoms"):
        SmemTile(("K", "N"), (8, 128), "bf16", "128B_base32B").operand("K")
    with pytest.raises(ValueError, match="straddles"):
        SmemTile(("M", "K"), (64, 32), "bf16", "32B").k_block_offset(0, 24)
    with pytest.raises(ValueError, match="whole 8-row groups"):
        SmemTile(("K", "N"), (64, 64), "bf16", "128B").k_block_offset(1, 4)


def canonical_byte(tile, op, start, mn, k):
    """Byte the MMA reads for operand element (mn, k) of a k-block whose descriptor starts at `start`: the
    library's walk of the canonical layouts (PTX ISA 9.7.15.5.1.2), fed the descriptor the tile derives."""
    desc = WgmmaSmemDescriptor(start_address=start, lbo=op.lbo, sbo=op.sbo, swizzle=op.swizzle)
    return canonical_element_address(desc, mn, k, tile.elem_bits // 8, op.major)


@pytest.mark.parametrize("mode", MMA_MODES)
@pytest.mark.parametrize("dtype", ["bf16", "f8E4M3FN", "tf32"])
@pytest.mark.parametrize("k_major", [True, False], ids=["K-major", "MN-major"])
def test_descriptor_view_reads_the_elements_tma_wrote(mode, dtype, k_major):
    """For every k-block, the descriptor fields (start, LBO, SBO) walked the way the ISA's canonical layout
    walks them land on exactly the byte `byte_address` gives each logical element."""
    eb = SM90.elem_bits(dtype) // 8
    span = swizzle(mode).span_bytes
    k_inst = SM90.mma_k_of(dtype)
    mn, kdim = 16, 2 * max(span // eb, k_inst)                     # two boxes (K-major) of K
    if k_major:
        tile = SmemTile(("M", "K"), (mn, kdim), dtype, mode)
    else:
        mn = 2 * span // eb                                         # two boxes along MN
        tile = SmemTile(("K", "N"), (kdim, mn), dtype, mode)
    op = tile.operand("K")
    for kk in range(kdim // k_inst):
        start = tile.k_block_offset(kk, k_inst)
        for i in range(mn):
            for k in range(k_inst):
                logical = (i, kk * k_inst + k) if k_major else (kk * k_inst + k, i)
                assert canonical_byte(tile, op, start, i, k) == tile.byte_address(*logical), (kk, i, k)


def test_warpgroup_sub_tile_descriptor_reads_its_rows():
    a = SmemTile(("M", "K"), (128, 128), "bf16", "128B")
    op = a.operand("K")
    for w in range(2):
        base = a.sub_tile_offset("M", w, 64)
        for kk in range(8):
            start = base + a.k_block_offset(kk, 16)
            for i in range(0, 64, 7):
                for k in range(16):
                    assert canonical_byte(a, op, start, i, k) == a.byte_address(64 * w + i, 16 * kk + k)


# ---- register fragments -----------------------------------------------------------------------

@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_wgmma_accumulator_covers_the_tile_once(n):
    rows, cols = wgmma_accumulator(n)
    assert rows.shape == cols.shape == (128, n // 2)
    cells = sorted(zip(rows.ravel().tolist(), cols.ravel().tolist()))
    assert cells == [(r, c) for r in range(64) for c in range(n)]


def test_wgmma_accumulator_worked_examples():
    """PTX ISA 9.7.15.5.1.1.1 accumulator D: thread 37 is warp 1 lane 5, so r0 = 17, columns 2 and 3."""
    rows, cols = wgmma_accumulator(16)
    assert list(zip(rows[37], cols[37])) == [(17, 2), (17, 3), (25, 2), (25, 3), (17, 10), (17, 11), (25, 10), (25, 11)]
    assert (rows[0, 0], cols[0, 0]) == (0, 0) and (rows[127, 7], cols[127, 7]) == (63, 15)
    with pytest.raises(ValueError, match="m64n12"):
        wgmma_accumulator(12)


def test_wgmma_a_fragment_covers_64x16_once():
    rows, cols = wgmma_a_k16()
    assert rows.shape == (128, 8)
    assert sorted(zip(rows.ravel().tolist(), cols.ravel().tolist())) == [(r, c) for r in range(64) for c in range(16)]
    # thread 37 (warp 1, lane 5): a0,a1 row 17 cols 2,3; a2,a3 row 25; a4..a7 the same rows at cols 10,11
    assert list(zip(rows[37], cols[37])) == [(17, 2), (17, 3), (25, 2), (25, 3), (17, 10), (17, 11), (25, 10), (25, 11)]


def test_tcgen05_ldst_registers_and_lane_quadrants():
    assert [tcgen05_ldst_registers(s, 4) for s in ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")] == \
        [4, 4, 8, 16, 4]
    assert tcgen05_ldst_registers("32x32b", 128) == 128
    with pytest.raises(ValueError, match="needs 512 registers"):
        tcgen05_ldst_registers("16x256b", 128)
    with pytest.raises(ValueError, match="power of two"):
        tcgen05_ldst_registers("32x32b", 3)
    with pytest.raises(ValueError, match="shapes are"):
        tcgen05_ldst_registers("32x64b", 1)
    assert tmem_lanes_of_warp(0) == range(0, 32) and tmem_lanes_of_warp(6) == range(64, 96)
    check_tmem_lane_access(5, 32)
    with pytest.raises(ValueError, match="lanes 32..63 only"):
        check_tmem_lane_access(5, 64)


# ---- TMEM -------------------------------------------------------------------------------------

def test_tmem_addresses_and_allocation():
    assert tmem_address(0, 0) == 0 and tmem_address(32, 5) == 0x200005 and tmem_address(127, 511) == 0x7F01FF
    assert decode_tmem_address(0x600080) == (96, 128)
    for bad in ((128, 0), (0, 512), (-1, 0)):
        with pytest.raises(ValueError, match="TMEM"):
            tmem_address(*bad)
    assert [alloc_columns(n) for n in (1, 32, 33, 128, 129, 300, 512)] == [32, 32, 64, 128, 256, 512, 512]
    with pytest.raises(ValueError, match="a CTA has 512"):
        alloc_columns(513)
    with pytest.raises(ValueError, match="at least 1"):
        alloc_columns(0)


def test_tmem_column_ranges():
    s0, s1, o0 = TmemColumns(0, 128), TmemColumns(128, 128), TmemColumns(256, 128)
    p0 = TmemColumns(64, 64)                       # P aliases the upper half of S0
    assert not s0.overlaps(s1) and s0.overlaps(p0) and s0.contains(p0) and not s1.contains(p0)
    assert o0.end == 384 and o0.address(lane=64, column=3) == (64 << 16) | 259
    with pytest.raises(ValueError, match="outside 0..511"):
        TmemColumns(448, 128)
    with pytest.raises(ValueError, match="columns are 0..127"):
        o0.address(column=128)


def test_fragment_arrays_are_numpy():
    rows, _ = wgmma_accumulator(8)
    assert isinstance(rows, np.ndarray) and rows.dtype.kind == "i"
