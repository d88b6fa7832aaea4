"""The oracle: NVIDIA CUTLASS's own descriptor definitions, compiled on the host at test time.

The PyPI package `nvidia-cutlass` (pinned in the `test` extra) ships CUTLASS's C++ headers under
`cutlass_library/source/include`. This module writes a small C++ program that includes
`cute/arch/mma_sm100_desc.hpp` (UMMA::InstrDescriptor, UMMA::SmemDescriptor, UMMA::make_runtime_instr_desc),
`cute/arch/mma_sm90_desc.hpp` (GmmaDescriptor) and `cute/arch/copy_sm100.hpp` (the SM100_TMEM_LOAD/STORE
atoms), compiles it with the host C++ compiler and reads the words it prints. Nothing of CUTLASS is copied
into this repository: the headers are read from the installed package, and the program only names CUTLASS's
types, enums, bitfield members and functions.

The CUDA headers CUTLASS includes (vector_types.h, cuda_fp16.h, <cuda/std/...>, <nv/target>) come from the
`nvidia-cuda-runtime` wheel (a dependency of the pinned nvcc wheel) and the `nvidia-cuda-cccl` wheel (pinned in
the `test` extra); a CUDA toolkit (CUDA_HOME, /usr/local/cuda) is used when those are absent.

Which names stand for which C++ types is this file's only knowledge (warploom's dtype names -> CUTLASS's
number types, swizzle names -> CUTLASS's LayoutType enumerators, PTX ld/st shapes -> CUTLASS's atom names);
every code, offset and width comes from the headers.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CUTLASS_PACKAGE = "nvidia-cutlass"
INSTALL_HINT = "pip install -e '.[test]' (the test extra pins nvidia-cutlass and nvidia-cuda-cccl)"

# warploom's operand dtype names -> the CUTLASS number type whose UMMA format code CUTLASS's to_UMMAFormat<T>
# gives. For kind::f8f6f4 the sub-byte types are the "unpacksmem" ones: that kind reads f6/f4 unpacked, one
# element per byte, in shared memory (CUTLASS maps the packed float_e2m1_t to kind::mxf4's code instead).
AB_TYPES = {
    "f16": "cutlass::half_t",
    "bf16": "cutlass::bfloat16_t",
    "tf32": "cutlass::tfloat32_t",
    "f8E4M3FN": "cutlass::float_e4m3_t",
    "f8E5M2": "cutlass::float_e5m2_t",
    "f6E2M3FN": "cutlass::detail::float_e2m3_unpacksmem_t",
    "f6E3M2FN": "cutlass::detail::float_e3m2_unpacksmem_t",
    "f4E2M1FN": "cutlass::detail::float_e2m1_unpacksmem_t",
    "u8": "uint8_t",
    "i8": "int8_t",
}
# accumulator dtype -> CUTLASS's to_CFormat<T> argument
D_TYPES = {"f16": "cutlass::half_t", "f32": "float", "i32": "int32_t"}
# the dense tcgen05.mma kinds and their operand / accumulator types (PTX ISA 9.7.16.10 "tcgen05.mma", the
# kinds table); every (A, B, D) of a kind is enumerated by the tests
KINDS = {
    "f16": (("f16", "bf16"), ("f16", "f32")),
    "tf32": (("tf32",), ("f32",)),
    "f8f6f4": (("f8E4M3FN", "f8E5M2", "f6E2M3FN", "f6E3M2FN", "f4E2M1FN"), ("f16", "f32")),
    "i8": (("u8", "i8"), ("i32",)),
}
# warploom swizzle names -> CUTLASS's enumerators
SM100_LAYOUTS = {"none": "SWIZZLE_NONE", "128B_base32B": "SWIZZLE_128B_BASE32B", "128B": "SWIZZLE_128B",
                 "64B": "SWIZZLE_64B", "32B": "SWIZZLE_32B"}
SM90_LAYOUTS = {"none": "INTERLEAVE", "128B": "B128", "64B": "B64", "32B": "B32"}
# PTX tcgen05.ld/st shapes -> the data-path part of CUTLASS's SM100_TMEM_{LOAD,STORE}_<dp>{N}x atom names
TMEM_SHAPES = {"32x32b": "32dp32b", "16x64b": "16dp64b", "16x128b": "16dp128b", "16x256b": "16dp256b",
               "16x32bx2": "16dp32b"}

# the bitfield members, in the order the program prints them when it decodes a word
INSTR_MEMBERS = ("sparse_id2_", "sparse_flag_", "saturate_", "c_format_", "a_format_", "b_format_", "a_negate_",
                 "b_negate_", "a_major_", "b_major_", "n_dim_", "m_dim_", "max_shift_")
SM100_SMEM_MEMBERS = ("start_address_", "leading_byte_offset_", "stride_byte_offset_", "version_",
                      "base_offset_", "lbo_mode_", "layout_type_")
SM90_SMEM_MEMBERS = ("start_address_", "leading_byte_offset_", "stride_byte_offset_", "base_offset_",
                     "layout_type_")


class OracleUnavailable(RuntimeError):
    """The CUTLASS headers, the CUDA headers they include or a C++ compiler are missing."""


def cutlass_include() -> Path:
    try:
        dist = md.distribution(CUTLASS_PACKAGE)
    except md.PackageNotFoundError:
        raise OracleUnavailable(f"the {CUTLASS_PACKAGE} package is not installed: {INSTALL_HINT}") from None
    root = Path(dist.locate_file("cutlass_library/source/include"))
    if not (root / "cute/arch/mma_sm100_desc.hpp").is_file():
        raise OracleUnavailable(f"{CUTLASS_PACKAGE} {dist.version} has no cute/arch/mma_sm100_desc.hpp under {root}")
    return root


def _wheel_dir(dist_name: str, suffix: str) -> Path | None:
    try:
        dist = md.distribution(dist_name)
    except md.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if str(f).endswith(suffix):
            return Path(dist.locate_file(f)).parents[suffix.count("/")]
    return None


def cuda_includes() -> list[Path]:
    """Include folders that hold vector_types.h, <nv/target> and <cuda/std/utility>."""
    runtime = _wheel_dir("nvidia-cuda-runtime", "include/vector_types.h")
    cccl = _wheel_dir("nvidia-cuda-cccl", "cuda/std/utility")
    if runtime and cccl:
        return [runtime / "include", cccl]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "include/vector_types.h").is_file():
            inc = Path(home) / "include"
            return [inc, inc / "cccl"] if (inc / "cccl/cuda/std/utility").is_file() else [inc]
    raise OracleUnavailable("no CUDA headers for CUTLASS (vector_types.h, <cuda/std/utility>): "
                            f"{INSTALL_HINT}, or set CUDA_HOME to a CUDA toolkit")


def compiler() -> str:
    for cxx in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cxx and shutil.which(cxx):
            return shutil.which(cxx)
    raise OracleUnavailable("no host C++ compiler (g++, c++, clang++ or $CXX) to compile the CUTLASS oracle")


# ---- the program --------------------------------------------------------------------------------

@dataclass(frozen=True)
class InstrCase:
    """The fields of one dense tcgen05.mma instruction descriptor, in warploom's names."""
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

    def cpp(self) -> str:
        """The descriptor as CUTLASS builds it: UMMA::make_runtime_instr_desc<...>(sparse id2) (its upper 32
        bits are the instruction descriptor; it calls UMMA::make_instr_desc)."""
        major = {"K": "cute::UMMA::Major::K", "MN": "cute::UMMA::Major::MN"}
        neg = {False: "cute::UMMA::ScaleIn::One", True: "cute::UMMA::ScaleIn::Neg"}
        sat = {False: "cute::UMMA::Saturate::False", True: "cute::UMMA::Saturate::True"}
        targs = ", ".join([AB_TYPES[self.a_dtype], AB_TYPES[self.b_dtype], D_TYPES[self.d_dtype], str(self.m),
                           str(self.n), major[self.a_major], major[self.b_major], neg[self.negate_a],
                           neg[self.negate_b], sat[self.saturate], "true" if self.sparse else "false",
                           f"cute::UMMA::MaxShift({self.max_shift})"])
        return f"uint32_t(cute::UMMA::make_runtime_instr_desc<{targs}>({self.sparse_selector}u) >> 32)"


