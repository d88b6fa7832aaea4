"""wl-pipeline: give each tile load a shared-memory ring of `stages` buffers, loaded asynchronously.

Each `wl.load_tile` becomes a `wl.async_load` into the current stage of a
`wl.buffer` declared at the top of the kernel; the stage of loop iteration i is
i % stages, so up to `stages` tiles are in flight ahead of the MMAs. The loads
of a loop that feed the same MMA advance together: they form one `wl.ring`
(its regions share the stage index and, once wl-plan-barriers runs, one full
and one empty barrier). The GEMM's A and B tiles feed one MMA: one ring `ab`.
An attention's K and V tiles feed different MMAs (S = Q K^T, then O += P V), so
each gets its own ring (`k`, `v`): the K slot is handed back as soon as S is
computed, while V is still in use. The sm_100a attention with `shared-kv` loads K and V into one region `kv`:
its ring takes two slots an iteration (`uses` = 2: K's, then V's), so the stages are shared in FIFO order (the
seed's use_shared_kv). A load outside any loop (attention's Q tile,
loaded once per CTA) gets a region and a ring of one stage; with `q-stages=2` (a persistent sm_90a attention) two
stages advancing once per tile (`_prefetch_once`: the next tile's Q loads during this one).
A GEMM's output C gets a staging region named after it: two chunks of the tile's rows by one 128-byte swizzle
span of columns (64 16-bit columns), written by the epilogue (sm_90a: the consumer warpgroups, from their
accumulator registers; sm_100a: the epilogue warps, from Tensor Memory) and stored by TMA in turn. An sm_90a GEMM
tiled with `epilogue=direct` has none: its consumers store C from registers.

An attention's output tile gets a staging region `o` (one stage, the tile's shape): the consumers write O
there and TMA stores it (sm_100a: each O tile i, in TMEM, gets `o<i>_out` on its own Q tile's bytes). It may alias Q's region (`aliases = ("q",)`): wl-plan-smem lets them share bytes
where Q is dead by the epilogue (the grid schedule), and keeps them apart where the next tile's Q is loaded
during it (the persistent schedule).
"""
from __future__ import annotations

from dataclasses import replace

from warploom import targets
from warploom.dialect.kernel_ir import kernel_ops
from warploom.layout import SWIZZLE_128B
from warploom.kernel import Copy, Load, Loop, Mma, Program, Region, Ring, Store
from warploom.kernel.contract import ATTENTION_STAGES, ATTENTION_WALKS, GEMM_STAGES, default_attention_q_stages

from .registry import PassError, edit_program, register

DEFAULT_STAGES = {"gemm": GEMM_STAGES, "attention": ATTENTION_STAGES}     # the kernel contract's defaults


def _ring_groups(loop: Loop) -> list[tuple[str, ...]]:
    """The loads of `loop` grouped by the first MMA of the loop that reads them (a load no MMA reads: alone)."""
    loads = [op.region or op.source for op in loop.body if isinstance(op, Load)]
    groups: dict[object, list[str]] = {}
    for name in loads:
        reader = next((i for i, op in enumerate(loop.body)
                       if isinstance(op, Mma) and name in (op.a.name, op.b.name)), name)
        groups.setdefault(reader, []).append(name)
    return [tuple(g) for g in groups.values()]


