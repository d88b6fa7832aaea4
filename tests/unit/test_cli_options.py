"""Every option of `warploom explain`, `compile` and `emulate` either changes what is printed or is refused, with
where it applies and the options that do apply (warploom/tools/options.py is the table); one `--op` vocabulary.

Refusals come before anything compiles, so the table-driven test runs in well under a second a case. Whether an
option that applies changes the output is checked on the kernel it names: the header `explain` and `compile` print
is the kernel's name and description, so an option that changes neither would print the same thing."""
import itertools
import re

import pytest

from warploom.tools import options
from warploom.tools.cli import SUBPARSERS, _attention_spec, _gemm_spec, build_parser, main, precompile_specs

# a value of each option that is valid on its own (flags take none)
VALUES = {"dtype": "f16", "b_layout": "nk", "head_dim": "64", "causal": None, "shared_kv": None, "q_stages": "1",
          "exp2_poly": "0.5", "block_m": "64", "block_n": "128", "stages": "3", "schedule": "persistent",
          "cluster_m": "2", "group_m": "8", "swap_ab": None, "shape": "128x128x128", "exact": None,
          "timeline": None, "cta": "0,0", "timeline_limit": "5", "layout": "bhsd",
          "variant": "warploom.variants:softcap", "seqlen": "4096", "varlen": None}

BASE = {"explain": ["explain"], "compile": ["compile"], "emulate": ["emulate"]}


def kernels(command):
    """Every kind of kernel a command can be asked for."""
    ops = ("matmul", "attention") + ((None,) if command == "compile" else ())
    timelines = (False, True) if command == "emulate" else (False,)
    return [options.Kernel(command, op, target, timeline)
            for op, target, timeline in itertools.product(ops, ("sm_90a", "sm_100a"), timelines)]


def argv_of(kernel: options.Kernel, dest: str) -> list[str]:
    build_parser()
    sp = SUBPARSERS[kernel.command]
    argv = [kernel.command, "--target", kernel.target]
    if kernel.op is None:
        argv.insert(1, "graph.mlir")                    # never read: the refusal comes first
    else:
        argv += ["--op", kernel.op]
    if kernel.command == "emulate":
        argv += ["--shape", "130x136x328" if kernel.op == "matmul" else "1,130,200,2,1,64"]
        if kernel.timeline and dest != "timeline":
            argv.append("--timeline")
    argv.append(options.flag(sp, dest))
    if VALUES[dest] is not None:
        argv.append(VALUES[dest])
    return argv


def dests(command):
    build_parser()
    return {a.dest for a in SUBPARSERS[command]._actions}


def refusal_cases():
    out = []
    for command, rules in options.RULES.items():
        for k in kernels(command):
            for dest, rule in rules.items():
                if dest in dests(command) and not rule.applies(k):
                    out.append(pytest.param(k, dest, id=f"{command}-{k.op}-{k.target}-{int(k.timeline)}-{dest}"))
    return out


@pytest.mark.parametrize("kernel, dest", refusal_cases())
def test_an_option_that_does_not_apply_is_refused(kernel, dest, capsys):
    argv = argv_of(kernel, dest)
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    flag = options.flag(SUBPARSERS[kernel.command], dest)
    assert err.startswith(f"warploom {kernel.command}: --") and " applies to " in err, err
    assert flag in re.findall(r"--[\w-]+", err.split(" applies to ")[0]), err         # named first, or among the others refused
    assert "The options that apply here: " in err and "Traceback" not in err
    applying = err.split("The options that apply here: ")[1].strip().split(", ")
    assert flag not in applying and "--target" in applying


def test_the_table_covers_every_kernel_option():
    """Each option of explain/compile/emulate is either in the table or applies to every kernel the command takes."""
    everywhere = {"explain": {"input", "op", "dtype", "block_n", "stages", "schedule", "target", "png"},
                  "compile": {"input", "op", "target", "dump_ir", "print_ir", "print_ir_after_all", "emit", "output"},
                  "emulate": {"op", "target", "shape", "dtype", "seeds", "input_seed", "delay", "sms", "max_ctas"}}
    for command, rules in options.RULES.items():
        assert dests(command) - {"help"} <= set(rules) | everywhere[command], \
            (command, dests(command) - set(rules) - everywhere[command])


def spec_of(argv):
    build_parser()
    args = build_parser().parse_args(argv)
    spec = _attention_spec(args) if args.op == "attention" else _gemm_spec(args)
    return spec.kernel_name, spec.describe()


