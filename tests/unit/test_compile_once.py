"""Eight processes that want the same missing kernel at once: it is compiled once (the others wait on the cache's
lock for it, then read it), and every process gets the complete artifact. The real compiler runs (a small sm_90a
GEMM); each process logs when it compiles."""
import json
import subprocess
import sys
import textwrap
import time

from warploom.kernels import GemmSpec

SPEC = GemmSpec("bf16", "kn", 128, 4, "sm_90a", "grid")
WORKER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from warploom import kernels
    from warploom.kernels import GemmSpec
    from warploom.runtime.cache import KernelCache

    cache, log, go = KernelCache(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    real = kernels.compile_spec

    def compile_spec(spec):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\\n")
        return real(spec)

    kernels.compile_spec = compile_spec
    import warploom.build        # the compiler imported before the start, so that all ask at about the same time
    while not go.exists():
        time.sleep(0.01)
    art = kernels.get_kernel(GemmSpec("bf16", "kn", 128, 4, "sm_90a", "grid"), cache)
    print(json.dumps({"key": art.key, "name": art.name, "cubin": len(art.cubin), "ptx": len(art.ptx)}))
""")


def test_eight_processes_compile_a_missing_kernel_once(tmp_path):
    cache, log, go = tmp_path / "cache", tmp_path / "compiles.log", tmp_path / "go"
    env_free = {k: v for k, v in __import__("os").environ.items() if k not in ("WARPLOOM_OFFLINE", "WARPLOOM_CACHE_DIR")}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(cache), str(log), str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env_free) for _ in range(8)]
    time.sleep(0.5)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    compiles = log.read_text().split()
    assert len(compiles) == 1, f"compiled {len(compiles)} times: {compiles}"
    assert len({r["key"] for r in results}) == 1 and all(r["name"] == SPEC.kernel_name for r in results)
    assert all(r["cubin"] > 1000 and r["ptx"] > 1000 for r in results)        # every process got the whole kernel
    # one entry in the cache, no temp folders left
    entries = [e for e in cache.iterdir() if not e.name.startswith(".")]
    assert [e.name for e in entries if e.is_dir() and e.name == results[0]["key"]] == [results[0]["key"]]