def pipeline(program: Program, stages: int, once_stages: int = 1) -> None:
    """Each Load gets a region and becomes a Copy: `stages` tiles for a load in a loop (one ring per group of
    loads feeding one MMA), one tile and a one-stage ring for a load outside loops."""
    if not any(isinstance(op, Load) or (isinstance(op, Loop) and any(isinstance(c, Load) for c in op.body))
               for op in program.body):
        raise PassError("wl-pipeline found no wl.load_tile in the kernel: run wl-tile first")

    def add(load: Load, n: int) -> Copy:
        name = load.region or load.source
        program.regions[name] = Region(name, "smem", program.inputs[load.source].elem, tuple(load.tile),
                                       tuple(load.dims), n)
        return Copy(load.source, name, use=load.use, multicast=load.multicast)

    body = []
    # an sm_100a attention's O tiles (in TMEM) go out through their own Q tile's smem, in order
    q_tiles = [op.region or op.source for op in program.body if isinstance(op, Load) and op.source == "q"]
    out_stores = [op for op in program.body if isinstance(op, Store) and op.output == "out"]
    for op in program.body:
        if isinstance(op, Load):
            op = add(op, 1)
            program.rings[op.region] = Ring(op.region, 1, (op.region,))
        elif isinstance(op, Store) and program.kind == "attention" and op.output == "out" and \
                program.regions.get(op.value, Region("", "smem", "f32", ())).space == "tmem":
            host = q_tiles[out_stores.index(op)]
            name = f"{op.value}_out"
            program.regions[name] = Region(name, "smem", program.outputs["out"].elem, tuple(op.tile), ("M", "D"), 1,
                                           aliases=(host,))
            op = replace(op, region=name)
        elif isinstance(op, Store) and program.kind == "attention" and op.output == "out":
            program.regions["o"] = Region("o", "smem", program.outputs["out"].elem, tuple(op.tile), ("M", "D"), 1,
                                          aliases=("q",))
            op = replace(op, region="o")
        elif isinstance(op, Store) and program.kind == "gemm" and program.attrs.get("epilogue", "tma") == "tma":
            op = replace(op, region=_chunk_staging(program, op))
        elif isinstance(op, Loop) and any(isinstance(c, Load) for c in op.body):
            groups = _ring_groups(op)
            op = replace(op, body=tuple(add(c, stages) if isinstance(c, Load) else c for c in op.body))
            for names in groups:
                # loads into one region (a shared K/V ring) take its slots in turn: `uses` a loop iteration
                regions = tuple(dict.fromkeys(names))
                uses = len(names) // len(regions)
                program.rings["".join(regions)] = Ring("".join(regions), stages, regions, uses=uses)
        body.append(op)
    program.body = tuple(_with_majors(body, program))
    program.attrs["stages"] = stages
    if once_stages != 1:
        _prefetch_once(program, once_stages)


ONCE_STAGES = (1, 2)     # the stages of a ring loaded once a tile (attention's Q): 2 prefetches the next tile's


def _prefetch_once(program: Program, once_stages: int) -> None:
    """A persistent sm_90a attention loads one Q tile per tile it walks. With one Q stage the producer may load
    the next tile's Q (and, behind it in program order, that tile's K and V) only once the consumers have freed
    this one, at the end of this tile's key loop. With `once_stages` = 2 each ring loaded outside the loops gets two
    stages instead, advancing once per tile (`counts = "tile"`): tile t uses stage t % 2, so the producer loads tile
    t + 1's Q while tile t runs. The plan must hold them with O's staging tile on its own bytes."""
    from .plan_smem import plan_smem_fits          # plan_smem imports the barrier planner, which imports nothing here
    if program.kind != "attention" or not targets.get(program.target).accumulator == "regs" or program.attrs.get("schedule") not in ATTENTION_WALKS:
        raise PassError(f"wl-pipeline: q-stages = {once_stages}: a second Q stage serves the persistent sm_90a "
                        f"attention (the next tile's Q loads during this one); this kernel is a {program.kind} "
                        f"({program.target}, schedule {program.attrs.get('schedule', 'grid')}): leave q-stages out")
    once = [name for name, ring in program.rings.items() if ring.stages == 1
            and any(isinstance(op, Copy) and op.region in ring.regions for op in program.body)]
    trial = replace(program, regions=dict(program.regions), rings=dict(program.rings))
    for name in once:
        ring = trial.rings[name] = replace(trial.rings[name], stages=once_stages, counts="tile")
        for r in ring.regions:
            trial.regions[r] = replace(trial.regions[r], stages=once_stages)
    if not plan_smem_fits(trial):
        raise PassError(f"wl-pipeline: q-stages = {once_stages}: {once_stages} Q tiles beside the K/V rings and O's "
                        f"staging tile do not fit the {targets.get(program.target).smem_limit} B of smem; use "
                        "q-stages=1, or fewer stages or a smaller block-n")
    program.regions, program.rings = trial.regions, trial.rings