_PRELUDE = r"""
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cute/arch/mma_sm100_desc.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/copy_sm100.hpp>

using namespace cute;

static int sm100_layout(const char* n) {
%(sm100_layouts)s
  std::fprintf(stderr, "unknown swizzle %%s\n", n); std::exit(2);
}
static int sm90_layout(const char* n) {
%(sm90_layouts)s
  std::fprintf(stderr, "unknown swizzle %%s\n", n); std::exit(2);
}

// Each input line is a command; each command prints one line.
//   SE start lbo sbo base lbo_mode swizzle   UMMA::SmemDescriptor, set as make_umma_desc sets it (bytes >> 4)
//   GE start lbo sbo base swizzle            GmmaDescriptor, likewise (make_gmma_desc)
//   ID / SD / GD word                        the members of that word as CUTLASS's bitfields read it
//   IM / SM / GM                             the bits CUTLASS's members cover
//   IC index                                 instruction-descriptor case `index` (built by CUTLASS, below)
//   TM name                                  a TMEM atom: its source and destination register counts
static uint32_t instr_case(int index) {
  switch (index) {
%(instr_cases)s
  }
  std::fprintf(stderr, "no case %%d\n", index); std::exit(2);
}
static void tmem_atom(const char* n) {
%(tmem_atoms)s
  std::printf("missing\n");
}

int main() {
  char cmd[8];
  while (std::scanf("%%7s", cmd) == 1) {
    if (!std::strcmp(cmd, "SE")) {
      unsigned long long start, lbo, sbo; unsigned base, mode; char swz[32];
      if (std::scanf("%%llu %%llu %%llu %%u %%u %%31s", &start, &lbo, &sbo, &base, &mode, swz) != 6) return 3;
      UMMA::SmemDescriptor d;
      d.desc_ = 0;
      d.version_ = 1;
      d.start_address_ = uint16_t(start >> 4);
      d.leading_byte_offset_ = uint16_t(lbo >> 4);
      d.stride_byte_offset_ = uint16_t(sbo >> 4);
      d.base_offset_ = base;
      d.lbo_mode_ = mode;
      d.layout_type_ = uint8_t(sm100_layout(swz));
      std::printf("%%016llx\n", (unsigned long long)d.desc_);
    } else if (!std::strcmp(cmd, "GE")) {
      unsigned long long start, lbo, sbo; unsigned base; char swz[32];
      if (std::scanf("%%llu %%llu %%llu %%u %%31s", &start, &lbo, &sbo, &base, swz) != 5) return 3;
      GmmaDescriptor d;
      d.desc_ = 0;
      d.bitfield.start_address_ = uint16_t(start >> 4);
      d.bitfield.leading_byte_offset_ = uint16_t(lbo >> 4);
      d.bitfield.stride_byte_offset_ = uint16_t(sbo >> 4);
      d.bitfield.base_offset_ = base;
      d.bitfield.layout_type_ = uint8_t(sm90_layout(swz));
      std::printf("%%016llx\n", (unsigned long long)d.desc_);
    } else if (!std::strcmp(cmd, "ID")) {
      unsigned long long w; if (std::scanf("%%llx", &w) != 1) return 3;
      UMMA::InstrDescriptor d; d.desc_ = uint32_t(w);
      std::printf("%(instr_fmt)s\n", %(instr_args)s);
    } else if (!std::strcmp(cmd, "SD")) {
      unsigned long long w; if (std::scanf("%%llx", &w) != 1) return 3;
      UMMA::SmemDescriptor d; d.desc_ = w;
      std::printf("%(sm100_fmt)s\n", %(sm100_args)s);
    } else if (!std::strcmp(cmd, "GD")) {
      unsigned long long w; if (std::scanf("%%llx", &w) != 1) return 3;
      GmmaDescriptor d; d.desc_ = w;
      std::printf("%(sm90_fmt)s\n", %(sm90_args)s);
    } else if (!std::strcmp(cmd, "IM")) {
      UMMA::InstrDescriptor d; d.desc_ = 0;
%(instr_ones)s
      std::printf("%%08x\n", d.desc_);
    } else if (!std::strcmp(cmd, "SM")) {
      UMMA::SmemDescriptor d; d.desc_ = 0;
%(sm100_ones)s
      std::printf("%%016llx\n", (unsigned long long)d.desc_);
    } else if (!std::strcmp(cmd, "GM")) {
      GmmaDescriptor d; d.desc_ = 0;
%(sm90_ones)s
      std::printf("%%016llx\n", (unsigned long long)d.desc_);
    } else if (!std::strcmp(cmd, "IC")) {
      int i; if (std::scanf("%%d", &i) != 1) return 3;
      std::printf("%%08x\n", instr_case(i));
    } else if (!std::strcmp(cmd, "TM")) {
      char n[96]; if (std::scanf("%%95s", n) != 1) return 3;
      tmem_atom(n);
    } else {
      std::fprintf(stderr, "unknown command %%s\n", cmd); return 3;
    }
  }
  return 0;
}
"""


