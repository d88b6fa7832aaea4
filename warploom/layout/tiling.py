"""`SmemTile`: a 2-D operand tile in shared memory, filled by TMA and read by an MMA.

The tile is the single source of everything derived from its layout: the TMA box
and where each box lands, the tile's bytes and alignment, the physical byte of any
logical element (what the emulator reads), and the MMA-facing view given which
dim is K (major-ness, leading/stride byte offsets, the start of each MMA k-block
and of each warpgroup's rows).

Storage: the contiguous dim is cut into boxes one swizzle span wide (16 bytes
without swizzle); box j holds all rows of that slice, rows x span bytes, and the
boxes follow one another. Inside a box row r starts at r x span and the swizzle
permutes 16-byte (or 32-byte) granules within each repeat.

LBO/SBO follow PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout" (canonical layouts,
T = 16 bytes of elements, c = span / 16):
  K-major  none      ((8,m),(T,2k)):((1T,SBO),(1,LBO))    LBO = next 16-byte K chunk = one box
  K-major  swizzled  ((8,m),(T,2k)):((cT,SBO),(1,T))      LBO unused, SBO = 8 rows x span
  MN-major none      ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)) LBO = 8 K rows, SBO = next 16-byte MN chunk
  MN-major swizzled  ((T,c,m),(8,k)):((1,T,LBO),(cT,SBO)) LBO = next span-wide MN chunk, SBO = 8 K rows
"""
from __future__ import annotations

from dataclasses import dataclass

from warploom.layout.swizzle import CHUNK_BYTES, Swizzle, swizzle as as_swizzle
from warploom.targets import ELEMENT_BITS, TMA_LIMITS

# A K-major swizzled descriptor ignores LBO; 16 B (encoded 1) is the conventional filler.
UNUSED_LBO = CHUNK_BYTES


@dataclass(frozen=True)
class MmaOperandLayout:
    """What an MMA smem descriptor needs to know about a tile, in bytes."""
    major: str            # "K": K is the contiguous dim; "MN": M or N is
    lbo: int              # leading dimension byte offset
    sbo: int              # stride dimension byte offset
    swizzle: Swizzle


