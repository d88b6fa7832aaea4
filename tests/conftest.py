"""pytest runs the lit suite too: each tests/lit/**/*.mlir file is one pytest item.

lit runs once, on all collected .mlir files together (in parallel), the first
time one of them is reached; each item then reports its own file's result.

The suite runs on one worker per core (pytest-xdist: `-n auto --dist loadgroup` in pyproject.toml). Tests that
share work go to one worker together (an `xdist_group` mark, given here at collection): the lit files (lit runs
once, on all of them) and the users of a module- or session-scoped fixture of the tests (the mutation batch, the
oracle's compiled CUTLASS headers, the assembled kernels), which a worker would otherwise build again. The groups
reach the scheduler through a file (SharedWorkScheduling below), not through the test ids: pytest-xdist 3.8's own
loadgroup renames the ids, which pytest 9.2 no longer lets it do, and then silently groups nothing
(pytest-dev/pytest-xdist#1386). Work that runs its own processes (lit, the mutation jobs) takes the cores per worker
(`cores_per_worker`), not all of them. The GPU tests (`-m gpu`) run in one process: they share one device.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

LIT_ROOT = Path(__file__).parent / "lit"
_lit_results: dict[str, tuple[str, str]] | None = None


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cores_per_worker() -> int:
    """The cores this process may fill with processes of its own: all of them, or its share under xdist."""
    return max(1, _cores() // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))


def pytest_addoption(parser):
    """pyproject.toml's addopts ask for pytest-xdist (`-n auto --dist loadgroup`); where it is not installed (a GPU
    box's own Python, say) those options are taken and ignored, and the suite runs in one process."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        group = parser.getgroup("xdist", "pytest-xdist is not installed: one process")
        # _addoption: pytest keeps lowercase short options for itself and its plugins; pytest-xdist adds -n so too
        group._addoption("-n", "--numprocesses", dest="numprocesses", default=None,
                         help="ignored without pytest-xdist")
        group.addoption("--dist", dest="dist", default="no", help="ignored without pytest-xdist")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: a worker per core; none (one process) on one core or where the GPU tests run."""
    markexpr = config.getoption("markexpr", "") or ""
    if "gpu" in markexpr.replace("not gpu", "") or _cores() < 2:
        return 0
    return _cores()


def _shared_fixture_home(item) -> str | None:
    """Where the broadest module-, class-, package- or session-scoped fixture of the tests that `item` uses is
    defined (a test module or a conftest's folder); None when it uses none (a plugin's or pytest's own don't count)."""
    info = getattr(item, "_fixtureinfo", None)
    homes = [defs[-1].baseid for defs in (info.name2fixturedefs.values() if info else ())
             if defs and defs[-1].scope != "function" and defs[-1].baseid]
    return min(homes, key=len) if homes else None


def pytest_itemcollected(item):
    group = "lit" if isinstance(item, LitItem) else _shared_fixture_home(item)
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))


def _group(item) -> str | None:
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    return "_".join(names) or None


_GROUPS = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """The controller tells each worker where to write the groups of the tests it collected."""
    if _GROUPS not in node.config.stash:
        node.config.stash[_GROUPS] = tempfile.mkdtemp(prefix="wl-xdist-groups-")
    node.workerinput["warploom_groups"] = node.config.stash[_GROUPS]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    where = getattr(config, "workerinput", {}).get("warploom_groups")
    if where:                                    # a worker: its collection's groups, for SharedWorkScheduling
        groups = {item.nodeid: g for item in items if (g := _group(item))}
        tmp = Path(where) / f".{config.workerinput['workerid']}.json"
        tmp.write_text(json.dumps(groups))
        tmp.replace(Path(where) / f"{config.workerinput['workerid']}.json")


def pytest_unconfigure(config):
    if _GROUPS in config.stash:
        shutil.rmtree(config.stash[_GROUPS], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup: xdist's load-scope scheduling, each group one unit of work (the rest a test each), the
    groups read from the workers' files (every worker collects the same tests)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedWorkScheduling(LoadScopeScheduling):
        groups: dict[str, str] = {}

        def schedule(self):
            if self.collection is None and _GROUPS in config.stash:
                files = sorted(Path(config.stash[_GROUPS]).glob("gw*.json"))
                self.groups = json.loads(files[0].read_text()) if files else {}
            super().schedule()

        def _split_scope(self, nodeid):
            return self.groups.get(nodeid, nodeid)

    return SharedWorkScheduling(config, log)


def pytest_collect_file(parent, file_path: Path):
    if file_path.suffix == ".mlir" and LIT_ROOT in file_path.parents and "Inputs" not in file_path.parts:
        return LitFile.from_parent(parent, path=file_path)
    return None


def run_lit(paths: list[Path], tmp: Path, max_failures: int = 0) -> dict[str, tuple[str, str]]:
    """Run lit on `paths`; map each test file's path (relative to tests/lit) to (status, output). With max_failures
    (pytest's -x or --maxfail) lit stops after that many failing files; those it did not run are "notrun"."""
    xml_path = tmp / "lit.xml"
    cmd = [sys.executable, "-c", "import lit.main; lit.main.main()", "-q", f"-j{cores_per_worker()}",
           f"--xunit-xml-output={xml_path}", *([f"--max-failures={max_failures}"] if max_failures else []),
           *map(str, paths)]
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
            elif skipped is not None and max_failures and skipped.get("message") == "User interrupt":
                results[rel] = ("notrun", "")         # lit's word for a test it left after --max-failures
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
            # -x: lit stops at its first failing file too (a mutant's run, tests/mutation, then stops in seconds)
            _lit_results = run_lit(paths, tmp, session.config.option.maxfail)
        rel = self.path.relative_to(LIT_ROOT).as_posix()
        status, output = _lit_results.get(rel, ("missing", _lit_results["<lit>"][1]))
        if status == "notrun":
            pytest.skip("not run: lit stopped at its first failing file (pytest -x / --maxfail)")
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
