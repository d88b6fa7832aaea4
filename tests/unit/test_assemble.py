"""The standard sm_90a GEMMs, from wl.matmul to SASS (CPU only): PTX, ptxas and nvJitLink cubins, nvdisasm.

Built once per session (module fixture); assembling runs in threads, the tools are separate processes.
"""
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from warploom.kernels import default_attention_schedule

from warploom.lowering import assemble as asm_mod
from warploom.lowering.assemble import (ToolError, ToolMissing, ToolRejected, assemble, disassemble, find_tool,
                                       parse_report, sass_counts)
from warploom.lowering.ptx import gpu_module_to_ptx
from warploom.build import build_gemm_module
from warploom.kernels import STANDARD_KERNELS

STANDARD = STANDARD_KERNELS["sm_90a"]

SASS_NAMES = ["HGMMA", "UTMALDG", "UTMASTG", "STG", "USETMAXREG", "ELECT", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR",
              "LDL", "STL"]


def _assemble_both(ptx):
    a, j = assemble(ptx, tool="ptxas"), assemble(ptx, tool="nvjitlink")
    return a, j, disassemble(a.cubin), disassemble(j.cubin)


@pytest.fixture(scope="module")
def kernels():
    out = {}
    for spec in STANDARD:     # MLIR under the GIL: one at a time
        out[spec] = {"ptx": gpu_module_to_ptx(build_gemm_module(spec))}
    with ThreadPoolExecutor(max_workers=4) as pool:
        for k, res in zip(out, pool.map(_assemble_both, [v["ptx"] for v in out.values()])):
            out[k].update(zip(("ptxas", "nvjitlink", "sass", "sass_nvjitlink"), res))
    return out


IDS = [s.lookup_id for s in STANDARD]


def ptx_counts(ptx):
    ops = re.findall(r"^\s*(?:@%p\d+\s+)?([a-z][\w.:]*)", ptx, re.M)
    count = lambda prefix: sum(op.startswith(prefix) for op in ops)  # noqa: E731
    return {p: count(p) for p in ("wgmma.mma_async", "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group",
                                  "cp.async.bulk.tensor", "mbarrier.init", "mbarrier.try_wait.parity",
                                  "mbarrier.arrive.expect_tx", "mbarrier.arrive.shared", "setmaxnreg.inc",
                                  "setmaxnreg.dec", "elect.sync", "fence.mbarrier_init", "cp.async.bulk.commit_group",
                                  "cp.async.bulk.wait_group.read", "fence.proxy.async", "st.shared.b32", "bar.sync",
                                  "st.global")}


@pytest.mark.parametrize("key", STANDARD, ids=IDS)
def test_ptx_instruction_mix(kernels, key):
    """The mix of the hardware-checked design: a k-tile is 4 wgmma k16 steps in one commit group (LLVM may
    peel the first K iteration, which duplicates the loop body), 1 + boxes-of-B TMA copies, one group left in
    flight in the loop (wait_group 1) and drained after it (wait_group 0). C leaves through smem: per 64-column
    chunk 16 st.shared.b32 a thread, one proxy fence, two named-barrier syncs, one TMA store and its commit group,
    one wait_group.read before the chunk is written (and one before the CTA exits); no st.global."""
    elem, b_layout, block_n = key.elem, key.b_layout, key.block_n
    ptx = kernels[key]["ptx"]
    assert ".target sm_90a" in ptx and f".entry {key.kernel_name}(" in ptx
    consumers = key.block_m // 64                  # one consumer warpgroup per 64 rows, after the producer's
    assert f".maxntid {128 * (1 + consumers)}, 1, 1" in ptx
    assert (".minnctapersm 1" in ptx) == (consumers == 1)   # ptxas needs it to honour setmaxnreg at 256 threads
    b_boxes = block_n // 64 if b_layout == "kn" else 1
    counts = ptx_counts(ptx)
    bodies = counts["wgmma.commit_group"]          # copies of the consumer's loop body (1, or 2 if peeled)
    assert bodies in (1, 2)
    assert {k: counts[k] for k in ("wgmma.mma_async", "wgmma.fence", "mbarrier.try_wait.parity")} == {
        "wgmma.mma_async": 4 * bodies, "wgmma.fence": bodies, "mbarrier.try_wait.parity": 1 + bodies}
    assert counts["wgmma.wait_group"] == bodies + 1
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d)", ptx).count("1") == bodies
    chunks = block_n // 64
    assert {k: v for k, v in counts.items() if k not in ("wgmma.mma_async", "wgmma.fence", "wgmma.commit_group",
                                                         "wgmma.wait_group", "mbarrier.try_wait.parity",
                                                         "mbarrier.arrive.shared")} == {
        "cp.async.bulk.tensor": 1 + b_boxes + chunks, "mbarrier.init": 2 * key.stages,
        "mbarrier.arrive.expect_tx": 1, "setmaxnreg.inc": 1 if consumers == 2 else 0,
        "setmaxnreg.dec": 1 if consumers == 2 else 2,
        "elect.sync": 1, "fence.mbarrier_init": 1, "cp.async.bulk.commit_group": chunks,
        "cp.async.bulk.wait_group.read": chunks + 1, "fence.proxy.async": chunks, "st.shared.b32": 16 * chunks,
        "bar.sync": 1 + 2 * chunks, "st.global": 0}
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", ptx)) == chunks   # the stores of C
    assert 1 <= counts["mbarrier.arrive.shared"] <= bodies
    trans_b = 1 if b_layout == "kn" else 0
    assert f"wgmma.mma_async.sync.aligned.m64n{block_n}k16.f32.{elem}.{elem}" in ptx
    # ..., scale-d p, imm-scale-a 1, imm-scale-b 1, imm-trans-a 0, imm-trans-b (1: B MN-major)
    tails = set(re.findall(r"wgmma\.mma_async[^;]*(p,\s*1,\s*1,\s*0,\s*\d);", ptx))
    assert {re.sub(r"\s+", "", t) for t in tails} == {f"p,1,1,0,{trans_b}"}


