"""The typed kernel program and its verifier: an FA3-shaped attention program, the GEMM read from wl IR,
and one hand-broken program per invariant (each error must name the check, the role or resource, and the fix)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from warploom.dialect.shapes import TensorType
from warploom.kernel import (Arrive, Compute, Copy, KernelError, Loop, MBarrier, Mma, MmaWait, NamedBarrier, Operand,
                             Program, Region, Ring, Role, Store, Sync, Wait, problems, read_program, verify)
from warploom.passes import run_pipeline

BF16_TILE = 128 * 128 * 2          # one 128x128 bf16 tile: 32768 B


def fa3_program() -> Program:
    """FA3-style forward attention for one 128-row Q tile, head dim 128: Q loaded once, a K ring and a V ring of
    2 stages, a producer warp, two consumer warpgroups taking turns through named barriers (ping-pong);
    S = Q K^T with K K-major (contraction over the head dim D), O += P V with P in registers and V MN-major
    (contraction over the key index N); O is staged for the store in Q's region."""
    seq = TensorType((None, 128), "bf16")
    regions = {
        "q": Region("q", "smem", "bf16", (128, 128), ("M", "D"), 1, 128, 0, BF16_TILE, 1024),
        "k": Region("k", "smem", "bf16", (128, 128), ("N", "D"), 2, 128, 32768, 2 * BF16_TILE, 1024),
        "v": Region("v", "smem", "bf16", (128, 128), ("N", "D"), 2, 128, 98304, 2 * BF16_TILE, 1024),
        "o": Region("o", "smem", "bf16", (128, 128), ("M", "D"), 1, 128, 0, BF16_TILE, 1024, aliases=("q",)),
    }
    barriers = {
        "q_full": MBarrier("q_full", 1, 1, BF16_TILE, offset=163840),
        "k_full": MBarrier("k_full", 2, 1, BF16_TILE, offset=163848),
        "k_empty": MBarrier("k_empty", 2, 2, offset=163864),
        "v_full": MBarrier("v_full", 2, 1, BF16_TILE, offset=163880),
        "v_empty": MBarrier("v_empty", 2, 2, offset=163896),
    }
    rings = {
        "q": Ring("q", 1, ("q",), "producer", ("consumer",), full="q_full"),
        "k": Ring("k", 2, ("k",), "producer", ("consumer",), full="k_full", empty="k_empty"),
        "v": Ring("v", 2, ("v",), "producer", ("consumer",), full="v_full", empty="v_empty"),
    }
    producer = Role("producer", first_warp=0, warps=1, issue="thread", regs=24, body=(
        Arrive("q_full", tx_bytes=BF16_TILE), Copy("q", "q", "q_full"),
        Loop(("cdiv", "Sk", 128), name="kv", body=(
            Wait("k_empty", "phase^1"), Arrive("k_full", tx_bytes=BF16_TILE), Copy("k", "k", "k_full"),
            Wait("v_empty", "phase^1"), Arrive("v_full", tx_bytes=BF16_TILE), Copy("v", "v", "v_full"))),
    ))
    consumer = Role("consumer", first_warp=4, warps=8, issue="warpgroup", regs=240, body=(
        Wait("q_full"),
        Loop(("cdiv", "Sk", 128), name="kv", carries=("o_acc", "row_max", "row_sum"), body=(
            Sync("turn"),                                    # wait for this warpgroup's turn at the tensor cores
            Wait("k_full"),
            Mma(Operand("smem", "q", "K"), Operand("smem", "k", "K"), Operand("regs", "s"), (64, 128, 128),
                k_dim="D", accumulate=False),
            MmaWait(0),
            Arrive("k_empty", per="warpgroup"),
            Compute("online_softmax", ("s", "row_max", "row_sum", "o_acc"), ("p", "row_max", "row_sum", "o_acc")),
            Wait("v_full"),
            Mma(Operand("regs", "p", "K"), Operand("smem", "v", "MN"), Operand("regs", "o_acc"), (64, 128, 128),
                k_dim="N"),
            Sync("turn", arrive_only=True),                  # hand the tensor cores to the other warpgroup
            MmaWait(0),
            Arrive("v_empty", per="warpgroup"))),
        Compute("normalize", ("o_acc", "row_sum"), ("o_acc",)),
        Store("o_acc", "out", (64, 128)),
    ))
    return Program(kind="attention", target="sm_90a", inputs={"q": seq, "k": seq, "v": seq}, outputs={"out": seq},
                   threads=384, roles=[producer, consumer], regions=regions, barriers=barriers,
                   named_barriers={"turn": NamedBarrier("turn", 1, 256)}, rings=rings,
                   registers={"s": (64, 128), "p": (64, 128), "o_acc": (64, 128), "row_max": (64,),
                              "row_sum": (64,)})


