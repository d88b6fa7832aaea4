"""warploom's sm_100a/sm_90a descriptor encoders and decoders and its tcgen05.ld/st forms against NVIDIA CUTLASS.

No Blackwell GPU is here, so nothing on hardware checks the sm_100a encodings; and the emulator decodes with the
same classes that encode. This checks them against an implementation the project did not write: CUTLASS's
UMMA::InstrDescriptor, UMMA::SmemDescriptor, GmmaDescriptor and SM100_TMEM_{LOAD,STORE} atoms, compiled from the
headers of the pinned `nvidia-cutlass` package at test time (cutlass_headers.py). Cases: every descriptor the
standard kernels' lowering encodes (kernel_cases.py), at the start addresses of their smem plans, and a sweep of
every field through its values (compare.py). docs/oracle.md says what is and is not covered.
"""
from __future__ import annotations

import re

import pytest

from warploom.layout import Sm100InstrDescriptor, Sm100SmemDescriptor, WgmmaSmemDescriptor
from warploom.layout.descriptors import kind_of

from .compare import Where, check_all_reserved, check_instr, check_sm90_smem, check_sm100_smem
from .cutlass_headers import INSTR_MEMBERS, SM90_SMEM_MEMBERS, SM100_SMEM_MEMBERS, TMEM_SHAPES, tmem_atom_name


def _fail(bad: list[str], what: str):
    if bad:
        shown = "\n  ".join(bad[:25])
        more = f"\n  ... and {len(bad) - 25} more" if len(bad) > 25 else ""
        pytest.fail(f"{len(bad)} {what} disagree with CUTLASS:\n  {shown}{more}", pytrace=False)


def test_the_kernels_were_enumerated(kernel_cases):
    """The cases come from the real kernels: both targets lowered, each descriptor kind and ld/st seen."""
    assert kernel_cases.kernels.get("sm_100a") and kernel_cases.kernels.get("sm_90a")
    assert kernel_cases.descriptors["Sm100InstrDescriptor"], "no sm_100a kernel encoded an instruction descriptor"
    assert kernel_cases.descriptors["Sm100SmemDescriptor"], "no sm_100a kernel encoded an smem descriptor"
    assert kernel_cases.descriptors["WgmmaSmemDescriptor"], "no sm_90a kernel encoded a wgmma descriptor"
    assert kernel_cases.tmem, "no sm_100a kernel issued a tcgen05.ld/st"


def test_sm100_instr_descriptor_against_cutlass(oracle, instr_cases):
    """Every instruction descriptor of the sm_100a kernels and every field through its values: warploom's
    encode() equals UMMA::make_runtime_instr_desc<A, B, D, M, N, majors, negates, saturate, sparse, max shift>
    (sparse id2)'s descriptor word, and decode() of that word gives the fields back."""
    cases, where = instr_cases
    _fail(check_instr(oracle, Sm100InstrDescriptor, cases, where, kind_of), "instruction descriptors")
    seen = oracle.members("instr", oracle.instr_words(cases))
    for member in INSTR_MEMBERS:     # the sweep moved every CUTLASS member off its base value
        assert len({s[member] for s in seen}) > 1, f"no case varies UMMA::InstrDescriptor::{member}"


def test_sm100_smem_descriptor_against_cutlass(oracle, sm100_smem_cases):
    """The tcgen05 smem descriptors of the sm_100a kernels (at each start address of their smem plans) and every
    field through its values, against UMMA::SmemDescriptor filled as CUTLASS's make_umma_desc fills it."""
    cases, where = sm100_smem_cases
    _fail(check_sm100_smem(oracle, Sm100SmemDescriptor, cases, where), "sm_100a smem descriptors")
    seen = oracle.members("sm100", [Sm100SmemDescriptor(**c).encode() for c in cases])
    for member in SM100_SMEM_MEMBERS:
        if member != "version_":     # fixed at 1 (CUTLASS sets it so for Blackwell)
            assert len({s[member] for s in seen}) > 1, f"no case varies UMMA::SmemDescriptor::{member}"


def test_sm90_smem_descriptor_against_cutlass(oracle, sm90_smem_cases):
    """The wgmma smem descriptors of the sm_90a kernels and every field through its values, against
    GmmaDescriptor's bitfield filled as CUTLASS's make_gmma_desc fills it."""
    cases, where = sm90_smem_cases
    _fail(check_sm90_smem(oracle, WgmmaSmemDescriptor, cases, where), "sm_90a wgmma descriptors")
    seen = oracle.members("sm90", [WgmmaSmemDescriptor(**c).encode() for c in cases])
    for member in SM90_SMEM_MEMBERS:
        assert len({s[member] for s in seen}) > 1, f"no case varies GmmaDescriptor::{member}"


def test_reserved_bits_are_cutlass_unnamed_bits(oracle):
    """A bit in no CUTLASS member (reserved, or fixed to 0) is refused by warploom's decoders."""
    bad = check_all_reserved(oracle, Sm100InstrDescriptor, Sm100SmemDescriptor, WgmmaSmemDescriptor)
    _fail(bad, "reserved bits")


