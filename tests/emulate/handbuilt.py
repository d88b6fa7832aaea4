"""Hand-built kernels for the emulator tests: a lowered standard GEMM, and the same GEMM with every consumer
wgmma rewritten to take A from registers (the FlashAttention P @ V form, `mma_async_reg_a`), its A registers
computed from the thread index as a known 64 x 64 pattern, so C = A_pattern @ B checks the register-A fragment
mapping end to end."""
import numpy as np
from mlir import ir
from mlir.dialects import arith, llvm, nvvm

from warploom.build import planned_program
from warploom.lowering.emit import wgmma
from warploom.lowering.emit.builder import Builder
from warploom.lowering import kernel_name
from warploom.lowering import lower_program as lower_kernel


def lowered(spec):
    program = planned_program(spec)
    return lower_kernel(program, kernel_name(program))


def ops(kernel, name: str) -> list:
    """The ops called `name`, in program order."""
    found = []

    def visit(op):
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE
    kernel.gpu_module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def pattern(rows, cols):
    """The A values the register-A kernels compute: small integers, exact in bf16/f16, no symmetry."""
    return ((rows * 7 + cols * 3 + (rows * cols) % 5) % 9) - 4.0


def a_matrix(m: int, k: int) -> np.ndarray:
    """A as the register-A kernels see it: the pattern of (row mod 64, column mod 64)."""
    i, j = np.meshgrid(np.arange(m) % 64, np.arange(k) % 64, indexing="ij")
    return pattern(i, j)


def _a_registers(b: Builder, elem: str) -> list[list[ir.Value]]:
    """For each k-step j of a 64-deep k-tile, the thread's four b32 A registers of the m64k16 fragment
    (PTX ISA 9.7.15.5.1.1, A from registers): register i holds rows 16 w + l / 4 + 8 (i % 2), columns
    16 j + 2 (l % 4) + 8 (i / 2) + {0, 1}, the even column in the low half; written here independently of
    warploom.layout.fragments."""
    c = b.const
    tid = b.sreg("tid", "x")
    warp, lane = b.remu(b.divu(tid, c(32)), c(4)), b.remu(tid, c(32))
    out = []
    for j in range(4):
        regs = []
        for i in range(4):
            row = b.add(b.add(b.mul(warp, c(16)), b.divu(lane, c(4))), c(8 * (i % 2)))
            halves = []
            for e in range(2):
                col = b.add(b.mul(b.remu(lane, c(4)), c(2)), c(16 * j + 8 * (i // 2) + e))
                v = b.add(b.add(b.mul(row, c(7)), b.mul(col, c(3))), b.remu(b.mul(row, col), c(5)))
                v = b.remu(v, c(9))
                f = arith.SIToFPOp(b.f32, v).result
                four = arith.ConstantOp(b.f32, 4.0).result
                halves.append(arith.SubFOp(f, four).result)
            conv = nvvm.ConvertF32x2ToBF16x2Op if elem == "bf16" else nvvm.ConvertF32x2ToF16x2Op
            ty = ir.VectorType.get([2], ir.BF16Type.get() if elem == "bf16" else ir.F16Type.get())
            packed = conv(ty, halves[1], halves[0], rnd=nvvm.FPRoundingMode.RN).result     # hi = odd column
            regs.append(llvm.BitcastOp(b.i32, packed).result)
        out.append(regs)
    return out


def register_a(kernel, spec, where: str = "before_loop"):
    """Rewrite every consumer wgmma of the lowered GEMM `kernel` into the register-A form. The A registers are
    computed once per consumer K loop, `where`: "before_loop" (correct: the loop's wgmma.fence orders them),
    or "after_fence" (broken: after the loop's wgmma.fence, right before the first wgmma)."""
    module = kernel.gpu_module
    func = next(o for o in module.regions[0].blocks[0].operations if o.operation.name == "llvm.func")
    with module.context, ir.Location.unknown():
        b = Builder(module, func)
        loops = {}
        for mma in ops(kernel, "nvvm.wgmma.mma_async"):
            loop = mma.parent
            while loop.name != "scf.for":
                loop = loop.parent
            if loop not in loops:
                if where == "before_loop":
                    anchor = loop
                else:
                    body = list(loop.regions[0].blocks[0].operations)
                    anchor = next(o for o in body if o.operation.name == "nvvm.wgmma.mma_async").operation
                with ir.InsertionPoint(anchor):
                    loops[loop] = [_a_registers(b, spec.elem), 0]
            regs, j = loops[loop]
            loops[loop][1] += 1
            v = mma.opview
            n = int(str(mma.attributes["shape"]).split("n = ")[1].split(",")[0])
            trans_b = 1 if "<row>" in str(mma.attributes["layoutB"]) else 0
            with ir.InsertionPoint(mma):
                new = wgmma.mma_async_reg_a(b, v.inouts, regs[j % 4], v.descriptorB, n, spec.elem, trans_b=trans_b)
            mma.results[0].replace_all_uses_with(new)
            mma.erase()
        module.verify()
    return kernel


def tiny_kernel(body: str, args: str = "", params=(), tensor_maps=None, threads: int = 32, smem_bytes: int = 8192):
    """An EmulatedKernel from a hand-written kernel body: `llvm.func @t(<args>)` in `gpu.module @t_mod` with a
    dynamic-smem global @t_smem; one CTA of `threads` threads."""
    from warploom.emulate import EmulatedKernel, compile_kernel
    src = (f"gpu.module @t_mod {{\n  llvm.mlir.global external @t_smem() {{addr_space = 3 : i32, alignment = 1024 : "
           f"i64}} : !llvm.array<0 x i8>\n  llvm.func @t({args}) attributes {{nvvm.kernel}} {{\n{body}\n"
           "    llvm.return\n  }\n}")
    ctx = ir.Context()
    with ctx:
        module = ir.Module.parse(src)
        gpu_module = module.body.operations[0].operation
        compiled = compile_kernel(gpu_module, "t")
    compiled._keep = (ctx, module, compiled._keep)
    return EmulatedKernel("t", compiled, list(params), dict(tensor_maps or {}), (("const", 1),) * 3,
                          (threads, 1, 1), (1, 1, 1), smem_bytes)
