"""wl-specialize: split a pipelined kernel into warp roles with register budgets.

Warpgroup 0 becomes the producer: one elected thread issues every async copy.
Warpgroups 1..n are consumers: each issues the MMAs for its 64-row slice of the
tile (wgmma is m64 per warpgroup) and stores that slice (through the staging smem
of C with a named barrier per warpgroup, `epilogue`, unless wl-tile made the
epilogue direct: then from its registers). A consumer keeps
`mma-in-flight` MMA groups running while it waits for the next stage (so the
tensor cores never idle on the wait), and drains them after the loop. Registers move from the
producer to the consumers with setmaxnreg, so the budgets must fit the file:
warpgroup threads * (producer_regs + consumers * consumer_regs) <= the register file
(128 * (40 + 2 * 232) <= 65536 on sm_90a). Every hardware number comes from the kernel's target.

A kernel whose loop does register arithmetic between its MMAs (attention: S = Q K^T, the online softmax,
O += P V) gets the same two roles (the producer: every copy, in the loop structure of the kernel; the
consumers: everything else, 64 rows per warpgroup) with three differences:
- every run of MMAs is followed by `wl.mma_wait {pending = 0}`: the compute after it reads the accumulator
  (S), or the next iteration's compute rescales it (O), so no MMA group can stay in flight
  (`mma-in-flight` must be 0);
- the consumer warpgroups take turns at the tensor cores (FA3's ping-pong) for the MMAs that come before the
  loop's first compute, through a named barrier `turn` with one instance per warpgroup: sync on its own
  instance before them, arrive on the next warpgroup's after issuing them (then wait for the results). Before
  the loop the last warpgroup arrives on warpgroup 0's instance (warpgroup 0 goes first); after it warpgroup 0
  syncs once more, taking the last hand-over, so every barrier phase completes;
- budgets default to 24 (producer) and 240 (consumers): the consumers hold S, P, O and the row statistics.

With `overlap` (the default for such kernels; FA3's intra-warpgroup overlap) the consumer loop is software
pipelined so that the MMAs after the compute (O += P V) of key block j - 1 run while the compute (the softmax)
of block j does. The loop must be: a run of MMAs (S = Q K^T), one online softmax, a run of MMAs reading its P
(O += P V). The online softmax splits into `softmax` (S, statistics -> P, statistics, the correction `corr`)
and `rescale` (O *= corr, once the P V that accumulates into O retired), and the loop gets three sections:
    first  (block 0)       sync own; S = Q K_0^T; arrive next; wait 0; softmax
    body   (block j >= 1)  sync own; S = Q K_j^T; O += P_{j-1} V_{j-1} (lag 1); arrive next;
                           wait 1 (S retired, P V in flight); softmax; wait 0; rescale
    last   (after block n-1)  O += P_{n-1} V_{n-1} (lag 1); wait 0
P is carried from one iteration to the next. The turn covers both MMAs issued in an iteration; the last P V
takes none (each warpgroup still takes one turn per key block, so the hand-overs balance as before).
"""
from __future__ import annotations

from dataclasses import replace

from warploom import targets
from warploom.dialect.kernel_ir import kernel_ops
from warploom.kernel import Compute, Copy, Loop, Mma, MmaWait, NamedBarrier, Program, Region, Ring, Role, Store, Sync
from warploom.targets import Target

from .registry import PassError, edit_program, register


def check_budget(target: Target, producer_regs: int, consumer_regs: int, consumers: int) -> None:
    for name, regs in (("producer-regs", producer_regs), ("consumer-regs", consumer_regs)):
        try:
            target.check_setmaxnreg(regs)
        except ValueError as e:
            raise PassError(f"{name}: {e}") from None
    threads, file, step = target.warpgroup_threads, target.register_file, target.setmaxnreg[2]
    used = threads * (producer_regs + consumers * consumer_regs)
    if used > file:
        raise PassError(f"register budget {producer_regs} + {consumers} x {consumer_regs} per thread needs "
                        f"{used} registers; the register file holds {file}: lower consumer-regs to "
                        f"{(file // threads - producer_regs) // consumers // step * step}")