@pytest.mark.parametrize("key", STANDARD, ids=IDS)
def test_ptxas_cubin(kernels, key):
    elem, b_layout, block_n = key.elem, key.b_layout, key.block_n
    a, sass = kernels[key]["ptxas"], kernels[key]["sass"]
    assert a.cubin[:4] == b"\x7fELF"
    assert (a.spill_stores, a.spill_loads, a.stack_bytes) == (0, 0, 0), a.log
    consumers = key.block_m // 64
    # 65536 / 384 threads at launch (255 for 256), then setmaxnreg moves them (40 and 232: two decreases for 256)
    assert a.registers <= (168 if consumers == 2 else 255), a.log
    assert "C7520" not in a.log, a.log               # no wgmma serialized (ptxas does that when setmaxnreg is ignored)
    assert "C7508" not in a.log and "setmaxnreg" not in a.log   # no "setmaxnreg ignored"
    n = sass_counts(sass, SASS_NAMES)
    assert n["HGMMA"] in (4, 8) and n["UTMALDG"] == 1 + (block_n // 64 if b_layout == "kn" else 1)
    assert n["UTMASTG"] == block_n // 64 and n["STG"] == 0          # C leaves by TMA only
    assert n["USETMAXREG"] == 2 and n["ELECT"] == 1
    assert n["LDL"] == 0 and n["STL"] == 0
    hgmma = re.findall(r"HGMMA\.(\S+)", sass)
    assert all(h.startswith(f"64x{block_n}x16.F32") for h in hgmma), hgmma
    assert all(h.endswith(".BF16") == (elem == "bf16") for h in hgmma), hgmma
    assert all((".tnspB" in line) == (b_layout == "kn") for line in re.findall(r"HGMMA[^;]*", sass))
    assert "USETMAXREG.DEALLOC.CTAPOOL 0x28" in sass                # the producer's 40
    assert ("USETMAXREG.TRY_ALLOC.CTAPOOL" in sass) == (consumers == 2)   # 232: taken (384 threads) or given back


@pytest.mark.parametrize("key", STANDARD, ids=IDS)
def test_nvjitlink_cubin(kernels, key):
    j, sass = kernels[key]["nvjitlink"], kernels[key]["sass_nvjitlink"]
    assert j.tool == "nvjitlink" and j.cubin[:4] == b"\x7fELF"
    assert (j.spill_stores, j.spill_loads, j.stack_bytes) == (0, 0, 0), j.log
    n = sass_counts(sass, SASS_NAMES)
    assert n["HGMMA"] in (4, 8) and n["UTMALDG"] >= 2 and n["LDL"] == 0 and n["STL"] == 0
    # nvJitLink compiles relocatably and drops setmaxnreg; when it does, it says so (C7504).
    assert n["USETMAXREG"] == 2 or "C7504" in j.log


def test_parse_report():
    log = ("ptxas info    : Function properties for k\n    8 bytes stack frame, 16 bytes spill stores, "
           "24 bytes spill loads\nptxas info    : Used 255 registers, used 1 barriers\n")
    assert parse_report(log) == (255, 16, 24, 8)
    with pytest.raises(ToolError, match="no resource report"):
        parse_report("nothing here")


def test_sass_counts_match_opcodes_only():
    sass = "  /*0010*/  HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;\n  /*0020*/  @!P0 NANOSLEEP.SYNCS 0x1 ;\n" \
           "  /*0030*/  SYNCS.EXCH.64 URZ, [UR5], UR6 ;\n"
    assert sass_counts(sass, ["HGMMA", "SYNCS", "LDL"]) == {"HGMMA": 1, "SYNCS": 1, "LDL": 0}


def test_tool_errors_name_the_tool_and_show_the_log():
    with pytest.raises(ToolError, match=r"ptxas failed .*\n.*(error|fatal)"):
        assemble(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus; }\n")
    with pytest.raises(ToolError, match="nvJitLink failed"):
        assemble(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus; }\n",
                 tool="nvjitlink")
    with pytest.raises(ValueError, match="unknown assembler"):
        assemble("", tool="nvcc")


