#!/usr/bin/env python3
"""Timing parity of `libra load` on `libra emu` against `libra sim --set sim.modes=rollout`.

For each workload and time scale: a trace (`libra trace gen WORKLOAD --steps 3 --batch 8
--samples 4 --seed 1`), the simulator's rollout mode on it (fleet tp1x4, load_balance routing),
then `libra load` on it against `libra emu --instances tp1x4` at that time scale, one batch at a
time as the rollout mode runs them (rl.max_staleness 0, weights after every step). Prints one
JSON line per (workload, scale) in bench/README.md's format: `value` is the largest relative
difference of a step's rollout time (load's wall time over the scale, against the simulator's
rollout_s), and `input` lists every step's ratio. tests/e2e/test_parity.py asserts the
deterministic part (trajectories, tokens, turns per instance); this prints the timing part and
asserts nothing.

Usage: bench/emu_parity.py [--libra PATH] [--scales 0.01,0.1] [--workloads r2e-gym,dapo-math]
"""

import argparse
import json
import os
import subprocess
import tempfile

SHAPE = ["--steps", "3", "--batch", "8", "--samples", "4"]


def run_json(args, timeout=1800):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(p.stdout)


def one(libra, workload, scale, tmp):
    trace = os.path.join(tmp, workload + ".jsonl")
    subprocess.run([libra, "trace", "gen", workload, *SHAPE, "--seed", "1", "-o", trace],
                   check=True)
    sim = run_json([libra, "sim", "--trace", trace, *SHAPE, "--json", "--set",
                    "sim.modes=rollout", "--set", "sched.policy=load_balance", "--set",
                    "sched.buckets=tp1x4:100000"])["modes"]["rollout"]["steps"]
    emu = subprocess.Popen([libra, "emu", "--instances", "tp1x4", "--time-scale", str(scale)],
                           stdout=subprocess.PIPE, text=True)
    try:
        urls = ",".join(json.loads(emu.stdout.readline())["url"] for _ in range(4))
        load = run_json([libra, "load", "--engines", urls, "--trace", trace, *SHAPE,
                         "--time-scale", str(scale), "--set", "rl.max_staleness=0", "--set",
                         "rl.sync_interval=1", "--json"])
    finally:
        emu.terminate()
        emu.wait(timeout=30)
    ratios = [s["wall_s"] / scale / t["rollout_s"] for s, t in zip(load["steps"], sim)]
    worst = max(abs(r - 1) for r in ratios)
    print(json.dumps({
        "input": "%s trace (3 steps of 8, seed 1), tp1x4 qwen3-14b a800-80g, time scale %g; "
                 "load/sim rollout time per step: %s"
                 % (workload, scale, ", ".join("%.3f" % r for r in ratios)),
        "instructions": None, "n": len(ratios), "name": "parity_%s_%g" % (workload, scale),
        "unit": "max |load/sim - 1|", "value": float("%.4g" % worst)}, sort_keys=True),
        flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libra", default="build/release/libra")
    ap.add_argument("--scales", default="0.01,0.1")
    ap.add_argument("--workloads", default="r2e-gym,dapo-math")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for w in a.workloads.split(","):
            for s in a.scales.split(","):
                one(a.libra, w, float(s), tmp)


if __name__ == "__main__":
    main()