@pytest.mark.parametrize("base, dest, value", [
    (["--op", "matmul"], "dtype", "f16"), (["--op", "matmul"], "b_layout", "nk"),
    (["--op", "matmul"], "block_m", "64"), (["--op", "matmul"], "block_n", "128"),
    (["--op", "matmul"], "stages", "3"), (["--op", "matmul"], "schedule", "persistent"),
    (["--op", "matmul"], "cluster_m", "2"), (["--op", "matmul"], "group_m", "8"),
    (["--op", "matmul"], "swap_ab", None), (["--op", "matmul", "--target", "sm_100a"], "block_m", "256"),
    (["--op", "attention"], "head_dim", "64"), (["--op", "attention"], "causal", None),
    (["--op", "attention"], "q_stages", "1"), (["--op", "attention"], "exp2_poly", "0.5"),
    (["--op", "attention", "--head-dim", "64"], "block_m", "192"), (["--op", "attention"], "block_n", "64"),
    (["--op", "attention"], "stages", "3"), (["--op", "attention"], "schedule", "grid"),
    (["--op", "attention", "--target", "sm_100a"], "shared_kv", None),
    (["--op", "attention", "--target", "sm_100a"], "exp2_poly", "0.5"),
    (["--op", "attention"], "varlen", None), (["--op", "attention", "--target", "sm_100a"], "varlen", None),
])
@pytest.mark.parametrize("command", ["explain", "compile"])
def test_an_option_that_applies_changes_the_kernel(command, base, dest, value):
    build_parser()
    flag = options.flag(SUBPARSERS[command], dest)
    before = spec_of([command] + base)
    after = spec_of([command] + base + [flag] + ([value] if value is not None else []))
    assert before != after, (flag, before)


def test_the_192_row_attention_is_reachable(capsys):
    """--block-m 192: the tall tile of head dim 64 ops.attention runs for long sequences (it printed the 128-row one)."""
    assert spec_of(["explain", "--op", "attention", "--head-dim", "64", "--block-m", "192"])[0] == \
        "wl_attn_bf16_d64_192x128_s2_ov_persistent_q2"
    from warploom.kernels import STANDARD_ATTENTION_KERNELS
    assert "wl_attn_bf16_d64_192x128_s2_ov_persistent_q2" in {s.kernel_name for s in STANDARD_ATTENTION_KERNELS["sm_90a"]}


# ---- one --op vocabulary ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["explain", "compile", "emulate", "precompile"])
def test_one_op_vocabulary(command):
    build_parser()
    action = next(a for a in SUBPARSERS[command]._actions if a.dest == "op")
    assert tuple(action.choices) == ("matmul", "attention")


def test_the_old_op_name_is_accepted_with_a_note(capsys):
    assert main(["explain", "--op", "gemm", "--head-dim", "64"]) == 2      # parsed as matmul, so --head-dim is refused
    err = capsys.readouterr().err
    assert "note: --op gemm is spelled --op matmul now" in err
    assert "--head-dim applies to the attention (--op attention), not to the sm_90a GEMM (--op matmul)" in err
    assert main(["emulate", "--op", "gemm", "--shape", "130x136x328", "--causal"]) == 2
    assert "--op gemm is spelled --op matmul now" in capsys.readouterr().err


def test_precompile_op_builds_one_family():
    from warploom.kernels import AttentionSpec, GemmSpec
    both, attention, matmul = (precompile_specs("sm_90a", op) for op in (None, "attention", "matmul"))
    assert attention and all(isinstance(s, AttentionSpec) for s in attention)
    assert matmul and all(isinstance(s, GemmSpec) for s in matmul)
    assert len(attention) + len(matmul) == len(both)


def test_precompile_tuning_with_attention_is_refused(capsys, tmp_path):
    assert main(["precompile", "--op", "attention", "--tuning", "--cache", str(tmp_path)]) == 2
    assert "--tuning builds the GEMM kernels `warploom tune` times" in capsys.readouterr().err


# ---- emulate: an option that applies changes what is printed (one small CTA each) ----------------------------------

def emulated(capsys, argv):
    rc = main(["emulate"] + argv)
    out = capsys.readouterr().out
    assert rc == 0, (argv, out)
    return re.sub(r"\s\d+\.\d\d\s", " <s> ", out)          # the seconds column varies run to run


@pytest.mark.parametrize("base, extra", [
    (["--shape", "64x64x64", "--schedule", "grid"], ["--dtype", "f16"]),
    (["--shape", "64x64x64", "--schedule", "grid"], ["--b-layout", "nk"]),
    (["--shape", "64x64x64", "--schedule", "grid"], ["--schedule", "persistent"]),
    (["--shape", "64x64x64", "--schedule", "grid"], ["--exact"]),
    (["--shape", "64x64x64", "--schedule", "grid"], ["--input-seed", "3"]),
    (["--shape", "64x64x64", "--schedule", "grid"], ["--delay", "2"]),
    (["--shape", "64x64x64", "--schedule", "grid"], ["--seeds", "2"]),
    (["--shape", "64x64x64", "--schedule", "grid"], ["--timeline", "--timeline-limit", "2"]),
    (["--shape", "130x136x64", "--schedule", "persistent"], ["--sms", "1"]),
    (["--op", "attention", "--shape", "1,64,64,1,1,64"], ["--causal"]),
    (["--op", "attention", "--shape", "1,64,64,1,1,64"], ["--layout", "bhsd"]),
])
def test_an_emulate_option_that_applies_changes_the_output(capsys, base, extra):
    assert emulated(capsys, base) != emulated(capsys, base + extra)


@pytest.mark.parametrize("command", ["passes", "compile", "precompile", "tune", "explain", "emulate", "demo"])
def test_every_subcommand_help_says_what_it_does(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    description = out.split("\n\n")[1]                       # after the usage, before the options
    assert not description.startswith(("options:", "positional")) and description.endswith("."), out


def test_the_attention_shape_asks_for_positive_integers(capsys):
    assert main(["emulate", "--op", "attention", "--shape", "1,0,200,2,1"]) == 2
    err = capsys.readouterr().err
    assert "as positive integers" in err and "non-negative" not in err
