"""The sm_100a (FA4-style) attention's plans, checked against an independent formula from its configuration, in the
order of the seed's SM100AttentionSMem: Q tiles, K stages, V stages, correction rows, then the TMEM address and the
mbarriers (warploom puts the barriers last); O written back into the Q tiles. TMEM: S per Q tile, P (16-bit) in
S's columns, O per Q tile (docs/attention-sm100.md)."""
import pytest

from warploom.build import planned_sm100_attention

BLOCK_M, Q_TILES, BLOCK_N, KV_STAGES, ELEM_BYTES, LANES = 128, 2, 128, 2, 2, 128


def expected_smem(d: int) -> dict:
    q_tile = BLOCK_M * d * ELEM_BYTES
    kv_stage = BLOCK_N * d * ELEM_BYTES
    q = 0
    k = Q_TILES * q_tile                                   # the seed's kv_byte_offset = q_bytes
    v = k + KV_STAGES * kv_stage
    correction = v + KV_STAGES * kv_stage                  # the seed's correction_byte_offset
    correction_bytes = Q_TILES * 2 * LANES * 4             # two floats per row of each Q tile: factor and row sum
    tmem_addr = correction + correction_bytes
    mbarriers = -(-(tmem_addr + 4) // 8) * 8              # the next 8-byte boundary after the 4-byte slot
    return {"q0": (q, q_tile), "q1": (q + q_tile, q_tile), "k": (k, KV_STAGES * kv_stage),
            "v": (v, KV_STAGES * kv_stage), "o0_out": (q, q_tile), "o1_out": (q + q_tile, q_tile),
            "correction": (correction, correction_bytes), "tmem_addr": (tmem_addr, 4),
            # q_full per Q tile, full + empty per K and V stage, and per Q tile s_full, p_full, o_full, o_ready
            "mbarriers": (mbarriers, 8 * (Q_TILES + 2 * 2 * KV_STAGES + 4 * Q_TILES))}


def expected_tmem(d: int) -> dict:
    s_cols, p_cols, o_cols = BLOCK_N, BLOCK_N * 16 // 32, d      # f32 S, 16-bit P two per 32-bit cell, f32 O
    return {"s0": (0, s_cols), "s1": (s_cols, s_cols), "p0": (0, p_cols), "p1": (s_cols, p_cols),
            "o0": (2 * s_cols, o_cols), "o1": (2 * s_cols + o_cols, o_cols)}


@pytest.mark.parametrize("d", [64, 128])
def test_every_offset_follows_from_the_configuration(d):
    p = planned_sm100_attention("bf16", d)
    assert p.attrs["q_tiles"] == Q_TILES and list(p.attrs["tile"]) == [Q_TILES * BLOCK_M, BLOCK_N, d]
    smem = {r.name: (r.offset, r.size) for r in p.regions.values() if r.space == "smem"}
    assert smem == expected_smem(d)
    tmem = {r.name: (r.offset, r.size) for r in p.regions.values() if r.space == "tmem"}
    assert tmem == expected_tmem(d)
    used = max(o + c for o, c in expected_tmem(d).values())
    assert p.attrs["tmem_columns"] == 1 << (used - 1).bit_length()              # 512 at both head dims
    assert p.regions["p0"].aliases == ("s0",) and p.regions["o0_out"].aliases == ("q0",)
    assert p.smem_bytes == expected_smem(d)["mbarriers"][0] + expected_smem(d)["mbarriers"][1] + 1024


def test_the_roles_and_their_registers_fill_the_register_file():
    p = planned_sm100_attention("f16", 128, causal=True)
    roles = {r.name: (r.first_warp, r.warps, r.issue, r.regs) for r in p.roles}
    assert roles == {"softmax0": (0, 4, "warpgroup", 168), "softmax1": (4, 4, "warpgroup", 168),
                     "correction": (8, 4, "warpgroup", 88), "mma": (12, 1, "thread", 88),
                     "load": (13, 1, "thread", 88), "spare": (14, 2, "warp", 88)}
    assert p.threads == 512 and 128 * (168 + 168 + 80 + 88) == 64512 <= 65536
    assert p.attrs["causal"] is True


@pytest.mark.parametrize("d", [64, 128])
def test_the_shared_kv_ring_follows_from_the_configuration(d):
    """use_shared_kv: K and V tiles pass through one ring of SLOTS slots (K of block j in slot 2j % SLOTS, V in
    (2j + 1) % SLOTS), right after the Q tiles as in the seed; its full and empty barriers have one per slot."""
    slots = 3
    p = planned_sm100_attention("bf16", d, shared_kv=True)
    q_tile, kv_slot = BLOCK_M * d * ELEM_BYTES, BLOCK_N * d * ELEM_BYTES
    kv = Q_TILES * q_tile
    correction = kv + slots * kv_slot
    tmem_addr = correction + Q_TILES * 2 * LANES * 4
    mbarriers = -(-(tmem_addr + 4) // 8) * 8
    smem = {r.name: (r.offset, r.size) for r in p.regions.values() if r.space == "smem"}
    assert smem == {"q0": (0, q_tile), "q1": (q_tile, q_tile), "kv": (kv, slots * kv_slot), "o0_out": (0, q_tile),
                    "o1_out": (q_tile, q_tile), "correction": (correction, Q_TILES * 2 * LANES * 4),
                    "tmem_addr": (tmem_addr, 4), "mbarriers": (mbarriers, 8 * (Q_TILES + 2 * slots + 4 * Q_TILES))}
    ring = p.rings["kv"]
    assert (ring.stages, ring.uses, ring.regions) == (slots, 2, ("kv",)) and "k" not in p.rings
    assert p.barriers["kv_full"].count == slots and p.barriers["kv_full"].tx_bytes == kv_slot
    assert p.attrs["shared_kv"] is True and p.attrs["stages"] == slots