def tile_rows(program: Program) -> int:
    """The accumulator rows of the kernel's tile, which its consumer warpgroups share: block-m, or block-n in a
    swap-AB GEMM (its MMA's rows run along N)."""
    tile = program.attrs["tile"]
    return tile[1] if program.attrs.get("swap_ab") else tile[0]


def gemm_parts(program: Program, who: str) -> tuple:
    """(the K loop, the store, the loop's copies, its MMA) of a GEMM-shaped kernel; PassError for any other."""
    loops = [op for op in program.body if isinstance(op, Loop)]
    stores = [op for op in program.body if isinstance(op, Store)]
    if len(loops) != 1 or len(stores) != 1:
        raise PassError(f"{who} splits a GEMM-shaped kernel (one K loop, one store); this one has "
                        f"{len(loops)} loops and {len(stores)} stores")
    (loop,), (store,) = loops, stores
    copies = tuple(op for op in loop.body if isinstance(op, Copy))
    (mma,) = [op for op in loop.body if isinstance(op, Mma)]
    return loop, store, copies, mma


def specialize(program: Program, producer_regs: int, consumer_regs: int, mma_in_flight: int) -> None:
    """The kernel-level loop and store become two roles: the producer copies, the consumers multiply and store."""
    target = targets.get(program.target)
    rows = target.mma_rows_per_warpgroup
    consumers = tile_rows(program) // rows
    check_budget(target, producer_regs, consumer_regs, consumers)
    stages = program.attrs["stages"]
    if not 0 <= mma_in_flight < stages:
        raise PassError(f"mma-in-flight = {mma_in_flight}: must be 0..{stages - 1} (stages - 1), since a "
                        "stage is refilled only after its MMAs retire")
    loop, store, copies, mma = gemm_parts(program, "wl-specialize")
    _, n, k = mma.shape
    warps_per_wg = target.warpgroup_threads // target.warp_size
    consumer_body = [replace(loop, body=(replace(mma, shape=(rows, n, k)), MmaWait(mma_in_flight)))]
    if mma_in_flight:
        consumer_body.append(MmaWait(0))       # the accumulators are final only now
    if store.region is not None:           # C through smem and TMA: each warpgroup syncs its own 128 threads
        epilogue_barriers(program, target, consumers)
    consumer_body.append(replace(store, tile=(rows, store.tile[1]),
                                 barrier=EPILOGUE if store.region is not None else None))
    per_warpgroup_registers(program, rows)
    program.roles = [
        Role("producer", 0, warps_per_wg, "thread", producer_regs, body=(replace(loop, body=copies, carries=()),)),
        Role("consumer", warps_per_wg, warps_per_wg * consumers, "warpgroup", consumer_regs,
             body=tuple(consumer_body)),
    ]
    program.body = ()
    for name, ring in program.rings.items():      # the producer fills every ring, the consumers drain it
        program.rings[name] = replace(ring, producer="producer", consumers=("consumer",))
    program.threads = target.warpgroup_threads * (1 + consumers)


def per_warpgroup_registers(program: Program, rows: int) -> None:
    """Register tiles are per issuing unit: the tile's rows become each consumer warpgroup's `rows`."""
    whole = tile_rows(program)
    program.registers = {name: (rows, *shape[1:]) if shape and shape[0] == whole else shape
                         for name, shape in program.registers.items()}


TURN = "turn"                 # the named barrier of the consumers' turns at the tensor cores
EPILOGUE = "epilogue"         # per consumer warpgroup: its output tile is in the staging smem, one thread may store it


def epilogue_barriers(program: Program, target: Target, consumers: int) -> None:
    """One named barrier per consumer warpgroup for its staged store (the next free ids)."""
    lo, hi = target.named_barrier_ids
    first = lo + sum(nb.count for nb in program.named_barriers.values())
    if first + consumers - 1 > hi:
        raise PassError(f"wl-specialize needs named barriers {first}..{first + consumers - 1} for the "
                        f"consumers' staged stores; {program.target} has ids {lo}..{hi}")
    program.named_barriers[EPILOGUE] = NamedBarrier(EPILOGUE, first, target.warpgroup_threads, count=consumers)
