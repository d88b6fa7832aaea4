"""pytest runs the lit suite too: each tests/lit/**/*.mlir file is one pytest item.

lit runs once, on all collected .mlir files together (in parallel), the first
time one of them is reached; each item then reports its own file's result.
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

LIT_ROOT = Path(__file__).parent / "lit"
_lit_results: dict[str, tuple[str, str]] | None = None


def pytest_collect_file(parent, file_path: Path):
    if file_path.suffix == ".mlir" and LIT_ROOT in file_path.parents and "Inputs" not in file_path.parts:
        return LitFile.from_parent(parent, path=file_path)
    return None


def run_lit(paths: list[Path], tmp: Path) -> dict[str, tuple[str, str]]:
    """Run lit on `paths`; map each test file's path (relative to tests/lit) to (status, output)."""
    xml_path = tmp / "lit.xml"
    cmd = [sys.executable, "-c", "import lit.main; lit.main.main()", "-q", f"--xunit-xml-output={xml_path}", *map(str, paths)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    results = {}
    if xml_path.exists():
        for case in ET.parse(xml_path).getroot().iter("testcase"):
            # classname "warploom.fuse", name "attention.mlir" -> "fuse/attention.mlir"
            parts = case.get("classname").split(".", 1)
            rel = (parts[1].replace(".", "/") + "/" if len(parts) > 1 else "") + case.get("name")
            failure = case.find("failure")
            skipped = case.find("skipped")
            if failure is not None:
                results[rel] = ("fail", failure.text or "")
            elif skipped is not None:
                results[rel] = ("skip", skipped.get("message", ""))
            else:
                results[rel] = ("pass", "")
    results["<lit>"] = ("done", proc.stdout + proc.stderr)
    return results


class LitFile(pytest.File):
    def collect(self):
        yield LitItem.from_parent(self, name=self.path.name)


class LitItem(pytest.Item):
    def runtest(self):
        global _lit_results
        if _lit_results is None:
            session = self.session
            paths = [item.path for item in session.items if isinstance(item, LitItem)]
            tmp = Path(session.config._tmp_path_factory.mktemp("lit"))  # noqa: SLF001
            _lit_results = run_lit(paths, tmp)
        rel = self.path.relative_to(LIT_ROOT).as_posix()
        status, output = _lit_results.get(rel, ("missing", _lit_results["<lit>"][1]))
        if status == "skip":
            pytest.skip(output or "lit: unsupported")
        if status != "pass":
            raise LitFailure(rel, status, output)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, LitFailure):
            rel, status, output = excinfo.value.args
            return f"lit test {rel}: {status}\n{output}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"lit: {self.path.relative_to(LIT_ROOT)}"


class LitFailure(Exception):
    pass
