"""End-to-end tests of `libra cost`'s default training layout: what `libra config check` accepts,
cost accepts with no layout flag (TP the largest of 4, 2, 1 that fits, DP the GPUs left that
the batch can feed), the text says when the default was narrowed, and where the user's own
flags cannot fit, the refusal names them."""

import json
import os
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]


def libra(*args):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120)


def header(r):
    assert r.returncode == 0, r.stderr
    return next(l for l in r.stdout.splitlines() if l.startswith("training step:"))


def note(r):
    """The line after the header: the defaulted layout's note, or the FLOPs line."""
    lines = r.stdout.splitlines()
    return lines[lines.index(header(r)) + 1]


@pytest.mark.parametrize("config,layout", [
    ({"cluster": {"gpus": 2}}, "TP 2 PP 1 CP 1 DP 1 EP 1 (2 GPUs)"),
    ({"cluster": {"gpus": 1}}, "TP 1 PP 1 CP 1 DP 1 EP 1 (1 GPUs)"),
    ({"rl": {"samples": 1, "batch_trajectories": 1}}, "TP 4 PP 1 CP 1 DP 1 EP 1 (4 GPUs)"),
    ({"cluster": {"gpus": 1}, "model": {"name": "qwen3-235b-a22b"}},
     "TP 1 PP 1 CP 1 DP 1 EP 1 (1 GPUs)"),
])
def test_what_config_check_accepts_cost_accepts(tmp_path, config, layout):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    assert libra("config", "check", str(path)).returncode == 0
    r = libra("cost", str(path))
    assert layout in header(r)
    assert note(r).startswith("  layout defaulted (no --tp, --dp given): "), r.stdout
    assert libra("cost", "--json", str(path)).returncode == 0


def test_the_default_dp_is_what_the_batch_feeds():
    """--batch 8 is two groups of 4 on 48 GPUs: 8 ranks of TP 4, each with one sequence."""
    r = libra("cost", "--batch", "8")
    assert "TP 4 PP 1 CP 1 DP 8 EP 1 (32 GPUs), 8 sequences" in header(r)
    assert note(r) == ("  layout defaulted (no --tp, --dp given): TP 4, DP 8, the largest that "
                       "fit the cluster (48 GPUs, 8 per node), the model and the batch "
                       "(8 sequences per mini-batch)")
    r = libra("cost", "--batch", "8", "--minibatches", "2", "--tp", "2")
    assert "TP 2 PP 1 CP 1 DP 4 EP 1 (8 GPUs)" in header(r)
    assert note(r).startswith("  layout defaulted (no --dp given): DP 4, the largest that fit ")
    assert note(r).endswith("(4 sequences per mini-batch)")


def test_the_default_tp_fits_the_flags_given():
    assert "TP 2 PP 2 CP 1 DP 1 " in header(libra("cost", "--gpus", "4", "--pp", "2"))
    assert "TP 1 PP 1 CP 1 DP 3 " in header(libra("cost", "--gpus", "4", "--dp", "3"))


def test_the_default_dp_suits_the_expert_parallel_size():
    """7 sequences feed 7 ranks of TP 4, but EP 8 must divide TP·DP: DP 6 is the largest."""
    r = libra("cost", "--model", "qwen3-30b-a3b", "--ep", "8", "--batch", "7")
    assert "TP 4 PP 1 CP 1 DP 6 EP 8 (24 GPUs)" in header(r)


def test_a_default_that_fits_the_whole_cluster_says_nothing_more():
    r = libra("cost")
    assert "TP 4 PP 1 CP 1 DP 12 EP 1 (48 GPUs)" in header(r)
    assert note(r).startswith("  FLOPs per token:")
    r = libra("cost", "--tp", "2", "--gpus", "2")
    assert "TP 2 PP 1 CP 1 DP 1 EP 1 (2 GPUs)" in header(r)
    assert note(r).startswith("  FLOPs per token:")


@pytest.mark.parametrize("args,says", [
    (("--dp", "100"), "the layout needs 100 GPUs, the cluster has 48; change --dp or --gpus"),
    (("--tp", "8", "--dp", "7"),
     "the layout needs 56 GPUs, the cluster has 48; change --tp, --dp or --gpus"),
    (("--gpus", "2", "--pp", "4"), "the layout needs 4 GPUs, the cluster has 2; change --pp or --gpus"),
    (("--dp", "8", "--batch", "4"),
     "4 sequences do not fit: each of 8 DP ranks needs a sequence in each of 1 mini-batches; "
     "change --dp or --batch"),
    (("--minibatches", "3", "--batch", "2"),
     "2 sequences do not fit: each of 1 DP ranks needs a sequence in each of 3 mini-batches; "
     "change --minibatches or --batch"),
    (("--seq-tokens", "40000"),
     "sequences of 40000 tokens do not fit a micro-batch of 32768 tokens; change --seq-tokens "
     "or --micro-batch-tokens"),
])
def test_flags_that_cannot_fit_are_named(args, says):
    r = libra("cost", *args)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert r.stderr == "libra: cost: " + says + "\n"


def test_the_help_states_the_default():
    r = libra("cost", "--help")
    assert "largest of 4, 2, 1" in r.stdout and "(default: 4, 1, 1)" not in r.stdout