def test_tcgen05_ld_st_forms_against_cutlass_atoms(oracle, kernel_cases):
    """Each tcgen05.ld/st form of the sm_100a kernels is one of CUTLASS's SM100_TMEM_{LOAD,STORE} atoms, with the
    same registers per thread (one address, N 32-bit cells), and the PTX the kernels assemble spells it as that
    atom's asm does, with as many registers in its list."""
    names = {form: tmem_atom_name(form[0], form[1], form[2]) for form in kernel_cases.tmem}
    regs = oracle.tmem_registers(sorted(set(names.values()) & set(oracle.tmem_atom_names)))
    bad = []
    for (op, shape, n, elem), atom in names.items():
        users = Where(kernel_cases.tmem).of((op, shape, n, elem))
        want = (1, n) if op == "ld" else (n, 1)
        if elem != "i32":
            bad.append(f"tcgen05.{op} {shape} x{n} moves {elem} cells ({users}); the atoms move b32 (uint32_t)")
        if regs.get(atom) is None:
            bad.append(f"tcgen05.{op} {shape} x{n} ({users}): CUTLASS has no atom {atom}")
        elif regs[atom] != want:
            bad.append(f"tcgen05.{op} {shape} x{n} ({users}): CUTLASS's {atom} has (source, destination) registers "
                       f"{regs[atom]}, warploom's op {want}")
    # the instruction text of the kernels' PTX
    asm = {atom: oracle.tmem_asm(atom) for atom in set(names.values())}
    checked = 0
    for kernel, ptx in kernel_cases.ptx.items():
        for line in ptx.splitlines():
            m = re.match(r"\s*(tcgen05\.(ld|st)\.\S+)\s+(.*);", line)
            if not m:
                continue
            mnemonic, op, operands = m.groups()
            form = re.fullmatch(r"tcgen05\.(?:ld|st)\.sync\.aligned\.(\w+)\.x(\d+)\.b32", mnemonic)
            if not form:
                bad.append(f"{kernel}: PTX {mnemonic!r} is no 32-bit-cell tcgen05.ld/st form CUTLASS has an atom for")
                continue
            atom = tmem_atom_name(op, form.group(1), int(form.group(2)))
            want = asm.get(atom) or oracle.tmem_asm(atom)
            regs_in_list = len(re.search(r"\{([^}]*)\}", operands).group(1).split(","))
            if mnemonic != want:
                bad.append(f"{kernel}: PTX {mnemonic!r}, CUTLASS's {atom} issues {want!r}")
            if regs_in_list != int(form.group(2)):
                bad.append(f"{kernel}: {mnemonic} lists {regs_in_list} registers")
            checked += 1
    assert checked, "no tcgen05.ld/st in the kept PTX"
    _fail(bad, "tcgen05.ld/st forms")


def test_tcgen05_ldst_register_table_against_cutlass_atoms(oracle):
    """warploom's table of registers per thread for every tcgen05.ld/st shape and .num
    (layout.fragments.tcgen05_ldst_registers, what the lowering and the emulator size their vectors by) against
    every SM100_TMEM_{LOAD,STORE} atom CUTLASS has: a form warploom accepts has an atom with that many data
    registers and one address register, whose asm issues that shape and .num; a form it refuses has none."""
    from warploom.layout.fragments import tcgen05_ldst_registers

    regs = oracle.tmem_registers(oracle.tmem_atom_names)
    bad, accepted = [], 0
    for shape in TMEM_SHAPES:
        for num in (1 << i for i in range(9)):          # x1 .. x256
            try:
                ours = tcgen05_ldst_registers(shape, num)
            except ValueError:
                ours = None
            for op in ("ld", "st"):
                atom = tmem_atom_name(op, shape, num)
                theirs = regs.get(atom)
                if ours is None:
                    if theirs is not None:
                        bad.append(f"tcgen05.{op}.{shape}.x{num}: warploom refuses it, CUTLASS has {atom} {theirs}")
                    continue
                accepted += 1
                want = (1, ours) if op == "ld" else (ours, 1)
                if theirs != want:
                    bad.append(f"tcgen05.{op}.{shape}.x{num}: warploom {ours} registers per thread, CUTLASS's {atom} "
                               f"(source, destination) {theirs}")
                asm = oracle.tmem_asm(atom)
                if theirs is not None and not (asm or "").startswith(f"tcgen05.{op}.sync.aligned.{shape}.x{num}."):
                    bad.append(f"tcgen05.{op}.{shape}.x{num}: CUTLASS's {atom} issues {asm!r}")
    assert accepted, "warploom accepts no tcgen05.ld/st form"
    unknown = set(oracle.tmem_atom_names) - {tmem_atom_name(op, s, 1 << i) for op in ("ld", "st") for s in TMEM_SHAPES
                                             for i in range(9)}
    if unknown:
        bad.append(f"CUTLASS atoms of no shape warploom names: {sorted(unknown)}")
    _fail(bad, "tcgen05.ld/st register counts")
