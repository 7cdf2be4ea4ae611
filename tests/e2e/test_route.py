"""End-to-end tests of `libra route eval` (docs/routing.md).

The trace is written here, from a toy agent whose tool returns determine the work left: a
failed first call means three long turns follow (12 500 tokens left: the long bucket), a
success means one short turn (300 left). Over buckets tp1:1000,tp2:5000,tp4:20000 the
decisions and their true buckets are known exactly, so the expected scores are computed by hand
below, and the placebo (returns shuffled among trajectories of the same depth) must fall to the
depth-only tree.
"""

import json
import os
import random
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
BUCKETS = "tp1:1000,tp2:5000,tp4:20000"


def call(tool, status, payload):
    return {"tool": tool, "status": status, "payload_tokens": payload, "queue_us": 0,
            "exec_us": 1000}


def toy_trace(path, steps=6, prompts_per_step=8, samples=4, pool=16, seed=3):
    rng = random.Random(seed)
    lines = [{"libra_trace": 1, "workload": "toy", "group_size": samples, "lossy": False}]
    for step in range(steps):
        for j in range(prompts_per_step):
            prompt = (step * prompts_per_step + j) % pool
            for sample in range(samples):
                long_ = rng.random() < 0.5
                ctx = 500
                turns = [{"generated_tokens": 200,
                          "calls": [call("bash", "failure" if long_ else "success", 50)]}]
                if long_:
                    turns.append({"generated_tokens": 6000,
                                  "calls": [call("bash", "success", 3000)]})
                    turns.append({"generated_tokens": 6000,
                                  "calls": [call("bash", "success", 50)]})
                    turns.append({"generated_tokens": 500, "calls": []})
                else:
                    turns.append({"generated_tokens": 300, "calls": []})
                for t in turns:
                    t["prompt_tokens"] = ctx
                    t["cached_tokens"] = 0
                    ctx += t["generated_tokens"] + sum(c["payload_tokens"] for c in t["calls"])
                lines.append({"step": step, "prompt_id": prompt, "epoch": 0, "sample": sample,
                              "version_start": step, "version_end": step,
                              "finish": "completed", "reward": 1.0,
                              "turns": [{k: t[k] for k in ("prompt_tokens", "cached_tokens",
                                                           "generated_tokens", "calls")}
                                        for t in turns]})
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return lines[1:]


def route(*args):
    return subprocess.run([LIBRA, "route", *args], capture_output=True, text=True, timeout=120)


def eval_json(trace, *args):
    r = route("eval", trace, "--buckets", BUCKETS, "--json", *args)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def test_scores_match_hand_counts(tmp_path):
    trace = str(tmp_path / "toy.jsonl")
    trajs = toy_trace(trace)
    rc, doc = eval_json(trace)
    assert rc == 0
    assert doc["schema"] == "libra.route-eval/1"
    assert {"libra_version", "seed", "config_digest"} <= set(doc)
    assert doc["train_steps"] == 1 and doc["eval_steps"] == 5
    assert doc["buckets"] == BUCKETS
    evaluated = [t for t in trajs if t["step"] >= 1]
    n_long = sum(len(t["turns"]) == 4 for t in evaluated)
    n_short = len(evaluated) - n_long
    decisions = 3 * n_long + n_short  # one per tool return
    pol = doc["policies"]
    for name, m in pol.items():
        assert m["all"]["decisions"] == decisions, name
        assert m["all"]["first_placements"]["n"] == len(evaluated)
        assert m["all"]["trajectories"] == len(evaluated)
    # true buckets: short 0; long 2, 2, 0
    majority = max(n_long * 2, n_long + n_short) / decisions
    assert abs(pol["cmlfq"]["all"]["majority_class"]["accuracy"] - majority) < 1e-9
    assert pol["oracle"]["all"]["accuracy"] == 1.0
    assert pol["oracle"]["all"]["spearman"] > 0.99
    # the tree has seen every state after the training step: every decision right
    assert pol["cmlfq"]["all"]["accuracy"] == 1.0
    assert pol["cmlfq"]["all"]["per_bucket_recall"] == [1.0, None, 1.0]
    assert pol["cmlfq"]["reasons"]["promote"] == n_long
    assert pol["cmlfq"]["reasons"]["demote"] == n_long
    assert abs(pol["cmlfq"]["all"]["moves_per_trajectory"] - 2 * n_long / len(evaluated)) < 1e-9
    # load_balance ignores buckets: its accuracy is not defined here
    assert pol["load_balance"]["all"]["accuracy"] is None
    # prompts recur from step 2 on (a pool of 16, 8 per step)
    assert pol["cmlfq"]["seen"]["decisions"] > 0 and pol["cmlfq"]["never"]["decisions"] > 0