CORR = "corr"                 # overlap: the softmax's correction factor of O, one per row


def specialize_compute(program: Program, producer_regs: int, consumer_regs: int, mma_in_flight: int,
                       overlap: bool = False) -> None:
    """A kernel with register compute between its MMAs (attention): the producer keeps every copy where it is;
    the consumers keep the rest, wait for each run of MMAs, and take turns for the MMAs before the loop's first
    compute (see the module docstring)."""
    target = targets.get(program.target)
    rows = target.mma_rows_per_warpgroup
    consumers = program.attrs["tile"][0] // rows
    check_budget(target, producer_regs, consumer_regs, consumers)
    if mma_in_flight:
        raise PassError(f"mma-in-flight = {mma_in_flight}: this kernel computes on its MMAs' accumulators in "
                        "registers between MMAs (the online softmax reads S and rescales O), so every MMA must "
                        "retire first; use mma-in-flight=0")
    loops = [op for op in program.body if isinstance(op, Loop)]
    if len(loops) != 1:
        raise PassError(f"wl-specialize splits a kernel with one loop; this one has {len(loops)}")
    warps_per_wg = target.warpgroup_threads // target.warp_size
    pingpong = consumers > 1
    if pingpong:
        lo, hi = target.named_barrier_ids
        first = lo + sum(nb.count for nb in program.named_barriers.values())
        if first + consumers - 1 > hi:
            raise PassError(f"wl-specialize needs named barriers {first}..{first + consumers - 1} for the "
                            f"consumers' turns; {program.target} has ids {lo}..{hi}")
        # each instance joins two warpgroups: the one whose turn it is (sync) and the one before it (arrive)
        program.named_barriers[TURN] = NamedBarrier(TURN, first, 2 * target.warpgroup_threads, count=consumers)
    if any(isinstance(op, Store) and op.region is not None for op in program.body):
        epilogue_barriers(program, target, consumers)

    def per_warpgroup(op):
        if isinstance(op, Mma):
            return replace(op, shape=(rows, *op.shape[1:]))
        if isinstance(op, Store):
            return replace(op, tile=(rows, *op.tile[1:]), barrier=EPILOGUE if op.region is not None else None)
        return op

    def consumer_loop(loop: Loop) -> Loop:
        ops = [per_warpgroup(op) for op in loop.body if not isinstance(op, Copy)]
        if overlap:
            return overlapped_loop(loop, ops)
        first_compute = next((i for i, op in enumerate(ops) if isinstance(op, Compute)), len(ops))
        out = []
        for i, op in enumerate(ops):
            mma = isinstance(op, Mma)
            turn = pingpong and mma and i < first_compute
            if turn and not (i and isinstance(ops[i - 1], Mma)):
                out.append(Sync(TURN))                                   # my turn at the tensor cores
            out.append(op)
            last_of_run = mma and not (i + 1 < len(ops) and isinstance(ops[i + 1], Mma))
            if turn and last_of_run:
                out.append(Sync(TURN, arrive_only=True, slot="next"))    # the next warpgroup's turn
            if last_of_run:
                out.append(MmaWait(0))                                   # the compute reads the accumulators
        return replace(loop, body=tuple(out))

    def overlapped_loop(loop: Loop, ops: list) -> Loop:
        kinds = "".join("m" if isinstance(op, Mma) else "c" if isinstance(op, Compute) else "?" for op in ops)
        n_s = len(kinds) - len(kinds.lstrip("m"))
        if kinds.strip("m") != "c" or not 0 < n_s < len(kinds) - 1 or ops[n_s].kind != "online_softmax":
            raise PassError("overlap: the loop must be MMAs, one online softmax, MMAs reading its output (attention's "
                            f"S = Q K^T, softmax, O += P V); this one is {[type(op).__name__ for op in ops]}: "
                            "use overlap=false")
        first_mmas, softmax, later = ops[:n_s], ops[n_s], ops[n_s + 1:]
        s_name, max_name, sum_name, o_name = softmax.reads
        p_name = softmax.writes[0]
        split = (Compute("softmax", (s_name, max_name, sum_name), (p_name, max_name, sum_name, CORR)),
                 Compute("rescale", (o_name, CORR), (o_name,)))
        lagged = tuple(replace(op, lag=1) for op in later)
        sync, hand_over = ((Sync(TURN),), (Sync(TURN, arrive_only=True, slot="next"),)) if pingpong else ((), ())
        first = (*sync, *first_mmas, *hand_over, MmaWait(0), split[0])
        body = (*sync, *first_mmas, *lagged, *hand_over, MmaWait(len(lagged)), split[0], MmaWait(0), split[1])
        last = (*lagged, MmaWait(0))
        carries = tuple(loop.carries) + ((p_name,) if p_name not in loop.carries else ())
        return replace(loop, first=first, body=body, last=last, carries=carries)

    producer, consumer = [], []
    for op in program.body:
        if isinstance(op, Copy):
            producer.append(op)
        elif isinstance(op, Loop):
            producer.append(replace(op, body=tuple(c for c in op.body if isinstance(c, Copy)), carries=()))
            if pingpong:        # the last warpgroup hands warpgroup 0 the first turn
                consumer.append(Sync(TURN, arrive_only=True, slot="next", warpgroup=consumers - 1, tiles="first"))
            consumer.append(consumer_loop(op))
            if pingpong:        # warpgroup 0 takes the last warpgroup's last hand-over
                consumer.append(Sync(TURN, warpgroup=0, tiles="last"))
        else:
            consumer.append(per_warpgroup(op))
    per_warpgroup_registers(program, rows)
    if overlap:
        program.registers[CORR] = (rows,)
    program.roles = [
        Role("producer", 0, warps_per_wg, "thread", producer_regs, body=tuple(producer)),
        Role("consumer", warps_per_wg, warps_per_wg * consumers, "warpgroup", consumer_regs, body=tuple(consumer)),
    ]
    program.body = ()
    for name, ring in program.rings.items():
        program.rings[name] = replace(ring, producer="producer", consumers=("consumer",))
    program.threads = target.warpgroup_threads * (1 + consumers)


