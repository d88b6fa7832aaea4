"""What the standard kernels encode: every descriptor and every tcgen05.ld/st the lowering builds.

Each kernel of `warploom.kernels.precompile_set(target)` for sm_100a and sm_90a is planned and lowered to its
gpu.module (no PTX, no ptxas) while the three descriptor classes record every value they encode and
`SmemTile.operand` records every tile read as an MMA operand (with the dim it contracts over). So the cases
are the lowering's own inputs, wherever in the lowering they are built; the smem regions' offsets of each
kernel's plan give the start addresses the kernel adds at run time. The tcgen05.ld/st ops are read from the
lowered NVVM (their shape attribute and vector length), and the PTX of one kernel per distinct set of ld/st
forms is kept to compare its instruction text with CUTLASS's atoms.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from warploom.layout import descriptors

DESCRIPTOR_CLASSES = ("Sm100InstrDescriptor", "Sm100SmemDescriptor", "WgmmaSmemDescriptor")
TARGETS = ("sm_100a", "sm_90a")
START_ADDRESS_LIMIT = 1 << 18          # the descriptors' 18-bit shared window


@dataclass
class TmemAccess:
    op: str             # "ld" or "st"
    shape: str          # "32x32b", ...
    repeats: int        # the .x{N} of the instruction: the vector length of 32-bit cells per thread
    element: str        # the vector's element type (i32: the b32 cells)


@dataclass
class KernelCases:
    # descriptor class name -> {field values (a tuple of (name, value) pairs): kernel names that encode it}
    descriptors: dict[str, dict[tuple, set[str]]] = field(default_factory=lambda: {c: {} for c in DESCRIPTOR_CLASSES})
    # target -> smem start addresses (region offsets of the plans)
    start_addresses: dict[str, set[int]] = field(default_factory=dict)
    tmem: dict[tuple, set[str]] = field(default_factory=dict)        # TmemAccess astuple -> kernel names
    ptx: dict[str, str] = field(default_factory=dict)                # kernel name -> PTX (one per ld/st form set)
    kernels: dict[str, list[str]] = field(default_factory=dict)      # target -> kernel names lowered
    # (target, SmemTile, k_dim) -> kernel names: every smem tile the lowering reads as an MMA operand
    operand_tiles: dict[tuple, set[str]] = field(default_factory=dict)


def values_of(desc) -> tuple:
    """A descriptor's field values as ((name, value), ...), swizzles by name."""
    out = []
    for f in dataclasses.fields(desc):
        v = getattr(desc, f.name)
        out.append((f.name, v.name if f.name == "swizzle" else v))
    return tuple(out)


def _lower(spec):
    """(program, lowered kernel) of one standard kernel, planned and lowered as warploom.build does it."""
    from warploom import build, kernels

    if isinstance(spec, kernels.AttentionSpec):
        program, _ = build.planned_attention(build.attention_graph(spec), spec)
    else:
        program = build.planned_program(spec)
    try:                                    # one lowering for every target (issue 33)
        from warploom.lowering import kernel_name, lower_program
    except ImportError:                     # a lowering module per target and family
        from warploom.lowering import sm90, sm90_attention, sm100, sm100_attention
        if program.kind == "attention":
            family = sm100_attention if program.target == "sm_100a" else sm90_attention
            return program, family.lower_attention(program, family.kernel_name(program))
        family = sm100 if program.target == "sm_100a" else sm90
        return program, family.lower_kernel(program, sm90.kernel_name(program))
    return program, lower_program(program, kernel_name(program))


def _tmem_ops(gpu_module) -> list[TmemAccess]:
    found = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for o in block.operations:
                    name = o.name
                    if name in ("nvvm.tcgen05.ld", "nvvm.tcgen05.st"):
                        shape = str(o.attributes["shape"])          # #nvvm.tcgen05_ldst_shape<shape_32x32b>
                        shape = shape.split("shape_", 1)[1].rstrip(">")
                        vec = o.results[0].type if name.endswith(".ld") else o.operands[1].type
                        text = str(vec)                             # vector<32xi32>
                        n, elem = text[len("vector<"):-1].split("x", 1)
                        found.append(TmemAccess(name.rsplit(".", 1)[1], shape, int(n), elem))
                    walk(o)

    walk(gpu_module.operation if hasattr(gpu_module, "operation") else gpu_module)
    return found


def collect(targets=TARGETS) -> KernelCases:
    from warploom import kernels
    from warploom.lowering.ptx import gpu_module_to_ptx

    cases = KernelCases()
    current: list[str] = []
    originals = {c: getattr(descriptors, c).encode for c in DESCRIPTOR_CLASSES}

    def recorder(cls_name):
        original = originals[cls_name]

        def encode(self):
            cases.descriptors[cls_name].setdefault(values_of(self), set()).add(current[0])
            return original(self)
        return encode

    from warploom.layout.tiling import SmemTile
    original_operand = SmemTile.operand
    target_now: list[str] = []

    def operand(self, k_dim="K"):
        cases.operand_tiles.setdefault((target_now[0], self, k_dim), set()).add(current[0])
        return original_operand(self, k_dim)

    for c in DESCRIPTOR_CLASSES:
        setattr(getattr(descriptors, c), "encode", recorder(c))
    SmemTile.operand = operand
    try:
        seen_forms: set[frozenset] = set()
        for target in targets:
            specs = kernels.precompile_set(target)
            if not specs:
                raise AssertionError(f"warploom.kernels.precompile_set({target!r}) is empty: no kernels to check")
            cases.kernels[target] = []
            target_now[:] = [target]
            for spec in specs:
                current[:] = [spec.lookup_id]
                program, lowered = _lower(spec)
                name = spec.lookup_id
                cases.kernels[target].append(name)
                for region in program.regions.values():
                    if region.space == "smem" and region.offset is not None:
                        cases.start_addresses.setdefault(target, set()).add(region.offset)
                forms = frozenset(dataclasses.astuple(a) for a in _tmem_ops(lowered.gpu_module))
                for form in forms:
                    cases.tmem.setdefault(form, set()).add(name)
                if forms and forms not in seen_forms:
                    seen_forms.add(forms)
                    cases.ptx[name] = gpu_module_to_ptx(lowered.gpu_module)
    finally:
        for c, original in originals.items():
            setattr(getattr(descriptors, c), "encode", original)
        SmemTile.operand = original_operand
    return cases
