"""MMA descriptors as values: encode() -> the integer the hardware reads, decode(bits) -> the value back.

- `WgmmaSmemDescriptor`: Hopper wgmma shared-memory matrix descriptor, 64 bits (PTX ISA 9.7.15.5.1.2.2
  "Matrix Descriptor Format").
- `Sm100SmemDescriptor`: tcgen05 shared-memory descriptor, 64 bits (PTX ISA 9.7.16.4.1 "Shared memory
  descriptor").
- `Sm100InstrDescriptor`: tcgen05.mma instruction descriptor for kinds f16, tf32, f8f6f4 and i8, 32 bits
  (PTX ISA 9.7.16.4.2 "Instruction descriptor", Table "kind::tf32, kind::f16, kind::f8f6f4 and kind::i8").

`canonical_element_address(desc, mn, k, elem_bytes, major)` walks a decoded wgmma descriptor through the
ISA's canonical layouts to the smem byte an MMA reads for operand element (mn, k): the one definition the
layout tests check against `SmemTile.byte_address` and the emulator reads operands with.

Encoders refuse what a field cannot hold (naming field, value and range) instead of masking it;
decoders refuse reserved bits and a wrong version. Addresses, LBO and SBO are given in bytes:
the descriptors hold them >> 4, so they must be multiples of 16 below 2^18.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from warploom.layout.ops import INT
from warploom.layout.swizzle import CHUNK_BYTES, Swizzle, from_hopper_code, from_sm100_code, swizzle as as_swizzle
from warploom.layout.tiling import SmemTile

_FIELD14_LIMIT = 1 << 18          # 14 bits of (bytes >> 4)
ADDRESS_UNIT_SHIFT = 4            # the address, LBO and SBO fields count bytes in 16-byte units
SHARED_WINDOW_MASK = (1 << 18) - 1    # the start address is the 18-bit shared-window address


def start_address_field(addr, ops=INT):
    """The start-address field of an MMA smem descriptor for smem byte address `addr` (its shared-window bits in
    16-byte units), on an int or through `ops` (an IR builder namespace; see warploom/layout/ops.py)."""
    return ops.shru(ops.and_(addr, ops.const(SHARED_WINDOW_MASK)), ops.const(ADDRESS_UNIT_SHIFT))


def descriptor_step(byte_offset, ops=INT):
    """What a descriptor's address field moves by for `byte_offset` bytes (a multiple of 16): the step from one
    k-block of a tile to the next, or from a stage's start to a warpgroup's rows."""
    return ops.shru(byte_offset, ops.const(ADDRESS_UNIT_SHIFT))


def k_block_steps(tile: SmemTile, kblocks: int, k: int, k_dim: str = "K") -> list[int]:
    """What the descriptor of `tile` moves by to reach each of its `kblocks` MMA k-blocks of `k` elements along
    `k_dim` (the first is 0): the MMA issues k-block kk from the descriptor plus step kk."""
    return [descriptor_step(tile.k_block_offset(kk, k, k_dim)) for kk in range(kblocks)]


def _bits(value: int, lo: int, width: int) -> int:
    return (value >> lo) & ((1 << width) - 1)


def _enc_bytes(name: str, value: int) -> int:
    if not isinstance(value, int) or value < 0 or value >= _FIELD14_LIMIT or value % 16:
        raise ValueError(f"descriptor {name} = {value!r} B: must be a multiple of 16 in 0..{_FIELD14_LIMIT - 16} "
                         "(it is stored >> 4 in 14 bits); align it to 16 B or move the tile lower in smem")
    return value >> 4


def _enc_int(name: str, value: int, width: int) -> int:
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int) or not 0 <= value < (1 << width):
        raise ValueError(f"descriptor {name} = {value!r}: must be an integer in 0..{(1 << width) - 1} ({width} bits)")
    return value


def _check_reserved(what: str, bits: int, width: int, used: list[tuple[int, int]]) -> None:
    if not 0 <= bits < (1 << width):
        raise ValueError(f"{what} {bits:#x} is not a {width}-bit unsigned value")
    mask = 0
    for lo, w in used:
        mask |= ((1 << w) - 1) << lo
    stray = bits & ~mask
    if stray:
        raise ValueError(f"{what} {bits:#x} has reserved bits set ({stray:#x}): not a descriptor this encoder writes")


# ---- Hopper wgmma ------------------------------------------------------------------------------

_WGMMA_FIELDS = [(0, 14), (16, 14), (32, 14), (49, 3), (62, 2)]


@dataclass(frozen=True)
class WgmmaSmemDescriptor:
    """[0,14) start address >> 4, [16,30) LBO >> 4, [32,46) SBO >> 4, [49,52) base offset,
    [62,64) swizzle (0 none, 1 128B, 2 64B, 3 32B)."""
    start_address: int        # smem byte address (shared window offset)
    lbo: int                  # leading dimension byte offset
    sbo: int                  # stride dimension byte offset
    swizzle: Swizzle
    base_offset: int = 0      # 0 when the swizzle pattern starts on a repeat boundary

    def __post_init__(self):
        object.__setattr__(self, "swizzle", as_swizzle(self.swizzle))

    def encode(self) -> int:
        if self.swizzle.hopper_code is None:
            raise ValueError(f"wgmma descriptor swizzle {self.swizzle}: Hopper has none, 32B, 64B and 128B only")
        return (_enc_bytes("start address", self.start_address)
                | _enc_bytes("LBO", self.lbo) << 16
                | _enc_bytes("SBO", self.sbo) << 32
                | _enc_int("base offset", self.base_offset, 3) << 49
                | self.swizzle.hopper_code << 62)

    def static_bits(self) -> int:
        """Everything but the start address, which the kernel adds at run time."""
        return replace(self, start_address=0).encode()

    @classmethod
    def decode(cls, bits: int) -> WgmmaSmemDescriptor:
        _check_reserved("wgmma smem descriptor", bits, 64, _WGMMA_FIELDS)
        return cls(start_address=_bits(bits, 0, 14) << 4, lbo=_bits(bits, 16, 14) << 4,
                   sbo=_bits(bits, 32, 14) << 4, base_offset=_bits(bits, 49, 3),
                   swizzle=from_hopper_code(_bits(bits, 62, 2)))

    @classmethod
    def for_tile(cls, tile: SmemTile, k_dim: str = "K", start_address: int = 0) -> WgmmaSmemDescriptor:
        """The descriptor of `tile` read as a wgmma operand contracting over `k_dim`."""
        op = tile.operand(k_dim)
        return cls(start_address=start_address, lbo=op.lbo, sbo=op.sbo, swizzle=op.swizzle)


def canonical_element_address(desc: WgmmaSmemDescriptor | Sm100SmemDescriptor, mn, k, elem_bytes: int, major: str):
    """Shared-memory byte address (the descriptor's 18-bit window) of operand element (mn, k) read through
    `desc`: mn counts along M (operand A) or N (operand B), k along K; ints or numpy arrays.

    Hopper wgmma and sm_100 tcgen05 descriptors share the canonical layouts (PTX ISA 9.7.16.3.3 "Canonical
    Layouts" lists the same eight as 9.7.15.5.1.2), so either descriptor is walked the same way; of the
    sm_100 extras, the absolute LBO mode (bit 52, sm_103a) and the 128B swizzle with 32-byte atoms are
    refused.

    PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout", canonical layouts in units of T = 16 bytes of
    elements, c = span / 16 (span = the swizzle width, 16 B without swizzle):
      K-major  none      ((8,m),(T,2k)):((1T,SBO),(1,LBO))
      K-major  swizzled  ((8,m),(T,2k)):((cT,SBO),(1,T))
      MN-major none      ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
      MN-major swizzled  ((T,c,m),(8,k)):((1,T,LBO),(cT,SBO))
    The swizzle then permutes the *absolute* address bits (bits [4,7) ^= bits [7,10) for 128B), so a k-block
    that starts mid-pattern (start + 32 B) still reads what TMA wrote; base offset 0 says the pattern is
    aligned to the address, which is the only case modelled here."""
    if getattr(desc, "lbo_mode", 0):
        raise ValueError("descriptor LBO mode 1 (absolute leading-dimension address, sm_103a): only the relative "
                         "byte offset is modelled")
    if desc.swizzle.name == "128B_base32B":
        raise ValueError("the 128B swizzle with 32-byte atoms: its canonical layout is not modelled")
    if desc.base_offset:
        raise ValueError(f"wgmma descriptor base offset {desc.base_offset}: only base offset 0 (tiles aligned to "
                         f"the {desc.swizzle.repeat_bytes}-byte swizzle repeat) is modelled; align the tile")
    if major not in ("K", "MN"):
        raise ValueError(f"operand major {major!r}: 'K' or 'MN'")
    per_chunk = CHUNK_BYTES // elem_bytes          # T: elements in 16 bytes
    span = desc.swizzle.span_bytes
    if major == "K" and not desc.swizzle.swizzled:
        linear = (mn % 8) * CHUNK_BYTES + (mn // 8) * desc.sbo + (k % per_chunk) * elem_bytes \
            + (k // per_chunk) * desc.lbo
    elif major == "K":
        linear = (mn % 8) * span + (mn // 8) * desc.sbo + k * elem_bytes
    elif not desc.swizzle.swizzled:
        linear = (mn % per_chunk) * elem_bytes + (mn // per_chunk) * desc.sbo + (k % 8) * CHUNK_BYTES \
            + (k // 8) * desc.lbo
    else:
        per_span = span // elem_bytes
        linear = (mn % per_span) * elem_bytes + (mn // per_span) * desc.lbo + (k % 8) * span + (k // 8) * desc.sbo
    return desc.swizzle.apply(desc.start_address + linear)


# ---- Blackwell tcgen05 shared memory descriptor ------------------------------------------------

_SM100_VERSION = 0b001
_SM100_FIELDS = [(0, 14), (16, 14), (32, 14), (46, 3), (49, 3), (52, 1), (61, 3)]


@dataclass(frozen=True)
class Sm100SmemDescriptor:
    """[0,14) start address >> 4, [16,30) LBO >> 4, [32,46) SBO >> 4, [46,49) = 0b001, [49,52) base
    offset, 52 LBO mode (0 relative, 1 absolute), [61,64) swizzle (0 none, 1 128B_base32B, 2 128B,
    4 64B, 6 32B)."""
    start_address: int
    lbo: int
    sbo: int
    swizzle: Swizzle
    base_offset: int = 0
    lbo_mode: int = 0

    def __post_init__(self):
        object.__setattr__(self, "swizzle", as_swizzle(self.swizzle))

    def encode(self) -> int:
        return (_enc_bytes("start address", self.start_address)
                | _enc_bytes("LBO", self.lbo) << 16
                | _enc_bytes("SBO", self.sbo) << 32
                | _SM100_VERSION << 46
                | _enc_int("base offset", self.base_offset, 3) << 49
                | _enc_int("LBO mode", self.lbo_mode, 1) << 52
                | self.swizzle.sm100_code << 61)

    def static_bits(self) -> int:
        """Everything but the start address, which the kernel adds at run time."""
        return replace(self, start_address=0).encode()

    @classmethod
    def decode(cls, bits: int) -> Sm100SmemDescriptor:
        _check_reserved("tcgen05 smem descriptor", bits, 64, _SM100_FIELDS)
        version = _bits(bits, 46, 3)
        if version != _SM100_VERSION:
            raise ValueError(f"tcgen05 smem descriptor {bits:#x}: bits [46,49) = {version:#b}, must be 0b001")
        return cls(start_address=_bits(bits, 0, 14) << 4, lbo=_bits(bits, 16, 14) << 4,
                   sbo=_bits(bits, 32, 14) << 4, base_offset=_bits(bits, 49, 3),
                   lbo_mode=_bits(bits, 52, 1), swizzle=from_sm100_code(_bits(bits, 61, 3)))

    @classmethod
    def for_tile(cls, tile: SmemTile, k_dim: str = "K", start_address: int = 0) -> Sm100SmemDescriptor:
        """The descriptor of `tile` read as a tcgen05.mma operand contracting over `k_dim`."""
        op = tile.operand(k_dim)
        return cls(start_address=start_address, lbo=op.lbo, sbo=op.sbo, swizzle=op.swizzle)


# ---- Blackwell tcgen05 instruction descriptor --------------------------------------------------

# Operand format codes per kind (bits [7,10) for A, [10,13) for B).
_AB_FORMATS = {
    "f16": {"f16": 0, "bf16": 1},
    "tf32": {"tf32": 2},
    "f8f6f4": {"f8E4M3FN": 0, "f8E5M2": 1, "f6E2M3FN": 3, "f6E3M2FN": 4, "f4E2M1FN": 5},
    "i8": {"u8": 0, "i8": 1},
}
# Accumulator format codes per kind (bits [4,6)).
_D_FORMATS = {
    "f16": {"f16": 0, "f32": 1},
    "tf32": {"f32": 1},
    "f8f6f4": {"f16": 0, "f32": 1},
    "i8": {"i32": 2},
}
_INSTR_FIELDS = [(0, 2), (2, 1), (3, 1), (4, 2), (7, 3), (10, 3), (13, 1), (14, 1), (15, 1), (16, 1),
                 (17, 6), (24, 5), (30, 2)]
_MAJOR = {"K": 0, "MN": 1}


def kind_of(dtype: str) -> str:
    for kind, formats in _AB_FORMATS.items():
        if dtype in formats:
            return kind
    raise ValueError(f"tcgen05.mma operand type {dtype!r}: the dense kinds take "
                     f"{sorted(d for f in _AB_FORMATS.values() for d in f)}")


@dataclass(frozen=True)
class Sm100InstrDescriptor:
    """[0,2) sparsity selector, 2 sparse, 3 saturate (i8), [4,6) D format, [7,10) A format, [10,13) B format,
    13/14 negate A/B, 15/16 transpose A/B (MN-major), [17,23) N >> 3, [24,29) M >> 4, [30,32) max shift (.ws).
    Bits 6, 23 and 29 are reserved."""
    a_dtype: str
    b_dtype: str
    d_dtype: str
    m: int
    n: int
    a_major: str = "K"
    b_major: str = "K"
    negate_a: bool = False
    negate_b: bool = False
    sparse: bool = False
    sparse_selector: int = 0
    saturate: bool = False
    max_shift: int = 0

    @property
    def kind(self) -> str:
        return kind_of(self.a_dtype)

    def encode(self) -> int:
        kind = self.kind
        if kind_of(self.b_dtype) != kind:
            raise ValueError(f"tcgen05.mma A is {self.a_dtype} (kind::{kind}) but B is {self.b_dtype} "
                             f"(kind::{kind_of(self.b_dtype)}): both operands must be of one kind")
        if self.d_dtype not in _D_FORMATS[kind]:
            raise ValueError(f"tcgen05.mma kind::{kind} accumulates into {sorted(_D_FORMATS[kind])}, "
                             f"not {self.d_dtype!r}")
        for name, major in (("A", self.a_major), ("B", self.b_major)):
            if major not in _MAJOR:
                raise ValueError(f"tcgen05.mma {name} major {major!r}: 'K' or 'MN'")
        if kind == "i8" and (self.negate_a or self.negate_b):
            raise ValueError("tcgen05.mma kind::i8 cannot negate A or B (the negate bits must be 0)")
        if kind != "i8" and self.saturate:
            raise ValueError(f"tcgen05.mma kind::{kind}: saturate applies to kind::i8 only")
        if self.m % 16 or not 0 < self.m >> 4 < 32:
            raise ValueError(f"instruction descriptor M = {self.m}: must be a multiple of 16 in 16..496 "
                             "(stored >> 4 in 5 bits)")
        if self.n % 8 or not 0 < self.n >> 3 < 64:
            raise ValueError(f"instruction descriptor N = {self.n}: must be a multiple of 8 in 8..504 "
                             "(stored >> 3 in 6 bits)")
        if not self.sparse and self.sparse_selector:
            raise ValueError(f"sparsity selector {self.sparse_selector} on a dense MMA: set sparse=True or use 0")
        return (_enc_int("sparsity selector", self.sparse_selector, 2)
                | _enc_int("sparse", self.sparse, 1) << 2
                | _enc_int("saturate", self.saturate, 1) << 3
                | _D_FORMATS[kind][self.d_dtype] << 4
                | _AB_FORMATS[kind][self.a_dtype] << 7
                | _AB_FORMATS[kind][self.b_dtype] << 10
                | _enc_int("negate A", self.negate_a, 1) << 13
                | _enc_int("negate B", self.negate_b, 1) << 14
                | _MAJOR[self.a_major] << 15
                | _MAJOR[self.b_major] << 16
                | (self.n >> 3) << 17
                | (self.m >> 4) << 24
                | _enc_int("max shift", self.max_shift, 2) << 30)

    @classmethod
    def decode(cls, bits: int, kind: str) -> Sm100InstrDescriptor:
        """The descriptor back from its 32 bits; the kind is not in the bits (it is part of the opcode)."""
        if kind not in _AB_FORMATS:
            raise ValueError(f"tcgen05.mma kind {kind!r}: this descriptor covers {sorted(_AB_FORMATS)}")
        _check_reserved("tcgen05 instruction descriptor", bits, 32, _INSTR_FIELDS)

        def lookup(table: dict[str, int], code: int, field: str) -> str:
            for name, c in table.items():
                if c == code:
                    return name
            raise ValueError(f"tcgen05 instruction descriptor {bits:#x}: {field} code {code} is not defined "
                             f"for kind::{kind} (codes {table})")

        return cls(a_dtype=lookup(_AB_FORMATS[kind], _bits(bits, 7, 3), "A format"),
                   b_dtype=lookup(_AB_FORMATS[kind], _bits(bits, 10, 3), "B format"),
                   d_dtype=lookup(_D_FORMATS[kind], _bits(bits, 4, 2), "D format"),
                   m=_bits(bits, 24, 5) << 4, n=_bits(bits, 17, 6) << 3,
                   a_major="MN" if _bits(bits, 15, 1) else "K", b_major="MN" if _bits(bits, 16, 1) else "K",
                   negate_a=bool(_bits(bits, 13, 1)), negate_b=bool(_bits(bits, 14, 1)),
                   sparse=bool(_bits(bits, 2, 1)), sparse_selector=_bits(bits, 0, 2),
                   saturate=bool(_bits(bits, 3, 1)), max_shift=_bits(bits, 30, 2))