# budgets (producer, consumer), MMA groups left in flight and intra-warpgroup overlap, per kind of kernel
DEFAULTS = {"gemm": (40, 232, 1, False), "attention": (24, 240, 0, True)}


# sm_100a GEMM roles (warps): one TMA warp, one MMA warp, four epilogue warps (one per TMEM lane quadrant)
TCGEN05_ROLES = (("producer", 1, "thread"), ("mma", 1, "thread"), ("epilogue", 4, "warp"))
TMEM_FREE = "tmem_free"       # the epilogue is done with TMEM: the MMA warp may free it
TMEM_ADDR = "tmem_addr"       # the smem word tcgen05.alloc writes the TMEM base address to
STAGED = "staged"             # the epilogue warps' chunk of C is in the staging smem: one thread may TMA-store it
RELAY = "relay"               # a CTA pair: the other CTA's MMA warp, forwarding "my stage landed" to the leader


def specialize_tcgen05(program: Program) -> None:
    """sm_100a: tcgen05.mma is issued by one thread for the whole tile and accumulates in Tensor Memory, so the
    roles are warps (module docstring, "sm_100a"): `producer` copies, `mma` issues every MMA, `epilogue` (four warps,
    warp w reading TMEM lanes 32 (w % 4) .. + 31) loads the accumulator and stores C. The accumulator becomes a ring
    `acc` counted in tiles: two TMEM stages in a persistent kernel where they fit (the epilogue of one tile overlaps
    the MMAs of the next), one otherwise. The MMA warp allocates TMEM and frees it once the epilogue warps, through
    named barrier `tmem_free`, say they are done."""
    target = targets.get(program.target)
    loop, store, copies, mma = gemm_parts(program, "wl-specialize (sm_100a)")
    acc = program.regions.get(mma.acc.name)
    if acc is None or acc.space != "tmem":
        raise PassError(f"wl-specialize (sm_100a): the MMA accumulates into {mma.acc.source} {mma.acc.name!r}; "
                        "tcgen05.mma accumulates in Tensor Memory (wl-tile{target=sm_100a} declares it)")
    persistent = program.attrs.get("schedule") == "persistent"
    columns = acc.shape[1] * targets.ELEMENT_BITS[acc.elem] // target.tmem.cell_bits
    stages = 2 if persistent and 2 * columns <= target.tmem.columns else 1
    program.regions[acc.name] = replace(acc, stages=stages)
    program.regions[TMEM_ADDR] = Region(TMEM_ADDR, "smem", "i32", (1,))
    program.rings[acc.name] = Ring(acc.name, stages, (acc.name,), producer="mma", consumers=("epilogue",),
                                   counts="tile")
    first, roles = 0, {}
    for name, warps, issue in TCGEN05_ROLES:
        roles[name] = (first, warps, issue)
        first += warps
    epilogue_threads = roles["epilogue"][1] * target.warp_size
    program.named_barriers[TMEM_FREE] = NamedBarrier(TMEM_FREE, target.named_barrier_ids[0],
                                                     epilogue_threads + target.warp_size)
    if store.region is not None:         # the staged store's hand-off between the epilogue warps and its storer
        program.named_barriers[STAGED] = NamedBarrier(STAGED, target.named_barrier_ids[0] + 1, epilogue_threads)
        store = replace(store, barrier=STAGED)
    bodies = {
        "producer": (replace(loop, body=copies, carries=()),),
        "mma": (replace(loop, body=(mma,), carries=()), Sync(TMEM_FREE, tiles="last")),
        "epilogue": (store, Sync(TMEM_FREE, arrive_only=True, tiles="last")),
    }
    pair = program.attrs.get("cta_group", 1) == 2
    program.roles = [Role(name, first, warps, issue, body=bodies[name], rank=0 if pair and name == "mma" else None)
                     for name, (first, warps, issue) in roles.items()]
    if pair:      # the other CTA's MMA warp: tells the leader when its operand stages landed; allocates and frees TMEM
        mma_first, mma_warps, mma_issue = roles["mma"]
        program.roles.append(Role(RELAY, mma_first, mma_warps, mma_issue, rank=1,
                                  body=(replace(loop, body=(), carries=()), Sync(TMEM_FREE, tiles="last"))))
    program.body = ()
    for name, ring in program.rings.items():
        if name != acc.name:                       # the producer fills the operand rings, the MMA warp drains them
            program.rings[name] = replace(ring, producer="producer", consumers=("mma",),
                                          relay=RELAY if pair else None)
    program.threads = first * target.warp_size


