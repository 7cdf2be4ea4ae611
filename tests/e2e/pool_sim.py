"""One experiment of the elastic pool run both ways (docs/serve.md "The simulator's decisions,
live"): `libra sim`'s libra mode with the pool, and live on `libra emu` engines, `libra serve
--pool-steer` and `libra load --trainer`, real processes on loopback. Used by
test_serve_pool_sim_slow.py and bench/pool_sim_live.py."""

import json
import os
import re
import subprocess

from emu_util import LIBRA, TOKEN, Emu, Serve

# The drift experiment at a small scale, one experiment for `libra sim` and `libra load
# --trainer`: R2E-Gym on Qwen3-4B and 8 H20s, from turns of 600 tokens (the preset's: 150) and
# fewer of them (finish logit -0.8, the preset's: -2.3), whose generations halve and whose
# trajectories take fewer turns still over two versions. Long turns keep the live rollout's
# HTTP and emulation time small beside the engines'. The fleet of sched.buckets is one TP2
# rollout engine; the 6 GPUs it leaves train as a TP2 core and two hybrid replicas of 2 GPUs,
# each a TP2 engine while it serves rollout. Staleness 0 and weights every step: a step's batch
# is the same trajectories in both. plan.min_rollout_gpus=2: rollout can spare both hybrids in
# the simulator, as in the gateway, which does not keep the experiment's floor (docs/serve.md
# "Steering by the signal").
DRIFT_PRESET = {"workloads": [{"name": "r2e-gym-drift-2", "base": "r2e-gym",
                               "turn_tokens": {"median": 600}, "finish": {"logit": -0.8},
                               "drift": {"enabled": True, "versions": 2, "generated_scale": 0.5,
                                         "finish_logit": 3}}]}
SCALE = "0.02"  # wall seconds per emulated second: slow enough for the sanitizer build
DRIFT_STEPS = 4
BATCH = 200


def drift_experiment(tmp_path, seed):
    """The experiment's flags, on a trace of it (seed) `libra trace gen` writes into tmp_path."""
    presets, trace = tmp_path / "presets.json", tmp_path / "drift.jsonl"
    presets.write_text(json.dumps(DRIFT_PRESET))
    subprocess.run([LIBRA, "trace", "gen", "r2e-gym-drift-2", "--presets", str(presets),
                    "--steps", str(DRIFT_STEPS), "--batch", str(BATCH), "--seed", str(seed),
                    "-o", str(trace)], check=True, timeout=60)
    return ["--presets", str(presets), "--trace", str(trace), "--workload", "r2e-gym-drift-2",
            "--model", "qwen3-4b", "--hardware", "h20", "--gpus", "8", "--batch", str(BATCH),
            "--steps", str(DRIFT_STEPS), "--seed", str(seed), "--set",
            "sched.buckets=tp2x1:40960", "--set", "sim.planner=false", "--set",
            "rl.max_staleness=0", "--set", "rl.sync_interval=1", "--set",
            "plan.min_rollout_gpus=2"]


def simulated(experiment, rule):
    """`libra sim`'s libra mode with the pool: its JSON, the requests its pool made as (op,
    the step whose end asked) and the hybrids each step trained with."""
    # the simulator replays the trace whatever the seed, and refuses one; load's token ids take it
    seed = experiment.index("--seed")
    experiment = experiment[:seed] + experiment[seed + 2:]
    p = subprocess.run([LIBRA, "sim", *experiment, "--set", "ehp.signal=" + rule, "--set",
                        "sim.modes=libra", "--set", "ehp.enabled=true", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    sim = json.loads(p.stdout)["modes"]["libra"]
    requests, hybrids = [], []
    for k, st in enumerate(sim["steps"]):  # a step's record holds what the last step's end did
        d = st["pool"]["decisions"]
        requests += [("reclaim", k - 1)] * d["joins"]
        requests += [("lend", k - 1)] * (d["returned"] + d["cancelled"])
        hybrids.append((st["pool"]["train_gpus"] - sim["layout"]["train_gpus"]) //
                       sim["layout"]["pool"]["replica_gpus"])
    return sim, requests, hybrids


def live(experiment, rule, decisions):
    """The experiment live, the gateway's decisions into the path decisions: `libra load`'s
    JSON and the requests the gateway asked as (op, the step whose end asked)."""
    with Emu("--instances", "tp2x3", "--model", "qwen3-4b", "--hardware", "h20",
             scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        gw = Serve(urls[0] + ",tp=2", args=[
            "--set", "sched.buckets=tp2:40960", "--pool-steer", "--set", "ehp.signal=" + rule,
            "--batch", str(BATCH), "--set", "rl.max_staleness=0", "--decisions", str(decisions),
            "--pool-replica", urls[1] + ",tp=2", "--pool-replica", urls[2] + ",tp=2"])
        try:
            p = subprocess.run([LIBRA, "load", "--engines", gw.url, "--trainer", "--json",
                                "--time-scale", SCALE, *experiment], capture_output=True,
                               text=True, timeout=300,
                               env={**os.environ, "LIBRA_ADMIN_TOKEN": TOKEN})
        finally:
            rc, notes = gw.stop()
    assert p.returncode == 0 and rc == 0, (p.stderr, notes)
    requests = [(op, int(step)) for op, step in re.findall(
        r"pool: (reclaim|lend) of replica \d+ asked: signal at step (\d+)", notes)]
    return json.loads(p.stdout), requests