def test_placebo_falls_to_depth_only(tmp_path):
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=11, prompts_per_step=32, pool=64)
    rc, doc = eval_json(trace, "--policy", "cmlfq", "--placebo")
    p = doc["placebo"]
    assert rc == (0 if p["within_tolerance"] else 1)
    # About 2600 decisions: the two accuracies differ by sampling noise only (a standard
    # error of about 1.2 points), so allow three of them; the exit code follows the
    # 1-point rule.
    assert p["difference_points"] < 3 * p["standard_error_points"], p
    real = doc["policies"]["cmlfq"]["all"]["accuracy"]
    assert real - p["cmlfq_shuffled_accuracy"] > 0.1  # the signal is in the returns
    assert set(doc["policies"]) == {"cmlfq", "cmlfq_shuffled", "depth_only"}
    assert p["cmlfq_accuracy"] == real
    assert abs(p["signal_points"] - 100 * (real - p["cmlfq_shuffled_accuracy"])) < 1e-9


def test_output_is_deterministic_and_text_mode_works(tmp_path):
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace)
    a = route("eval", trace, "--buckets", BUCKETS, "--json", "--placebo", "--seed", "7")
    b = route("eval", trace, "--buckets", BUCKETS, "--json", "--placebo", "--seed", "7")
    assert a.stdout == b.stdout
    t = route("eval", trace, "--buckets", BUCKETS, "--policy", "oracle")
    assert t.returncode == 0, t.stderr
    assert "oracle" in t.stdout and "100.0" in t.stdout