@dataclass(frozen=True)
class SmemTile:
    dims: tuple[str, str]       # (outer, contiguous) dim names, e.g. ("M", "K") or ("K", "N")
    shape: tuple[int, int]      # (rows, cols) in elements
    dtype: str
    swizzle: Swizzle

    def __init__(self, dims, shape, dtype: str, swizzle):
        object.__setattr__(self, "dims", tuple(dims))
        object.__setattr__(self, "shape", tuple(int(v) for v in shape))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "swizzle", as_swizzle(swizzle))
        self._check()

    def _check(self) -> None:
        if len(self.dims) != 2 or len(self.shape) != 2 or self.dims[0] == self.dims[1]:
            raise ValueError(f"smem tile dims {self.dims} shape {self.shape}: give two distinct dims and two sizes")
        if self.dtype not in ELEMENT_BITS:
            raise ValueError(f"smem tile element type {self.dtype!r}: known types are {sorted(ELEMENT_BITS)}")
        rows, cols = self.shape
        if rows <= 0 or rows % 8:
            raise ValueError(f"smem tile {self}: {rows} rows is not a positive multiple of 8 (the core-matrix "
                             "height MMA descriptors step over); pad the tile")
        if (cols * self.elem_bits) % (8 * self.span):
            raise ValueError(f"smem tile {self}: its contiguous dim is {cols * self.elem_bits / 8:g} bytes, not a "
                             f"multiple of the {self.span}-byte span of swizzle {self.swizzle}; pick another "
                             "swizzle or widen the tile")
        TMA_LIMITS.check_box(self.box, self.elem_bits, self.swizzle.bytes)

    def __str__(self) -> str:
        return (f"{self.dims[0]}{self.dims[1]} {self.shape[0]}x{self.shape[1]} {self.dtype} "
                f"swizzle {self.swizzle}")

    # ---- storage -------------------------------------------------------------------------
    @property
    def elem_bits(self) -> int:
        return ELEMENT_BITS[self.dtype]

    @property
    def span(self) -> int:
        """Bytes of one stored row of a box: the swizzle span (16 without swizzle)."""
        return self.swizzle.span_bytes

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def row_bytes(self) -> int:
        """Bytes of one logical row (the whole contiguous dim)."""
        return self.shape[1] * self.elem_bits // 8

    @property
    def box(self) -> tuple[int, int]:
        """The TMA box, innermost dim first (cuTensorMapEncodeTiled order): (span in elements, rows)."""
        return (self.span * 8 // self.elem_bits, self.rows)

    @property
    def num_boxes(self) -> int:
        return self.row_bytes // self.span

    @property
    def box_bytes(self) -> int:
        return self.rows * self.span

    def box_offset(self, j: int) -> int:
        """Byte offset of box j inside the tile."""
        if not 0 <= j < self.num_boxes:
            raise ValueError(f"box {j} of smem tile {self}: it has boxes 0..{self.num_boxes - 1}")
        return j * self.box_bytes

    def box_start(self, j: int) -> int:
        """The element coordinate along the contiguous dim where box j starts (its TMA coordinate offset)."""
        self.box_offset(j)
        return j * self.box[0]

    @property
    def bytes(self) -> int:
        return self.rows * self.row_bytes

    @property
    def align(self) -> int:
        """Alignment the tile's smem offset needs: the swizzle repeat (descriptor base offset 0)
        and at least the TMA destination alignment."""
        return max(self.swizzle.repeat_bytes, TMA_LIMITS.smem_dst_align)

    def byte_address(self, row: int, col: int) -> int:
        """Physical byte offset, from the tile start, of logical element (row, col), swizzle included.
        For sub-byte types it is the byte holding the element."""
        rows, cols = self.shape
        if not (0 <= row < rows and 0 <= col < cols):
            raise ValueError(f"element ({row}, {col}) is outside smem tile {self}")
        col_byte = col * self.elem_bits // 8
        box, within = divmod(col_byte, self.span)
        return self.swizzle.apply(box * self.box_bytes + row * self.span + within)

    # ---- the MMA view --------------------------------------------------------------------
    def major(self, k_dim: str = "K") -> str:
        """"K" if K is the contiguous dim, "MN" if it is the outer one."""
        if k_dim == self.dims[1]:
            return "K"
        if k_dim == self.dims[0]:
            return "MN"
        raise ValueError(f"smem tile {self} has no dim {k_dim!r} to contract over; its dims are {self.dims}")

    def k_extent(self, k_dim: str = "K") -> int:
        return self.shape[1] if self.major(k_dim) == "K" else self.shape[0]

    def operand(self, k_dim: str = "K") -> MmaOperandLayout:
        """Major-ness and descriptor LBO/SBO of this tile read as an MMA operand."""
        major = self.major(k_dim)
        atom = 8 * self.span                 # 8 rows of one box: the core-matrix group stride
        if self.swizzle.atom_rows != 8:
            raise ValueError(f"smem tile {self}: the {self.swizzle} swizzle has {self.swizzle.atom_rows}-row atoms; "
                             "warploom derives MMA operands only for 8-row atoms (none, 32B, 64B, 128B)")
        if major == "K":
            lbo = self.box_bytes if not self.swizzle.swizzled else UNUSED_LBO
            return MmaOperandLayout("K", lbo=lbo, sbo=atom, swizzle=self.swizzle)
        if not self.swizzle.swizzled:
            return MmaOperandLayout("MN", lbo=atom, sbo=self.box_bytes, swizzle=self.swizzle)
        return MmaOperandLayout("MN", lbo=self.box_bytes, sbo=atom, swizzle=self.swizzle)

    def k_block_offset(self, kk: int, k: int, k_dim: str = "K") -> int:
        """Byte offset of the operand of MMA k-block `kk`, each block `k` elements of K (target.mma_k_of)."""
        extent = self.k_extent(k_dim)
        if k <= 0 or kk < 0 or (kk + 1) * k > extent:
            raise ValueError(f"MMA k-block {kk} of {k} elements reaches past K = {extent} of smem tile {self}")
        if self.major(k_dim) == "MN":
            if k % 8:
                raise ValueError(f"MMA k = {k} on MN-major smem tile {self}: k-blocks must cover whole 8-row groups")
            return kk * k * self.span
        start = kk * k * self.elem_bits // 8
        step = k * self.elem_bits // 8
        # one instruction's K slice must sit inside one box (or be whole 16-byte chunks without swizzle)
        if step % CHUNK_BYTES or (self.swizzle.swizzled and start // self.span != (start + step - 1) // self.span):
            raise ValueError(f"MMA k = {k} ({step} B) on K-major smem tile {self} straddles a "
                             f"{self.span}-byte swizzle span; use a k that divides the span")
        box, within = divmod(start, self.span)
        return box * self.box_bytes + within

    def sub_tile_offset(self, dim: str, index: int, extent: int) -> int:
        """Byte offset where sub-tile `index` of `extent` elements along `dim` starts, e.g. the 64 rows of A
        warpgroup w reads (`sub_tile_offset("M", w, 64)`) or the N half of B one MMA reads. The
        descriptor's LBO/SBO then reach the rest of the sub-tile."""
        if dim not in self.dims:
            raise ValueError(f"smem tile {self} has no dim {dim!r}; its dims are {self.dims}")
        size = self.shape[self.dims.index(dim)]
        if extent <= 0 or index < 0 or (index + 1) * extent > size:
            raise ValueError(f"sub-tile {index} of {extent} along {dim} reaches past {size} in smem tile {self}")
        if dim == self.dims[0]:
            if extent % 8:
                raise ValueError(f"sub-tile of {extent} rows of smem tile {self}: rows must come in groups of 8")
            return index * extent * self.span
        extent_bytes = extent * self.elem_bits // 8
        if extent_bytes % self.span:
            raise ValueError(f"sub-tile of {extent} elements along {dim} ({extent_bytes} B) of smem tile {self} "
                             f"does not start on a {self.span}-byte box; use a multiple of {self.box[0]}")
        return index * (extent_bytes // self.span) * self.box_bytes