def _decode_fmt(members, prefix: str) -> tuple[str, str]:
    fmt = " ".join(f"{m}=%llu" for m in members)
    args = ", ".join(f"(unsigned long long){prefix}{m}" for m in members)
    return fmt, args


def _all_ones(members, prefix: str) -> str:
    # assigning -1 through the member sets every bit it covers (unsigned bitfields wrap modulo 2^width)
    return "\n".join(f"      {prefix}{m} = ~0u;" for m in members)


def _qualified(atom: str) -> str:
    """CUTLASS declares its TMEM atoms in cute::SM100::TMEM::LOAD and ::STORE."""
    return f"SM100::TMEM::{'LOAD' if atom.startswith('SM100_TMEM_LOAD_') else 'STORE'}::{atom}"


def program_source(instr_cases: list[InstrCase], tmem_atoms: list[str]) -> str:
    sm100 = "\n".join(f'  if (!std::strcmp(n, "{k}")) return int(UMMA::LayoutType::{v});'
                      for k, v in SM100_LAYOUTS.items())
    sm90 = "\n".join(f'  if (!std::strcmp(n, "{k}")) return int(SM90::GMMA::LayoutType::{v});'
                     for k, v in SM90_LAYOUTS.items())
    cases = "\n".join(f"    case {i}: return {c.cpp()};" for i, c in enumerate(instr_cases))
    atoms = "\n".join(
        f'  if (!std::strcmp(n, "{a}")) {{ std::printf("%zu %zu\\n", sizeof({q}::SRegisters) / sizeof(uint32_t), '
        f'sizeof({q}::DRegisters) / sizeof(uint32_t)); return; }}' for a, q in zip(tmem_atoms, map(_qualified, tmem_atoms)))
    ifmt, iargs = _decode_fmt(INSTR_MEMBERS, "d.")
    sfmt, sargs = _decode_fmt(SM100_SMEM_MEMBERS, "d.")
    gfmt, gargs = _decode_fmt(SM90_SMEM_MEMBERS, "d.bitfield.")
    return _PRELUDE % dict(sm100_layouts=sm100, sm90_layouts=sm90, instr_cases=cases, tmem_atoms=atoms,
                           instr_fmt=ifmt, instr_args=iargs, sm100_fmt=sfmt, sm100_args=sargs, sm90_fmt=gfmt,
                           sm90_args=gargs, instr_ones=_all_ones(INSTR_MEMBERS, "d."),
                           sm100_ones=_all_ones(SM100_SMEM_MEMBERS, "d."),
                           sm90_ones=_all_ones(SM90_SMEM_MEMBERS, "d.bitfield."))