def test_policies_on_any_number_of_threads_and_progress(tmp_path):
    """The policies are evaluated in parallel (--jobs); the result does not depend on it. The
    progress line goes to stderr only when asked for off a terminal."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace)
    args = ["eval", trace, "--buckets", BUCKETS, "--json", "--placebo"]
    one, three = route(*args, "--jobs", "1"), route(*args, "--jobs", "3")
    assert one.returncode == 0 and one.stdout == three.stdout and one.stderr == ""
    loud = route(*args, "--progress")
    last = loud.stderr.splitlines()[-1]
    assert last.startswith("libra route eval: ") and "policy-steps (100%)" in last


def test_regret(tmp_path):
    """Every decision is charged what its bucket costs over the best one in hindsight
    (docs/routing.md "Cost and regret"): never negative; load_balance chooses no bucket, so its
    own regrets are null (the evaluator's idle fleet keeps it on bucket 0, an artefact); the best
    constant is the least of the constants; and cmlfq_h, which follows whichever of its experts
    (the constants among them) has cost least, does no worse than the majority class here."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace)
    rc, doc = eval_json(trace)
    planned = doc["regret"]
    assert planned["deadline_s"] == (planned["max_staleness"] + 1) * planned["planned_step_s"]
    pol = doc["policies"]
    rows = {name: m["all"]["regret"] for name, m in pol.items()}
    for name, r in rows.items():
        a = pol[name]["all"]
        assert r["decisions"] == a["decisions"] + a["first_placements"]["n"]
        if name != "load_balance":
            assert r["per_decision_gpu_s"] >= 0 and r["per_trajectory_gpu_s"] >= 0, name
    zero = rows["load_balance"]
    for key in ("per_decision_gpu_s", "per_trajectory_gpu_s", "path_per_trajectory_gpu_s"):
        assert zero[key] is None, key
    major = zero["majority_class"]
    assert major["bucket"] == 0
    assert zero["best_constant"]["per_decision_gpu_s"] <= major["per_decision_gpu_s"]
    assert rows["cmlfq_h"]["per_decision_gpu_s"] <= major["per_decision_gpu_s"]
    assert rows["oracle"]["path_per_trajectory_gpu_s"] <= major["path_per_trajectory_gpu_s"]


def test_planner_layout_and_folds(tmp_path):
    """Without --buckets the layout is the planner's banding of the trace on the experiment's
    cluster; --folds K splits the prompts into K folds, each routed after the others are learnt,
    so every trajectory is scored once."""
    trace = str(tmp_path / "toy.jsonl")
    trajs = toy_trace(trace)
    r = route("eval", trace, "--json", "--policy", "cmlfq_h")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    plan = json.loads(subprocess.run([LIBRA, "plan", "--set", "workload.trace=" + trace, "--json"],
                                     capture_output=True, text=True).stdout)
    assert doc["buckets"] == plan["rollout"]["buckets_text"]
    rc, folds = eval_json(trace, "--folds", "4", "--policy", "cmlfq")
    assert rc == 0 and folds["folds"] == 4 and folds["train_steps"] == 0
    assert folds["policies"]["cmlfq"]["all"]["trajectories"] == len(trajs)
    text = route("eval", trace, "--buckets", BUCKETS, "--folds", "4").stdout
    assert "4-fold leave-tasks-out" in text


def test_bad_input(tmp_path):
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=2)
    r = route("eval", trace, "--buckets", "tp3:100")
    assert r.returncode == 2
    assert r.stderr.startswith("libra: --buckets: column 3: tp size 3 is not one of 1, 2, 4, 8")
    r = route("eval", trace, "--buckets", BUCKETS, "--policy", "fifo")
    assert r.returncode == 2 and "unknown policy 'fifo'" in r.stderr
    r = route("eval", trace, "--buckets", BUCKETS, "--train-steps", "2")
    assert r.returncode == 2 and "leaves nothing to evaluate (the trace has 2 steps)" in r.stderr
    one = str(tmp_path / "one.jsonl")
    toy_trace(one, steps=1)
    r = route("eval", one, "--buckets", BUCKETS, "--train-steps", "1")
    assert r.returncode == 2 and "(the trace has 1 step)" in r.stderr
    r = route("eval", trace, "--gpus", "2")  # no split of two GPUs: no plan, no layout
    assert r.returncode == 2 and "the planner gives no bucket layout" in r.stderr
    r = route("eval", trace, "--buckets", BUCKETS, "--folds", "1")
    assert r.returncode == 2 and "--folds: expected an integer in [2, " in r.stderr
    # two steps of 8 prompts: 16 folds hold one prompt each, a 17th would be empty
    assert route("eval", trace, "--buckets", BUCKETS, "--folds", "16").returncode == 0
    r = route("eval", trace, "--buckets", BUCKETS, "--folds", "17")
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert "--folds 17: the trace has 16 prompts, so at most 16 folds" in r.stderr
    # --folds evaluates every step: a --train-steps beside it would change nothing
    for args in (["--folds", "2", "--train-steps", "1"], ["--train-steps", "0", "--folds", "2"]):
        r = route("eval", trace, "--buckets", BUCKETS, *args)
        assert r.returncode == 2 and r.stdout == "", args
        assert "--train-steps and --folds exclude each other" in r.stderr
    r = route("eval", str(tmp_path / "missing.jsonl"), "--buckets", BUCKETS)
    assert r.returncode == 3
    r = route("eval", trace, "--buckets", BUCKETS, "--truncated", "maybe")
    assert r.returncode == 2 and "--truncated: expected censored or exact" in r.stderr
    r = route("eval", trace, "--buckets", BUCKETS, "--min-visits", "0")
    assert r.returncode == 2 and "--min-visits: expected an integer in [1, " in r.stderr
    r = route("frobnicate")
    assert r.returncode == 2
    assert route("--help").returncode == 0


def refused(trace, *args):
    """The stderr of a route eval of trace that must be refused as a usage error, before any
    output."""
    r = route("eval", trace, *args)
    assert r.returncode == 2 and r.stdout == "", (args, r.stdout, r.stderr)
    return r.stderr