def replace_op(body, old, new):
    """`body` with op `old` replaced by `new` (None removes it), searching nested loops."""
    out = []
    for op in body:
        if op is old:
            if new is not None:
                out.append(new)
        elif isinstance(op, Loop):
            out.append(replace(op, body=replace_op(op.body, old, new)))
        else:
            out.append(op)
    return tuple(out)


def edit_role(p: Program, name: str, old, new) -> Program:
    p.roles = [replace(r, body=replace_op(r.body, old, new)) if r.name == name else r for r in p.roles]
    return p


def find(p: Program, role: str, pred):
    return next(op for op in p.role(role).walk() if pred(op))


def only_problem(p: Program, check: str):
    found = problems(p)
    assert found, f"no problem found; expected a {check!r} problem"
    assert {f.check for f in found} == {check}, "\n".join(map(str, found))
    return found


# ---- the programs that must verify --------------------------------------------------------------------

def test_fa3_shaped_program_verifies():
    p = fa3_program()
    assert problems(p) == []
    verify(p)
    qk, pv = [op for _, op in p.ops() if isinstance(op, Mma)]
    assert (qk.b.name, qk.b.major, pv.b.name, pv.b.major, pv.a.source) == ("k", "K", "v", "MN", "regs")


@pytest.mark.parametrize("spec_index", [0, 3, 9, 14])
def test_standard_gemms_read_from_ir_verify(spec_index):
    from warploom.build import build_gemm_module
    from warploom.dialect.kernel_ir import kernel_ops
    from warploom.kernels import STANDARD_KERNELS
    spec = STANDARD_KERNELS["sm_90a"][spec_index]
    module = build_gemm_module(spec, lower=False)
    with module.context:
        (kernel,) = kernel_ops(module)
        p = read_program(kernel)
    assert problems(p) == []
    (ring,) = p.rings.values()
    assert (ring.regions, ring.full, ring.empty, ring.stages) == (("a", "b"), "full", "empty", spec.stages)
    assert [(r.name, r.first_warp, r.warps, r.issue) for r in p.roles] == [
        ("producer", 0, 4, "thread"), ("consumer", 4, 8, "warpgroup")]
    mma = next(op for _, op in p.ops() if isinstance(op, Mma))
    assert (mma.a.major, mma.b.major) == ("K", "K" if spec.b_layout == "nk" else "MN")


# ---- one broken program per invariant -----------------------------------------------------------------

def test_roles_disjoint_warps():
    p = fa3_program()
    p.roles[1] = replace(p.roles[1], first_warp=0)
    (f, *_) = [x for x in problems(p) if x.check == "roles"]
    assert "warp 0 is also in role 'producer'" in str(f) and "give each warp one role" in str(f)


def test_roles_warpgroup_alignment():
    p = fa3_program()
    p.roles[1] = replace(p.roles[1], first_warp=3)
    found = [x for x in problems(p) if x.check == "roles"]
    assert any("multiple of 4 warps" in str(x) and "role 'consumer'" in str(x) for x in found)


def test_registers_overflow_names_budgets_and_fix():
    p = fa3_program()
    p.roles[1] = replace(p.roles[1], regs=256)
    (f,) = only_problem(p, "registers")
    assert "wg0 24, wg1 256, wg2 256" in str(f) and "65536" in str(f) and "lower the largest budget" in str(f)


