"""The elastic pool live against the simulator's (docs/serve.md "The simulator's decisions,
live"): one experiment run by `libra sim`'s libra mode with the pool, and live on `libra emu`
engines, `libra serve --pool-steer` and `libra load --trainer`, real processes on loopback."""

import json
import os
import re
import subprocess

import pytest

from emu_util import LIBRA, TOKEN, Emu, Serve, assert_weights_never_go_back

# The drift experiment at a small scale, one experiment for `libra sim` and `libra load
# --trainer`: R2E-Gym on Qwen3-4B and 8 H20s, from turns of 600 tokens (the preset's: 150) and
# fewer of them (finish logit -0.8, the preset's: -2.3), whose generations halve and whose
# trajectories take fewer turns still over two versions. Long turns keep the live rollout's
# HTTP and emulation time small beside the engines'. The fleet of sched.buckets is one TP2 rollout engine; the
# 6 GPUs it leaves train as a TP2 core and two hybrid replicas of 2 GPUs, each a TP2 engine while
# it serves rollout. Staleness 0 and weights every step: a step's batch is the same trajectories
# in both. plan.min_rollout_gpus=2: rollout can spare both hybrids in the simulator, as in the
# gateway, which does not keep the experiment's floor (docs/serve.md "Steering by the signal").
DRIFT_PRESET = {"workloads": [{"name": "r2e-gym-drift-2", "base": "r2e-gym",
                               "turn_tokens": {"median": 600}, "finish": {"logit": -0.8},
                               "drift": {"enabled": True, "versions": 2, "generated_scale": 0.5,
                                         "finish_logit": 3}}]}
SCALE = "0.02"  # wall seconds per emulated second: slow enough for the sanitizer build
DRIFT_STEPS = 4


def drift_experiment(tmp_path):
    """The experiment's flags, on a trace of it `libra trace gen` writes into tmp_path."""
    presets, trace = tmp_path / "presets.json", tmp_path / "drift.jsonl"
    presets.write_text(json.dumps(DRIFT_PRESET))
    subprocess.run([LIBRA, "trace", "gen", "r2e-gym-drift-2", "--presets", str(presets),
                    "--steps", str(DRIFT_STEPS), "--batch", "200", "--seed", "2", "-o",
                    str(trace)], check=True, timeout=60)
    return ["--presets", str(presets), "--trace", str(trace), "--workload", "r2e-gym-drift-2",
            "--model", "qwen3-4b", "--hardware", "h20", "--gpus", "8", "--batch", "200",
            "--steps", str(DRIFT_STEPS), "--seed", "2", "--set", "sched.buckets=tp2x1:40960",
            "--set", "sim.planner=false", "--set", "rl.max_staleness=0", "--set",
            "rl.sync_interval=1", "--set", "plan.min_rollout_gpus=2"]


@pytest.mark.parametrize("rule", ["balance", "reference"])
def test_the_live_pool_lends_and_reclaims_as_the_simulator_does(tmp_path, rule):
    """`libra sim`'s libra mode with the elastic pool and the same experiment run live — `libra
    emu` engines as the simulator's fleet, `libra serve --pool-steer`, `libra load --trainer` —
    make the same requests at the same steps' ends, train each step with the same hybrids and
    for the same time, lose no trajectory and never send a turn to older weights. With libra's
    balance rule one hybrid joins for good; the reference's rule borrows both and gives both
    back, step after step."""
    experiment, signal_rule = drift_experiment(tmp_path), ["--set", "ehp.signal=" + rule]
    p = subprocess.run([LIBRA, "sim", *experiment, *signal_rule, "--set", "sim.modes=libra",
                        "--set", "ehp.enabled=true", "--json"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    sim = json.loads(p.stdout)["modes"]["libra"]
    split = sim["layout"]["pool"]
    assert (split["core_replicas"], split["hybrid_replicas"], split["replica_gpus"]) == (1, 2, 2)
    assert sim["layout"]["instances"] == "tp2x3"  # the core's engine and one per hybrid
    sim_requests, sim_hybrids = [], []
    for k, st in enumerate(sim["steps"]):  # a step's record holds what the last step's end did
        d = st["pool"]["decisions"]
        sim_requests += [("reclaim", k - 1)] * d["joins"]
        sim_requests += [("lend", k - 1)] * (d["returned"] + d["cancelled"])
        sim_hybrids.append((st["pool"]["train_gpus"] - sim["layout"]["train_gpus"]) // 2)

    decisions = tmp_path / "decisions.jsonl"
    with Emu("--instances", "tp2x3", "--model", "qwen3-4b", "--hardware", "h20",
             scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        gw = Serve(urls[0] + ",tp=2", args=[
            "--set", "sched.buckets=tp2:40960", "--pool-steer", *signal_rule, "--batch", "200",
            "--set", "rl.max_staleness=0", "--decisions", str(decisions),
            "--pool-replica", urls[1] + ",tp=2", "--pool-replica", urls[2] + ",tp=2"])
        try:
            p = subprocess.run([LIBRA, "load", "--engines", gw.url, "--trainer", "--json",
                                "--time-scale", SCALE, *experiment], capture_output=True,
                               text=True, timeout=300,
                               env={**os.environ, "LIBRA_ADMIN_TOKEN": TOKEN})
        finally:
            rc, notes = gw.stop()
    assert p.returncode == 0 and rc == 0, (p.stderr, notes)
    live = json.loads(p.stdout)
    live_requests = [(op, int(step)) for op, step in re.findall(
        r"pool: (reclaim|lend) of replica \d+ asked: signal at step (\d+)", notes)]
    assert live_requests == sim_requests, (live_requests, sim_requests)
    lends = 2 if rule == "reference" else 0  # step 1's end gives both hybrids back
    assert len(sim_requests) - lends >= 1 and [op for op, _ in sim_requests].count("lend") == lends
    trained = live["steps"][:-1]  # the last batch ends the run untrained
    assert [s["active_hybrids"] for s in trained] == sim_hybrids[:-1]
    for s, st in zip(trained, sim["steps"]):
        assert abs(s["train_s"] - st["train_s"]) <= 1e-9 * st["train_s"], (s, st["train_s"])
    # no trajectory lost: every batch whole, none dropped as stale or filtered
    assert [s["trajectories"] for s in live["steps"]] == [200] * DRIFT_STEPS
    assert sum(s["stale_groups"] + s["filtered_groups"] for s in live["steps"]) == 0
    assert_weights_never_go_back(decisions)