def test_buckets_with_instance_counts_is_refused(tmp_path):
    """route eval builds no fleet: --buckets' instance counts are refused as --set
    sched.buckets' are, naming the buckets without them."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=2)
    counted = "tp1x4:1000,tp2x2:5000,tp4:20000"
    for args, label in ((["--buckets", counted], "--buckets"),
                        (["--set", "sched.buckets=" + counted], "--set sched.buckets")):
        err = refused(trace, *args)
        assert err.startswith(f"libra: {label}: instance counts have no effect in libra route "
                              "eval"), err
        assert f'give the buckets alone ("{BUCKETS}")' in err, err


@pytest.mark.parametrize("spec, col, why", [
    ("tp01:1000,tp4:20000", 3, "tp size '01' has a leading zero"),
    ("TP1:1000,tp4:20000", 1, "'TP' must be lower case"),
    ("tp1:1000,tp4:20000 ", 19, "a space is not allowed"),
    ("tp1:1000, tp4:20000", 10, "a space is not allowed"),
    ("tp1:01000,tp4:20000", 5, "max_tokens '01000' has a leading zero"),
])
def test_bucket_spellings_outside_the_grammar_are_refused(tmp_path, spec, col, why):
    """The text form is written one way (docs/routing.md); another spelling is refused at its
    column by every way of setting sched.buckets, not read as the layout it resembles."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=2)
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"sched": {"buckets": spec}}))
    for args, where in ((["--buckets", spec], "--buckets: "),
                        (["--set", "sched.buckets=" + spec], "--set sched.buckets: "),
                        (["--config", str(config)], f"{config}:1:")):
        err = refused(trace, *args)
        assert err.startswith("libra: " + where), (args, err)
        assert f"column {col}: {why}" in err, (args, err)


@pytest.mark.parametrize("flags, why", [
    (["--gpus", "4"], "the cluster has 4 GPUs (cluster.gpus)"),
    (["--set", "cluster.gpus_per_node=4"], "a node has 4 GPUs (cluster.gpus_per_node)"),
])
def test_a_bucket_no_instance_of_the_cluster_can_serve_is_refused(tmp_path, flags, why):
    """A TP8 bucket on a cluster that cannot hold a TP8 instance would be scored as if it could
    (on a 4-GPU cluster, with no deadline): it is refused, naming the bucket and the limit."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=2)
    layout = "tp1:1000,tp2:5000,tp8:20000"
    for args, where in ((["--buckets", layout], "--buckets"),
                        (["--set", "sched.buckets=" + layout], "--set sched.buckets")):
        err = refused(trace, *args, *flags)
        assert err.startswith(f"libra: {where}: bucket 3 (tp8:20000) is served by TP8, but "
                              + why), err
    ok = route("eval", trace, "--buckets", BUCKETS, "--policy", "oracle", *flags)
    assert ok.returncode == 0, ok.stderr


def test_buckets_and_set_buckets_both_set_the_key(tmp_path):
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=2)
    for args in (["--buckets", BUCKETS, "--set", "sched.buckets=tp1:1000,tp4:20000"],
                 ["--set", "sched.buckets=tp1:1000,tp4:20000", "--buckets", BUCKETS]):
        err = refused(trace, *args)
        assert "--buckets" in err and "--set sched.buckets" in err, err
        assert "both set sched.buckets" in err, err


def test_config_digest_covers_the_buckets(tmp_path):
    """--buckets is sched.buckets: the digest is --set sched.buckets=' digest, and another
    layout (or the planner's) is another digest."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace)

    def digest(*args):
        r = route("eval", trace, "--policy", "oracle", "--json", *args)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["config_digest"]

    by_flag = digest("--buckets", BUCKETS)
    assert by_flag == digest("--set", "sched.buckets=" + BUCKETS)
    assert len({by_flag, digest(), digest("--buckets", "tp1:1000,tp4:20000")}) == 3


def test_seed_without_placebo_is_refused(tmp_path):
    """The trace is replayed as recorded: the seed draws only --placebo's shuffle. Without
    --placebo a seed would change nothing but the digest; the default asks nothing."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=2)
    for args, label in ((["--seed", "7"], "--seed"), (["--set", "sim.seed=7"], "--set sim.seed")):
        err = refused(trace, "--buckets", BUCKETS, "--policy", "cmlfq", *args)
        assert f"{label}: sim.seed has no effect without --placebo" in err, err
    assert route("eval", trace, "--buckets", BUCKETS, "--seed", "1").returncode == 0
    r = route("eval", trace, "--buckets", BUCKETS, "--policy", "cmlfq", "--placebo", "--seed",
              "7")
    assert r.returncode in (0, 1), r.stderr


@pytest.mark.parametrize("policy", ["load_balance", "oracle", "plas", "length_aware", "la_mlfq"])
def test_rebuild_interval_without_a_model_is_refused(tmp_path, policy):
    """sched.rebuild_interval rebuilds the models of cmlfq, predictor and cmlfq_h: with a policy
    that has none it is refused, as sched.shrink_visits is."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=2)
    for key, value, acts_on in (("sched.rebuild_interval", 1, "cmlfq, predictor and cmlfq_h"),
                                ("sched.shrink_visits", 0, "cmlfq and cmlfq_h")):
        err = refused(trace, "--buckets", BUCKETS, "--policy", policy, "--set", f"{key}={value}")
        assert (f"--set {key}: {key} has no effect with --policy {policy}: it acts on {acts_on} "
                "only") in err, err
    # the placebo's arms are cmlfq's
    r = route("eval", trace, "--buckets", BUCKETS, "--policy", policy, "--placebo", "--set",
              "sched.rebuild_interval=1")
    assert r.returncode in (0, 1), r.stderr


def test_rebuild_interval_with_a_model(tmp_path):
    """Taken where a model is rebuilt; refused with --folds, whose folds' models are never
    rebuilt (the router is ticked by steps)."""
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace, steps=2)
    for policy in ("cmlfq", "predictor", "cmlfq_h"):
        r = route("eval", trace, "--buckets", BUCKETS, "--policy", policy, "--set",
                  "sched.rebuild_interval=1")
        assert r.returncode == 0, (policy, r.stderr)
    err = refused(trace, "--buckets", BUCKETS, "--policy", "cmlfq", "--folds", "2", "--set",
                  "sched.rebuild_interval=1")
    assert "--set sched.rebuild_interval: sched.rebuild_interval has no effect with --folds" \
        in err, err