def test_registers_one_budget_per_warpgroup():
    p = fa3_program()
    p.roles[0] = replace(p.roles[0], warps=1, regs=24)
    p.roles.append(Role("mma", first_warp=1, warps=1, issue="thread", regs=32))
    found = [x for x in problems(p) if x.check == "registers"]
    assert any("warpgroup 0" in str(x) and "give both one budget" in str(x) for x in found)


def test_names_unknown_barrier():
    p = fa3_program()
    old = find(p, "consumer", lambda op: isinstance(op, Wait) and op.barrier == "k_full")
    edit_role(p, "consumer", old, Wait("k_ful"))
    found = [x for x in problems(p) if x.check == "names"]
    assert any("role 'consumer', Wait(barrier='k_ful'" in str(x) and "no mbarrier named 'k_ful'" in str(x)
               for x in found)


def test_names_mma_register_operand_must_be_declared():
    p = fa3_program()
    del p.registers["p"]
    (f,) = only_problem(p, "names")
    assert "register value 'p'" in str(f) and "Mma(" in str(f)


def test_stages_barrier_slots_match_ring():
    p = fa3_program()
    p.barriers["k_empty"] = replace(p.barriers["k_empty"], count=3)
    found = [x for x in problems(p) if x.check == "stages"]
    assert any("'k_empty' has 3 slots for 2 stages" in str(x) for x in found)


def test_loop_staged_op_outside_loop():
    p = fa3_program()
    old = find(p, "consumer", lambda op: isinstance(op, Wait) and op.barrier == "k_full")
    edit_role(p, "consumer", old, None)
    body = p.role("consumer").body
    p.roles[1] = replace(p.roles[1], body=(Wait("k_full"),) + body)
    found = [x for x in problems(p) if x.check == "loop"]
    assert found and "move the op into the loop" in str(found[0]) and "'k_full' has 2 stages" in str(found[0])


