"""warploom's descriptor classes against the CUTLASS oracle: the cases, and one comparison per descriptor.

Each `check_*` takes the classes to check (warploom's own, or a mutated copy in test_oracle_mutations.py) and
returns one message per disagreement; an empty list means every case agreed. A case agrees when
  - warploom's encode() gives the word CUTLASS builds from the same field values, and
  - warploom's decode() of CUTLASS's word gives back the same field values (the emulator reads descriptors
    with decode(), so a decoder moved together with its encoder is caught too).
Messages read CUTLASS's word and warploom's through CUTLASS's bitfield members, so they name the member
that moved.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from .cutlass_headers import KINDS, SM90_LAYOUTS, SM100_LAYOUTS, InstrCase, Oracle

FIELD14 = [16 << i for i in range(14)] + [0x3FFF0]          # each bit of a 14-bit (bytes >> 4) field, and all


# ---- the cases ------------------------------------------------------------------------------------

def instr_sweep() -> list[InstrCase]:
    """Every field of the instruction descriptor through its values, one field at a time, from bases that are
    the standard kernels' shapes; every (A, B, D) of each dense kind."""
    base = InstrCase("bf16", "bf16", "f32", 128, 256)
    out = []
    for kind, (operands, accumulators) in KINDS.items():
        for a in operands:
            for b in operands:
                for d in accumulators:
                    out.append(InstrCase(a, b, d, 128, 256))
                    out.append(InstrCase(a, b, d, 64, 8, a_major="MN", b_major="K"))
    out += [InstrCase("bf16", "bf16", "f32", m, 256) for m in range(16, 512, 16)]
    out += [InstrCase("f16", "f16", "f16", 128, n) for n in range(8, 512, 8)]
    out += [InstrCase("bf16", "bf16", "f32", 128, 256, a_major=am, b_major=bm) for am in ("K", "MN")
            for bm in ("K", "MN")]
    out += [InstrCase("bf16", "bf16", "f32", 128, 256, negate_a=na, negate_b=nb) for na in (False, True)
            for nb in (False, True)]
    out += [InstrCase("f8E4M3FN", "f8E5M2", "f32", 128, 64, sparse=True, sparse_selector=s) for s in range(4)]
    out += [InstrCase("i8", "i8", "i32", 128, 64, saturate=s) for s in (False, True)]
    out += [InstrCase("bf16", "bf16", "f32", 128, 256, max_shift=s) for s in range(4)]
    rng = random.Random(33)
    for _ in range(64):                 # every field at once, at random
        kind = rng.choice(list(KINDS))
        operands, accumulators = KINDS[kind]
        sparse = rng.random() < 0.5
        out.append(InstrCase(rng.choice(operands), rng.choice(operands), rng.choice(accumulators),
                             16 * rng.randrange(1, 32), 8 * rng.randrange(1, 64), rng.choice(("K", "MN")),
                             rng.choice(("K", "MN")), kind != "i8" and rng.random() < 0.5,
                             kind != "i8" and rng.random() < 0.5, sparse, rng.randrange(4) if sparse else 0,
                             kind == "i8" and rng.random() < 0.5, rng.randrange(4)))
    assert base in out, "the sweep passes the standard 128 x 256 bf16 shape"
    return list(dict.fromkeys(out))


def sm100_smem_sweep() -> list[dict]:
    """start address, LBO, SBO: each bit and all; base offset 0..7; LBO mode 0, 1; every swizzle; random."""
    base = dict(start_address=0, lbo=16, sbo=1024, swizzle="128B", base_offset=0, lbo_mode=0)
    out = [dict(base, **{f: v}) for f in ("start_address", "lbo", "sbo") for v in FIELD14]
    out += [dict(base, base_offset=v) for v in range(8)]
    out += [dict(base, lbo_mode=v) for v in (0, 1)]
    out += [dict(base, swizzle=s) for s in SM100_LAYOUTS]
    rng = random.Random(100)
    out += [dict(start_address=16 * rng.randrange(1 << 14), lbo=16 * rng.randrange(1 << 14),
                 sbo=16 * rng.randrange(1 << 14), swizzle=rng.choice(list(SM100_LAYOUTS)),
                 base_offset=rng.randrange(8), lbo_mode=rng.randrange(2)) for _ in range(128)]
    return out


def sm90_smem_sweep() -> list[dict]:
    base = dict(start_address=0, lbo=16, sbo=1024, swizzle="128B", base_offset=0)
    out = [dict(base, **{f: v}) for f in ("start_address", "lbo", "sbo") for v in FIELD14]
    out += [dict(base, base_offset=v) for v in range(8)]
    out += [dict(base, swizzle=s) for s in SM90_LAYOUTS]
    rng = random.Random(90)
    out += [dict(start_address=16 * rng.randrange(1 << 14), lbo=16 * rng.randrange(1 << 14),
                 sbo=16 * rng.randrange(1 << 14), swizzle=rng.choice(list(SM90_LAYOUTS)),
                 base_offset=rng.randrange(8)) for _ in range(128)]
    return out


def with_start_addresses(values: list[dict], addresses) -> list[dict]:
    """Each recorded descriptor (start address 0: the static bits) at each plan offset the descriptors can hold."""
    usable = sorted(a for a in addresses if a % 16 == 0 and 0 <= a < (1 << 18))
    return [dict(v, start_address=a) for v in values for a in [v["start_address"], *usable]]


# ---- the comparisons ------------------------------------------------------------------------------

