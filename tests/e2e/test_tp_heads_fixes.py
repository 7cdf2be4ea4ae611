"""A rollout TP size that does not divide the model's attention heads (qwen2.5-7b has 28, so it
takes TP 1, 2 and 4: `libra cost`) is refused by `libra config check` (exit 1) and by every
command that would run it (exit 2), with one message naming the key, the heads and the TP sizes
the model takes, wherever the TP comes from: a pinned sim.colocated_tp or sim.async_tp, an
instance of sched.buckets, a size of plan.tp_pattern; plan.min_tp_sizes above the sizes the
model takes on a node is refused too. `libra serve` without a bucket layout names the
(workload, model) pair it has no reference layout for and the models the workload has one for.

Needs LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import json
import os

import pytest
from cli_run import refused, run

SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
DEFAULT = os.path.join(SOURCE_DIR, "examples", "default.json")
TRACE = os.path.join(SOURCE_DIR, "tests", "data", "trace", "small.jsonl")
MODEL = ("--model", "qwen2.5-7b")
SHORT = ("--steps", "3", "--set", "sim.warmup_steps=1")
TAKES = "does not divide the 28 attention heads of qwen2.5-7b, which takes TP 1, 2, 4"


def same_refusal(check, *others):
    """config check's refusal (exit 1) is each other command's (exit 2), word for word."""
    msg = refused(check, 1)
    assert TAKES in msg, msg
    for r in others:
        assert refused(r) == msg
    return msg


@pytest.mark.parametrize("key,mode", [("sim.colocated_tp", "colocated"),
                                      ("sim.async_tp", "async")])
def test_pinned_tp_not_dividing_heads(key, mode):
    flags = (*MODEL, "--set", f"{key}=8", "--set", f"sim.modes={mode}")
    msg = same_refusal(run("config", "check", DEFAULT, *flags), run("sim", *flags, *SHORT))
    assert msg.startswith(f"libra: --set {key}: TP 8 "), msg
    assert "no KV left" not in msg


def test_pinned_tp_dividing_heads_taken():
    r = run("config", "check", DEFAULT, *MODEL, "--set", "sim.colocated_tp=4",
            "--set", "sim.modes=colocated")
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_bucket_tp_not_dividing_heads(tmp_path):
    path = tmp_path / "exp.json"
    path.write_text(json.dumps({"model": {"name": "qwen2.5-7b"}, "sim": {"modes": ["rollout"]},
                                "sched": {"buckets": "tp1x4:4000,tp8x1:30000"}}))
    msg = same_refusal(run("config", "check", str(path)), run("sim", str(path), *SHORT))
    assert f"{path}:1:" in msg and "sched.buckets: TP 8 " in msg, msg
    flags = (*MODEL, "--set", "sched.buckets=tp1:4000,tp8:30000")
    same_refusal(run("config", "check", DEFAULT, *flags), run("plan", *flags),
                 run("route", "eval", TRACE, *flags))


def test_tp_pattern_not_dividing_heads():
    flags = (*MODEL, "--set", "plan.tp_pattern=8")
    msg = same_refusal(run("config", "check", DEFAULT, *flags), run("plan", *flags))
    assert msg.startswith("libra: --set plan.tp_pattern: TP 8 "), msg


def test_min_tp_sizes_beyond_the_model():
    flags = (*MODEL, "--set", "plan.min_tp_sizes=4")
    msg = refused(run("config", "check", DEFAULT, *flags), 1)
    assert msg.startswith("libra: --set plan.min_tp_sizes: 4 ") and "TP 1, 2, 4" in msg, msg
    assert refused(run("plan", *flags)) == msg
    r = run("config", "check", DEFAULT, *MODEL, "--set", "plan.min_tp_sizes=3")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args,pair,known", [
    (("examples/sim-dapo7b-h20-32-colocated.json",), "'dapo-math-verl' on model 'qwen2.5-7b'",
     ["it has none for any model", "--workload and --model"]),
    (("--model", "qwen2.5-7b"), "'r2e-gym' on model 'qwen2.5-7b'",
     ["it has one for qwen3-4b, qwen3-14b)", "a --model"]),
])
def test_serve_names_the_missing_pair(args, pair, known):
    args = [os.path.join(SOURCE_DIR, a) if a.endswith(".json") else a for a in args]
    msg = refused(run("serve", *args, "--engine", "http://127.0.0.1:9", timeout=30))
    assert f"no reference bucket layout for workload {pair}" in msg, msg
    assert "--set sched.buckets=" in msg and all(k in msg for k in known), msg