def test_tx_bytes_must_match_copies():
    p = fa3_program()
    old = find(p, "producer", lambda op: isinstance(op, Arrive) and op.barrier == "k_full")
    edit_role(p, "producer", old, Arrive("k_full", tx_bytes=BF16_TILE // 2))
    found = [x for x in problems(p) if x.check == "tx-bytes"]
    assert any("expects 16384 B but the copies completing on 'k_full' here land 32768 B (k 32768 B)" in str(x)
               for x in found)


def test_arrivals_count_matches_roles():
    p = fa3_program()
    p.barriers["v_empty"] = replace(p.barriers["v_empty"], arrivals=1)
    (f,) = only_problem(p, "arrivals")
    assert "'v_empty'" in str(f) and "consumer 2" in str(f) and "set arrivals = 2" in str(f)


def test_handoff_barrier_nobody_arrives_on():
    p = fa3_program()
    old = find(p, "consumer", lambda op: isinstance(op, Arrive) and op.barrier == "v_empty")
    edit_role(p, "consumer", old, None)
    (f,) = only_problem(p, "handoff")
    assert "'v_empty'" in str(f) and "deadlock" in str(f)


def test_protocol_refill_without_empty_wait():
    p = fa3_program()
    old = find(p, "producer", lambda op: isinstance(op, Wait) and op.barrier == "k_empty")
    edit_role(p, "producer", old, None)
    found = problems(p)
    assert any(x.check == "protocol" and "Copy(source='k'" in str(x) and "waiting on 'k_empty'" in str(x)
               for x in found)


def test_protocol_mma_without_full_wait():
    p = fa3_program()
    old = find(p, "consumer", lambda op: isinstance(op, Wait) and op.barrier == "v_full")
    edit_role(p, "consumer", old, None)
    found = [x for x in problems(p) if x.check == "protocol"]
    assert len(found) == 1 and "reads 'v' (ring 'v') without waiting on 'v_full'" in str(found[0])


def test_parity_producer_waits_on_previous_phase():
    p = fa3_program()
    old = find(p, "producer", lambda op: isinstance(op, Wait) and op.barrier == "v_empty")
    edit_role(p, "producer", old, Wait("v_empty", "phase"))
    (f,) = only_problem(p, "parity")
    assert "use 'phase^1'" in str(f) and "role 'producer'" in str(f)


def test_overlap_needs_declared_alias():
    p = fa3_program()
    p.regions["o"] = replace(p.regions["o"], aliases=())
    (f,) = only_problem(p, "overlap")
    assert "'o'" in str(f) and "'q'" in str(f) and "declare the alias" in str(f)


def test_capacity_smem_limit():
    p = fa3_program()
    p.regions["v"] = replace(p.regions["v"], stages=8, size=8 * BF16_TILE)
    p.rings["v"] = replace(p.rings["v"], stages=8)
    for name in ("v_full", "v_empty"):
        p.barriers[name] = replace(p.barriers[name], count=8, offset=p.barriers[name].offset + 400000)
    found = [x for x in problems(p) if x.check == "capacity"]
    assert found and "allows 232448 B" in str(found[0]) and "fewer stages" in str(found[0])


def test_alignment_swizzled_tile():
    p = fa3_program()
    p.regions["k"] = replace(p.regions["k"], offset=32768 + 128, align=128)
    found = [x for x in problems(p) if x.check == "alignment"]
    assert found and "multiples of 1024 B (the swizzle repeat)" in str(found[0])


def test_named_barrier_thread_count_and_id():
    p = fa3_program()
    p.named_barriers["turn"] = NamedBarrier("turn", 0, 128)
    found = {str(x) for x in problems(p) if x.check == "named-barriers"}
    assert any("id 0; use 1..15" in f for f in found)
    assert any("counts 128 threads but roles consumer bring 256: set threads = 256" in f for f in found)


def test_mma_major_must_match_layout():
    p = fa3_program()
    old = find(p, "consumer", lambda op: isinstance(op, Mma) and op.k_dim == "N")
    edit_role(p, "consumer", old, replace(old, b=Operand("smem", "v", "K")))
    (f,) = only_problem(p, "mma")
    assert "declared K-major but region 'v' ('N', 'D') is MN-major" in str(f)


def test_mma_shape_and_sources_per_target():
    p = fa3_program()
    old = find(p, "consumer", lambda op: isinstance(op, Mma) and op.k_dim == "D")
    edit_role(p, "consumer", old, replace(old, shape=(128, 128, 128), acc=Operand("tmem", "s")))
    found = [str(x) for x in problems(p) if x.check in ("mma", "names")]
    assert any("m128n128" in f and "M in (64,)" in f for f in found)
    assert any("acc from tmem: sm_90a reads acc from regs" in f for f in found)


def test_verify_raises_with_every_problem():
    p = fa3_program()
    p.barriers["v_empty"] = replace(p.barriers["v_empty"], arrivals=1)
    p.regions["o"] = replace(p.regions["o"], aliases=())
    with pytest.raises(KernelError) as e:
        verify(p, "fa3")
    assert "fa3 fails 2 check(s)" in str(e.value) and len(e.value.problems) == 2


# ---- the program's printed form: read -> write gives the IR back -------------------------------------

@pytest.mark.parametrize("passes", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("spec_index", [0, 9])
def test_write_program_is_the_inverse_of_read(spec_index, passes):
    """After each kernel pass, writing the program it reads reproduces the kernel IR exactly."""
    from warploom.build import gemm_graph, planning_passes
    from warploom.dialect.kernel_ir import kernel_ops
    from warploom.kernel.write import write_program
    from warploom.kernels import STANDARD_KERNELS
    spec = STANDARD_KERNELS["sm_90a"][spec_index]
    pipeline = planning_passes(spec)                    # wl-verify, wl-fuse, wl-verify, then the 5 kernel passes
    module, _ = run_pipeline(gemm_graph(spec), pipeline[:3 + passes])
    with module.context:
        (kernel,) = kernel_ops(module)
        before = str(kernel)
        write_program(kernel, read_program(kernel))
        assert str(kernel) == before


def test_write_program_holds_roles_of_single_warps():
    """The FA3-shaped program has a one-warp producer: it prints as `warps = [0, 1]` and reads back the same."""
    from warploom.dialect import make_context
    from warploom.kernel.write import write_program
    from mlir import ir
    p = fa3_program()
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse('func.func @f(%q: tensor<?x128xbf16>) -> tensor<?x128xbf16> {\n'
                                 '  %o = "wl.kernel"(%q, %q) ({\n    gpu.yield\n  }) {kind = "attention", tile = [128, 128, 128], '
                                 'cluster = [1, 1, 1], grid = [["const", 1]]} : (tensor<?x128xbf16>, tensor<?x128xbf16>) -> tensor<?x128xbf16>\n'
                                 '  return %o : tensor<?x128xbf16>\n}\n')
        from warploom.dialect.kernel_ir import kernel_ops
        (kernel,) = kernel_ops(module)
        write_program(kernel, p)
        assert "warps = [0, 1]" in str(kernel)
        from warploom.kernel import read_program
        back = read_program(kernel)
        assert [(r.name, r.first_warp, r.warps, r.issue) for r in back.roles] == \
            [(r.name, r.first_warp, r.warps, r.issue) for r in p.roles]


def _planned_fa3():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "emulate" / "fa3_plan.py"
    spec = importlib.util.spec_from_file_location("fa3_plan_contract", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.planned_fa3


@pytest.mark.parametrize("overlap", [False, True], ids=["serial", "overlap"])
@pytest.mark.parametrize("elem, d, causal, schedule", [("bf16", 64, False, "grid"), ("f16", 128, True, "grid"),
                                                       ("bf16", 256, True, "grid"), ("bf16", 64, True, "persistent")])
def test_write_then_read_gives_the_planned_fa3_program_back(elem, d, causal, schedule, overlap):
    """The planned attention (two outputs, a one-stage ring loaded once, named barriers with per-warpgroup slots,
    register-A MMAs, computes, loop names and carries; overlapped: the loop's first and last sections, lagged
    waits and MMAs) has a wl IR form that reads back as the same program."""
    import json
    from warploom.dialect import make_context
    from warploom.dialect.kernel_ir import kernel_ops
    from warploom.kernel.write import write_program
    from mlir import ir
    p = _planned_fa3()(elem, d, causal, overlap=overlap, schedule=schedule)
    seq, lse = f"tensor<?x?x?x{d}x{elem}>", "tensor<?x?x?xf32>"
    a = p.attrs
    attrs = (f'kind = "attention", tile = {json.dumps(a["tile"])}, grid = {json.dumps(a["grid"])}, '
             f'schedule = "{schedule}", cluster = [1, 1, 1], causal = {str(causal).lower()}, acc_elem = "f32", '
             'input_names = ["q", "k", "v"], output_names = ["out", "lse"]')
    text = (f'func.func @f(%q: {seq}, %k: {seq}, %v: {seq}) -> {seq} {{\n'
            f'  %o:2 = "wl.kernel"(%q, %k, %v) ({{\n    gpu.yield\n  }}) {{{attrs}}} : ({seq}, {seq}, {seq}) -> '
            f'({seq}, {lse})\n  return %o#0 : {seq}\n}}\n')
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        (kernel,) = kernel_ops(module)
        write_program(kernel, p)
        printed = str(kernel)
        assert read_program(kernel) == p
    lines = ['"wl.named_barrier"() {count = 2 : i64, id = 1 : i64, name = "turn", threads = 256 : i64}',
             '"wl.named_barrier_arrive"() {barrier = "turn", slot = "next", tiles = "first", warpgroup = 1 : i64}',
             '"wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}',
             'a = "p", a_major = "K", a_source = "regs", acc = "o_acc", b = "v", b_major = "MN", '
             'b_source = "smem", k_dim = "N"']
    if overlap:
        lines += ['"wl.loop_first"() ({', '"wl.loop_last"() ({',
                  '"wl.wait"() {barrier = "v_full", lag = 1 : i64, parity = "consumer"}',
                  'k_dim = "N", lag = 1 : i64, shape = ',
                  '"wl.compute"() {kind = "softmax", reads = ["s", "row_max", "row_sum"], '
                  'writes = ["p", "row_max", "row_sum", "corr"]}',
                  '"wl.compute"() {kind = "rescale", reads = ["o_acc", "corr"], writes = ["o_acc"]}',
                  'carries = ["o_acc", "row_max", "row_sum", "p"]']
    else:
        lines += ['"wl.compute"() {kind = "online_softmax", reads = ["s", "row_max", "row_sum", "o_acc"], '
                  'writes = ["p", "row_max", "row_sum", "o_acc"]}']
    for line in lines:
        assert line in printed, line


# ---- the overlapped (software-pipelined) attention schedule: the verifier checks its sections ----------------

def _overlapped_consumer(edit):
    """planned_fa3's overlapped program with the consumer loop replaced by edit(loop)."""
    import dataclasses
    p = _planned_fa3()("bf16", 64, False)
    roles = []
    for role in p.roles:
        if role.name == "consumer":
            role = dataclasses.replace(role, body=tuple(edit(o) if isinstance(o, Loop) else o for o in role.body))
        roles.append(role)
    return dataclasses.replace(p, roles=roles)


def test_overlapped_fa3_verifies():
    assert problems(_planned_fa3()("bf16", 128, True)) == []


def test_overlap_last_section_must_free_what_the_body_frees_late():
    """The body frees V with lag 1 (the previous block's stage); a last section that does not free the last block's
    stage leaves its v_empty phase incomplete."""
    import dataclasses
    found = problems(_overlapped_consumer(lambda loop: dataclasses.replace(
        loop, last=tuple(o for o in loop.last if not isinstance(o, Arrive)))))
    assert [(f.check, f.where) for f in found] == [("arrivals", "role 'consumer', loop 'kv' section 'last'")]
    assert "makes 0 arrivals on 'v_empty' where the body makes 2 lagged arrivals" in found[0].message


def test_overlap_first_section_must_free_what_the_body_frees_at_once():
    import dataclasses
    found = problems(_overlapped_consumer(lambda loop: dataclasses.replace(
        loop, first=tuple(o for o in loop.first if not isinstance(o, Arrive)))))
    assert [f.check for f in found] == ["arrivals"]
    assert "makes 0 arrivals on 'k_empty' where the body makes 2 lag-0 arrivals (for iteration 0)" in found[0].message


def test_overlap_sections_lags():
    """No lag in the first section (block 0 has no predecessor); every ring op of the last section has one (it runs
    after the last block); a lagged MMA needs the wait of the same lag."""
    import dataclasses
    first_lagged = problems(_overlapped_consumer(lambda loop: dataclasses.replace(
        loop, first=tuple(dataclasses.replace(o, lag=1) if isinstance(o, Arrive) else o for o in loop.first))))
    assert "loop" in [f.check for f in first_lagged]
    assert any("lag 1 in a loop's first section" in f.message for f in first_lagged)
    last_unlagged = problems(_overlapped_consumer(lambda loop: dataclasses.replace(
        loop, last=tuple(dataclasses.replace(o, lag=0) if isinstance(o, (Wait, Mma)) else o for o in loop.last))))
    assert [f.check for f in last_unlagged] == ["loop", "loop"]
    assert all("last section" in f.message for f in last_unlagged)
    wrong_wait = problems(_overlapped_consumer(lambda loop: dataclasses.replace(
        loop, body=tuple(dataclasses.replace(o, lag=0) if isinstance(o, Wait) and o.barrier == "v_full" else o
                         for o in loop.body))))
    assert [f.check for f in wrong_wait] == ["protocol"]
    assert "lag 1: the stage of iteration - 1" in wrong_wait[0].message


def test_overlap_lag_beyond_the_stages():
    import dataclasses
    found = problems(_overlapped_consumer(lambda loop: dataclasses.replace(
        loop, body=tuple(dataclasses.replace(o, lag=2) if isinstance(o, Mma) and o.lag else o for o in loop.body))))
    assert "stages" in [f.check for f in found]
    assert any("lag 2 with 2 stage(s)" in f.message for f in found)
