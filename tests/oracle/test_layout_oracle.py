"""What the smem descriptors' LBO and SBO mean, against CUTLASS: warploom's operand tiles and CuTe's.

test_cutlass_oracle.py checks where each field sits; this checks the values the fields carry. For every smem
tile the standard kernels' lowering reads as an MMA operand (and a sweep of swizzles and majors), CuTe tiles
CUTLASS's canonical atom (Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom) over the same MN x K shape, and CUTLASS
builds the descriptor of each MMA k-block with make_umma_desc (sm_100a) or make_gmma_desc (sm_90a). Then
  - warploom's tile stores each element where CuTe's tile does (SmemTile.byte_address, what TMA writes),
  - warploom's descriptor for the tile (for_tile) is CUTLASS's word: swizzle code, LBO, SBO, version, base,
  - each k-block starts where CuTe's slice starts (SmemTile.k_block_offset), its start-address field and the
    steps between k-blocks (start_address_field, descriptor_step, k_block_steps: what the lowering evaluates on
    IR values) are CUTLASS's, and
  - warploom's decode of CUTLASS's descriptor, walked through canonical_element_address (how the emulator
    reads MMA operands), reaches the byte CuTe's tensor holds for every element of the k-block.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from warploom.layout import Sm100SmemDescriptor, SmemTile, WgmmaSmemDescriptor, canonical_element_address
from warploom.targets import get as get_target

from .cutlass_headers import LAYOUT_ATOMS, LAYOUT_TYPES, LayoutCase, LayoutOracle, OracleUnavailable

DESCRIPTOR = {"sm_100a": Sm100SmemDescriptor, "sm_90a": WgmmaSmemDescriptor}


def sweep_tiles():
    """Every swizzle and major at 16 bits on both targets; 8 and 32 bits at 128B on sm_100a."""
    out = []
    for target in DESCRIPTOR:
        for swz in LAYOUT_ATOMS:
            out.append((target, SmemTile(("M", "K"), (128, 64), "bf16", swz), "K"))
            out.append((target, SmemTile(("K", "N"), (64, 128), "bf16", swz), "K"))
    out.append(("sm_100a", SmemTile(("M", "K"), (128, 128), "f8E4M3FN", "128B"), "K"))
    out.append(("sm_100a", SmemTile(("K", "N"), (64, 128), "f8E4M3FN", "128B"), "K"))
    out.append(("sm_100a", SmemTile(("M", "K"), (128, 32), "tf32", "128B"), "K"))
    return out


def layout_case(target: str, tile: SmemTile, k_dim: str) -> LayoutCase:
    """The CuTe tile of the same shape, major and swizzle, its atoms in the order warploom's storage uses:
    boxes one span wide along the contiguous dim, each holding all rows (so along the outer dim first)."""
    major = tile.major(k_dim)
    rows, cols = tile.shape
    mn, k = (rows, cols) if major == "K" else (cols, rows)
    return LayoutCase(target, tile.elem_bits, mn, k, major, tile.swizzle.name,
                      "mn_first" if major == "K" else "k_first")


_bytes_memo: dict = {}


def warploom_bytes(tile: SmemTile, major: str, mn: int, k: int) -> np.ndarray:
    """SmemTile.byte_address of every (mn, k); tiles that differ only in the element type's name (bf16, f16)
    share the work."""
    key = (tile.dims, tile.shape, tile.elem_bits, tile.swizzle.name, major)
    if key in _bytes_memo:
        return _bytes_memo[key]
    out = _bytes_memo[key] = np.empty((mn, k), dtype=np.int64)
    for i in range(mn):
        for j in range(k):
            out[i, j] = tile.byte_address(i, j) if major == "K" else tile.byte_address(j, i)
    return out


@pytest.fixture(scope="session")
def operand_tiles(kernel_cases):
    tiles: dict = {}
    for key, users in kernel_cases.operand_tiles.items():
        target, tile, _ = key
        if tile.swizzle.name in LAYOUT_ATOMS and tile.elem_bits in LAYOUT_TYPES:
            tiles.setdefault(key, set()).update(users)
    for key in sweep_tiles():
        tiles.setdefault(key, set())
    return tiles


@pytest.fixture(scope="session")
def layout_oracle(tmp_path_factory, operand_tiles):
    cases = [layout_case(*key) for key in operand_tiles]
    try:
        return LayoutOracle(tmp_path_factory.mktemp("cutlass_layouts"), cases)
    except OracleUnavailable as e:
        pytest.fail(f"the CUTLASS layout oracle cannot be built: {e}")


def test_kernel_operand_tiles_recorded(kernel_cases):
    targets = {t for t, _, _ in kernel_cases.operand_tiles}
    assert targets == {"sm_100a", "sm_90a"}, \
        f"the lowering read smem operand tiles through SmemTile.operand for {sorted(targets)} only"


def test_descriptor_address_steps_against_cutlass(operand_tiles, layout_oracle, oracle):
    """The formulas the lowering evaluates on IR values for the start-address field
    (layout.descriptors.start_address_field, descriptor_step, k_block_steps), here on ints: each k-block's field
    is the one CUTLASS's descriptor holds for the byte where CuTe's slice starts (make_*_desc stores the shared
    address >> 4 in the 14-bit start_address_ member), and the steps between k-blocks are those fields' distances."""
    from warploom.layout.descriptors import descriptor_step, k_block_steps, start_address_field

    bad = []
    for (target, tile, k_dim), users in operand_tiles.items():
        case = layout_case(target, tile, k_dim)
        got = layout_oracle.results[case]
        words = (oracle.sm100_smem_words([(s, 0, 0, 0, 0, "none") for s in got.starts]) if target == "sm_100a"
                 else oracle.sm90_smem_words([(s, 0, 0, 0, "none") for s in got.starts]))
        fields = [w & 0x3FFF for w in words]
        steps = k_block_steps(tile, len(got.starts), get_target(target).mma_k_of(tile.dtype), k_dim)
        for kb, (start, field) in enumerate(zip(got.starts, fields)):
            mine = (start_address_field(start), descriptor_step(tile.k_block_offset(kb, case.k_block, k_dim)),
                    steps[kb])
            if mine != (field, field - fields[0], field - fields[0]):
                bad.append(f"{target} {tile} over {k_dim}, k-block {kb} at byte {start}: start_address_field, "
                           f"descriptor_step, k_block_steps give {mine}; CUTLASS's field {field}, step "
                           f"{field - fields[0]}")
                break
    # the shared window: CUTLASS keeps the address's bits [4, 18)
    addresses = [0, 16, 0x3FFF0, 0x40000, 0x40400, 0x12345670, 0xFFFFFFF0]
    words = oracle.sm100_smem_words([(a, 0, 0, 0, 0, "none") for a in addresses])
    for a, w in zip(addresses, words):
        if start_address_field(a) != w & 0x3FFF:
            bad.append(f"start_address_field({a:#x}) = {start_address_field(a):#x}; CUTLASS's start_address_ "
                       f"{w & 0x3FFF:#x}")
    if bad:
        pytest.fail(f"{len(bad)} start-address fields disagree with CUTLASS:\n  " + "\n  ".join(bad[:25]),
                    pytrace=False)


