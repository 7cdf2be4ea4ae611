"""End-to-end tests of input guards of `libra route eval`, `libra plan` and `libra config`
(docs/cli.md, docs/config.md).

- `route eval --decisions FILE` is written whole once the run has succeeded, as `-o` is: a run
  whose report cannot be written leaves FILE as it was, and an `-o` that cannot be written is
  refused before the trace is read.
- A route eval flag that tunes policies the run does not include (`--min-visits` and the trees'
  `--set sched.shrink_visits` / `sched.empirical_shrink` without cmlfq or cmlfq_h,
  `sched.attempt_shrink` without cmlfq_h) is refused, not taken to no effect; the default, or
  a policy that reads it, is taken.
- `plan.homogeneous_rollout` with a `plan.tp_pattern` of several TP sizes is refused naming
  both (every command and `config check`), not searched into "no feasible plan".
- A real key given as -0.0 is 0: `config show` prints 0.0 and the digest of 0.0.
- `route eval` on a trace whose group size does not divide the batch (Search-R1's 5 against the
  default 32) plans batches of whole groups; it wrote past the length sample's end (heap
  corruption, exit 134).

Needs LIBRA_BIN.
"""

import json
import os
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
BUCKETS = "tp1:1000,tp2:5000,tp4:20000"


def run(*args, cwd=None):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120, env=env,
                          cwd=cwd)


def refused(r, code=2):
    assert r.returncode == code and r.stdout == "", (r.returncode, r.stderr)
    return r.stderr


def trace(path, steps=3):
    """A small trace: each trajectory fails (long) or passes (short) its first tool call."""
    lines = [{"libra_trace": 1, "workload": "toy", "group_size": 2, "lossy": False}]
    for step in range(steps):
        for prompt in range(4):
            for sample in range(2):
                long_ = (step + prompt + sample) % 2 == 0
                turns = [{"prompt_tokens": 500, "cached_tokens": 0, "generated_tokens": 200,
                          "calls": [{"tool": "bash", "status": "failure" if long_ else "success",
                                     "payload_tokens": 50, "queue_us": 0, "exec_us": 1000}]},
                         {"prompt_tokens": 750, "cached_tokens": 0,
                          "generated_tokens": 9000 if long_ else 300, "calls": []}]
                lines.append({"step": step, "prompt_id": prompt, "epoch": 0, "sample": sample,
                              "version_start": step, "version_end": step,
                              "finish": "completed", "reward": 1.0, "turns": turns})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


# ---- route eval: --decisions is written whole, after the run ---------------------------------

def test_decisions_file_is_left_as_it_was_when_the_report_cannot_be_written(tmp_path):
    t = trace(tmp_path / "t.jsonl")
    decisions = tmp_path / "d.jsonl"
    decisions.write_text("old\n")
    err = refused(run("route", "eval", t, "--buckets", BUCKETS, "--policy", "cmlfq",
                      "--decisions", str(decisions), "-o", str(tmp_path)), 3)
    assert f"cannot write '{tmp_path}'" in err, err
    assert decisions.read_text() == "old\n"
    assert not (tmp_path / "d.jsonl.tmp").exists()
    r = run("route", "eval", t, "--buckets", BUCKETS, "--policy", "cmlfq", "--decisions",
            str(decisions))
    assert r.returncode == 0, r.stderr
    lines = decisions.read_text().splitlines()
    assert lines and all(json.loads(x)["policy"] == "cmlfq" for x in lines)


def test_decisions_that_cannot_be_written_are_refused_before_the_trace_is_read(tmp_path):
    err = refused(run("route", "eval", str(tmp_path / "missing.jsonl"), "--policy", "cmlfq",
                      "--decisions", str(tmp_path)), 3)
    assert f"cannot write '{tmp_path}'" in err, err


# ---- route eval: flags of policies the run does not include ----------------------------------

@pytest.mark.parametrize("flag", [
    ("--min-visits", "5"),
    ("--set", "sched.shrink_visits=3"),
    ("--set", "sched.empirical_shrink=false"),
    ("--set", "sched.attempt_shrink=5"),
])
@pytest.mark.parametrize("policy", ["oracle", "load_balance", "plas"])
def test_a_tree_flag_without_a_tree_policy_is_refused(tmp_path, flag, policy):
    t = trace(tmp_path / "t.jsonl")
    err = refused(run("route", "eval", t, "--buckets", BUCKETS, "--policy", policy, *flag))
    assert f"has no effect with --policy {policy}" in err, err
    assert flag[1].split("=")[0] in err or flag[0] in err, err


def test_attempt_shrink_is_cmlfq_h_s_alone(tmp_path):
    t = trace(tmp_path / "t.jsonl")
    err = refused(run("route", "eval", t, "--buckets", BUCKETS, "--policy", "cmlfq", "--set",
                      "sched.attempt_shrink=5"))
    assert "--set sched.attempt_shrink: sched.attempt_shrink has no effect with --policy cmlfq" \
        in err, err


