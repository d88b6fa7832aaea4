"""warploom.targets: the hardware numbers, the lookup by name, and the checks that use them."""
import pytest

from warploom import targets
from warploom.targets import SM90, SM100, TARGETS


def test_get_by_name_and_unknown_name_lists_the_known_ones():
    assert targets.get("sm_90a") is SM90 and targets.get("sm_100a") is SM100
    assert set(TARGETS) == {"sm_90a", "sm_100a"}
    with pytest.raises(ValueError, match="known targets: sm_100a, sm_90a"):
        targets.get("sm_80")


@pytest.mark.parametrize("t", [SM90, SM100], ids=lambda t: t.name)
def test_shared_limits(t):
    assert t.smem_limit == 232448
    assert t.register_file == 65536
    assert (t.warp_size, t.warpgroup_threads, t.max_threads_per_block) == (32, 128, 1024)
    assert t.setmaxnreg == (24, 256, 8)
    assert t.mbarrier_bytes == 8 and t.smem_base_align == 1024 and t.cluster_max_portable == 8
    assert (t.tma.rank_min, t.tma.rank_max, t.tma.box_dim_min, t.tma.box_dim_max) == (1, 5, 1, 256)
    assert t.tma.global_stride_multiple == 16


def test_target_specific_fields():
    assert (SM90.name, SM90.ptx_features, SM90.tmem) == ("sm_90a", "+ptx80", None)
    assert (SM100.name, SM100.ptx_features) == ("sm_100a", "+ptx86")
    assert "128B_base32B" in SM100.swizzles and "128B_base32B" not in SM90.swizzles
    tm = SM100.tmem
    assert (tm.lanes, tm.columns, tm.cell_bits, tm.alloc_min_columns, tm.alloc_max_columns) == (128, 512, 32, 32, 512)


@pytest.mark.parametrize("dtype, k", [("bf16", 16), ("f16", 16), ("tf32", 8), ("f8E4M3FN", 32), ("f8E5M2", 32),
                                      ("i8", 32)])
def test_mma_k_per_instruction(dtype, k):
    assert SM90.mma_k_of(dtype) == k and SM100.mma_k_of(dtype) == k


def test_mma_kinds_and_sub_byte_inputs_only_on_sm100():
    assert SM100.mma_kind_of("f4E2M1FN") == "f8f6f4" and SM100.mma_k_of("f6E3M2FN") == 32
    assert SM100.mma_kind_of("bf16") == "f16" and SM100.mma_kind_of("u8") == "i8"
    with pytest.raises(ValueError, match="f4E2M1FN"):
        SM90.mma_k_of("f4E2M1FN")


def test_wgmma_shapes():
    for n in (8, 16, 136, 256):
        SM90.check_mma_shape(64, n, "bf16")
    for m, n in ((128, 64), (64, 12), (64, 264), (64, 0)):
        with pytest.raises(ValueError, match=f"m{m}n{n}.*M in \\(64,\\), N in 8..256 step 8"):
            SM90.check_mma_shape(m, n, "bf16")
    with pytest.raises(ValueError, match="no cta_group 2"):
        SM90.check_mma_shape(64, 64, "bf16", cta_group=2)


def test_tcgen05_shapes():
    for m, n in ((64, 8), (128, 256), (128, 72)):
        SM100.check_mma_shape(m, n, "bf16")
    for m, n in ((128, 16), (256, 256), (256, 32)):
        SM100.check_mma_shape(m, n, "bf16", cta_group=2)
    with pytest.raises(ValueError, match="M in \\(64, 128\\)"):
        SM100.check_mma_shape(256, 128, "bf16")
    with pytest.raises(ValueError, match="N in 16..256 step 16"):
        SM100.check_mma_shape(128, 24, "bf16", cta_group=2)


def test_mn_major_operands():
    SM90.check_mma_major("bf16", "MN")
    SM90.check_mma_major("tf32", "K")
    with pytest.raises(ValueError, match="tf32 only K-major"):
        SM90.check_mma_major("tf32", "MN")
    SM100.check_mma_major("tf32", "MN")


def test_element_sizes():
    assert SM100.elem_bits("f4E2M1FN") == 4 and SM90.elem_bytes("bf16") == 2 and SM90.elem_bytes("f8E4M3FN") == 1
    with pytest.raises(ValueError, match="4 bits"):
        SM100.elem_bytes("f4E2M1FN")
    with pytest.raises(ValueError, match="'bf17' is unknown"):
        SM90.elem_bits("bf17")


def test_setmaxnreg_and_cluster_checks():
    for regs in (24, 240, 256):
        SM90.check_setmaxnreg(regs)
    for regs in (16, 260, 100):
        with pytest.raises(ValueError, match="24..256 in steps of 8"):
            SM90.check_setmaxnreg(regs)
    SM100.check_cluster(8)
    with pytest.raises(ValueError, match="portable limit on sm_100a is 8"):
        SM100.check_cluster(16)


def test_tma_box_limits():
    SM90.tma.check_box((64, 256), 16, 128)
    SM90.tma.check_box((8, 64), 16, 0)
    with pytest.raises(ValueError, match="box dim 1 = 512 is outside 1..256"):
        SM90.tma.check_box((64, 512), 16, 128)
    with pytest.raises(ValueError, match="256 bytes, more than the 128-byte swizzle span"):
        SM90.tma.check_box((128, 64), 16, 128)
    with pytest.raises(ValueError, match="not a multiple of 16 bytes"):
        SM90.tma.check_box((4, 64), 16, 0)
    with pytest.raises(ValueError, match="rank 6"):
        SM90.tma.check_box((8,) * 6, 16, 0)
    with pytest.raises(ValueError, match="not a multiple of 16 B"):
        SM90.tma.check_global_stride(100)


def test_a_kernel_names_its_target_or_gets_sm90():
    assert targets.of_kernel({}) is SM90
    assert targets.of_kernel({"target": "sm_100a", "tile": [128, 256, 64]}) is SM100
    with pytest.raises(ValueError, match="unknown target 'sm_80'"):
        targets.of_kernel({"target": "sm_80"})


def test_mma_rows_per_warpgroup_only_where_warpgroups_hold_the_accumulators():
    assert SM90.mma_rows_per_warpgroup == 64
    with pytest.raises(ValueError, match="accumulators in tmem, not in a warpgroup's registers"):
        SM100.mma_rows_per_warpgroup


def test_one_element_size_table():
    """The runtime sizes elements from the targets' table; it keeps no table of its own."""
    from warploom.runtime import dtypes, tensors
    assert not hasattr(dtypes, "BITS")
    for name in dtypes.ELEMENT_TYPES:
        if targets.ELEMENT_BITS[name] % 8 == 0:
            assert tensors.elem_bytes(name) == targets.ELEMENT_BITS[name] // 8
