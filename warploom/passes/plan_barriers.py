"""wl-plan-barriers: the mbarriers of a specialized kernel, and the waits and arrives that use them.

For each ring of `stages` operand buffers there are two barrier rings:
  full[s]   arrivals 1 (the producer's arrive.expect_tx) + the stage's TMA bytes;
            consumers wait on it before their MMAs read stage s;
  empty[s]  arrivals = consumer warpgroups (one elected thread each, after its
            MMAs on stage s retired); the producer waits on it before refilling s.
            A ring that a copy fills by multicast (an sm_90a 2x1 cluster sharing B) is refilled in
            every CTA of the cluster at once, so each consumer warpgroup frees the slot in every CTA
            (`Arrive.cta = "pair"`) and empty[s] counts the consumers of all of them.
K tile i uses stage s = i % stages and phase (i / stages) & 1; the consumer waits
for that phase of full[s], the producer for the opposite phase of empty[s], so its
first lap over fresh barriers does not block. When consumers keep `pending` MMA
groups in flight (wl.mma_wait {pending}), the stage they may free at iteration i
is the one of iteration i - pending: the arrive carries that `lag`. The size of one mbarrier
comes from the kernel's target, element sizes from `warploom.targets.ELEMENT_BITS`.

A ring of one stage loaded once, outside the producer's loops (attention's Q), has only a full
barrier: the producer announces its bytes once, the consumers wait for it once, before the loop
that reads it (with two stages advancing per tile, `counts = "tile"`: the same ops, on tile t's stage t % 2). In a
persistent kernel "once" is once per tile, so such a ring gets an empty barrier
too (one arrival per consumer warpgroup): the consumers free it after the loop that reads it and the
named-barrier syncs that close that loop (or, when a staged store's region shares the tile's bytes, after
that store), and the producer waits for it before loading the next tile's Q (its phase is the CTA's tile
count). A kernel with several rings names its barriers after them (q_full, k_full, k_empty,
v_full, v_empty, in the rings' order). A consumer's wait goes ahead of the named-barrier syncs just
before the MMA (or loop) it guards: it takes its turn at the tensor cores only once its data landed.

A software-pipelined loop (attention's intra-warpgroup overlap: sections first, body, last) gets the protocol
in each section. An MMA with a lag (P_{j-1} V_{j-1}) is guarded by a wait with the same lag, and its slot is
freed after the first wait_group that retires it (here the wait_group 0 after the softmax, not the
wait_group 1 that retires S_j): the arrive carries the MMA's lag.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from warploom import targets
from warploom.dialect.kernel_ir import kernel_ops
from warploom.kernel import Arrive, Compute, Copy, Loop, MBarrier, Mma, MmaWait, Program, Store, Sync, Wait
from warploom.kernel.program import BARRIER_STORAGE
from warploom.kernel.contract import ATTENTION_WALKS

from .registry import PassError, edit_program, register


@dataclass(frozen=True)
class BarrierRing:
    name: str
    count: int          # one mbarrier per stage
    arrivals: int       # arrivals that complete a phase
    tx_bytes: int       # async-copy bytes that must land too (0: none)
    notes: str
    ring: str           # the wl.ring it paces
    side: str           # "full" (data landed) or "empty" (slot free)


def barrier_names(ring: str, rings: int) -> tuple[str, str]:
    """(full, empty) barrier names of `ring`; a kernel with a single ring keeps the plain names."""
    return ("full", "empty") if rings == 1 else (f"{ring}_full", f"{ring}_empty")


def _frees_per_phase(program: Program, role_name: str) -> int:
    """The arrivals one consumer role makes to free a slot: a tcgen05 MMA thread one commit, a warp role every
    thread (each after its own tcgen05.wait::ld), a warpgroup role one thread per warpgroup."""
    target = targets.get(program.target)
    role = program.role(role_name)
    if role.issue == "thread":
        return 1
    if role.issue == "warp":
        return role.warps * target.warp_size
    return role.warps * target.warp_size // target.warpgroup_threads


def multicast_ctas(program: Program, ring) -> int:
    """The CTAs whose consumers free a slot of `ring`: the cluster's size when a copy into the ring multicasts (each
    CTA's producer writes into every CTA's slot, so it may refill the slot only once all of them are done), else 1."""
    copies = [op for role in program.roles for op in role.walk() if isinstance(op, Copy) and op.region in ring.regions]
    if not any(op.multicast for op in copies):
        return 1
    size = 1
    for d in program.attrs.get("cluster", [1, 1, 1]):
        size *= int(d)
    return size


def barrier_rings(program: Program) -> list[BarrierRing]:
    """The mbarriers of every ring of a specialized program, in storage order; the smem planner sizes their storage
    from this. full: the producer's one expect_tx arrival plus the bytes of one stage of the ring's regions (a TMEM
    accumulator ring: the MMA thread's one commit, no bytes); empty (rings whose slots are reused): the consumers'
    arrivals (`_frees_per_phase`)."""
    out = []
    pair = program.attrs.get("cta_group", 1) == 2
    for ring in program.rings.values():
        # a CTA pair's accumulator is freed by the epilogue threads of both CTAs, on the leader's barrier; a slot
        # that a multicast fills in every CTA of the cluster is freed by the consumers of all of them
        landing = 2 if pair and ring.counts == "tile" else multicast_ctas(program, ring)
        consumers = sum(_frees_per_phase(program, c) for c in ring.consumers) * landing
        tmem = all(program.regions[r].space == "tmem" for r in ring.regions)
        tx = 0 if tmem else sum(program.regions[r].stage_bytes for r in ring.regions)
        full, empty = barrier_names(ring.name, len(program.rings))
        landed = (f"MMAs into {' + '.join(ring.regions)} complete (tcgen05.commit)" if tmem
                  else f"TMA of {' + '.join(ring.regions)} landed")
        out.append(BarrierRing(full, ring.stages, 1, tx, landed, ring.name, "full"))
        if ring.relay is not None:
            out.append(BarrierRing(f"{ring.name}_peer", ring.stages, 1, 0, f"the other CTA's {ring.name} stage landed "
                                   f"(its {ring.relay} warp arrives on the leader's barrier)", ring.name, "peer"))
        if ring.stages > 1 or program.attrs.get("schedule") in ATTENTION_WALKS:   # a walk loads Q once a tile
            freed = "epilogue read the accumulator" if tmem else "consumers' MMAs on the stage retired"
            out.append(BarrierRing(empty, ring.stages, consumers, 0, freed, ring.name, "empty"))
    return out + fa4_barriers(program)


def fa4_barriers(program: Program) -> list[BarrierRing]:
    """The sm_100a attention's Tensor Memory hand-offs, one mbarrier each per Q tile i, used once per key block
    (phase = block & 1): s<i>_full, the MMA thread's commit once S_i = Q_i K^T is done; p<i>_full, every thread of
    softmax<i> once P_i is in TMEM and the row's factor and sum in smem; o<i>_full, the commit once O_i += P_i V is
    done (which also frees S_i's columns for the next S_i, as the MMA thread waits on it before that MMA); o<i>_ready,
    every correction thread once O_i is rescaled for the next P_i V (docs/attention-sm100.md, "Hand-offs")."""
    if program.kind != "attention" or not targets.get(program.target).accumulator == "tmem":
        return []
    target = targets.get(program.target)
    out = []
    for i in range(int(program.attrs.get("q_tiles", 2))):
        softmax = program.role(f"softmax{i}").warps * target.warp_size
        correction = program.role("correction").warps * target.warp_size
        out += [BarrierRing(f"s{i}_full", 1, 1, 0, f"S{i} = Q{i} K^T done (tcgen05.commit)", f"s{i}", "s_full"),
                BarrierRing(f"p{i}_full", 1, softmax, 0, f"P{i} in TMEM, factor and sum in smem (softmax{i})",
                            f"s{i}", "p_full"),
                BarrierRing(f"o{i}_full", 1, 1, 0, f"O{i} += P{i} V done (tcgen05.commit)", f"o{i}", "o_full"),
                BarrierRing(f"o{i}_ready", 1, correction, 0, f"O{i} rescaled (correction)", f"o{i}", "o_ready")]
    return out


def _fa4_hand_offs(program: Program) -> None:
    """Each role's waits and arrivals on the `fa4_barriers`, at every key block j:
        mma         wait o<i>_full (phase^1: P_i V of block j-1 done, S_i's columns free; passes at j = 0), S_i,
                    commit s<i>_full; ...; wait p<i>_full and o<i>_ready, P_i V, commit o<i>_full
        softmax<i>  wait s<i>_full, the softmax, arrive p<i>_full
        correction  per tile: wait p<i>_full (the factor), wait o<i>_full (phase^1: the P_i V it rescales is done),
                    rescale, arrive o<i>_ready; after the loop, in its last section (iteration `trips`, whose phase^1 is
                    the last block's phase), wait o<i>_full before O_i is normalized and stored over Q_i (every MMA
                    reading Q_i is done then)."""
    def mma_ops(ops):
        out = []
        for op in ops:
            if isinstance(op, Mma) and op.acc.name.startswith("s"):
                i = op.acc.name[1:]
                _wait_before(out, Wait(f"o{i}_full", "phase^1"))
                out += [op, Arrive(f"s{i}_full", per="commit")]
            elif isinstance(op, Mma) and op.a.name.startswith("p"):
                i = op.a.name[1:]
                _wait_before(out, Wait(f"p{i}_full", "phase"))
                _wait_before(out, Wait(f"o{i}_ready", "phase"))
                out += [op, Arrive(f"o{i}_full", per="commit")]
            else:
                out.append(op)
        return tuple(out)

    def softmax_ops(ops, i):
        return (Wait(f"s{i}_full", "phase"), *ops, Arrive(f"p{i}_full", per="thread"))

    def correction_ops(ops):
        out = []
        for op in ops:
            if isinstance(op, Compute) and op.kind == "rescale":
                i = op.writes[0][1:]
                out += [Wait(f"p{i}_full", "phase"), Wait(f"o{i}_full", "phase^1"), op,
                        Arrive(f"o{i}_ready", per="thread")]
            else:
                out.append(op)
        return tuple(out)

    roles = []
    for role in program.roles:
        body = role.body
        if role.name == "mma":
            body = tuple(replace(op, body=mma_ops(op.body)) if isinstance(op, Loop) else op for op in body)
        elif role.name.startswith("softmax"):
            i = role.name[len("softmax"):]
            body = tuple(replace(op, body=softmax_ops(op.body, i)) if isinstance(op, Loop) else op for op in body)
        elif role.name == "correction":
            tiles = [op.writes[0][1:] for op in role.walk() if isinstance(op, Compute) and op.kind == "rescale"]
            body = tuple(replace(op, body=correction_ops(op.body),
                                 last=tuple(Wait(f"o{i}_full", "phase^1") for i in tiles))
                         if isinstance(op, Loop) else op for op in body)
        roles.append(replace(role, body=body))
    program.roles = roles


def _reads(op, regions) -> bool:
    """True when `op` is (or a loop holding) an MMA reading one of `regions`."""
    if isinstance(op, Loop):
        return any(_reads(o, regions) for _, ops in op.sections for o in ops)
    return isinstance(op, Mma) and bool({op.a.name, op.b.name} & set(regions))


def _wait_before(out: list, wait: Wait) -> None:
    """Append `wait`, ahead of the named-barrier syncs that directly precede the op it guards: a consumer waits
    for its data before it takes (or hands on) its turn at the tensor cores, so a turn is never held while the
    data is still in flight."""
    at = len(out)
    while at and isinstance(out[at - 1], Sync):
        at -= 1
    out.insert(at, wait)


def _loaded_once(role_body: tuple, regions) -> bool:
    """True when the producer copies into `regions` outside any loop (attention's Q: one tile per CTA)."""
    return any(isinstance(op, Copy) and op.region in regions for op in role_body)


def _frees_at(body: tuple, at: int) -> tuple[int, int] | None:
    """(index, lag) of the MmaWait that frees the stage the MMA body[at] reads: the first wait after it that
    leaves no more groups in flight than were committed after it (so it retired: the arrive frees the MMA's own
    stage, its lag), else the first wait after it (a GEMM keeping `pending` groups in flight: the stage of
    `pending` iterations earlier retired)."""
    after, fallback = 0, None
    for i in range(at + 1, len(body)):
        op = body[i]
        if isinstance(op, Mma):
            after += 1
        elif isinstance(op, MmaWait):
            if op.pending <= after:
                return i, body[at].lag
            if fallback is None:
                fallback = (i, body[at].lag + op.pending - after)
    return fallback


def _last_reader(body: tuple, regions) -> tuple[int, int] | None:
    """(index, 0) of the last MMA in `body` reading `regions`: a tcgen05 MMA thread frees the slot right after it
    with a commit (the arrival comes once those MMAs completed: no wait needed)."""
    at = [i for i, op in enumerate(body) if isinstance(op, Mma) and _reads(op, regions)]
    return (at[-1], 0) if at else None


def _hand_offs(body: tuple, ring, full: str, empty: str | None, tx_bytes: int, once: bool = False,
               waited: bool = False, sharers: frozenset = frozenset(), commit: bool = False,
               peer: str | None = None, cta: str = "own") -> tuple:
    """`body` with the ring's protocol added to each loop (to each section of a pipelined one): the producer
    waits for a free slot and announces the bytes before its first copy into the ring (copies complete on
    full); a consumer waits for full before its first MMA on the ring's data (and before the turn syncs just
    ahead of it; with the MMA's lag: the stage it reads), and frees the slot after the wait that retires that
    MMA (`_frees_at`: the stage freed at iteration i is the one of iteration i - lag). Data loaded `once`
    (outside the producer's loops) is waited for once, at this level, before the loop that reads it. With
    `commit` (sm_100a: the consumer is a tcgen05 MMA thread) the slot is freed by a tcgen05.commit right after the
    last MMA reading it (`_last_reader`); in a CTA pair the consumer also waits on `peer` (the other CTA's slot
    landed) and the commit arrives on both CTAs' `empty` (cta "pair")."""
    out, announced, free_at, free_after = [], False, None, False
    for i, op in enumerate(body):
        # a once-loaded tile, read by the loop just closed: free after the syncs closing it, or after the last
        # staged store into a region sharing its bytes
        later = any(isinstance(o, Store) and o.region in sharers for o in body[i:])
        if free_after and not isinstance(op, Sync) and not later:
            out.append(Arrive(empty, per="warpgroup"))
            free_after = False
        if isinstance(op, Loop):
            reads = _reads(op, ring.regions)
            if once and not waited and reads:
                _wait_before(out, Wait(full, "phase"))
                waited = True
                free_after = empty is not None
            out.append(replace(op, **{name: _hand_offs(ops, ring, full, empty, tx_bytes, once, waited, sharers,
                                                       commit, peer, cta) for name, ops in op.sections}))
            continue
        if isinstance(op, Copy) and op.region in ring.regions:
            if not announced:
                if empty is not None:
                    out.append(Wait(empty, "phase^1"))
                out.append(Arrive(full, tx_bytes=tx_bytes))
                announced = True
            op = replace(op, barrier=full)
        if not waited and _reads(op, ring.regions):
            _wait_before(out, Wait(full, "phase", lag=op.lag))
            if peer is not None:
                _wait_before(out, Wait(peer, "phase", lag=op.lag))
            waited = True
            if empty is not None:
                free_at = _last_reader(body, ring.regions) if commit else _frees_at(body, i)
        out.append(op)
        if free_at is not None and i == free_at[0]:
            out.append(Arrive(empty, lag=free_at[1], per="commit" if commit else "warpgroup", cta=cta))
            free_at = None
    if free_after:
        out.append(Arrive(empty, per="warpgroup"))
    return tuple(out)


def _shared_hand_offs(body: tuple, ring, full: str, empty: str, tx_bytes: int, commit: bool) -> tuple:
    """A ring taking `ring.uses` slots an iteration (the sm_100a attention's shared K/V ring): each use is its own
    slot, with its own full and empty phases. The producer waits for a free slot and announces its bytes before each
    copy (of its use); the consumer waits for a use's slot before the first MMA reading it and frees it after the
    last one (a tcgen05.commit: the arrival comes once those MMAs completed)."""
    out = []
    for op in body:
        if isinstance(op, Loop):
            if op.first or op.last:
                raise PassError(f"wl-plan-barriers: ring {ring.name!r} takes {ring.uses} slots an iteration; a "
                                "software-pipelined loop over it is not planned")
            out.append(replace(op, body=_shared_hand_offs(op.body, ring, full, empty, tx_bytes, commit)))
        elif isinstance(op, Copy) and op.region in ring.regions:
            out += [Wait(empty, "phase^1", use=op.use), Arrive(full, tx_bytes=tx_bytes, use=op.use),
                    replace(op, barrier=full)]
        else:
            out.append(op)
    reads = {}          # use -> indices of the MMAs reading that slot
    for i, op in enumerate(out):
        if isinstance(op, Mma):
            for operand in (op.a, op.b):
                if operand.name in ring.regions:
                    reads.setdefault(operand.use, []).append(i)
    if not reads:
        return tuple(out)
    if not commit:
        raise PassError(f"wl-plan-barriers: ring {ring.name!r} takes {ring.uses} slots an iteration; only a tcgen05 "
                        "MMA thread (freeing slots by commit) is planned as its consumer")
    before = {at[0]: use for use, at in reads.items()}
    after = {at[-1]: use for use, at in reads.items()}
    planned = []
    for i, op in enumerate(out):
        if i in before:
            _wait_before(planned, Wait(full, "phase", use=before[i]))
        planned.append(op)
        if i in after:
            planned.append(Arrive(empty, per="commit", use=after[i]))
    return tuple(planned)


def _relay(body: tuple, full: str, peer: str) -> tuple:
    """The relay role's loops: per iteration, wait until this CTA's slot landed, then arrive on the leader's
    `peer` barrier of the same stage."""
    return tuple(replace(op, body=(Wait(full, "phase"), Arrive(peer, cta="leader"))) if isinstance(op, Loop) else op
                 for op in body)


def _writes(op, regions) -> bool:
    if isinstance(op, Loop):
        return any(_writes(o, regions) for _, ops in op.sections for o in ops)
    return isinstance(op, Mma) and op.acc.name in regions


def _accumulator_hand_offs(body: tuple, ring, full: str, empty: str | None, producer: bool, pair: bool) -> tuple:
    """A TMEM accumulator ring, counted in tiles (sm_100a). The MMA thread waits for a free accumulator before
    the loop that writes it and commits to full after it (the arrival comes once every MMA of the tile is
    done); the epilogue waits for full before its store reads the accumulator and frees it after. In a CTA pair
    the commit arrives on both CTAs' full (each holds half the accumulator) and both epilogues free it on the
    leader's empty (where the MMA thread waits)."""
    out = []
    for op in body:
        if producer and _writes(op, ring.regions):
            if empty is not None:
                out.append(Wait(empty, "phase^1"))
            out += [op, Arrive(full, per="commit", cta="pair" if pair else "own")]
        elif not producer and isinstance(op, Store) and op.value in ring.regions:
            out += [Wait(full, "phase"), op]
            if empty is not None:
                out.append(Arrive(empty, per="thread", cta="leader" if pair else "own"))
        else:
            out.append(op)
    return tuple(out)


def plan_barriers(program: Program) -> None:
    storage = program.regions.get(BARRIER_STORAGE)
    if storage is None or storage.offset is None:
        raise PassError("wl-plan-barriers needs the smem plan (run wl-plan-smem first)")
    mbarrier_bytes = targets.get(program.target).mbarrier_bytes
    offset = storage.offset
    planned = barrier_rings(program)
    pair = program.attrs.get("cta_group", 1) == 2
    multicast = {name: multicast_ctas(program, ring) > 1 for name, ring in program.rings.items()}
    for bar in planned:     # barriers another CTA of the cluster arrives at: initialised for the cluster
        program.barriers[bar.name] = MBarrier(bar.name, bar.count, bar.arrivals, bar.tx_bytes, offset=offset,
                                              scope="cluster" if pair or any(multicast.values()) else "cta")
        offset += bar.count * mbarrier_bytes
    for name, ring in list(program.rings.items()):
        sides = {b.side: b for b in planned if b.ring == name}
        full, empty, peer = sides["full"], sides.get("empty"), sides.get("peer")
        ring = program.rings[name] = replace(ring, full=full.name, empty=empty.name if empty else None,
                                             peer=peer.name if peer else None)
        once = ring.producer is not None and _loaded_once(program.role(ring.producer).body, ring.regions)
        if ring.counts == "tile" and not once:      # an accumulator ring (a once-loaded one: Q prefetched per tile)
            program.roles = [replace(role, body=_accumulator_hand_offs(role.body, ring, full.name, ring.empty,
                                                                       role.name == ring.producer, pair))
                             if role.name in (ring.producer, *ring.consumers) else role for role in program.roles]
            continue
        if ring.relay is not None:      # the other CTA's slot landed: its relay role tells the leader
            program.roles = [replace(role, body=_relay(role.body, full.name, ring.peer)) if role.name == ring.relay
                             else role for role in program.roles]
        commit = any(program.role(c).issue == "thread" for c in ring.consumers)     # a tcgen05 MMA thread
        if ring.uses > 1:
            program.roles = [replace(role, body=_shared_hand_offs(role.body, ring, full.name, ring.empty,
                                                                  full.tx_bytes, commit))
                             if role.name in (ring.producer, *ring.consumers) else role for role in program.roles]
            continue
        sharers = frozenset(r.name for r in program.regions.values() if set(r.aliases) & set(ring.regions))
        program.roles = [replace(role, body=_hand_offs(role.body, ring, full.name, ring.empty, full.tx_bytes, once,
                                                       sharers=sharers, commit=commit,
                                                       peer=ring.peer if role.name in ring.consumers else None,
                                                       cta="pair" if pair or multicast[name] else "own"))
                         if role.name in (ring.producer, *ring.consumers) else role for role in program.roles]
    if fa4_barriers(program):
        _fa4_hand_offs(program)


@register("wl-plan-barriers", "mbarriers per stage (full/empty), arrival counts, tx bytes; waits and arrives in each role",
          after=("wl-tile", "wl-pipeline", "wl-specialize", "wl-plan-smem"))
def run(module):
    for kernel in kernel_ops(module):
        edit_program(kernel, plan_barriers)
