"""End-to-end tests of valid-looking extreme experiments (docs/sim.md, docs/config.md,
docs/cli.md).

- Dynamic sampling that drops every group (a workload whose rewards are always equal) stops
  the asynchronous modes with an error naming rl.dynamic_sampling, as the planner and the
  colocated mode's bounded rounds do, instead of replacing dropped groups forever.
- The weight-update keys (`rl.max_staleness`, `rl.sync_interval`, `rl.sync_mode`,
  `rl.transport`) act in libra sim only with async or libra in sim.modes, the trainer's keys
  (`rl.minibatches`, `rl.old_logprob`, `rl.reference`) only with a mode that trains, the
  router's (`sched.*`) only with a mode that routes over buckets (libra, rollout;
  `sched.attempt_shrink` with cmlfq_h), and the planner's and verification's (`sim.planner`,
  `plan.homogeneous_rollout`, `plan.verify_*`) only with libra: a flag setting one without them
  is refused; a file's value is taken (libra plan acts on it). Where libra runs but unplanned
  (sim.planner false), the refusal of a planner key names sim.planner.
- `--attribution` with a swept key that its colocated bar leaves aside runs (its points are one
  experiment by design), not refused as a value spelled twice.
- `libra config check` refuses what libra plan, libra load and libra route eval refuse of the
  update rules (reshard, keep with disk_restart, a staleness below the sync interval), whatever
  sim.modes.
- route eval's error when the planner refuses the experiment carries the planner's whole reason.
- A trajectory timeout that stops every trajectory is an error naming the key, not zeros.
- The largest cluster a config takes (65536 GPUs) plans and runs libra: its fleet of more than
  4096 instances of one TP size was refused by the router as out of a layout's range.

Needs LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import json
import os

import pytest
from cli_run import refused, run

SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
SMALL = ("--gpus", "16", "--model", "qwen3-4b", "--batch", "8", "--steps", "2")


def equal_rewards_preset(path):
    """r2e-gym whose every trajectory is rewarded 0: every GRPO group has equal rewards."""
    with open(os.path.join(SOURCE_DIR, "data/presets/workloads.json"), encoding="utf-8") as f:
        base = next(w for w in json.load(f)["workloads"] if w["name"] == "r2e-gym")
    base.update(name="no-reward", reward={"logit": -20, "difficulty": 0})
    path.write_text(json.dumps({"schema": "libra.presets/1", "workloads": [base]}))
    return str(path)


# ---- dynamic sampling that drops every group --------------------------------------------------

@pytest.mark.parametrize("mode", [
    ("--set", "sim.modes=async", "--set", "sim.async_train_gpus=8", "--set", "sim.async_tp=4"),
    ("--set", "sim.modes=libra", "--set", "sim.planner=false", "--set",
     "sched.buckets=tp4x2:30000"),
])
def test_async_dynamic_sampling_that_drops_every_group_stops(tmp_path, mode):
    """(gen_batch acts as regenerate there, so a flag giving it is refused: test_sim_pool_fixes.)"""
    presets = equal_rewards_preset(tmp_path / "p.json")
    err = refused(run("sim", "--presets", presets, "--workload", "no-reward", *SMALL, *mode,
                      "--set", "rl.dynamic_sampling=regenerate"))
    assert "rl.dynamic_sampling" in err and "nothing would train" in err, err


@pytest.mark.parametrize("mode", [
    ("--set", "sim.modes=colocated", "--set", "sim.colocated_tp=4"),
    ("--set", "sim.modes=rollout", "--set", "sched.buckets=tp4x2:30000"),
])
def test_a_run_whose_dynamic_sampling_kept_no_group_is_refused(tmp_path, mode):
    """A synchronous step's rounds end at rl.max_gen_batches, so the run ended, trained nothing
    and printed a table of zeros (exit 0); like the async modes', it is an error naming the key."""
    presets = equal_rewards_preset(tmp_path / "p.json")
    err = refused(run("sim", "--presets", presets, "--workload", "no-reward", *SMALL, *mode,
                      "--set", "rl.dynamic_sampling=regenerate"))
    assert "rl.dynamic_sampling regenerate dropped every group the run generated" in err, err
    assert "nothing trained" in err, err


# ---- weight-update and trainer keys without a mode that uses them -----------------------------

COLOCATED = ("--set", "sim.modes=colocated", "--set", "sim.colocated_tp=4")
ROLLOUT = ("--set", "sim.modes=rollout", "--set", "sched.buckets=tp4x2:30000")


@pytest.mark.parametrize("modes,setting", [
    (COLOCATED, "rl.max_staleness=8"),
    (COLOCATED, "rl.sync_interval=2"),
    (COLOCATED, "rl.sync_mode=abort_resume"),
    (COLOCATED, "rl.transport=nccl"),
    (COLOCATED, "rl.transport=reshard"),
    (ROLLOUT, "rl.sync_interval=2"),
    (ROLLOUT, "rl.transport=nccl"),
    (ROLLOUT, "rl.minibatches=2"),
    (ROLLOUT, "rl.old_logprob=false"),
    (ROLLOUT, "rl.reference=true"),
    (COLOCATED, "sched.policy=plas"),
    (COLOCATED, "sched.buckets=tp4x2:30000"),
    (COLOCATED, "sched.rebuild_interval=3"),
    (COLOCATED, "sched.shrink_visits=3"),
    (COLOCATED, "sched.empirical_shrink=false"),
    (COLOCATED, "sched.attempt_shrink=1"),
    (COLOCATED, "sim.planner=false"),
    (COLOCATED, "plan.homogeneous_rollout=true"),
    (COLOCATED, "plan.verify_candidates=3"),
    (ROLLOUT, "sim.planner=false"),
    (ROLLOUT, "plan.verify_steps=5"),
    (ROLLOUT, "sched.attempt_shrink=1"),
])
def test_a_key_no_mode_run_uses_is_refused_from_a_flag(modes, setting):
    key, value = setting.split("=")
    err = refused(run("sim", *SMALL, *modes, "--set", setting))
    assert err.startswith(f"libra: --set {key}: {key}="), err
    assert value in err and "has no effect without" in err and "sim.modes" in err, err


