"""A stream-K kernel launched directly with chosen SMS (so which pieces exist is known), exact inputs: prints which rows
and columns of C are wrong, and the counters after the launch. H200 run 24 found wl_gemm_*_64x128x64_s8_streamk wrong
this way, even on a whole tile with no fix-up (logs/run24-debug_streamk.log).

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 tests/gpu/debug_streamk.py [BMxBNxSTAGES ...]

(default 64x64x8 128x128x6; the kernels must be in the cache)"""
import sys
import torch
sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])
from warploom.kernels import GemmSpec, get_kernel
from warploom.runtime import rules
from warploom.runtime.launch import default_launcher
from warploom.runtime.tensormap import encode_tiled
from warploom.runtime.tensors import as_device_tensor


def run(spec, m, n, k, sms):
    art = get_kernel(spec)
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randint(-2, 3, (m, k), device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randint(-2, 3, (k, n), device="cuda", generator=g).to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    args = {"a": encode_tiled(art.tensor_maps["a"], as_device_tensor(a), [1, 0]),
            "b": encode_tiled(art.tensor_maps["b"], as_device_tensor(b), [1, 0]),
            "c": encode_tiled(art.tensor_maps["c"], as_device_tensor(c), [1, 0]), "M": m, "N": n, "K": k}
    sizes = {"M": m, "N": n, "K": k, "SMS": sms}
    g_ = rules.evaluate(art.grid[0], sizes)
    floats, counts = spec.streamk_buffers(g_, m, n)
    ws = torch.full((floats,), float("nan"), device="cuda", dtype=torch.float32)
    cnt = torch.zeros(counts, device="cuda", dtype=torch.int32)
    args.update(workspace=ws.data_ptr(), counters=cnt.data_ptr())
    default_launcher().prepare(art, sizes, args, device=0).launch(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    bad = (c.float() != ref)
    rows = torch.nonzero(bad.any(1)).flatten().tolist()
    cols = torch.nonzero(bad.any(0)).flatten().tolist()
    pieces = rules.streamk_pieces(g_, *rules.streamk_tiles(art.grid[0], sizes))
    print(f"{spec.kernel_name} {m}x{n}x{k} SMS={sms} grid={g_} pieces/tile={[len(p) for p in pieces]} "
          f"wrong={int(bad.sum())}/{m * n} nan={int(torch.isnan(c.float()).sum())} counters={cnt.tolist()[:8]} "
          f"rows={rows[:5]}..{rows[-3:]} ({len(rows)}) cols={cols[:5]}..{cols[-3:]} ({len(cols)})", flush=True)
    if bad.any():
        i, j = torch.nonzero(bad)[0].tolist()
        print(f"   first C[{i},{j}] = {c[i, j].item()} expected {ref[i, j].item()}; ws[0:4] {ws[:4].tolist()}")


for tile in sys.argv[1:] or ["64x64x8", "128x128x6"]:
    bm, bn, stages = map(int, tile.split("x"))
    spec = GemmSpec("bf16", "kn", bn, stages, "sm_90a", "streamk", bm)
    for m, n, k, sms in ((64, 128, 128, 1), (64, 128, 128, 2), (64, 256, 256, 2), (64, 256, 256, 3), (128, 128, 64, 2),
                         (300, 392, 328, 132), (64, 128, 1024, 1), (64, 128, 1024, 2)):
        run(spec, m, n, k, sms)
