"""The kernel verifier: the invariants every planned kernel program must hold, checked after each planning pass.

`problems(program)` returns every broken invariant as a `Problem` (the check's
name, the role and op it is about, what is wrong and the way out); `verify`
raises `KernelError` listing them. Checks skip what is not planned yet (a region
without an offset has no overlap to check), so the same verifier runs after
wl-tile and after wl-plan-barriers.

    check            invariant
    roles            warp ranges are disjoint, inside the block, warpgroup roles on 4-warp boundaries
    registers        setmaxnreg budgets in range and, together, within the register file
    names            every op is a planned op and names a barrier, region, input, output or register that exists
    stages           a ring's barriers and regions have the ring's stages; a lag stays inside them
    loop             an op on a staged barrier or region sits inside a loop (its stage is the iteration's); a
                     pipelined loop's first section has no lag (no earlier iteration), its last section acts on
                     earlier iterations only (lag >= 1, no copies)
    tx-bytes         an expect_tx arrival announces exactly the bytes its copies land
    arrivals         a barrier's arrival count equals the arrivals its roles make per phase; in a pipelined loop
                     every iteration's stage gets the same arrivals (first = the body's lag-0 ones, last = the
                     body's lagged ones)
    handoff          every barrier is both arrived at and waited on
    protocol         a copy into a reused slot waits for `empty` first; an MMA on ring data waits for `full`
                     (of the same iteration: the same lag) earlier in its loop section
    parity           consumers wait on the phase, producers on the phase before it
    overlap          live regions (and barrier storage) do not overlap unless declared aliases
    capacity         smem within the target's limit (and the launch's request), TMEM within its columns
    alignment        offsets meet their alignment; swizzled tiles start on a swizzle repeat
    named-barriers   ids 1..15, unique; thread counts are the threads of the roles that use them
    mma              shapes the target's MMA takes; operand sources it can read; majors match the layouts
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from warploom import targets

from .program import (ARRIVE_CTAS, ARRIVERS, BARRIER_STORAGE, ISSUE_MODES, MAJORS, PARITIES, SLOTS, SOURCES, Arrive, Copy, Loop, Mma, MmaWait, Opaque, Program,
                      Role, Store, Sync, Wait)


@dataclass(frozen=True)
class Problem:
    check: str
    where: str                       # "role 'consumer', Wait(barrier='full')" or "region 'a'"
    message: str                     # what is wrong, with values and limits, and the way out

    def __str__(self) -> str:
        return f"[{self.check}] {self.where}: {self.message}"


class KernelError(ValueError):
    """A kernel program breaks invariants; `problems` lists each."""

    def __init__(self, problems: list[Problem], kernel: str = "kernel"):
        self.problems = problems
        super().__init__(f"{kernel} fails {len(problems)} check(s):\n" + "\n".join(f"  {p}" for p in problems))


def describe(op) -> str:
    """Op(field=value, ...) with the fields that identify it (no nested bodies)."""
    shown = [f"{f.name}={getattr(op, f.name)!r}" for f in fields(op) if f.name != "body"]
    return f"{type(op).__name__}({', '.join(shown)})"


def verify(program: Program, kernel: str = "kernel") -> None:
    found = problems(program)
    if found:
        raise KernelError(found, kernel)


def problems(program: Program) -> list[Problem]:
    out: list[Problem] = []
    for check in CHECKS:
        out.extend(check(program))
    return out


# ---- helpers ---------------------------------------------------------------------------------

def _at(role: Role, op) -> str:
    return f"role {role.name!r}, {describe(op)}"


def _threads(role: Role, warp_size: int) -> int:
    return role.warps * warp_size


def _with_loops(body, depth: int = 0):
    """(op, loop depth, enclosing body: a loop's section) for every op under `body`."""
    for op in body:
        yield op, depth, body
        if isinstance(op, Loop):
            for _, ops in op.sections:
                yield from _with_loops(ops, depth + 1)


def _sectioned(body, section: str = "top"):
    """(op, section) for every op under `body`: section "first", "body" or "last" of the innermost loop, or "top"."""
    for op in body:
        yield op, section
        if isinstance(op, Loop):
            for name, ops in op.sections:
                yield from _sectioned(ops, name)


def _lag_of(op) -> int:
    return getattr(op, "lag", 0)


# ---- checks ----------------------------------------------------------------------------------

def check_roles(p: Program):
    t = targets.get(p.target)
    warps_in_block = (p.threads // t.warp_size) if p.threads else None
    owner: dict[tuple, str] = {}          # (warp, rank or None: every CTA) -> role
    for role in p.roles:
        if role.issue not in ISSUE_MODES:
            yield Problem("roles", f"role {role.name!r}", f"issue {role.issue!r}; use one of {', '.join(ISSUE_MODES)}")
        if role.warps < 1:
            yield Problem("roles", f"role {role.name!r}", f"{role.warps} warps; a role needs at least one")
        per_wg = t.warpgroup_threads // t.warp_size
        if role.issue == "warpgroup" and (role.first_warp % per_wg or role.warps % per_wg):
            yield Problem("roles", f"role {role.name!r}",
                          f"warps {role.first_warp}..{role.first_warp + role.warps - 1} issue as warpgroups, which "
                          f"must start on a multiple of {per_wg} warps and span whole warpgroups: move the role to "
                          f"warp {role.first_warp // per_wg * per_wg} or make it {per_wg}-warp sized")
        clash = None
        for w in role.warp_range:          # a warp has one role in each CTA (a role with a rank runs in that CTA only)
            taken = [name for (ow, rank), name in owner.items()
                     if ow == w and (rank is None or role.rank is None or rank == role.rank)]
            if taken and clash is None:
                clash = (w, taken[0])
            owner[(w, role.rank)] = role.name
        if clash is not None:
            yield Problem("roles", f"role {role.name!r}",
                          f"warp {clash[0]} is also in role {clash[1]!r}; give each warp one role (per CTA of the "
                          "cluster, with `rank`)")
        if warps_in_block is not None and role.warp_range.stop > warps_in_block:
            yield Problem("roles", f"role {role.name!r}",
                          f"warps up to {role.warp_range.stop - 1}, but the block has {p.threads} threads "
                          f"({warps_in_block} warps): raise threads or move the role")
    if p.threads is not None and p.threads > t.max_threads_per_block:
        yield Problem("roles", "kernel", f"{p.threads} threads per block; {p.target} allows "
                      f"{t.max_threads_per_block}: use fewer warps")


def check_registers(p: Program):
    """setmaxnreg acts on whole warpgroups: roles sharing a warpgroup share its budget; warpgroups no budgeted
    role touches keep what the launch gives every thread."""
    t = targets.get(p.target)
    lo, hi, step = t.setmaxnreg
    warps_per_wg = t.warpgroup_threads // t.warp_size
    budget: dict[int, tuple[int, str]] = {}
    for role in p.roles:
        if role.regs is None:
            continue
        if not (lo <= role.regs <= hi and role.regs % step == 0):
            yield Problem("registers", f"role {role.name!r}",
                          f"regs = {role.regs}; setmaxnreg takes multiples of {step} in {lo}..{hi}")
        for wg in sorted({w // warps_per_wg for w in role.warp_range}):
            if wg in budget and budget[wg][0] != role.regs:
                yield Problem("registers", f"role {role.name!r}",
                              f"asks for {role.regs} registers in warpgroup {wg}, which role {budget[wg][1]!r} "
                              f"budgets at {budget[wg][0]}; setmaxnreg is per warpgroup: give both one budget")
            budget.setdefault(wg, (role.regs, role.name))
    if not p.threads or not budget:
        return
    launch = t.launch_regs(p.threads)
    groups = -(-p.threads // t.warpgroup_threads)
    used = sum(t.warpgroup_threads * budget.get(wg, (launch, ""))[0] for wg in range(groups))
    if used > t.register_file:
        listing = ", ".join(f"wg{wg} {budget.get(wg, (launch, 'launch'))[0]}" for wg in range(groups))
        yield Problem("registers", "kernel",
                      f"the warpgroups' budgets ({listing}) need {used} registers; the register file holds "
                      f"{t.register_file}: lower the largest budget")


def check_names(p: Program):
    for role, op in p.ops():
        barrier = getattr(op, "barrier", None)
        if isinstance(op, (Wait, Arrive, Copy)) and barrier is not None and barrier not in p.barriers:
            yield Problem("names", _at(role, op), f"no mbarrier named {barrier!r} (have: "
                          f"{', '.join(p.barriers) or 'none'}); run wl-plan-barriers or fix the name")
        if isinstance(op, Arrive) and op.cta not in ARRIVE_CTAS:
            yield Problem("names", _at(role, op), f"arrives at cta {op.cta!r}; use one of {', '.join(ARRIVE_CTAS)}")
        if isinstance(op, Arrive) and op.cta != "own" and _cluster_size(p) < 2:
            yield Problem("names", _at(role, op), f"arrives at the {op.cta!r} CTA's barrier, but the kernel's cluster "
                          f"is {list(p.attrs.get('cluster', [1, 1, 1]))}: only a CTA pair has a leader")
        if isinstance(op, Copy) and op.multicast and _cluster_size(p) < 2:
            yield Problem("names", _at(role, op), f"multicasts a copy of {op.source!r}, but the kernel's cluster is "
                          f"{list(p.attrs.get('cluster', [1, 1, 1]))}: a multicast needs a cluster of 2 or more CTAs")
        if isinstance(op, Arrive) and op.per not in ARRIVERS:
            yield Problem("names", _at(role, op), f"arrives per {op.per!r}; use one of {', '.join(ARRIVERS)}")
        if isinstance(op, Arrive) and op.per == "commit" and (
                role.issue != "thread" or "tmem" not in targets.get(p.target).mma_sources["acc"]):
            yield Problem("names", _at(role, op), f"a tcgen05.commit arrival needs a one-thread role issuing MMAs "
                          f"into Tensor Memory; role {role.name!r} issues as {role.issue!r} on {p.target}")
        if isinstance(op, Sync) and barrier not in p.named_barriers:
            yield Problem("names", _at(role, op), f"no named barrier {barrier!r} (have: "
                          f"{', '.join(p.named_barriers) or 'none'})")
        if isinstance(op, Copy):
            if op.region not in p.regions:
                yield Problem("names", _at(role, op), f"no region named {op.region!r}")
            elif p.regions[op.region].space != "smem":
                yield Problem("names", _at(role, op), f"region {op.region!r} is in {p.regions[op.region].space}; "
                              "TMA copies land in shared memory")
            if op.source not in p.inputs:
                yield Problem("names", _at(role, op), f"no kernel input {op.source!r} (inputs: {', '.join(p.inputs)})")
        if isinstance(op, Mma):
            for which in ("a", "b", "acc"):
                operand = getattr(op, which)
                if operand.source not in SOURCES:
                    yield Problem("names", _at(role, op), f"{which} source {operand.source!r}; use one of "
                                  f"{', '.join(SOURCES)}")
                elif operand.source == "regs":
                    if operand.name not in p.registers:
                        yield Problem("names", _at(role, op), f"{which} reads register value {operand.name!r}, "
                                      f"which is not declared (registers: {', '.join(p.registers) or 'none'})")
                elif operand.name not in p.regions:
                    yield Problem("names", _at(role, op), f"{which} reads region {operand.name!r}, which does "
                                  "not exist")
                elif p.regions[operand.name].space != operand.source:
                    yield Problem("names", _at(role, op), f"{which} reads {operand.name!r} as {operand.source}, "
                                  f"but the region is in {p.regions[operand.name].space}")
        if isinstance(op, Opaque):
            yield Problem("names", _at(role, op), f"wl.{op.kind} has no kernel-program meaning inside a role; "
                          "only planned ops (loops, waits, arrives, copies, MMAs, stores) belong there")
        if isinstance(op, Store) and op.output not in p.outputs:
            yield Problem("names", _at(role, op), f"no kernel output {op.output!r} (outputs: {', '.join(p.outputs)})")
        if isinstance(op, Store) and op.region is not None:
            staging = p.regions.get(op.region)
            if staging is None or staging.space != "smem" or staging.stages > 2:
                yield Problem("names", _at(role, op), f"stores {op.output!r} through {op.region!r}, which is not an "
                              "smem region of one stage (or two, alternating per chunk)")
    for region in p.regions.values():
        for alias in region.aliases:
            if alias not in p.regions:
                yield Problem("names", f"region {region.name!r}", f"declares alias {alias!r}, which does not exist")
    for ring in p.rings.values():
        for r in ring.regions:
            if r not in p.regions:
                yield Problem("names", f"ring {ring.name!r}", f"region {r!r} does not exist")
        for b in (ring.full, ring.empty):
            if b is not None and b not in p.barriers:
                yield Problem("names", f"ring {ring.name!r}", f"barrier {b!r} does not exist")
        for role in (ring.producer, *ring.consumers):
            if role is not None and role not in {r.name for r in p.roles}:
                yield Problem("names", f"ring {ring.name!r}", f"role {role!r} does not exist")


def check_stages(p: Program):
    for ring in p.rings.values():
        for r in ring.regions:
            if r in p.regions and p.regions[r].stages != ring.stages:
                yield Problem("stages", f"ring {ring.name!r}", f"region {r!r} has {p.regions[r].stages} stages, "
                              f"the ring {ring.stages}: give them the same count (wl-pipeline)")
        for b in (ring.full, ring.empty):
            if b in p.barriers and p.barriers[b].count != ring.stages:
                yield Problem("stages", f"ring {ring.name!r}", f"barrier {b!r} has {p.barriers[b].count} slots "
                              f"for {ring.stages} stages: one mbarrier per stage")
    for role, op in p.ops():
        count = None
        if isinstance(op, (Arrive, Wait)) and op.barrier in p.barriers:
            count = p.barriers[op.barrier].count
        if isinstance(op, Mma) and op.lag:
            staged = [p.regions[o.name].stages for o in (op.a, op.b) if o.source != "regs" and o.name in p.regions
                      and p.regions[o.name].stages > 1]
            count = min(staged) if staged else 1
        if count is not None and (not 0 <= op.lag < max(count, 1) or (count == 1 and op.lag)):
            yield Problem("stages", _at(role, op), f"lag {op.lag} with {count} stage(s): use 0..{count - 1}")
        if isinstance(op, MmaWait) and not 0 <= op.pending <= 7:
            yield Problem("stages", _at(role, op), f"pending = {op.pending}; wait_group takes 0..7")


def _per_tile(p: Program, barrier: str) -> bool:
    """True for a barrier of a ring that advances once per tile (a persistent kernel's accumulator ring, or its Q
    ring of two stages)."""
    ring = p.ring_of_barrier(barrier)
    return ring is not None and ring.counts == "tile"


def check_loop(p: Program):
    for role in p.roles:
        for op, depth, _ in _with_loops(role.body):
            staged = None
            if isinstance(op, (Wait, Arrive)) and op.barrier in p.barriers and p.barriers[op.barrier].count > 1:
                if _per_tile(p, op.barrier):
                    if depth:
                        yield Problem("loop", _at(role, op), f"barrier {op.barrier!r} advances once per tile, but "
                                      "the op sits in a loop (it would advance per iteration): move it out of the loop")
                    continue
                staged = f"barrier {op.barrier!r} has {p.barriers[op.barrier].count} stages"
            if isinstance(op, Copy) and op.region in p.regions and p.regions[op.region].stages > 1 and \
                    not (p.ring_of_region(op.region) and p.ring_of_region(op.region).counts == "tile"):
                staged = f"region {op.region!r} has {p.regions[op.region].stages} stages"
            if staged and depth == 0:
                yield Problem("loop", _at(role, op), f"{staged}, and outside a loop no iteration picks the stage: "
                              "move the op into the loop")
        for op, section in _sectioned(role.body):
            if section == "first" and _lag_of(op):
                yield Problem("loop", _at(role, op), f"lag {op.lag} in a loop's first section: iteration 0 has no "
                              "earlier iteration; move the op to the body")
            if section == "last":
                ring = None
                if isinstance(op, (Wait, Arrive)):
                    ring = p.ring_of_barrier(op.barrier)
                elif isinstance(op, Mma):
                    ring = next((p.ring_of_region(o.name) for o in (op.a, op.b) if o.source != "regs"
                                 and p.ring_of_region(o.name) and p.ring_of_region(o.name).stages > 1), None)
                if isinstance(op, Copy) or (ring is not None and ring.stages > 1 and not _lag_of(op)):
                    yield Problem("loop", _at(role, op), "in a loop's last section, which runs after the last "
                                  "iteration: there is no stage of its own to use; give it a lag >= 1 (an earlier "
                                  "iteration's stage) or move it into the body")


def check_tx_bytes(p: Program):
    expected_by: dict[str, bool] = {}
    for role in p.roles:
        for op, _, body in _with_loops(role.body):
            if not isinstance(op, Arrive) or not op.tx_bytes:
                continue
            expected_by[op.barrier] = True
            copies = [c for c in body if isinstance(c, Copy) and c.barrier == op.barrier and c.region in p.regions
                      and c.use == op.use]       # a ring taking several slots an iteration: this use's copies
            landed = sum(p.regions[c.region].stage_bytes for c in copies)
            if landed != op.tx_bytes:
                listing = " + ".join(f"{c.region} {p.regions[c.region].stage_bytes} B" for c in copies) or "none"
                yield Problem("tx-bytes", _at(role, op), f"expects {op.tx_bytes} B but the copies completing on "
                              f"{op.barrier!r} here land {landed} B ({listing}): the phase would "
                              f"{'never complete' if op.tx_bytes > landed else 'complete before the data lands'}")
            if op.barrier in p.barriers and p.barriers[op.barrier].tx_bytes not in (0, op.tx_bytes):
                yield Problem("tx-bytes", _at(role, op), f"barrier {op.barrier!r} is planned for "
                              f"{p.barriers[op.barrier].tx_bytes} B per phase, the arrival expects {op.tx_bytes} B")
    for role, op in p.ops():
        if isinstance(op, Copy) and op.barrier in p.barriers and not expected_by.get(op.barrier):
            yield Problem("tx-bytes", _at(role, op), f"completes on {op.barrier!r}, which no arrive.expect_tx "
                          "announces: the barrier would complete before the copy lands")


def _arrivals_per_phase(role: Role, op: Arrive, warp_size: int, warpgroup_threads: int) -> int:
    if op.per == "commit":                 # tcgen05.commit: one arrival, made for the issuing thread
        return 1
    if op.per == "thread":
        return role.warps * warp_size
    if op.per == "warpgroup":
        return max(role.warps * warp_size // warpgroup_threads, 1)
    if role.issue == "thread":
        return 1
    return role.warps * warp_size          # every thread of a warp/warpgroup role arrives


def _cluster_size(p: Program) -> int:
    size = 1
    for d in p.attrs.get("cluster", [1, 1, 1]):
        size *= int(d)
    return size


def _landing(p: Program, role: Role, op: Arrive) -> int:
    """How many CTAs' arrivals land on one instance of the barrier: arrivals at the pair leader's instance come from
    every CTA that runs the role."""
    if op.cta == "leader":
        return _cluster_size(p) if role.rank is None else 1
    if op.cta == "pair" and op.per != "commit":    # every CTA's role arrives at every CTA's instance
        return _cluster_size(p) if role.rank is None else 1
    return 1


def check_arrivals(p: Program):
    """Per phase (one iteration's stage) the arrivals of the loop body and the code outside loops; a pipelined
    loop's first section stands in for the body's lag-0 arrivals at iteration 0, its last section for the
    lagged ones of the last iteration, so each must make exactly those."""
    t = targets.get(p.target)
    made: dict[str, list[str]] = {}
    total: dict[str, int] = {}
    for role in p.roles:
        for op, section in _sectioned(role.body):
            if isinstance(op, Arrive) and op.barrier in p.barriers and section in ("top", "body"):
                n = _arrivals_per_phase(role, op, t.warp_size, t.warpgroup_threads) * _landing(p, role, op)
                key = (op.barrier, op.use)        # each use of a ring taking several slots is its own phase
                total[key] = total.get(key, 0) + n
                made.setdefault(key, []).append(f"{role.name} {n}")
        for loop in (o for o in role.walk() if isinstance(o, Loop)):
            for section, lagged in (("first", False), ("last", True)):
                if not getattr(loop, section):
                    continue
                want, have = {}, {}
                for ops, into in ((loop.body, want), (getattr(loop, section), have)):
                    for op in ops:
                        if isinstance(op, Arrive) and op.barrier in p.barriers and bool(op.lag) == lagged:
                            into[op.barrier] = into.get(op.barrier, 0) + _arrivals_per_phase(
                                role, op, t.warp_size, t.warpgroup_threads)
                for name in sorted(set(want) | set(have)):
                    if want.get(name, 0) != have.get(name, 0):
                        which = "lagged arrivals (for the last iteration)" if lagged else \
                            "lag-0 arrivals (for iteration 0)"
                        yield Problem("arrivals", f"role {role.name!r}, loop {loop.name!r} section {section!r}",
                                      f"makes {have.get(name, 0)} arrivals on {name!r} where the body makes "
                                      f"{want.get(name, 0)} {which}: that stage's phase would "
                                      f"{'never complete' if have.get(name, 0) < want.get(name, 0) else 'complete early'}")
    for (name, use), n in total.items():
        bar = p.barriers[name]
        if n != bar.arrivals:
            of = f" (slot use {use})" if use else ""
            yield Problem("arrivals", f"mbarrier {name!r}{of}", f"initialised for {bar.arrivals} arrivals per phase, "
                          f"but the roles make {n} ({', '.join(made[(name, use)])}): set arrivals = {n}")


def check_handoff(p: Program):
    waited = {op.barrier for _, op in p.ops() if isinstance(op, Wait)}
    arrived = {op.barrier for _, op in p.ops() if isinstance(op, Arrive)}
    if not any(True for _ in p.ops()):
        return
    for name in p.barriers:
        if name not in arrived:
            yield Problem("handoff", f"mbarrier {name!r}", "is waited on but nothing arrives on it: its waiters "
                          "would deadlock; add the arrive (or tcgen05.commit) that completes it"
                          if name in waited else "is never used: remove it or add its wait and arrive")
        elif name not in waited:
            yield Problem("handoff", f"mbarrier {name!r}", "is arrived at but never waited on: the data or slot "
                          "it guards is used unsynchronised; add the wait")


def check_protocol(p: Program):
    for role in p.roles:
        for op, _, body in _with_loops(role.body):
            before = body[: body.index(op)]
            waits = {(w.barrier, w.lag) for w in before if isinstance(w, Wait)}
            if isinstance(op, Copy):
                ring = p.ring_of_region(op.region)
                if ring and ring.empty and not any(b == ring.empty for b, _ in waits):
                    yield Problem("protocol", _at(role, op), f"refills a slot of ring {ring.name!r} without first "
                                  f"waiting on {ring.empty!r}: the copy can overwrite data a consumer still reads")
            if isinstance(op, Mma):
                for operand in (op.a, op.b):
                    ring = p.ring_of_region(operand.name) if operand.source != "regs" else None
                    if ring and ring.full and (ring.full, op.lag) not in waits and \
                            not _waited_outside(role.body, op, ring.full):
                        of = f" (lag {op.lag}: the stage of iteration - {op.lag})" if op.lag else ""
                        yield Problem("protocol", _at(role, op), f"reads {operand.name!r} (ring {ring.name!r}) "
                                      f"without waiting on {ring.full!r}{of} first: the data may not have landed")


def _waited_outside(body, target, barrier: str) -> bool:
    """True when a Wait on `barrier` precedes the loop holding `target` (data loaded once, e.g. Q)."""
    for op in body:
        if op is target:
            return False
        if isinstance(op, Wait) and op.barrier == barrier:
            return True
        if isinstance(op, Loop) and any(o is target for _, ops in op.sections for o in _with_loops_ops(ops)):
            return any(isinstance(o, Wait) and o.barrier == barrier for o in body[: body.index(op)])
    return False


def _with_loops_ops(body):
    for op, _, _ in _with_loops(body):
        yield op


def check_parity(p: Program):
    for role, op in p.ops():
        if not isinstance(op, Wait):
            continue
        if op.parity not in PARITIES:
            yield Problem("parity", _at(role, op), f"parity {op.parity!r}; use one of {', '.join(PARITIES)}")
            continue
        ring = p.ring_of_barrier(op.barrier)
        if ring is None:
            continue
        want = "phase" if op.barrier in (ring.full, ring.peer) else "phase^1"
        if op.parity != want:
            who = "consumers wait on the phase being filled" if want == "phase" else \
                "the producer waits on the phase before (its first lap over fresh barriers passes at once)"
            yield Problem("parity", _at(role, op), f"waits on {op.parity!r} of {op.barrier!r}; {who}: use {want!r}")


def _smem_intervals(p: Program):
    t = targets.get(p.target)
    for r in p.regions.values():
        if r.space == "smem" and r.offset is not None and r.size is not None:
            yield r.name, r.offset, r.offset + r.size, set(r.aliases)
    for b in p.barriers.values():
        if b.offset is not None:
            # barriers live inside the barrier storage region the smem planner placed
            yield f"mbarrier {b.name}", b.offset, b.offset + b.count * t.mbarrier_bytes, {BARRIER_STORAGE}


def check_overlap(p: Program):
    for space, intervals in (("smem", list(_smem_intervals(p))),
                             ("tmem", [(r.name, r.offset, r.offset + r.size, set(r.aliases))
                                       for r in p.regions.values()
                                       if r.space == "tmem" and r.offset is not None and r.size is not None])):
        intervals.sort(key=lambda x: x[1])
        for i, (n1, s1, e1, a1) in enumerate(intervals):
            for n2, s2, e2, a2 in intervals[i + 1:]:
                if s2 >= e1:
                    break
                if n2 in a1 or n1 in a2:
                    continue
                unit = "B" if space == "smem" else "columns"
                yield Problem("overlap", f"{space} {n1!r} and {n2!r}",
                              f"[{s1}, {e1}) and [{s2}, {e2}) {unit} overlap and are not declared aliases: "
                              "re-run the planner, or declare the alias if the two are never live together")


def check_capacity(p: Program):
    t = targets.get(p.target)
    ends = [e for _, _, e, _ in _smem_intervals(p)]
    if ends:
        end = max(ends)
        if end + t.smem_base_align > t.smem_limit:
            yield Problem("capacity", "smem", f"the plan ends at {end} B (+ {t.smem_base_align} B base alignment "
                          f"slack); {p.target} allows {t.smem_limit} B: use fewer stages or smaller tiles")
        if p.smem_bytes is not None and p.smem_bytes < end + t.smem_base_align - 1:
            yield Problem("capacity", "smem", f"the launch asks for {p.smem_bytes} B but the plan needs "
                          f"{end} B + {t.smem_base_align - 1} B for the run-time base alignment")
    tmem = [r for r in p.regions.values() if r.space == "tmem" and r.offset is not None and r.size is not None]
    if tmem:
        if t.tmem is None:
            yield Problem("capacity", "tmem", f"{p.target} has no Tensor Memory; regions "
                          f"{', '.join(r.name for r in tmem)} need sm_100a")
        else:
            end = max(r.offset + r.size for r in tmem)
            if end > t.tmem.columns:
                listing = ", ".join(f"{r.name} {r.size}" for r in tmem)
                yield Problem("capacity", "tmem", f"columns up to {end} ({listing}); TMEM has {t.tmem.columns}: "
                              "alias P into S, or use smaller tiles")


def check_alignment(p: Program):
    t = targets.get(p.target)
    for r in p.regions.values():
        if r.space != "smem" or r.offset is None:
            continue
        if r.offset % r.align:
            yield Problem("alignment", f"region {r.name!r}", f"offset {r.offset} is not a multiple of its "
                          f"alignment {r.align}")
        if r.swizzle:
            repeat = 8 * r.swizzle
            stage = r.stage_bytes
            if r.offset % repeat or stage % repeat:
                yield Problem("alignment", f"region {r.name!r}",
                              f"{r.swizzle}B-swizzled tile at offset {r.offset} with {stage} B stages: both must be "
                              f"multiples of {repeat} B (the swizzle repeat) so MMA descriptors use base offset 0")
    for b in p.barriers.values():
        if b.offset is not None and b.offset % t.mbarrier_bytes:
            yield Problem("alignment", f"mbarrier {b.name!r}", f"offset {b.offset} is not {t.mbarrier_bytes}-byte "
                          "aligned")


def check_named_barriers(p: Program):
    t = targets.get(p.target)
    seen: dict[int, str] = {}
    users: dict[str, set[str]] = {}
    wg_warps = t.warpgroup_threads // t.warp_size
    private: dict = {}          # barriers a staged Store syncs its own warpgroup on: one instance per warpgroup
    for role, op in p.ops():
        if isinstance(op, Store) and op.barrier is not None:
            nb = p.named_barriers.get(op.barrier)
            wgs = max(1, role.warps // wg_warps)
            if nb is None:
                yield Problem("named-barriers", _at(role, op), f"no named barrier {op.barrier!r}")
            elif nb.count != wgs:
                yield Problem("named-barriers", _at(role, op), f"{nb.name!r} has {nb.count} instances but role "
                              f"{role.name!r} has {wgs} warpgroups, each syncing on its own: set count = {wgs}")
            private.setdefault(op.barrier, set()).add(role.name)
        if isinstance(op, Sync):
            users.setdefault(op.barrier, set()).add(role.name)
            nb = p.named_barriers.get(op.barrier)
            wgs = max(1, role.warps // wg_warps)
            if op.slot not in SLOTS:
                yield Problem("named-barriers", _at(role, op), f"slot {op.slot!r}; use one of {', '.join(SLOTS)}")
            elif nb is not None and op.slot == "next" and nb.count == 1:
                yield Problem("named-barriers", _at(role, op), f"slot 'next' on {nb.name!r}, which has one instance: "
                              f"declare count = {wgs} (one per warpgroup of {role.name!r})")
            if nb is not None and nb.count > 1 and nb.count != wgs:
                yield Problem("named-barriers", _at(role, op), f"{nb.name!r} has {nb.count} instances but role "
                              f"{role.name!r} has {wgs} warpgroups: set count = {wgs}")
            if op.warpgroup is not None and not 0 <= op.warpgroup < wgs:
                yield Problem("named-barriers", _at(role, op), f"warpgroup {op.warpgroup}: role {role.name!r} has "
                              f"warpgroups 0..{wgs - 1}")
    for nb in p.named_barriers.values():
        lo, hi = t.named_barrier_ids
        if not (lo <= nb.id and nb.ids[-1] <= hi):
            shown = f"id {nb.id}" if nb.count == 1 else f"ids {nb.id}..{nb.ids[-1]}"
            yield Problem("named-barriers", f"named barrier {nb.name!r}", f"{shown}; use {lo}..{hi} "
                          "(id 0 is the block-wide barrier)")
        for i in nb.ids:
            if i in seen:
                yield Problem("named-barriers", f"named barrier {nb.name!r}", f"id {i} is also {seen[i]!r}")
            seen[i] = nb.name
        if nb.threads % t.warp_size:
            yield Problem("named-barriers", f"named barrier {nb.name!r}", f"{nb.threads} threads; bar.sync counts "
                          f"whole warps (a multiple of {t.warp_size})")
        if nb.name in private:
            have = sum(_threads(p.role(r), t.warp_size) for r in private[nb.name]) // nb.count
            if have != nb.threads:
                yield Problem("named-barriers", f"named barrier {nb.name!r}",
                              f"counts {nb.threads} threads but each warpgroup of roles "
                              f"{', '.join(sorted(private[nb.name]))} brings {have}: set threads = {have}")
        elif nb.name in users:
            # per CTA of the cluster: a role with a rank runs in that CTA only
            roles = [p.role(r) for r in users[nb.name]]
            ranks = sorted({r.rank for r in roles if r.rank is not None}) or [None]
            counts = {sum(_threads(r, t.warp_size) for r in roles if r.rank in (None, rank)) for rank in ranks}
            if nb.count > 1:        # a ring of instances (slots own / next): a warpgroup and the one before it
                counts = {2 * n // nb.count for n in counts}
            have = max(counts)
            if counts != {nb.threads}:
                yield Problem("named-barriers", f"named barrier {nb.name!r}",
                              f"counts {nb.threads} threads but roles {', '.join(sorted(users[nb.name]))} bring "
                              f"{have}: set threads = {have}")
        else:
            yield Problem("named-barriers", f"named barrier {nb.name!r}", "no role syncs on it: remove it")


def check_mma(p: Program):
    t = targets.get(p.target)
    for role, op in p.ops():
        if not isinstance(op, Mma):
            continue
        where = _at(role, op)
        m, n, k = op.shape
        elem = _elem(p, op.a) or _elem(p, op.b)
        group = int(p.attrs.get("cta_group", 1))     # a CTA pair's MMA (sm_100a cta_group::2): each CTA holds n / 2 of B
        if elem is not None:
            try:
                t.check_mma_shape(m, n, elem, group)
                if k % t.mma_k_of(elem):
                    raise ValueError(f"k = {k} is not a multiple of the {t.mma_k_of(elem)} one {elem} MMA "
                                     "instruction takes: use a k tile that is")
                for operand in (op.a, op.b):
                    if operand.source == "smem":
                        t.check_mma_major(elem, operand.major)
            except ValueError as e:
                yield Problem("mma", where, str(e))
        sources = t.mma_sources
        for which in ("a", "b", "acc"):
            operand = getattr(op, which)
            if operand.source not in sources[which]:
                yield Problem("mma", where, f"{which} from {operand.source}: {p.target} reads {which} from "
                              f"{' or '.join(sources[which])}")
            if operand.major not in MAJORS:
                yield Problem("mma", where, f"{which} major {operand.major!r}; use 'K' or 'MN'")
        if op.a.source == "regs" and op.a.major != "K":
            yield Problem("mma", where, "a from registers is always K-major (the register fragment layout)")
        k_dim = op.k_dim
        for which in ("a", "b"):
            operand = getattr(op, which)
            region = p.regions.get(operand.name) if operand.source in ("smem", "tmem") else None
            if region is None or not region.dims:
                continue
            if k_dim not in region.dims:
                yield Problem("mma", where, f"{which} region {region.name!r} has dims {region.dims}, none of them "
                              f"the contraction dim {k_dim!r}")
                continue
            major = region.major_of(k_dim)
            if operand.major != major:
                yield Problem("mma", where, f"{which} is declared {operand.major}-major but region {region.name!r} "
                              f"{region.dims} is {major}-major for contraction over {k_dim!r}")
            extent = dict(zip(region.dims, region.shape))
            if extent[k_dim] % k:
                yield Problem("mma", where, f"{which} region {region.name!r} spans {extent[k_dim]} along "
                              f"{k_dim!r}, not a multiple of the MMA k = {k}")
            if which == "b":
                other = [d for d in region.dims if d != k_dim]
                if other and extent[other[0]] * group != n:
                    per = f" in each of the pair's CTAs, the MMA n / 2 = {n // group}" if group > 1 else \
                        f", the MMA n = {n}"
                    yield Problem("mma", where, f"b region {region.name!r} has {extent[other[0]]} along "
                                  f"{other[0]!r}{per}")


def _elem(p: Program, operand) -> str | None:
    if operand.source == "regs":
        return None
    region = p.regions.get(operand.name)
    return region.elem if region else None


CHECKS = (check_roles, check_registers, check_names, check_stages, check_loop, check_tx_bytes, check_arrivals,
          check_handoff, check_protocol, check_parity, check_overlap, check_capacity, check_alignment,
          check_named_barriers, check_mma)