class Oracle:
    """The compiled program; `run(lines)` feeds it commands and returns its output lines."""

    def __init__(self, workdir: Path, instr_cases: list[InstrCase], tmem_atoms: list[str]):
        self.include = cutlass_include()
        self.cuda = cuda_includes()
        self.cxx = compiler()
        self.instr_cases = list(instr_cases)
        self.case_index = {c: i for i, c in enumerate(self.instr_cases)}
        self.tmem_atom_names = list(tmem_atoms)
        src = program_source(self.instr_cases, self.tmem_atom_names)
        tag = hashlib.sha256(src.encode()).hexdigest()[:12]
        self.source = workdir / f"cutlass_oracle_{tag}.cpp"
        self.binary = workdir / f"cutlass_oracle_{tag}"
        self.source.write_text(src)
        cmd = [self.cxx, "-std=c++17", "-O0", "-w", "-I", str(self.include)]
        for inc in self.cuda:
            cmd += ["-I", str(inc)]
        cmd += [str(self.source), "-o", str(self.binary)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            # a compiler that rejects the program is a failure (the headers changed, or a name here is wrong)
            raise RuntimeError(f"compiling the CUTLASS oracle failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
        self.version = md.version(CUTLASS_PACKAGE)
        self._memo: dict[tuple, list[str]] = {}

    def run(self, lines: list[str]) -> list[str]:
        key = tuple(lines)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = out = self._run(lines)
        return out

    def _run(self, lines: list[str]) -> list[str]:
        proc = subprocess.run([str(self.binary)], input="\n".join(lines) + "\n", capture_output=True, text=True)
        out = proc.stdout.splitlines()
        if proc.returncode or len(out) != len(lines):
            raise RuntimeError(f"the CUTLASS oracle exited {proc.returncode} after {len(out)} of {len(lines)} "
                               f"commands: {proc.stderr[-2000:]}")
        return out

    # -- words

    def instr_words(self, cases: list[InstrCase]) -> list[int]:
        return [int(w, 16) for w in self.run([f"IC {self.case_index[c]}" for c in cases])]

    def sm100_smem_words(self, fields: list[tuple[int, int, int, int, int, str]]) -> list[int]:
        return [int(w, 16) for w in self.run([f"SE {s} {l} {b} {o} {m} {z}" for s, l, b, o, m, z in fields])]

    def sm90_smem_words(self, fields: list[tuple[int, int, int, int, str]]) -> list[int]:
        return [int(w, 16) for w in self.run([f"GE {s} {l} {b} {o} {z}" for s, l, b, o, z in fields])]

    # -- reading a word with CUTLASS's members (for messages)

    def members(self, kind: str, words: list[int]) -> list[dict[str, int]]:
        cmd = {"instr": "ID", "sm100": "SD", "sm90": "GD"}[kind]
        out = []
        for line in self.run([f"{cmd} {w:x}" for w in words]):
            out.append({k: int(v) for k, v in (kv.split("=") for kv in line.split())})
        return out

    def covered_bits(self, kind: str) -> int:
        return int(self.run([{"instr": "IM", "sm100": "SM", "sm90": "GM"}[kind]])[0], 16)

    # -- TMEM atoms

    def tmem_registers(self, names: list[str]) -> dict[str, tuple[int, int] | None]:
        out = {}
        for name, line in zip(names, self.run([f"TM {n}" for n in names])):
            out[name] = None if line == "missing" else tuple(int(x) for x in line.split())
        return out

    def tmem_asm(self, name: str) -> str | None:
        """The PTX instruction (mnemonic with its qualifiers) in the asm statement of CUTLASS's atom `name`,
        read from the installed copy_sm100.hpp."""
        text = (self.include / "cute/arch/copy_sm100.hpp").read_text()
        m = re.search(r"struct\s+" + re.escape(name) + r"\s*\{(.*?)\n\};", text, re.S)
        if not m:
            return None
        asm = re.search(r'asm\s+volatile\s*\(\s*"([^"]*)"', m.group(1))
        return asm.group(1).split()[0].split("[")[0].split("{")[0] if asm else None


def tmem_atoms_in_headers() -> list[str]:
    """Every SM100_TMEM_{LOAD,STORE} atom of the installed copy_sm100.hpp, but the .pack::16b/.unpack::16b ones."""
    text = (cutlass_include() / "cute/arch/copy_sm100.hpp").read_text()
    return sorted({n for n in re.findall(r"struct\s+(SM100_TMEM_(?:LOAD|STORE)_\w+)", text) if not n.endswith("_16b")})


def tmem_atom_name(op: str, shape: str, repeats: int, pack16: bool = False) -> str:
    """CUTLASS's atom for `tcgen05.{ld,st}.sync.aligned.{shape}.x{repeats}.b32`."""
    return (f"SM100_TMEM_{'LOAD' if op == 'ld' else 'STORE'}_{TMEM_SHAPES[shape]}{repeats}x"
            + ("_16b" if pack16 else ""))


# ---- smem operand layouts: CUTLASS's make_umma_desc / make_gmma_desc on CuTe tiles -------------------

# one CUTLASS number type per element width: a CuTe smem layout depends only on the width
LAYOUT_TYPES = {8: "cutlass::float_e4m3_t", 16: "cutlass::bfloat16_t", 32: "cutlass::tfloat32_t"}
LAYOUT_ATOMS = {"none": "INTER", "32B": "SW32", "64B": "SW64", "128B": "SW128"}
# how tile_to_shape lays the atoms over the (MN, K) tile: along MN first, or along K first
ORDERS = {"mn_first": "Step<_1,_2>", "k_first": "Step<_2,_1>"}


@dataclass(frozen=True)
class LayoutCase:
    """An MN x K operand tile of `elem_bits`-bit elements, `major`-major, tiled from CUTLASS's canonical
    Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom in `order`; described by UMMA (sm_100a) or GMMA (sm_90a)."""
    target: str          # "sm_100a" or "sm_90a"
    elem_bits: int
    mn: int
    k: int
    major: str           # "K" or "MN"
    swizzle: str         # "none", "32B", "64B", "128B"
    order: str           # "mn_first" or "k_first"

    @property
    def k_block(self) -> int:
        """Elements of K one MMA instruction reads (256 bits): the slice each descriptor describes."""
        return 256 // self.elem_bits

    def cpp(self, index: int) -> str:
        ns = "UMMA" if self.target == "sm_100a" else "GMMA"
        t = LAYOUT_TYPES[self.elem_bits]
        atom = f"{ns}::Layout_{self.major}_{LAYOUT_ATOMS[self.swizzle]}_Atom<{t}>"
        return (f"  layout_case<{'true' if ns == 'UMMA' else 'false'}, {1 if self.major == 'MN' else 0}, {t}, {atom}, "
                f"{self.mn}, {self.k}, {ORDERS[self.order]}>({index});")


_LAYOUT_PROGRAM = r"""
#include <cstdio>
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm100.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

using namespace cute;

// One line per case: "L index", then per MMA k-block " word:start" (the descriptor CUTLASS makes for that k-block's
// MN x KB slice, and where the slice starts in bytes), then " |" and the byte offset of every element (mn, k),
// mn-major order, from CuTe's swizzled tensor. (On the host CUTLASS cannot read an smem address: the start
// address field is 0 and it prints an ERROR line, which the reader drops.)
template <bool Umma, int Major, class T, class Atom, int MN, int K, class Order>
void layout_case(int index) {
  constexpr int KB = 256 / sizeof_bits<T>::value;
  auto layout = tile_to_shape(Atom{}, make_shape(Int<MN>{}, Int<K>{}), Order{});
  T* base = reinterpret_cast<T*>(0);
  auto tensor = make_tensor(make_smem_ptr(base), layout);
  unsigned long long words[K / KB]; long starts[K / KB];
  for (int kb = 0; kb < K / KB; ++kb) {
    auto slice = local_tile(tensor, make_shape(Int<MN>{}, Int<KB>{}), make_coord(0, kb));
    if constexpr (Umma) words[kb] = UMMA::make_umma_desc<UMMA::Major(Major)>(slice).desc_;
    else words[kb] = GMMA::make_gmma_desc<GMMA::Major(Major)>(slice).desc_;
    starts[kb] = long((char*)raw_pointer_cast(slice.data()) - (char*)base);
  }
  std::printf("L %d", index);
  for (int kb = 0; kb < K / KB; ++kb) std::printf(" %016llx:%ld", words[kb], starts[kb]);
  std::printf(" |");
  for (int mn = 0; mn < MN; ++mn)
    for (int k = 0; k < K; ++k) std::printf(" %ld", long((char*)&tensor(mn, k) - (char*)base));
  std::printf("\n");
}

int main() {
%(cases)s
  return 0;
}
"""


@dataclass
class LayoutResult:
    words: list[int]          # per k-block
    starts: list[int]         # per k-block, bytes
    offsets: list[list[int]]  # [mn][k], bytes


class LayoutOracle:
    """Compiles the cases into `parts` programs at once (one per core) and reads their output."""

    def __init__(self, workdir: Path, cases: list[LayoutCase], parts: int = 2):
        self.cases = list(dict.fromkeys(cases))
        include, cuda, cxx = cutlass_include(), cuda_includes(), compiler()
        flags = ["-std=c++17", "-O0", "-w", "-I", str(include)] + [a for inc in cuda for a in ("-I", str(inc))]
        chunks = [list(range(i, len(self.cases), parts)) for i in range(parts)]
        procs = []
        for chunk in chunks:
            if not chunk:
                continue
            src = _LAYOUT_PROGRAM.replace("%(cases)s", "\n".join(self.cases[i].cpp(i) for i in chunk))
            tag = hashlib.sha256(src.encode()).hexdigest()[:12]
            source, binary = workdir / f"cutlass_layouts_{tag}.cpp", workdir / f"cutlass_layouts_{tag}"
            source.write_text(src)
            procs.append((binary, subprocess.Popen([cxx, *flags, str(source), "-o", str(binary)],
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        self.results: dict[LayoutCase, LayoutResult] = {}
        for binary, proc in procs:
            _, err = proc.communicate()
            if proc.returncode:
                raise RuntimeError(f"compiling the CUTLASS layout oracle failed:\n{err[-4000:]}")
        for binary, _ in procs:
            out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                if not line.startswith("L "):
                    continue
                head, body = line.split(" |", 1)
                fields = head.split()
                case = self.cases[int(fields[1])]
                words = [int(f.split(":")[0], 16) for f in fields[2:]]
                starts = [int(f.split(":")[1]) for f in fields[2:]]
                flat = [int(v) for v in body.split()]
                offsets = [flat[i * case.k:(i + 1) * case.k] for i in range(case.mn)]
                self.results[case] = LayoutResult(words, starts, offsets)
        missing = [c for c in self.cases if c not in self.results]
        if missing:
            raise RuntimeError(f"the CUTLASS layout oracle printed nothing for {missing[:3]}")