@pytest.mark.parametrize("args", [
    ("--policy", "oracle", "--min-visits", "1"),  # the default asks nothing
    ("--policy", "oracle", "--set", "sched.attempt_shrink=2"),
    ("--policy", "cmlfq_h", "--min-visits", "5", "--set", "sched.attempt_shrink=5"),
    ("--policy", "cmlfq", "--set", "sched.shrink_visits=3"),
    ("--policy", "oracle", "--placebo", "--min-visits", "5"),  # the placebo runs cmlfq
    ("--min-visits", "5", "--set", "sched.attempt_shrink=5"),  # all
])
def test_a_tree_flag_with_a_policy_that_reads_it_is_taken(tmp_path, args):
    t = trace(tmp_path / "t.jsonl")
    r = run("route", "eval", t, "--buckets", BUCKETS, "--json", *args)
    assert r.returncode in (0, 1), r.stderr  # 1: a placebo verdict
    assert json.loads(r.stdout)["schema"] == "libra.route-eval/1"


def test_a_config_file_s_tree_settings_are_taken_whatever_the_policy(tmp_path):
    t = trace(tmp_path / "t.jsonl")
    config = tmp_path / "c.json"
    config.write_text('{"sched": {"attempt_shrink": 5, "shrink_visits": 3}}\n')
    r = run("route", "eval", t, "--buckets", BUCKETS, "--policy", "oracle", "--config",
            str(config))
    assert r.returncode == 0, r.stderr


def test_an_unknown_policy_is_a_usage_error_before_the_trace_is_read(tmp_path):
    err = refused(run("route", "eval", str(tmp_path / "missing.jsonl"), "--policy", "bogus"))
    assert "--policy: unknown policy 'bogus'" in err and "usage:" not in err, err


# ---- plan: contradictory settings ------------------------------------------------------------

def test_homogeneous_rollout_with_a_mixed_tp_pattern_is_refused(tmp_path):
    err = refused(run("plan", "--verify", "0", "--homogeneous-rollout", "--set",
                      "plan.tp_pattern=1,1,2,4"))
    assert "--homogeneous-rollout: one TP size for every rollout instance contradicts " \
        "plan.tp_pattern '1,1,2,4'" in err, err
    config = tmp_path / "c.json"
    config.write_text('{"plan": {"homogeneous_rollout": true, "tp_pattern": "1,1,2,4"}}\n')
    err = refused(run("config", "check", str(config)), 1)
    assert "c.json:1:11: plan.homogeneous_rollout: " in err, err
    r = run("plan", "--verify", "0", "--homogeneous-rollout", "--set", "plan.tp_pattern=4,4")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args,said", [
    (("--homogeneous-rollout", "--set", "plan.min_tp_sizes=2"),
     "libra: --homogeneous-rollout: one TP size for every rollout instance contradicts "
     "plan.min_tp_sizes 2\n"),
    (("--set", "plan.tp_pattern=4,4", "--set", "plan.min_tp_sizes=2"),
     "libra: --set plan.min_tp_sizes: 2 TP sizes contradicts plan.tp_pattern '4,4', which puts "
     "1 on every rollout node\n"),
])
def test_a_least_count_of_tp_sizes_no_fleet_can_have_is_refused(args, said):
    """They were searched and answered exit 1, 'no feasible plan', blaming the other key (no
    single TP size serves every request), where one TP8 size does."""
    assert refused(run("plan", "--verify", "0", *args)) == said


# ---- config: negative zero -------------------------------------------------------------------

def show(*args):
    r = run("config", "show", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("value", ["-0.0", "-0", "-0e5"])
def test_negative_zero_is_zero(tmp_path, value):
    zero = show()
    config = tmp_path / "c.json"
    config.write_text('{"rl": {"overprovision_frac": %s}}\n' % value)
    for doc in (show(str(config)), show("--set", f"rl.overprovision_frac={value}")):
        assert doc["config_digest"] == zero["config_digest"]
    r = run("config", "show", str(config))
    assert '"overprovision_frac": 0.0' in r.stdout, r.stdout


@pytest.mark.parametrize("steps", ["2", "20"])
def test_route_eval_plans_a_trace_whose_groups_do_not_divide_the_batch(tmp_path, steps):
    path = str(tmp_path / "sr1.jsonl")
    r = run("trace", "gen", "search-r1", "--steps", steps, "--seed", "1", "-o", path)
    assert r.returncode == 0, r.stderr
    r = run("route", "eval", path, "--train-steps", "1", "--policy", "cmlfq", "--json")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert json.loads(r.stdout)["regret"]["planned_step_s"] > 0
