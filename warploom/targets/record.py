"""The record types of `warploom.targets`: what a target's hardware facts are (`Target` and its parts: TMA limits, MMA
shapes, Tensor Memory geometry, element widths). The per-architecture records (sm90.py, sm100.py) fill them in and
`warploom.targets` registers them; this module imports neither, so the package has no import cycle."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

# Storage width of each element type, by its MLIR spelling. tf32 is stored in 32 bits.
ELEMENT_BITS: Mapping[str, int] = MappingProxyType({
    "f64": 64, "f32": 32, "tf32": 32, "bf16": 16, "f16": 16,
    "f8E4M3FN": 8, "f8E5M2": 8, "f6E2M3FN": 6, "f6E3M2FN": 6, "f4E2M1FN": 4,
    "i32": 32, "i8": 8, "u8": 8,
})


@dataclass(frozen=True)
class TmaLimits:
    """cuTensorMapEncodeTiled limits (CUDA Driver API "Tensor Map Object Management"; PTX ISA "Tensors")."""
    rank_min: int = 1
    rank_max: int = 5
    box_dim_min: int = 1
    box_dim_max: int = 256
    box_inner_bytes_multiple: int = 16     # boxDim[0] * element size
    global_stride_multiple: int = 16       # every global stride in bytes
    global_address_align: int = 16
    smem_dst_align: int = 128

    def check_box(self, box: tuple[int, ...], elem_bits: int, swizzle_bytes: int) -> None:
        """Raise unless a TMA box (innermost dim first) can be encoded with this swizzle span (0 = none)."""
        if not self.rank_min <= len(box) <= self.rank_max:
            raise ValueError(f"TMA box {box} has rank {len(box)}; tensor maps take rank "
                             f"{self.rank_min}..{self.rank_max}: merge or split dims")
        for i, d in enumerate(box):
            if not self.box_dim_min <= d <= self.box_dim_max:
                raise ValueError(f"TMA box dim {i} = {d} is outside {self.box_dim_min}..{self.box_dim_max}: "
                                 "split the tile into several boxes")
        inner_bits = box[0] * elem_bits
        if inner_bits % (8 * self.box_inner_bytes_multiple):
            raise ValueError(f"TMA box inner dim {box[0]} x {elem_bits} bits is not a multiple of "
                             f"{self.box_inner_bytes_multiple} bytes: widen the inner dim")
        if swizzle_bytes and inner_bits // 8 > swizzle_bytes:
            raise ValueError(f"TMA box inner dim is {inner_bits // 8} bytes, more than the {swizzle_bytes}-byte "
                             "swizzle span: use boxes one swizzle span wide")

    def check_global_stride(self, stride_bytes: int) -> None:
        if stride_bytes % self.global_stride_multiple:
            raise ValueError(f"global stride {stride_bytes} B is not a multiple of {self.global_stride_multiple} B: "
                             "pad the leading dimension")


TMA_LIMITS = TmaLimits()


@dataclass(frozen=True)
class MmaShapes:
    """The M values and the N range one MMA issue form accepts (cta_group 1 or 2 on sm_100a)."""
    cta_group: int
    m: tuple[int, ...]
    n_min: int
    n_max: int
    n_step: int
    note: str = ""

    def accepts(self, m: int, n: int) -> bool:
        return m in self.m and self.n_min <= n <= self.n_max and n % self.n_step == 0


@dataclass(frozen=True)
class TmemGeometry:
    """Tensor Memory of one CTA (PTX ISA "Tensor Memory"): lanes x columns x cell bits."""
    lanes: int = 128
    columns: int = 512
    cell_bits: int = 32
    alloc_min_columns: int = 32            # tcgen05.alloc takes a power of two in this range
    alloc_max_columns: int = 512
    lanes_per_warp: int = 32               # warp (warpid % 4) = q reaches lanes 32q..32q+31


@dataclass(frozen=True)
class Target:
    """One GPU architecture: every limit and shape the compiler checks against."""
    name: str                              # "sm_90a", the chip string of #nvvm.target
    chip: str                              # what it runs on, in words
    compute_capability: tuple[int, int]    # the one GPU capability an arch-specific ("a") cubin loads on
    ptx_features: str                      # the minimum PTX ISA the lowering needs
    mma_instruction: str
    smem_limit: int                        # dynamic shared memory one CTA may opt into, bytes
    register_file: int                     # 32-bit registers per SM (and per CTA at most)
    warp_size: int
    warpgroup_threads: int
    max_threads_per_block: int
    setmaxnreg: tuple[int, int, int]       # (min, max, step) of setmaxnreg's register count
    mbarrier_bytes: int
    smem_base_align: int                   # the kernels round the dynamic smem base up to this
    cluster_max_portable: int
    swizzles: tuple[str, ...]              # swizzle modes TMA and the MMA descriptors take
    mma_k: Mapping[str, int]               # input dtype -> K of one MMA instruction
    mma_kind: Mapping[str, str]            # input dtype -> instruction kind (f16, tf32, f8f6f4, i8)
    mma_shapes: tuple[MmaShapes, ...]
    mma_mn_major: frozenset[str]           # input dtypes an MMA may read MN-major (transposed) from smem
    mma_sources: Mapping[str, tuple[str, ...]]    # operand ("a", "b", "acc") -> where the MMA can read it
    element_bits: Mapping[str, int] = field(default_factory=lambda: ELEMENT_BITS)
    # bar.sync/bar.arrive ids a kernel may name (PTX ISA "bar, barrier": 16 per CTA; id 0 is what
    # __syncthreads and the kernels' own prologue use)
    named_barrier_ids: tuple[int, int] = (1, 15)
    tma: TmaLimits = TMA_LIMITS
    tmem: TmemGeometry | None = None
    # packed f32x2 add and fma (add.rn.f32x2, fma.rn.f32x2: PTX ISA 8.6, sm_100 and later; FADD2/FFMA2): two floats'
    # work an issue, which the exp2 polynomial takes in pairs (warploom.lowering.emit.exp2.exp2_fma_x2)
    packed_f32x2: bool = False
    # SMs of the arch's largest part, for planning without a GPU at hand (the runtime asks the device it launches on)
    sm_count: int = 0
    # L2 bytes of its smallest common part (what the causal attention's deal keeps K/V within: rules.causal_tile_table)
    l2_bytes: int = 0
    # whether a GPU of this target can be reached from here (the device tool lends Hopper GPUs only): False means its
    # kernels are checked by assembly, SASS, the emulator and the encoding oracle only, and never reported as run
    hardware_here: bool = False

    # ---- capabilities (what code asks instead of comparing target names) ----
    @property
    def accumulator(self) -> str:
        """Where the MMA keeps its accumulators: "regs" (a warpgroup's registers) or "tmem" (Tensor Memory)."""
        return self.mma_sources["acc"][0]

    @property
    def has_tmem(self) -> bool:
        """Whether the target has Tensor Memory (wl-plan-tmem plans it; tcgen05 reads and writes it)."""
        return self.tmem is not None

    # ---- element types ----
    def elem_bits(self, dtype: str) -> int:
        if dtype not in self.element_bits:
            raise ValueError(f"element type {dtype!r} is unknown to {self.name}; known: {sorted(self.element_bits)}")
        return self.element_bits[dtype]

    def elem_bytes(self, dtype: str) -> int:
        bits = self.elem_bits(dtype)
        if bits % 8:
            raise ValueError(f"{dtype} is {bits} bits, not a whole number of bytes: count it in bits")
        return bits // 8

    # ---- MMA ----
    def _mma_dtype(self, dtype: str) -> None:
        if dtype not in self.mma_k:
            raise ValueError(f"{self.name} {self.mma_instruction} takes inputs {sorted(self.mma_k)}, "
                             f"not {dtype!r}: convert the operand first")

    def mma_k_of(self, dtype: str) -> int:
        """K of one MMA instruction for this input type (16 for bf16)."""
        self._mma_dtype(dtype)
        return self.mma_k[dtype]

    def mma_kind_of(self, dtype: str) -> str:
        self._mma_dtype(dtype)
        return self.mma_kind[dtype]

    def check_mma_shape(self, m: int, n: int, dtype: str, cta_group: int = 1) -> None:
        """Raise unless one MMA instruction of shape m x n with this input type exists."""
        self._mma_dtype(dtype)
        forms = [s for s in self.mma_shapes if s.cta_group == cta_group]
        if not forms:
            raise ValueError(f"{self.name} has no cta_group {cta_group}; it has "
                             f"{sorted({s.cta_group for s in self.mma_shapes})}")
        form = forms[0]
        if not form.accepts(m, n):
            raise ValueError(f"{self.mma_instruction} m{m}n{n} ({dtype}, cta_group {cta_group}) is not a shape "
                             f"{self.name} has: M in {form.m}, N in {form.n_min}..{form.n_max} step {form.n_step}; "
                             "pick a tile with such M and N")

    def check_mma_major(self, dtype: str, major: str) -> None:
        if major == "MN" and dtype not in self.mma_mn_major:
            raise ValueError(f"{self.name} {self.mma_instruction} reads {dtype} only K-major from smem; "
                             f"MN-major works for {sorted(self.mma_mn_major)}: store the operand K-contiguous")

    @property
    def mma_rows_per_warpgroup(self) -> int:
        """Accumulator rows one warpgroup's MMA covers (wgmma m64), on targets where a warpgroup issues the
        MMA and holds its accumulators in registers."""
        if "regs" not in self.mma_sources["acc"]:
            raise ValueError(f"{self.name} {self.mma_instruction} keeps its accumulators in "
                             f"{', '.join(self.mma_sources['acc'])}, not in a warpgroup's registers: "
                             "split the tile over warpgroups only on sm_90a")
        (form,) = (s for s in self.mma_shapes if s.cta_group == 1)
        return form.m[0]

    # ---- registers, clusters ----
    def check_setmaxnreg(self, regs: int) -> None:
        lo, hi, step = self.setmaxnreg
        if not lo <= regs <= hi or regs % step:
            raise ValueError(f"setmaxnreg {regs}: takes {lo}..{hi} in steps of {step}; round to a multiple of {step}")

    def launch_regs(self, threads: int) -> int:
        """Registers per thread a block of `threads` starts with when one block fills the register file
        (ptxas allocates in units of 8); setmaxnreg then moves registers between warpgroups."""
        return self.register_file // threads // 8 * 8

    def check_cluster(self, ctas: int) -> None:
        if not 1 <= ctas <= self.cluster_max_portable:
            raise ValueError(f"cluster of {ctas} CTAs: the portable limit on {self.name} is "
                             f"{self.cluster_max_portable}; use a smaller cluster")