@pytest.mark.parametrize("setting", ["plan.replan_interval_steps=0", "plan.verify_steps=5",
                                     "plan.homogeneous_rollout=true"])
def test_a_planner_key_with_libra_unplanned_names_sim_planner(tmp_path, setting):
    """libra runs sched.buckets' fleet when sim.planner is false (as a file may pin it): the
    refusal names that switch, not sim.modes alone, which does hold libra."""
    key = setting.split("=")[0]
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"sim": {"planner": False, "modes": ["libra"]},
                                "sched": {"buckets": "tp8x2:40960"}}))
    err = refused(run("sim", str(path), *SMALL, "--set", setting))
    assert err.startswith(f"libra: --set {key}: {setting} has no effect with sim.planner false: "
                          "libra runs the fleet of sched.buckets, unplanned"), err


@pytest.mark.parametrize("modes,setting", [
    (COLOCATED + ("--set", "sim.modes=colocated,async"), "rl.transport=nccl"),
    (ROLLOUT + ("--set", "sim.modes=rollout,libra"), "rl.sync_interval=2"),
    (COLOCATED, "rl.minibatches=2"),
    (ROLLOUT, "sched.policy=plas"),
    (ROLLOUT + ("--set", "sched.policy=cmlfq_h"), "sched.attempt_shrink=1"),
    (COLOCATED + ("--set", "sim.modes=colocated,libra"), "plan.verify_candidates=3"),
])
def test_the_key_is_taken_with_a_mode_that_uses_it(modes, setting):
    r = run("sim", *SMALL, *modes, "--set", setting, "--json")
    assert r.returncode in (0, 1), r.stderr  # 1: a layout that cannot run is a result
    assert "has no effect" not in r.stderr, r.stderr


def test_a_file_value_is_taken_by_sim_and_config_check(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"cluster": {"gpus": 16}, "model": {"name": "qwen3-4b"},
                                "rl": {"batch_trajectories": 8, "steps": 2, "sync_interval": 2,
                                       "transport": "nccl"},
                                "sim": {"modes": ["colocated"], "colocated_tp": 4}}))
    r = run("config", "check", str(path))
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    r = run("sim", str(path), "--json")
    assert r.returncode == 0, r.stderr


def test_an_attribution_sweeps_a_key_its_colocated_bar_leaves_aside():
    """The colocated bar of every rl.sync_interval is one experiment, each its point's bar."""
    r = run("sim", *SMALL, "--attribution", "--sweep", "rl.sync_interval=1,2", "--set",
            "plan.verify_candidates=0", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    assert [g["key"] for g in json.loads(r.stdout)["grid"]] == ["rl.sync_interval",
                                                                "attribution"]


# ---- config check refuses what libra plan refuses of the update rules --------------------------

@pytest.mark.parametrize("rl,why", [
    ({"transport": "reshard"}, "rl.transport: reshard moves weights in place"),
    ({"sync_mode": "keep", "transport": "disk_restart"}, "rl.sync_mode: keep generates"),
    ({"max_staleness": 0}, "rl.max_staleness: 0 is below rl.sync_interval - 1 = 4"),
])
@pytest.mark.parametrize("modes", [["colocated"], ["rollout"]])
def test_config_check_refuses_an_update_rule_plan_refuses(tmp_path, rl, why, modes):
    path = tmp_path / "x.json"
    doc = {"rl": {**rl, "steps": 2}, "sim": {"modes": modes}}
    if modes == ["rollout"]:
        doc["sched"] = {"buckets": "tp8x4:30000"}
    path.write_text(json.dumps(doc))
    err = refused(run("config", "check", str(path)), 1)
    assert err.startswith(f"libra: {path}: {why}") and "libra plan" in err, err
    err = refused(run("plan", str(path)))
    assert why in err, err


# ---- route eval names the planner's whole reason ----------------------------------------------

def test_route_eval_prints_the_planners_whole_reason(tmp_path):
    trace = tmp_path / "t.jsonl"
    r = run("trace", "gen", "r2e-gym", "--steps", "2", "--batch", "4", "--samples", "2", "-o",
            str(trace))
    assert r.returncode == 0, r.stderr
    err = refused(run("route", "eval", str(trace), "--gpus", "2"))
    assert "colocated, where every GPU trains and rolls out, needs cluster.gpus to meet " \
           "each)): give --buckets" in err, err


# ---- a timeout that stops every trajectory ----------------------------------------------------

@pytest.mark.parametrize("modes", ["colocated", "async", "libra"])
def test_a_timeout_that_stops_every_trajectory_is_refused(modes):
    err = refused(run("sim", *SMALL, "--set", f"sim.modes={modes}", "--set",
                      "rl.trajectory_timeout_s=0.001"))
    assert "rl.trajectory_timeout_s 0.001 s stopped every trajectory" in err, err


def test_the_largest_cluster_plans_and_runs_libra():
    r = run("sim", "--gpus", "65536", "--workload", "search-r1", "--steps", "2", "--set",
            "sim.modes=libra", "--set", "plan.verify_candidates=0", "--json")
    assert r.returncode == 0, r.stderr
    instances = json.loads(r.stdout)["modes"]["libra"]["layout"]["instances"]  # "tp8x6440"
    assert max(int(kind.split("x")[1]) for kind in instances.split(",")) > 4096, instances
