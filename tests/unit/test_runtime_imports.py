"""warploom.runtime must load on a machine without MLIR: importing it pulls in no `mlir` module."""
import subprocess
import sys


def test_runtime_imports_no_mlir():
    code = ("import sys, warploom.runtime, warploom.runtime.dtypes\n"
            "bad = sorted(m for m in sys.modules if m == 'mlir' or m.startswith('mlir.'))\n"
            "print(bad)\nsys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"warploom.runtime imported MLIR modules: {proc.stdout} {proc.stderr}"


def test_runtime_works_with_mlir_blocked():
    # A meta-path hook refuses any mlir import, as on a machine without the bindings.
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'mlir' or name.startswith('mlir.'):\n"
            "            raise ImportError('mlir is blocked in this test')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import warploom, warploom.runtime\n"
            "from warploom.runtime.dtypes import numpy_dtype\n"
            "assert str(numpy_dtype('bf16')) == 'bfloat16'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