# sm_100a attention roles (FA4-style; docs/attention-sm100.md): name, warps, issue, setmaxnreg budget
# (budgets measured with ptxas 13.0: the MMA thread's unrolled key block spills at 48 or 64 registers, and at 80 with
# the shared K/V ring's slot arithmetic; none at 88; the softmax none at 168; the correction spills 4 bytes at 80 in the
# packed-sequence (varlen) kernel at head dim 128, none at 88; docs/attention-sm100.md)
FA4_ROLES = (("softmax0", 4, "warpgroup", 168), ("softmax1", 4, "warpgroup", 168), ("correction", 4, "warpgroup", 88),
             ("mma", 1, "thread", 88), ("load", 1, "thread", 88), ("spare", 2, "warp", 88))
CORRECTION = "correction"     # smem rows the softmax warpgroups hand the correction warpgroup: [tile][factor, row sum]
EPILOGUE = "epilogue"         # named barrier: the correction warpgroup's staged O store


def specialize_fa4(program: Program) -> None:
    """sm_100a attention: the FA4 roles over 16 warps. `load` (one thread) copies the Q tiles once and the K and V
    stages; `mma` (one thread) issues S_i = Q_i K^T and O_i += P_i V for both Q tiles; `softmax<i>` (a warpgroup per
    Q tile, thread t of warp w owning row 32 (w % 4) + t: its TMEM lane) turns S_i into P_i and each row's
    correction factor and running sum, and after the last key block stores the LSE; `correction` (a warpgroup)
    rescales O_i in TMEM, then normalizes it and stores it through Q_i's smem by TMA; `spare` has no work. Budgets:
    168 for the softmax warpgroups, 88 for the correction and the rest: the whole register file.
    Declares the
    correction rows (smem, [tile][factor, row sum][row]), the TMEM address slot, named barriers `tmem_free` (the
    correction warpgroup tells the MMA warp it is done with TMEM, which it then frees) and `epilogue` (the staged
    store); the mbarrier hand-offs are wl-plan-barriers'."""
    target = targets.get(program.target)
    loops = [op for op in program.body if isinstance(op, Loop)]
    if len(loops) != 1:
        raise PassError(f"wl-specialize (sm_100a attention) takes one key loop; this kernel has {len(loops)}")
    (loop,) = loops
    tiles = int(program.attrs.get("q_tiles", 2))
    copies = tuple(op for op in program.body if isinstance(op, Copy))
    loop_copies = tuple(op for op in loop.body if isinstance(op, Copy))
    mmas = tuple(op for op in loop.body if isinstance(op, Mma))
    computes = [op for op in loop.body if isinstance(op, Compute)]
    softmax = [op for op in computes if op.kind == "online_softmax"]
    rescale = tuple(op for op in computes if op.kind == "rescale")
    after = [op for op in program.body if not isinstance(op, (Copy, Loop))]
    if len(softmax) != tiles:
        raise PassError(f"wl-specialize (sm_100a attention): {len(softmax)} online softmaxes for {tiles} Q tiles")
    # after the loop: the LSE (from the row statistics the softmax holds) by softmax i, O by the correction
    lse = {i: tuple(op for op in after if (isinstance(op, Compute) and op.kind == "lse" and op.writes == (f"lse{i}",))
                    or (isinstance(op, Store) and op.value == f"lse{i}")) for i in range(tiles)}
    rest = tuple(op for op in after if not any(op in ops for ops in lse.values()))
    threads = target.warpgroup_threads
    program.named_barriers[TMEM_FREE] = NamedBarrier(TMEM_FREE, target.named_barrier_ids[0], threads + target.warp_size)
    program.named_barriers[EPILOGUE] = NamedBarrier(EPILOGUE, target.named_barrier_ids[0] + 1, threads)
    rest = tuple(replace(op, barrier=EPILOGUE) if isinstance(op, Store) and op.region is not None else op
                 for op in rest)
    bodies = {"load": (*copies, replace(loop, body=loop_copies, carries=())),
              "mma": (replace(loop, body=mmas, carries=()), Sync(TMEM_FREE)),
              "correction": (replace(loop, body=rescale, carries=()), *rest, Sync(TMEM_FREE, arrive_only=True)),
              "spare": ()}
    for i, op in enumerate(softmax):
        bodies[f"softmax{i}"] = (replace(loop, body=(op,), carries=tuple(c for c in loop.carries
                                                                          if c.endswith(str(i)))), *lse[i])
    first, roles = 0, []
    for name, warps, issue, regs in FA4_ROLES:
        roles.append(Role(name, first, warps, issue, regs, body=bodies[name]))
        first += warps
    program.roles = roles
    program.body = ()
    program.threads = first * target.warp_size
    rows = target.tmem.lanes
    _reserve_rope_and_scales(program, tiles, rows)
    program.regions[CORRECTION] = Region(CORRECTION, "smem", "f32", (tiles, 2, rows))
    for name, size in _scale_regions(program, tiles, rows):
        program.regions[name] = Region(name, "smem", program.attrs["scale_dtype"], size)
    program.regions[TMEM_ADDR] = Region(TMEM_ADDR, "smem", "i32", (1,))
    for name, ring in program.rings.items():        # the load warp fills every ring, the MMA warp reads them
        program.rings[name] = replace(ring, producer="load", consumers=("mma",))


