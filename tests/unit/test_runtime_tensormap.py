"""TMA layout rules, checked in Python before the driver is called (CPU only: fake tensors)."""
import pytest

from warploom.runtime.artifact import TensorMapSpec
from warploom.runtime.tensormap import TmaLayoutError, check_tma_layout
from warploom.runtime.tensors import DeviceTensor, contiguous_strides

BASE = 0x7F00_0000_0000  # a 16-byte aligned fake device address


def tensor(shape, dtype="bf16", strides=None, ptr=BASE):
    return DeviceTensor(ptr=ptr, shape=tuple(shape), strides=tuple(strides or contiguous_strides(shape)),
                        dtype=dtype, device=0, framework="cai", obj=None)


def spec(box=(64, 128), swizzle=128, dtype="bf16", dims=("K", "M")):
    return TensorMapSpec("a_map", "A", dtype, box, swizzle, dims)


def test_valid_row_major_2d():
    lay = check_tma_layout(spec(), tensor((4096, 1024)), [1, 0])  # A[M, K], K innermost
    assert lay.data_type == "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"
    assert lay.global_dims == (1024, 4096)
    assert lay.global_strides == (2048,)
    assert lay.box == (64, 128) and lay.swizzle == "CU_TENSOR_MAP_SWIZZLE_128B"
    assert lay.l2_promotion == "CU_TENSOR_MAP_L2_PROMOTION_L2_128B"
    assert lay.oob_fill == "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"


def test_valid_variants():
    # Column-major B[K, N] read with N innermost; fp8 travels as UINT8; f32 with 32-B swizzle.
    t = tensor((512, 256), strides=(1, 512))
    assert check_tma_layout(spec(), t, [0, 1]).global_dims == (512, 256)
    lay = check_tma_layout(spec(box=(128, 64), dtype="e4m3"), tensor((64, 256), "f8E4M3FN"), [1, 0])
    assert lay.data_type == "CU_TENSOR_MAP_DATA_TYPE_UINT8"
    check_tma_layout(spec(box=(8, 16), swizzle=32, dtype="f32"), tensor((16, 8), "f32"), [1, 0])
    # 4-d attention tensor [B, S, H, D] with D innermost, box over (D, S), B and H unit boxes.
    t = tensor((2, 1000, 8, 128))
    lay = check_tma_layout(TensorMapSpec("q", "Q", "bf16", (64, 1, 128, 1), 128, ("D", "H", "S", "B")), t,
                           [3, 2, 1, 0])
    assert lay.global_dims == (128, 8, 1000, 2)
    assert lay.global_strides == (256, 2048, 2048 * 1000)


def test_size_one_axes_get_a_legal_stride():
    # torch may report stride 1 for a size-1 axis; it never moves the address, so it is replaced.
    lay = check_tma_layout(spec(), tensor((1, 64), strides=(1, 1)), [1, 0])
    assert lay.global_strides == (128,)
    # A size-1 axis may also be left out of dims_order.
    lay = check_tma_layout(spec(), tensor((1, 256, 64)), [2, 1])
    assert lay.global_dims == (64, 256)


@pytest.mark.parametrize("make, order, words", [
    (lambda: tensor((128, 64), ptr=BASE + 8), [1, 0], ["0x7f0000000008", "16-byte aligned", "clone"]),
    (lambda: tensor((128, 64), strides=(1, 128)), [1, 0], ["stride 128", "stride 1", "contiguous"]),
    (lambda: tensor((128, 60), strides=(60, 1)), [1, 0], ["120 bytes", "multiple of 16", "multiple of 8"]),
    (lambda: tensor((2, 2**20, 2**20), strides=(2**40, 2**20, 1)), [2, 1, 0], ["2^40"]),
    (lambda: tensor((2**32 + 1, 64)), [1, 0], ["4294967297", "2^32"]),
    (lambda: tensor((0, 64)), [1, 0], ["size 0", "skip the launch"]),
    (lambda: tensor((2,) * 6), [5, 4, 3, 2, 1, 0], ["rank 6", "1..5"]),
])
def test_tensor_violations(make, order, words):
    rank = len(order)
    box = (64,) + (1,) * (rank - 1)
    s = TensorMapSpec("a_map", "A", "bf16", box, 128, tuple(f"d{i}" for i in range(rank)))
    with pytest.raises(TmaLayoutError) as info:
        check_tma_layout(s, make(), order)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    assert "a_map" in str(info.value)


@pytest.mark.parametrize("box, swizzle, words", [
    ((257, 1), 0, ["box[0] = 257", "1..256"]),
    ((64, 0), 128, ["box[1] = 0"]),
    ((4, 16), 0, ["8 bytes", "multiple of 16", "multiple of 8"]),
    ((128, 16), 128, ["256 bytes exceeds the 128-byte swizzle", "box[0] <= 64"]),
    ((32, 16), 32, ["64 bytes exceeds the 32-byte swizzle", "box[0] <= 16"]),
])
def test_box_violations(box, swizzle, words):
    with pytest.raises(TmaLayoutError) as info:
        check_tma_layout(spec(box=box, swizzle=swizzle), tensor((512, 512)), [1, 0])
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_tma_layout_error_is_value_error():
    assert issubclass(TmaLayoutError, ValueError)


def test_unsupported_dtype_and_mismatch():
    with pytest.raises(TypeError, match="built for bf16 but the tensor is f16"):
        check_tma_layout(spec(), tensor((128, 64), "f16"), [1, 0])
    with pytest.raises(TmaLayoutError, match="f4E2M1FN has no TMA data type"):
        check_tma_layout(spec(dtype="f4E2M1FN"), tensor((128, 64), "f4E2M1FN"), [1, 0])


def test_bad_dims_order():
    with pytest.raises(ValueError, match="distinct axes"):
        check_tma_layout(spec(), tensor((128, 64)), [1, 1])
    with pytest.raises(ValueError, match=r"axes \[0\] .* not in dims_order"):
        check_tma_layout(TensorMapSpec("a_map", "A", "bf16", (64,), 128, ("K",)), tensor((128, 64)), [1])
    with pytest.raises(ValueError, match="box"):
        check_tma_layout(spec(), tensor((2, 128, 64)), [2, 1, 0])