def test_missing_tool_names_the_pip_package(monkeypatch):
    monkeypatch.setattr(asm_mod.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(asm_mod.shutil, "which", lambda name: None)
    with pytest.raises(ToolMissing, match=r"ptxas not found.*pip install \"nvidia-cuda-nvcc==13\.0\.\*\""):
        find_tool("ptxas")
    with pytest.raises(ToolMissing, match="nvidia-cuda-nvdisasm"):
        find_tool("nvdisasm")


BAD_PTX = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus; }\n"


@pytest.mark.parametrize("tool", ["ptxas", "nvjitlink"])
def test_a_rejected_kernel_is_a_failure_carrying_the_tools_message(tool):
    """A tool that ran and refused its input raises ToolRejected (a ToolError, not ToolMissing: the one tests skip
    on), its message carrying the tool's own diagnostic: the unknown instruction and the line it is on."""
    with pytest.raises(ToolError) as e:
        assemble(BAD_PTX, tool=tool)
    assert isinstance(e.value, ToolRejected) and not isinstance(e.value, ToolMissing)
    assert "bogus" in str(e.value) or "line 4" in str(e.value), str(e.value)


def test_nvdisasm_rejecting_a_cubin_is_a_failure():
    with pytest.raises(ToolRejected, match="nvdisasm failed"):
        disassemble(b"not a cubin")


def test_tools_come_from_the_pip_packages():
    assert "nvidia" in find_tool("ptxas") and "nvidia" in find_tool("nvdisasm")


# ---- the sm_90a attention kernels (planned_fa3 lowered by warploom.lowering) ----------------

SASS_AB = {"bf16": ".BF16", "f16": ""}        # nvdisasm spells the A/B type of HGMMA for bf16 only (f16 is the default)
# every standard kernel (bf16 and f16, the overlapped schedule, each head dim's standard schedule: persistent at 64
# and 128, grid at 256), the grid schedule's overlapped kernels at 64 and 128 in bf16, and the serial schedule in
# bf16 (grid)
ATTENTION = ([(elem, d, causal, True, default_attention_schedule(d)) for elem in ("bf16", "f16")
              for d in (64, 128, 256) for causal in (False, True)]
             + [("bf16", d, causal, True, "grid") for d in (64, 128) for causal in (False, True)]
             + [("bf16", d, causal, False, "grid") for d in (64, 128, 256) for causal in (False, True)])
ATTN_IDS = [f"{e}-d{d}{'-causal' if c else ''}{'-overlap' if ov else '-serial'}-{sch}" for e, d, c, ov, sch in ATTENTION]
ATTN_SASS = ["HGMMA", "UTMALDG", "UTMASTG", "UTMACMDFLUSH", "STS", "STG.E", "FENCE.VIEW.ASYNC.S", "USETMAXREG", "ELECT",
             "BAR.SYNC", "BAR.ARV", "SHFL.BFLY", "MUFU.EX2", "MUFU.LG2",
             "LDL", "STL"]