STORE_STAGING_STAGES = 2     # a GEMM's staged store of C alternates two chunk buffers


def _chunk_staging(program: Program, store: Store) -> str:
    """A GEMM's C is stored through smem by TMA (unless its epilogue is "direct", sm_90a) in chunks of the tile's
    rows by one 128-byte swizzle span of columns: region `c` holds two such chunks (one is written while the
    previous one's TMA store reads the other)."""
    elem = program.outputs[store.output].elem
    columns = SWIZZLE_128B.span_bytes * 8 // targets.ELEMENT_BITS[elem]
    rows, width = store.tile
    if width % columns:
        raise PassError(f"wl-pipeline: the tile's {width} columns are not whole {columns}-column chunks of the "
                        f"staged {elem} store: use a block-n that is a multiple of {columns}")
    name = store.output
    program.regions[name] = Region(name, "smem", elem, (rows, columns), ("M", "N"), STORE_STAGING_STAGES)
    return name


def _with_majors(body, program: Program) -> list:
    """The MMAs' smem operands take their major-ness from the regions just made (a region's dims decide it)."""
    out = []
    for op in body:
        if isinstance(op, Loop):
            op = replace(op, body=tuple(_with_majors(op.body, program)))
        elif isinstance(op, Mma):
            fixed = {}
            for which in ("a", "b"):
                operand = getattr(op, which)
                region = program.regions.get(operand.name)
                if operand.source == "smem" and region is not None and region.dims:
                    fixed[which] = replace(operand, major=region.major_of(op.k_dim))
            op = replace(op, **fixed)
        out.append(op)
    return out


@register("wl-pipeline", "Multi-stage buffering: each tile load becomes an async copy into a ring of buffers "
          "(one ring per group of loads feeding one MMA; a load outside loops gets one stage)",
          options={"stages": int, "q-stages": int}, after=("wl-tile",))
def run(module, stages: int | None = None, q_stages: int | None = None):
    """stages defaults to 4 for a GEMM and 2 for an attention. q-stages (a persistent sm_90a attention's): 1, or 2:
    Q's ring gets two stages advancing once per tile, the next tile's Q loading during this one; unset: 2 for the
    persistent standard tiles (warploom.kernel.contract.default_attention_q_stages), else 1."""
    if stages is not None and not 2 <= stages <= 8:
        why = ("one stage cannot overlap loads with MMAs" if stages == 1 else
               "a ring needs at least two stages to load into" if stages < 1 else
               "8 is the most wl-pipeline offers; the smem limit caps most tiles lower, and warploom explain names the "
               "most stages that fit")
        raise PassError(f"wl-pipeline: stages = {stages}; use 2..8 ({why})")
    if q_stages is not None and q_stages not in ONCE_STAGES:
        raise PassError(f"wl-pipeline: q-stages = {q_stages}; use 1 or 2 (2: the next tile's Q loads during this "
                        "one, in a persistent sm_90a attention)")

    def edit(p: Program) -> None:
        n = DEFAULT_STAGES.get(p.kind, GEMM_STAGES) if stages is None else stages
        pipeline(p, n, _default_q_stages(p, n) if q_stages is None else q_stages)
    for kernel in kernel_ops(module):
        edit_program(kernel, edit)


def _default_q_stages(program: Program, stages: int) -> int:
    """Q's stages when q-stages is unset: the standard kernel's (contract.default_attention_q_stages)."""
    if program.kind != "attention":
        return 1
    _, block_n, head_dim = program.attrs["tile"]
    return default_attention_q_stages(program.target, program.attrs.get("schedule", "grid"), int(head_dim),
                                      int(block_n), stages)
