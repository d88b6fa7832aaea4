"""The commands in README.md and docs/*.md run as written, the paths they name exist, and the numbers they quote
from the code are the code's (issue 37).

A command is a line of a ```bash / ```sh block, or a `$ ` line of a ```console block or an unlabelled one. Each is
classified below: run (in a scratch folder holding the files the docs assume: gemm.mlir, attn.mlir), or, where running
it here takes minutes or a GPU, checked by the command line's own parser and option table only (set
WARPLOOM_DOC_COMMANDS=all to run those too, GPU ones excepted), or not run at all, with the reason. A command the
table does not know fails the test: a new command in the docs gets a row here.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

# commands not run here, and why (a prefix of the command names it)
NOT_RUN = {
    "python3 -m venv": "the install itself",
    "pip install": "the install itself",
    "pytest": "the whole test suite, this test among it",
    "WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python my_script.py": "the GPU box's side: a user's script",
    "WARPLOOM_CACHE_DIR=DIR WARPLOOM_OFFLINE=1 warploom tune": "needs a GPU and torch (warploom tune)",
}
# commands that take minutes here: their options are checked, and they run only with WARPLOOM_DOC_COMMANDS=all
PARSE_ONLY = {
    "warploom demo": "about a minute; tests/unit/test_demo.py runs it",
    "warploom precompile": "builds every standard kernel (minutes)",
    "warploom emulate --op attention": "emulates every thread of 8 CTAs under 3 seeds",
    "warploom emulate --shape 130x264x200 --schedule persistent --seeds 3": "three seeds of a persistent kernel",
}

GEMM = """func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
"""


def commands(page: Path):
    """(line number, command, the output the page shows after it) of every command in the page's code blocks."""
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        end = next(j for j in range(start, len(lines)) if lines[j].startswith("```"))
        body = lines[start:end]
        if lang in ("bash", "sh", "shell"):
            joined = []
            for k, line in enumerate(body):
                if joined and joined[-1][1].endswith("\\"):
                    joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
                elif line.strip():
                    joined.append((start + k + 1, line.strip()))
            for n, cmd in joined:
                yield n, cmd, []
        elif lang in ("console", ""):
            for k, line in enumerate(body):
                if line.startswith("$ "):
                    shown = []
                    for out in body[k + 1:]:
                        if out.startswith("$ "):
                            break
                        shown.append(out)
                    yield start + k + 1, line[2:].strip(), shown
        i = end + 1


def strip_comment(cmd: str) -> str:
    """The command without a trailing `# comment` (outside quotes)."""
    out, quote = [], None
    for ch_i, ch in enumerate(cmd):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (ch_i == 0 or cmd[ch_i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).strip()


ALL = [pytest.param(page, n, cmd, shown, id=f"{page.name}:{n}") for page in PAGES
       for n, cmd, shown in commands(page)]


def kind(cmd: str) -> str:
    for prefix in NOT_RUN:
        if cmd.startswith(prefix):
            return "not run"
    for prefix in PARSE_ONLY:
        if cmd.startswith(prefix):
            return "parse" if os.environ.get("WARPLOOM_DOC_COMMANDS") != "all" else "run"
    if re.match(r"^(warploom|warploom-opt|ls)\b", cmd):
        return "run"
    return "unknown"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A folder with the files the docs' commands name (gemm.mlir, attn.mlir), shared by the page's commands in
    order (seeing-inside.md lists the folder its compile wrote)."""
    folder = tmp_path_factory.mktemp("docs")
    (folder / "gemm.mlir").write_text(GEMM)
    shutil.copy(ROOT / "examples" / "attention.mlir", folder / "attn.mlir")
    shutil.copytree(ROOT / "examples", folder / "examples")          # the docs' `warploom explain examples/...`
    return folder


@pytest.mark.parametrize("page, line, cmd, shown", ALL)
def test_a_command_in_the_docs_runs_as_written(page, line, cmd, shown, scratch):
    cmd = strip_comment(cmd)
    if not cmd:                 # a line that is only a comment
        return
    how = kind(cmd)
    assert how != "unknown", f"{page.name}:{line}: `{cmd}`: add it to a table of tests/unit/test_cli_docs.py"
    if how == "not run":
        return
    argv = shlex.split(re.sub(r"\s\[[^\]]*\]", "", cmd))        # [--optional args] as written in a synopsis
    while argv and re.match(r"^\w+=", argv[0]):                   # VAR=value before the command
        argv.pop(0)
    if how == "parse":
        from warploom.tools import cli, options
        parser = cli.build_parser()
        args, extra = parser.parse_known_args(cli._attach_dash_values(argv[1:]))
        assert not extra, f"{page.name}:{line}: `{cmd}`: unknown options {extra}"
        if args.command in options.RULES:
            kernel = options.Kernel(args.command, getattr(args, "op", None), args.target,
                                    getattr(args, "timeline", False))
            assert options.refusal(cli.SUBPARSERS[args.command], args, kernel) is None, cmd
        return
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(cmd, shell=True, cwd=scratch, capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [s.split("error: ", 1)[1] for s in shown if "error: " in s]
    if errors:                  # the page shows the command failing: it still fails, with that message
        assert proc.returncode != 0, (cmd, proc.stdout[-2000:])
        said = " ".join(proc.stderr.split())
        shown_text = " ".join(" ".join(shown).split()).split("error: ", 1)[1]
        assert shown_text[:60] in said, (shown_text, proc.stderr)
    else:
        assert proc.returncode == 0, f"{page.name}:{line}: `{cmd}` exited {proc.returncode}:\n{proc.stderr[-3000:]}"


# ---- paths and numbers ------------------------------------------------------------------------------------------

PATH_LIKE = re.compile(r"^(warploom|tests|docs|examples|benchmarks)/[\w./-]*$")


def named_paths(page: Path):
    text = page.read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):          # markdown links
        if not re.match(r"^[a-z]+:", target):
            yield (page.parent / target).resolve(), target
    for token in re.findall(r"`([^`\s]+)`", text):                         # `warploom/tuning/sm_90a.json`
        token = token.split("::")[0].rstrip(".,;:)")
        if PATH_LIKE.match(token):
            yield ROOT / token, token


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_path_the_docs_name_exists(page):
    missing = sorted({shown for path, shown in named_paths(page) if not path.exists()})
    assert not missing, f"{page.name} names paths that are not in the repository: {missing}"


def test_the_numbers_the_readme_quotes_are_the_codes():
    from tests.mutation.mutations import MUTATIONS
    from warploom.tools.cli import precompile_specs
    readme = " ".join((ROOT / "README.md").read_text().split())
    for quoted in re.findall(r"(\d+) (?:deliberate bugs|mutations)\b", readme):    # a count, where one is quoted
        assert quoted == str(len(MUTATIONS)), f"README quotes {quoted} mutations; tests/mutation has {len(MUTATIONS)}"
    built = re.search(r"warploom precompile --target sm_90a --op attention --cache DIR` builds (\d+):", readme)
    assert built.group(1) == str(len(precompile_specs("sm_90a", "attention")))


def test_a_precompile_the_docs_name_has_its_cache():
    """`warploom precompile` without --cache exits 2: a page that gives its options gives --cache too (a bare
    `warploom precompile`, naming the command, is prose)."""
    for page in PAGES:
        for cmd in re.findall(r"`(warploom precompile [^`]*)`", page.read_text()):
            assert "--cache" in cmd or "--help" in cmd, f"{page.name}: `{cmd}` has no --cache"