def _reserve_rope_and_scales(program: Program, tiles: int, rows: int) -> None:
    """The seed's rope columns (MLA: rope_depth > 0): q_rope right after the Q tiles, k_rope after the K/V stages,
    each planned (wl-plan-smem places them in the seed's order) but not loaded or lowered yet."""
    depth = int(program.attrs.get("rope_depth", 0))
    if not depth:
        return
    regions, elem = dict(program.regions), program.inputs["q"].elem
    kv = [r for r in regions.values() if r.space == "smem" and r.dims == ("N", "D")]
    stages, block_n = max(r.stages for r in kv), kv[0].shape[0]
    order = []
    for name, region in regions.items():
        order.append((name, region))
        if name == f"q{tiles - 1}":
            order.append(("q_rope", Region("q_rope", "smem", elem, (tiles * rows, depth), ("M", "R"))))
        if region is kv[-1]:
            order.append(("k_rope", Region("k_rope", "smem", elem, (block_n, depth), ("N", "R"), stages)))
    program.regions = dict(order)


def _scale_regions(program: Program, tiles: int, rows: int) -> list:
    """The seed's per-token scales (FP8: scale_dtype set): q_scale a value per query row, k_scale per key of each
    K stage, after the correction rows; planned, not lowered yet."""
    if not program.attrs.get("scale_dtype"):
        return []
    kv = [r for r in program.regions.values() if r.space == "smem" and r.dims == ("N", "D")]
    return [("q_scale", (tiles * rows,)), ("k_scale", (max(r.stages for r in kv), kv[0].shape[0]))]