def test_operand_tiles_against_cutlass(operand_tiles, layout_oracle):
    bad, unused = [], []
    for (target, tile, k_dim), users in operand_tiles.items():
        who = ", ".join(sorted(users)[:2]) + (f" and {len(users) - 2} more" if len(users) > 2 else "") \
            if users else "sweep"
        what = f"{target} {tile} read over {k_dim} ({who})"
        case = layout_case(target, tile, k_dim)
        got = layout_oracle.results[case]
        theirs = np.array(got.offsets, dtype=np.int64)
        # 1. storage
        ours = warploom_bytes(tile, case.major, case.mn, case.k)
        if not np.array_equal(ours, theirs):
            i, j = map(int, np.argwhere(ours != theirs)[0])
            bad.append(f"{what}: element (mn {i}, k {j}) at byte {ours[i, j]}, CuTe's {case.order} tiling of "
                       f"CUTLASS's {case.major}-major {tile.swizzle} atom holds it at {theirs[i, j]}")
            continue
        mma_k = get_target(target).mma_k_of(tile.dtype)
        if mma_k != case.k_block:
            bad.append(f"{what}: warploom's MMA K for {tile.dtype} is {mma_k}; CUTLASS's descriptors cover "
                       f"{case.k_block} (256 bits)")
            continue
        mn_idx, k_idx = np.meshgrid(np.arange(case.mn), np.arange(case.k_block), indexing="ij")
        # 2. the descriptor warploom builds for the tile: CUTLASS's word, or one that differs only in an LBO or
        # SBO that no element of the tile reaches (a stride over a mode of one atom: CUTLASS writes 0 there)
        cls = DESCRIPTOR[target]
        mine = cls.for_tile(tile, k_dim)
        if mine.encode() != got.words[0]:
            cut = cls.decode(got.words[0])
            same_else = dataclasses.replace(mine, lbo=cut.lbo, sbo=cut.sbo) == cut
            walk = canonical_element_address(mine, mn_idx, k_idx, tile.elem_bits // 8, case.major)
            if same_else and np.array_equal(walk, theirs[:, :case.k_block]):
                unused.append(f"{what}: LBO {mine.lbo} / SBO {mine.sbo}, CUTLASS {cut.lbo} / {cut.sbo}")
            else:
                bad.append(f"{what}: warploom's descriptor {mine.encode():#018x} (LBO {mine.lbo}, SBO {mine.sbo}, "
                           f"{mine.swizzle}), CUTLASS's {got.words[0]:#018x} (LBO {cut.lbo}, SBO {cut.sbo}, "
                           f"{cut.swizzle})")
        # 3. k-blocks and 4. the canonical walk of CUTLASS's descriptors
        for kb, (word, start) in enumerate(zip(got.words, got.starts)):
            step = tile.k_block_offset(kb, mma_k, k_dim)
            if step != start:
                bad.append(f"{what}: k-block {kb} starts at byte {step}, CuTe's slice at {start}")
                break
            desc = dataclasses.replace(cls.decode(word), start_address=start)
            walk = canonical_element_address(desc, mn_idx, k_idx, tile.elem_bits // 8, case.major)
            want = theirs[:, kb * case.k_block:(kb + 1) * case.k_block]
            if not np.array_equal(walk, want):
                i, j = map(int, np.argwhere(walk != want)[0])
                bad.append(f"{what}: k-block {kb}, element (mn {i}, k {j}): warploom reads CUTLASS's descriptor "
                           f"{word:#018x} (start {start}) at byte {walk[i, j]}, CuTe's tensor holds it at "
                           f"{want[i, j]}")
                break
    if bad:
        pytest.fail(f"{len(bad)} operand tiles disagree with CUTLASS:\n  " + "\n  ".join(bad[:25]), pytrace=False)
