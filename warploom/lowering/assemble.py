"""PTX -> cubin (ptxas or nvJitLink), cubin -> SASS (nvdisasm), and the resource report of each.

    asm = assemble(ptx)                     # standalone ptxas -v -O3, whole program
    asm.registers, asm.spill_stores, asm.stack_bytes, asm.log
    sass = disassemble(asm.cubin)
    sass_counts(sass, ["HGMMA", "UTMALDG", "LDL", "STL"])

Use ptxas for sm_90a kernels with warp roles: nvJitLink compiles PTX in
relocatable mode and drops `setmaxnreg` (ptxas info C7504), so the consumer
warpgroups would not get their larger register budget. `tool="nvjitlink"` is
there for hosts without the ptxas binary and for comparison.

Binaries are looked up next to the installed `nvidia` pip packages first
(nvidia-cuda-nvcc ships ptxas, nvidia-cuda-nvdisasm ships nvdisasm, both under
site-packages/nvidia/cu13/bin), then on PATH.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# binary -> the pip package that ships it
TOOL_PACKAGES = {"ptxas": "nvidia-cuda-nvcc==13.0.*", "nvdisasm": "nvidia-cuda-nvdisasm"}


class ToolError(RuntimeError):
    """A CUDA tool is missing or failed; the message names it and carries its log."""


class ToolMissing(ToolError):
    """A CUDA tool (ptxas, nvdisasm, nvJitLink) is not installed: the message names the package that ships it. The
    one ToolError a test may skip on; a tool that ran and rejected its input raises ToolRejected."""


class ToolRejected(ToolError):
    """A CUDA tool ran and refused its input (ptxas or nvdisasm exited non-zero, nvJitLink failed): the message
    carries the tool's own log. A failure, never a reason to skip."""


@dataclass
class Assembly:
    cubin: bytes
    log: str                 # the tool's full report (ptxas -v / nvJitLink info log)
    registers: int           # per thread at launch (largest over the kernels in the PTX)
    spill_stores: int        # bytes, summed over kernels
    spill_loads: int
    stack_bytes: int
    tool: str = "ptxas"


def find_tool(name: str) -> str:
    """Path of a CUDA binary: from the `nvidia` pip packages, else PATH; ToolMissing naming the package."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        for sub in ("cu13", "cuda_nvcc", "cuda_nvdisasm", "cu12"):
            path = Path(root) / sub / "bin" / name
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    found = shutil.which(name)
    if found:
        return found
    package = TOOL_PACKAGES.get(name, "the CUDA toolkit")
    raise ToolMissing(f"{name} not found (looked in the nvidia pip packages {roots or '[none installed]'} and on "
                      f"PATH): "
                    f"install it with `pip install \"{package}\"`")


def parse_report(log: str) -> tuple[int, int, int, int]:
    """(registers, spill store bytes, spill load bytes, stack bytes) from a ptxas -v style report."""
    regs = [int(r) for r in re.findall(r"Used (\d+) registers", log)]
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if not regs or not frames:
        raise ToolError(f"no resource report (\"Used N registers\", \"... bytes spill stores\") in the log:\n{log}")
    return (max(regs), sum(int(f[1]) for f in frames), sum(int(f[2]) for f in frames),
            max(int(f[0]) for f in frames))


def assemble(ptx: str, arch: str = "sm_90a", tool: str = "ptxas") -> Assembly:
    """Assemble PTX into a cubin for `arch` with `tool` ("ptxas" or "nvjitlink"), -O3, with its report."""
    if tool == "ptxas":
        cubin, log = _ptxas(ptx, arch)
    elif tool == "nvjitlink":
        cubin, log = _nvjitlink(ptx, arch)
    else:
        raise ValueError(f"unknown assembler {tool!r}; use 'ptxas' or 'nvjitlink'")
    regs, stores, loads, stack = parse_report(log)
    return Assembly(cubin=cubin, log=log, registers=regs, spill_stores=stores, spill_loads=loads,
                    stack_bytes=stack, tool=tool)


def _ptxas(ptx: str, arch: str) -> tuple[bytes, str]:
    exe = find_tool("ptxas")
    with tempfile.TemporaryDirectory(prefix="wl-ptxas-") as tmp:
        src, out = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        # whole-program mode (no -c): the only mode that keeps setmaxnreg
        cmd = [exe, "-v", f"-arch={arch}", "-O3", "--warn-on-spills", str(src), "-o", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        log = (r.stdout + r.stderr).strip()
        if r.returncode != 0 or not out.is_file():
            from warploom.passes.reproducer import assembler_reproducer
            where = assembler_reproducer("ptxas", ptx, arch)
            raise ToolRejected(f"ptxas failed (exit {r.returncode}): {' '.join(cmd)}\n{log}\n"
                            f"reproducer: {where}/replay.sh (kernel.ptx and the ptxas call)")
        return out.read_bytes(), log


def _nvjitlink(ptx: str, arch: str) -> tuple[bytes, str]:
    try:
        from cuda.bindings import nvjitlink as nj
    except ImportError as e:
        raise ToolMissing(f"nvJitLink is not available ({e}): install `pip install cuda-bindings "
                          "nvidia-nvjitlink`") from None
    opts = [f"-arch={arch}", "-O3", "-verbose"]
    h = nj.create(len(opts), opts)

    def read(size_fn, get_fn) -> str:
        n = size_fn(h)
        buf = bytearray(n)
        if n:
            get_fn(h, buf)
        return buf.decode(errors="replace").rstrip("\x00").strip()

    try:
        data = ptx.encode()
        try:
            nj.add_data(h, nj.InputType.PTX, data, len(data), "kernel.ptx")
            nj.complete(h)
        except Exception as e:   # nvJitLinkError: the reason is in the error log
            raise ToolRejected(f"nvJitLink failed ({' '.join(opts)}): {e}\n"
                            f"{read(nj.get_error_log_size, nj.get_error_log)}") from None
        n = nj.get_linked_cubin_size(h)
        cubin = bytearray(n)
        nj.get_linked_cubin(h, cubin)
        return bytes(cubin), read(nj.get_info_log_size, nj.get_info_log)
    finally:
        nj.destroy(h)


def disassemble(cubin: bytes) -> str:
    """SASS text of a cubin (nvdisasm -c)."""
    exe = find_tool("nvdisasm")
    with tempfile.TemporaryDirectory(prefix="wl-nvdisasm-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        r = subprocess.run([exe, "-c", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            raise ToolRejected(f"nvdisasm failed (exit {r.returncode}):\n{(r.stdout + r.stderr).strip()}")
        return r.stdout


def sass_counts(sass: str, names) -> dict[str, int]:
    """How many SASS instructions start with each opcode name ("HGMMA" counts HGMMA.64x256x16.F32.BF16)."""
    return {name: len(re.findall(rf"(?<![\w.]){re.escape(name)}(?![\w])", sass)) for name in names}