def specialize_any(program: Program, producer_regs: int | None, consumer_regs: int | None,
                   mma_in_flight: int | None, overlap: bool | None = None) -> None:
    """The GEMM's roles, or (a loop with register compute between MMAs) `specialize_compute`'s; on sm_100a
    `specialize_tcgen05`'s (no register budgets or MMA groups to set there)."""
    if targets.get(program.target).accumulator == "tmem":
        given = [n for n, v in (("producer-regs", producer_regs), ("consumer-regs", consumer_regs),
                                ("mma-in-flight", mma_in_flight), ("overlap", overlap)) if v is not None]
        if given:
            raise PassError(f"wl-specialize: {', '.join(given)} apply to sm_90a's warpgroup roles; the sm_100a "
                            "roles (a TMA warp, an MMA warp, four epilogue warps) take no options")
        (specialize_fa4 if program.kind == "attention" else specialize_tcgen05)(program)
        return
    defaults = DEFAULTS.get(program.kind, DEFAULTS["gemm"])
    regs_p, regs_c, flight, ov = (d if v is None else v for v, d in
                                  zip((producer_regs, consumer_regs, mma_in_flight, overlap), defaults))
    if consumer_regs is None:              # more consumers than the default budget fits: the most that does
        target = targets.get(program.target)
        consumers = tile_rows(program) // target.mma_rows_per_warpgroup
        step = target.setmaxnreg[2]
        regs_c = min(regs_c, (target.register_file // target.warpgroup_threads - regs_p) // consumers // step * step)
    computes = any(isinstance(op, Compute) for loop in program.body if isinstance(loop, Loop) for op in loop.body)
    if computes:
        specialize_compute(program, regs_p, regs_c, flight, ov)
    elif overlap:
        raise PassError("overlap = true: the intra-warpgroup overlap pipelines a loop with register compute between "
                        "its MMAs (attention); this kernel has none (use mma-in-flight for a GEMM)")
    else:
        specialize(program, regs_p, regs_c, flight)


@register("wl-specialize", "Warp roles: a TMA producer warpgroup and wgmma consumer warpgroups, with setmaxnreg "
          "budgets (attention: the consumers' ping-pong on a named barrier, and the intra-warpgroup overlap)",
          options={"producer-regs": int, "consumer-regs": int, "mma-in-flight": int, "overlap": bool},
          after=("wl-tile", "wl-pipeline"))
def run(module, producer_regs: int | None = None, consumer_regs: int | None = None,
        mma_in_flight: int | None = None, overlap: bool | None = None):
    """Defaults: GEMM 40 / 232 registers, 1 MMA group in flight; attention 24 / 240, none in flight, overlap on."""
    for kernel in kernel_ops(module):
        edit_program(kernel, lambda p: specialize_any(p, producer_regs, consumer_regs, mma_in_flight, overlap))
