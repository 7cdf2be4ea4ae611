"""Parity of `libra load` against `libra emu` with `libra sim --set sim.modes=rollout`
(docs/load.md "Parity"): on a fixed trace and fleet, with the same routing rule (sticky, first
turn to the least-loaded instance: the simulator's load_balance policy) and one batch at a time
(no staleness: each batch starts on the weights the one before it trained), the deterministic
part of a run is the same — the trajectories finished per step, their generated tokens, and
the turns served in all, each once. Which instance serves a trajectory follows the order in
which nearly simultaneous turns finish on the wall clock (a few milliseconds of HTTP and timer
overhead per turn, more in a sanitized build, can swap two of them, and sticky routing carries
the swap on), so the split among instances is not asserted; neither is the timing part, a bench
figure (bench/emu_parity.py)."""

import json
import subprocess

import pytest

from emu_util import LIBRA, Emu

STEPS, BATCH, SAMPLES = 3, 8, 4
SHAPE = ["--steps", str(STEPS), "--batch", str(BATCH), "--samples", str(SAMPLES)]


@pytest.mark.parametrize("workload", ["r2e-gym", "dapo-math"])
def test_load_on_emulated_engines_reproduces_the_simulated_rollout(tmp_path, workload):
    trace = str(tmp_path / "t.jsonl")
    subprocess.run([LIBRA, "trace", "gen", workload, *SHAPE, "--seed", "1", "-o", trace],
                   check=True, timeout=60)
    sim = subprocess.run(
        [LIBRA, "sim", "--trace", trace, *SHAPE, "--json", "--set", "sim.modes=rollout",
         "--set", "sched.policy=load_balance", "--set", "sched.buckets=tp1x4:100000"],
        capture_output=True, text=True, timeout=120)
    assert sim.returncode == 0, sim.stderr
    rollout = json.loads(sim.stdout)["modes"]["rollout"]
    with Emu("--instances", "tp1x4") as emu:
        urls = ",".join(i["url"] for i in emu.instances)
        load = subprocess.run(
            [LIBRA, "load", "--engines", urls, "--trace", trace, *SHAPE, "--time-scale", "0.01",
             "--set", "rl.max_staleness=0", "--set", "rl.sync_interval=1", "--json"],
            capture_output=True, text=True, timeout=240)
    assert load.returncode == 0, load.stderr
    got = json.loads(load.stdout)
    assert [s["trajectories"] for s in got["steps"]] == [s["trajectories"] for s in rollout["steps"]]
    assert [s["generated_tokens"] for s in got["steps"]] == \
        [s["trained_tokens"] for s in rollout["steps"]]
    served = [e["turns"] for e in got["engines"]]
    assert sum(served) == sum(rollout["run"]["requests_by_instance"]) and all(served), served
    assert sum(s["resubmitted"] for s in got["steps"]) == 0