def test_a_trace_of_only_its_header(tmp_path):
    # no trajectory to sort or replay: refused as having nothing to evaluate, with or without
    # a layout given (the sanitizer build once failed here before saying so); it was told to
    # give --buckets, then that --train-steps 1 left nothing to evaluate
    trace = tmp_path / "header.jsonl"
    trace.write_text('{"libra_trace":1,"workload":"r2e-gym"}\n', encoding="utf-8")
    for args in (["--buckets", "tp1:100"], [], ["--buckets", BUCKETS, "--folds", "2"]):
        r = route("eval", str(trace), *args)
        assert r.returncode == 2 and r.stdout == "", (args, r.stderr)
        assert r.stderr == (f"libra: route eval: {trace} holds no trajectories: nothing to "
                            "evaluate\n"), r.stderr


def test_placebo_on_a_generated_r2e_trace(tmp_path):
    # A workload model's own trace (docs/routing.md "The placebo check"): 40 steps of
    # R2E-Gym, seed 1, about 5 400 decisions, at the defaults (censored truncations,
    # empirical shrinkage) over the reference layout (the planner's banding of this trace is
    # one bucket, where every arm is trivially right). The three arms share one estimator:
    # censored tails come from the depth node and path nodes are shrunk toward it, so
    # shuffled returns leave C-MLFQ where the depth-only tree is: 0.0 points apart (standard
    # error 0.5) here. (On the 200-step traces of docs/routing.md "Measured" the calibrated
    # preset fails the check with the fixed k and passes it with empirical shrinkage: the
    # tests at the end.)
    trace = str(tmp_path / "r2e.jsonl")
    gen = subprocess.run([LIBRA, "trace", "gen", "r2e-gym", "--steps", "40", "--seed", "1",
                          "-o", trace], capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, gen.stderr
    r = route("eval", trace, "--policy", "cmlfq", "--train-steps", "5", "--set",
              "sched.rebuild_interval=5", "--placebo", "--json", "--buckets",
              "tp1:4000,tp2:12000,tp4:30000")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    p = doc["placebo"]
    assert p["within_tolerance"] and p["difference_points"] <= p["tolerance_points"] == 1.0
    assert p["depth_only_accuracy"] < 0.95  # not the trivial one-bucket case
    pol = doc["policies"]
    n = {pol[k]["all"]["decisions"] for k in ("cmlfq", "cmlfq_shuffled", "depth_only")}
    assert len(n) == 1 and n.pop() > 5000
    # Every decision point is answered by some node: nothing falls to "no node" once the
    # depth node behind it has a visit, in either arm.
    for k in ("cmlfq_shuffled", "depth_only"):
        assert pol[k]["reasons"].get("no_node", 0) < 0.01 * pol[k]["all"]["decisions"], k


# The placebo check on the 200-step R2E-Gym traces of docs/routing.md "Measured". With empirical
# shrinkage (the default; docs/routing.md "Empirical shrinkage") a depth's path nodes answer with
# its depth node unless they spread beyond chance, so on shuffled returns C-MLFQ decides as the
# depth-only tree does. With the fixed k for them too (sched.empirical_shrink=false,
# sched.shrink_visits 50) it fails on the calibrated preset: shuffled returns leave C-MLFQ 3.9
# points from the depth-only tree on seed 1.
def r2e_placebo(tmp_path, seed, *settings):
    trace = str(tmp_path / f"r2e{seed}.jsonl")
    if not os.path.exists(trace):
        gen = subprocess.run([LIBRA, "trace", "gen", "r2e-gym", "--steps", "200", "--seed",
                              str(seed), "-o", trace], capture_output=True, text=True,
                             timeout=300)
        assert gen.returncode == 0, gen.stderr
    r = subprocess.run([LIBRA, "route", "eval", trace, "--policy", "cmlfq", "--train-steps",
                        "10", "--set", "sched.rebuild_interval=5", "--placebo", "--buckets",
                        "tp1:4000,tp2:12000,tp4:30000", "--json", *settings],
                       capture_output=True, text=True, timeout=600)
    doc = json.loads(r.stdout)
    assert r.returncode == (0 if doc["placebo"]["within_tolerance"] else 1), r.stderr
    return doc


# Seed 1 was in view when the two standard deviations of the estimate were chosen; seed 3 was
# held out (docs/routing.md "Measured").
@pytest.mark.parametrize("seed", [1, 3])
def test_empirical_shrinkage_passes_the_placebo_check(tmp_path, seed):
    doc = r2e_placebo(tmp_path, seed)
    assert doc["empirical_shrink"] is True
    p = doc["placebo"]
    assert p["within_tolerance"] and p["difference_points"] < 1.0
    if seed == 1:  # no depth spreads beyond chance: every shuffled decision is the depth node's
        pol = doc["policies"]
        assert pol["cmlfq_shuffled"]["all"] == pol["depth_only"]["all"]
        assert p["signal_points"] > 5


def test_the_text_output_names_the_estimator(tmp_path):
    trace = str(tmp_path / "toy.jsonl")
    toy_trace(trace)
    for setting, named in (("false", True), ("true", False)):
        r = route("eval", trace, "--policy", "cmlfq", "--buckets", BUCKETS, "--set",
                  "sched.empirical_shrink=" + setting)
        assert r.returncode == 0, r.stderr
        assert ("sched.empirical_shrink" in r.stdout) == named, r.stdout


def test_the_fixed_k_fails_it_on_seed_1(tmp_path):
    doc = r2e_placebo(tmp_path, 1, "--set", "sched.empirical_shrink=false")
    assert doc["empirical_shrink"] is False
    assert not doc["placebo"]["within_tolerance"]
    assert doc["placebo"]["difference_points"] > 3


def test_samples_other_than_the_traces_groups_are_refused(tmp_path):
    """route eval replays the trace's groups (its header's group_size): --samples 8 ran as 4,
    whatever was asked, where plan and sim refuse the mismatch."""
    trace = str(tmp_path / "t.jsonl")
    toy_trace(trace, samples=4)
    for flag in (["--samples", "8"], ["--set", "rl.samples=2"]):
        err = refused(trace, "--buckets", BUCKETS, *flag)
        assert ("the trace's GRPO groups are 4 trajectories (its header's group_size), not "
                "rl.samples = %s" % flag[1][-1]) in err, err
    assert eval_json(trace, "--samples", "4")[1] == eval_json(trace)[1]


def test_an_argument_after_the_trace_is_named(tmp_path):
    """route eval T T said "expected 'eval TRACE'", as if the trace were missing."""
    trace = str(tmp_path / "t.jsonl")
    toy_trace(trace)
    r = route("eval", trace, "extra")
    assert r.returncode == 2 and r.stderr.startswith(
        "libra: route: unexpected argument 'extra'\n"), r.stderr
    assert route("eval").stderr.startswith("libra: route: expected 'eval TRACE'\n")