@dataclass
class Where:
    """Which kernels (or which sweep) a case comes from, for messages."""
    label: dict

    def of(self, case) -> str:
        key = tuple(sorted(case.items())) if isinstance(case, dict) else case
        users = self.label.get(key)
        if not users:
            return "field sweep"
        users = sorted(users)
        return ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")


def short(desc) -> str:
    """A descriptor by its non-default fields (dataclass reprs run to 300 characters)."""
    parts = []
    for f in dataclasses.fields(desc):
        v = getattr(desc, f.name)
        if f.default is dataclasses.MISSING or v != f.default:
            parts.append(f"{f.name}={v.name if f.name == 'swizzle' else v}")
    return f"{type(desc).__name__}({', '.join(parts)})"


DETAIL = 25          # disagreements described member by member (each costs two runs of the oracle)


def _diff(oracle: Oracle, kind: str, ours: int, theirs: int) -> str:
    mine, cut = oracle.members(kind, [ours, theirs])
    moved = [f"{m}: warploom {mine[m]}, CUTLASS {cut[m]}" for m in cut if mine[m] != cut[m]]
    stray = ours & ~oracle.covered_bits(kind)
    if stray:
        moved.append(f"bits {stray:#x} set by warploom lie in no CUTLASS member")
    return "; ".join(moved) or "(the same members)"


def _run(oracle, kind, cases, words, build, decode, where, limit) -> list[str]:
    """encode(case) == CUTLASS's word, and decode(CUTLASS's word) == the case, for each case."""
    bad = []
    digits = 8 if kind == "instr" else 16
    for case, word in zip(cases, words):
        if limit is not None and len(bad) >= limit:
            break
        try:
            desc = build(case)
            ours = desc.encode()
        except Exception as e:      # noqa: BLE001 - refusing what CUTLASS encodes is a disagreement too
            bad.append(f"{case} ({where.of(case)}): warploom refuses it: {type(e).__name__}: {e}")
            continue
        if ours != word:
            why = _diff(oracle, kind, ours, word) if len(bad) < DETAIL else ""
            bad.append(f"{short(desc)} ({where.of(case)}): warploom {ours:#0{digits + 2}x}, "
                       f"CUTLASS {word:#0{digits + 2}x}" + (f": {why}" if why else ""))
            continue
        try:
            back = decode(word, case)
        except Exception as e:      # noqa: BLE001
            bad.append(f"{short(desc)} ({where.of(case)}): warploom cannot decode CUTLASS's {word:#x}: "
                       f"{type(e).__name__}: {e}")
            continue
        if back != desc:
            bad.append(f"{short(desc)} ({where.of(case)}): warploom decodes CUTLASS's {word:#x} as {short(back)}")
    return bad


def check_instr(oracle: Oracle, cls, cases: list[InstrCase], where: Where, kind_of, limit=None) -> list[str]:
    """The kind is not in the instruction descriptor's bits (it is part of the opcode): decode takes it."""
    return _run(oracle, "instr", cases, oracle.instr_words(cases), lambda c: cls(**vars(c)),
                lambda w, c: cls.decode(w, kind_of(c.a_dtype)), where, limit)


def check_sm100_smem(oracle: Oracle, cls, cases: list[dict], where: Where, limit=None) -> list[str]:
    words = oracle.sm100_smem_words([(c["start_address"], c["lbo"], c["sbo"], c["base_offset"], c["lbo_mode"],
                                      c["swizzle"]) for c in cases])
    return _run(oracle, "sm100", cases, words, lambda c: cls(**c), lambda w, c: cls.decode(w), where, limit)


def check_sm90_smem(oracle: Oracle, cls, cases: list[dict], where: Where, limit=None) -> list[str]:
    words = oracle.sm90_smem_words([(c["start_address"], c["lbo"], c["sbo"], c["base_offset"], c["swizzle"])
                                    for c in cases])
    return _run(oracle, "sm90", cases, words, lambda c: cls(**c), lambda w, c: cls.decode(w), where, limit)


def check_reserved(oracle: Oracle, kind: str, decode, valid_word: int, width: int) -> list[str]:
    """Every bit outside CUTLASS's members must be refused by warploom's decoder (it is reserved, or fixed)."""
    covered = oracle.covered_bits(kind)
    bad = []
    for bit in range(width):
        if covered >> bit & 1 or valid_word >> bit & 1:
            continue
        try:
            got = decode(valid_word | 1 << bit)
        except ValueError:
            continue
        bad.append(f"bit {bit} lies in no CUTLASS member of the {kind} descriptor, but warploom decodes "
                   f"{valid_word | 1 << bit:#x} as {short(got)}")
    return bad


def check_all_reserved(oracle: Oracle, instr_cls, sm100_cls, sm90_cls) -> list[str]:
    """check_reserved for the three descriptors, from valid words CUTLASS builds."""
    (idesc,) = oracle.instr_words([InstrCase("bf16", "bf16", "f32", 128, 256)])
    (s100,) = oracle.sm100_smem_words([(0, 16, 1024, 0, 0, "128B")])
    (s90,) = oracle.sm90_smem_words([(0, 16, 1024, 0, "128B")])
    bad = []
    for kind, decode, word, width in (("instr", lambda w: instr_cls.decode(w, "f16"), idesc, 32),
                                      ("sm100", sm100_cls.decode, s100, 64), ("sm90", sm90_cls.decode, s90, 64)):
        try:
            bad += check_reserved(oracle, kind, decode, word, width)
        except ValueError as e:         # the decoder refuses the valid word itself
            bad.append(f"warploom refuses CUTLASS's {kind} descriptor {word:#x}: {e}")
    return bad