@pytest.fixture(scope="module")
def attention_kernels():
    from tests.emulate.fa3_plan import default_block_n, planned_fa3
    from warploom.lowering import kernel_name, lower_program as lower_attention
    out = {}
    for elem, d, causal, overlap, schedule in ATTENTION:
        program = planned_fa3(elem, d, causal, overlap=overlap, schedule=schedule)
        lowered = lower_attention(program, kernel_name(program))
        out[(elem, d, causal, overlap, schedule)] = {"name": lowered.name, "block_n": default_block_n(d, schedule),
                            "ptx": gpu_module_to_ptx(lowered.gpu_module)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda ptx: (lambda a: (a, disassemble(a.cubin)))(assemble(ptx, tool="ptxas")),
                        [v["ptx"] for v in out.values()])
        for key, (a, sass) in zip(out, done):
            out[key].update(ptxas=a, sass=sass)
    return out


@pytest.mark.parametrize("key", ATTENTION, ids=ATTN_IDS)
def test_attention_ptxas_and_sass(attention_kernels, key):
    """Each attention kernel assembles with no spill and no stack; per key block one S = Q K^T (D/16 k16
    wgmmas, both operands K-major) and one O += P V (block_n/16 register-A wgmmas, V MN-major: .tnspB); TMA: Q
    once, K and V per block, D/64 boxes each; the ping-pong's named barriers (ids 1, 2 picked at run time,
    256 threads); row max / sum over the quad (2 bfly each for 2 rows, 3 times); setmaxnreg 24 / 240.
    Registers seen (ptxas 13.0, highest R used after setmaxnreg, grid tiles: block_n 128 / 176 / 80): serial
    d64 ~144, d128 ~214, d256 ~225; overlapped (P_{j-1} and O in flight beside S_j, P_j) d64 ~173, d128 ~236,
    d256 ~237. The persistent schedule (the standard at 64 and 128) runs the same code once per tile: the same
    instruction counts; its tile walk keeps a few more registers live (176 spills at head dim 128); its block_n
    there is 128 (160 fits; 128 ran faster, benchmarks/NOTES.md run 42).

    The overlapped schedule has its loop body twice more (the peeled first block: S and softmax; the last P V
    after the loop), so twice the HGMMAs, one more turn, one more softmax; ptxas reports no wgmma serialization
    (C7513 "Potential Performance Loss": P_j is made while P_{j-1} V_{j-1} still reads P_{j-1}'s registers), and
    the whole softmax of block j (its block_n / 2 + 2 ex2) sits between the body's wait_group 1 and wait_group 0:
    beside the P V in flight."""
    elem, d, causal, overlap, schedule = key
    k = attention_kernels[key]
    a, sass, bn = k["ptxas"], k["sass"], k["block_n"]
    name = (f"wl_attn_{elem}_d{d}_128x{bn}_s2" + ("_causal" * causal) + ("_ov" * overlap)
            + ("_persistent_q2" * (schedule == "persistent")))
    assert f".entry {k['name']}" in k["ptx"] and k["name"] == name
    assert a.cubin[:4] == b"\x7fELF"
    assert (a.spill_stores, a.spill_loads, a.stack_bytes) == (0, 0, 0), a.log
    assert a.registers <= 168 and "C7508" not in a.log, a.log
    assert "C7513" not in a.log and "Potential Performance Loss" not in a.log, a.log
    n = sass_counts(sass, ATTN_SASS)
    assert n["LDL"] == 0 and n["STL"] == 0
    copies = 2 if overlap else 1                                       # the loop body's MMAs and softmax, peeled
    assert n["HGMMA"] == copies * (d // 16 + bn // 16) and n["UTMALDG"] == 3 * d // 64
    hgmma = re.findall(r"HGMMA\.(\S+)[^;]*", sass)
    assert sorted(set(h.split()[0] for h in hgmma)) == sorted({f"64x{n}x16.F32{SASS_AB[elem]}" for n in (bn, d)})
    lines = re.findall(r"HGMMA[^;]*", sass)
    assert sum(".tnspB" in line for line in lines) == copies * bn // 16  # only P V reads B MN-major
    # bar 0; turn[w] (in the first block and the loop when overlapped); warpgroup 0's last; epilogue[w] twice
    assert n["BAR.ARV"] == 1 + copies and n["BAR.SYNC"] == 4 + copies
    assert len(re.findall(r"BAR\.SYNC\.DEFER_BLOCKING R\d+, 0x80", sass)) == 2      # 128 threads: one warpgroup
    # O through smem: one 4-byte st.shared per column pair and row (D / 4 a thread), fenced for the async proxy,
    # then one TMA store per 64 columns, one bulk group; global stores only for the LSE (2 rows a thread)
    assert n["STS"] == d // 4 and n["FENCE.VIEW.ASYNC.S"] >= 1
    assert n["UTMASTG"] == d // 64 and n["UTMACMDFLUSH"] == 1 and n["STG.E"] == 2
    assert re.search(r"BAR\.SYNC\.DEFER_BLOCKING R\d+, 0x100", sass) and re.search(r"BAR\.ARV R\d+, 0x100", sass)
    assert n["SHFL.BFLY"] == 4 * copies + 8 and n["MUFU.LG2"] == 2 and n["MUFU.EX2"] == copies * (bn // 2 + 2)
    waits = [(i, w) for i, w in enumerate(sass.splitlines()) if "WARPGROUP.DEPBAR.LE gsb0" in w]
    if overlap:
        body = [i for i, w in waits if w.rstrip(" ;").endswith("0x1")]
        assert len(body) == 1, waits
        end = next(i for i, w in waits if i > body[0])
        beside = sass.splitlines()[body[0]:end]
        assert sum("MUFU.EX2" in line for line in beside) == bn // 2 + 2, "the softmax is not beside the P V"
    else:
        assert all(w.rstrip(" ;").endswith("0x0") for _, w in waits)
    assert n["USETMAXREG"] == 2 and "USETMAXREG.DEALLOC.CTAPOOL 0x18" in sass
    assert re.search(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL (UP\d+, )?0xf0 ", sass)
    assert max(int(r) for r in re.findall(r"\bR(\d+)\b", sass)) < 240       # within the consumers' 240


def test_tuning_only_kernels_assemble_without_serialized_wgmma():
    """The kernels only the tuning table may pick (warploom/tuning) run through ops like the standard ones: ptxas must
    honour their setmaxnreg (no C7508), keep their wgmmas unserialized (no C7520) and spill nothing."""
    from warploom import tuning
    extra = [s for s in tuning.all_candidates() if s not in STANDARD]
    assert extra
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(assemble, [gpu_module_to_ptx(build_gemm_module(s)) for s in extra]))
    for spec, a in zip(extra, results):
        assert "C7520" not in a.log and "C7508" not in a.log, (spec.kernel_name, a.log)
        assert (a.spill_stores, a.spill_loads, a.stack_bytes) == (0, 0, 0), (spec.kernel_name, a.log)


def _key_loop(sass: str) -> list[str]:
    """The opcodes of the innermost loop (a backward branch to a label) that holds HGMMAs and MUFU.EX2s: the
    consumers' key loop (the others holding both also hold the peeled first and last blocks)."""
    labels, ins = {}, []
    for line in sass.splitlines():
        label = re.match(r"\s*\.L_x_(\d+):", line)
        if label:
            labels[label.group(1)] = len(ins)
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)[^;]*;", line)
        if m:
            ins.append(("MUFU.EX2" if "MUFU.EX2" in line else m.group(1), line))
    loops = []
    for i, (_, line) in enumerate(ins):
        target = re.search(r"BRA[^;]*\.L_x_(\d+)", line)
        if target and labels.get(target.group(1), i + 1) <= i:
            body = [op for op, _ in ins[labels[target.group(1)]:i + 1]]
            if "HGMMA" in body and "MUFU.EX2" in body:
                loops.append(body)
    return min(loops, key=len)


@pytest.mark.parametrize("d", [64, 128])
def test_streamk_key_loop_is_the_persistent_one(d):
    """The stream-K attention's key loop compiles to the persistent kernel's instructions: the merge and the
    conditional stores around it must not cost the loop anything. (A branch around the O store made ptxas 13.0 move
    the ring arithmetic off the uniform datapath: 654 SASS instructions a key block instead of 584 at head dim 128,
    48 R2UR instead of 16, and the kernel 4-7% slower on the GPU, run 54.)"""
    from warploom.build import planned_attention_program
    from warploom.lowering import kernel_name, lower_program as lower_attention
    loops = {}
    for schedule in ("persistent", "streamk"):
        program = planned_attention_program("bf16", d, False, schedule=schedule)
        lowered = lower_attention(program, kernel_name(program))
        loops[schedule] = _key_loop(disassemble(assemble(gpu_module_to_ptx(lowered.gpu_module), tool="ptxas").cubin))
    persistent, streamk = loops["persistent"], loops["streamk"]
    assert len(streamk) <= len(persistent) + 4, (len(streamk), len(persistent))
    for op in ("R2UR", "IMAD", "HGMMA", "MUFU.EX2"):
        assert streamk.count(op) <= persistent.count(op), (op, streamk.count(op), persistent.count(op))
