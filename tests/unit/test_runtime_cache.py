"""KernelCache: keys, atomic concurrent puts, env vars, MissingKernelError (CPU only)."""
import multiprocessing
import threading
from pathlib import Path

import pytest

from warploom.runtime.artifact import KernelArtifact, ParamSpec
from warploom.runtime.cache import KernelCache, MissingKernelError, cache_key, default_cache, offline

TOOLS = {"mlir": "22.1.8.4", "nvjitlink": "13.0", "warploom": "0.1.0"}


def make(key, tag="a"):
    return KernelArtifact(name="k", target="sm_90a", cubin=b"cubin-" + tag.encode() * 1000, ptx="ptx " + tag,
                          smem_bytes=0, block=(128, 1, 1), cluster=(1, 1, 1),
                          grid=(("cdiv", "N", 128), ("const", 1), ("const", 1)),
                          params=[ParamSpec("out", "ptr"), ParamSpec("n", "i32")], tensor_maps={},
                          meta={"writer": tag}, key=key)


def test_key_depends_on_everything():
    k = cache_key("ir", "sm_90a", TOOLS)
    assert len(k) == 64 and int(k, 16) >= 0
    assert k == cache_key("ir", "sm_90a", dict(reversed(TOOLS.items())))  # order-free
    assert k != cache_key("ir ", "sm_90a", TOOLS)
    assert k != cache_key("ir", "sm_100a", TOOLS)
    assert k != cache_key("ir", "sm_90a", {**TOOLS, "nvjitlink": "13.1"})
    assert k != cache_key("ir", "sm_90a", {**TOOLS, "ptxas": "13.0"})
    with pytest.raises(TypeError, match="toolchain must map str to str"):
        cache_key("ir", "sm_90a", {"mlir": 22})


def test_get_missing_is_none(tmp_path):
    assert KernelCache(tmp_path / "nothing-yet").get(cache_key("x", "sm_90a", TOOLS)) is None


def test_put_get_round_trip(tmp_path):
    cache = KernelCache(tmp_path)
    key = cache_key("ir", "sm_90a", TOOLS)
    path = cache.put(make(key))
    assert path == tmp_path / key
    assert cache.get(key) == make(key)
    # A second put keeps the first entry.
    cache.put(make(key, tag="b"))
    assert cache.get(key).meta == {"writer": "a"}
    assert [p.name for p in tmp_path.iterdir()] == [key]  # no temp folders left behind


def test_bad_keys_rejected(tmp_path):
    cache = KernelCache(tmp_path)
    for key in ("../evil", "a/b", ".hidden", ""):
        with pytest.raises(ValueError, match="not a plain file name"):
            cache.get(key)


def test_damaged_entry_names_folder(tmp_path):
    cache = KernelCache(tmp_path)
    key = cache_key("ir", "sm_90a", TOOLS)
    cache.put(make(key))
    (tmp_path / key / "kernel.ptx").unlink()
    with pytest.raises(ValueError, match=rf"{key}.*delete that folder"):
        cache.get(key)


def test_concurrent_thread_writers(tmp_path):
    cache = KernelCache(tmp_path)
    key = cache_key("ir", "sm_90a", TOOLS)
    start = threading.Barrier(8)
    errors = []

    def writer(i):
        try:
            start.wait()
            cache.put(make(key, tag=str(i)))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    art = cache.get(key)
    tag = art.meta["writer"]
    assert art == make(key, tag=tag)  # one writer's files, complete and unmixed
    assert [p.name for p in tmp_path.iterdir()] == [key]


def _process_writer(root, key, tag, start):
    start.wait()
    KernelCache(root).put(make(key, tag=tag))


def test_concurrent_process_writers(tmp_path):
    ctx = multiprocessing.get_context("fork")
    key = cache_key("ir2", "sm_90a", TOOLS)
    start = ctx.Barrier(4)
    procs = [ctx.Process(target=_process_writer, args=(str(tmp_path), key, str(i), start)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    art = KernelCache(tmp_path).get(key)
    assert art == make(key, tag=art.meta["writer"])
    assert [p.name for p in tmp_path.iterdir()] == [key]


def test_env_vars(monkeypatch, tmp_path):
    monkeypatch.setenv("WARPLOOM_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache().root == tmp_path / "c"
    monkeypatch.delenv("WARPLOOM_CACHE_DIR")
    assert default_cache().root == Path.home() / ".cache" / "warploom"
    monkeypatch.delenv("WARPLOOM_OFFLINE", raising=False)
    assert offline() is False
    monkeypatch.setenv("WARPLOOM_OFFLINE", "1")
    assert offline() is True
    monkeypatch.setenv("WARPLOOM_OFFLINE", "0")
    assert offline() is False


def test_missing_kernel_error_text():
    e = MissingKernelError("deadbeef", "gemm bf16 M=N=K=4096 on sm_90a",
                           "warploom precompile --target sm_90a --cache /tmp/c")
    text = str(e)
    assert "deadbeef" in text and "gemm bf16 M=N=K=4096" in text
    assert "warploom precompile --target sm_90a --cache /tmp/c" in text
    assert isinstance(e, LookupError) and e.key == "deadbeef"
