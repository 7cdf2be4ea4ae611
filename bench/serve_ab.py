#!/usr/bin/env python3
"""A live A/B of the gateway's routing: C-MLFQ against sticky least-requests, through
`libra serve`, on emulated engines and a fixed trace, beside what `libra sim` predicts for the
same fleet, trace and policies (docs/serve.md "A/B").

The trace is `libra trace gen WORKLOAD --steps S --batch B --samples n --seed 1`; the fleet is
`libra emu --instances FLEET` behind one gateway per arm (`--mode cmlfq`, `--mode shadow`: the
sticky router routes, C-MLFQ is only logged), driven by `libra load --trace` in synchronous RL
(rl.max_staleness=0, a weight update after every step, so the gateway's trees learn each step);
the prediction is `libra sim --set sim.modes=rollout` with sched.policy cmlfq and load_balance
on the same layout. Prints one JSON line per arm and source (rollout seconds per step, emulated
for the live runs: wall / time scale) and a table. Nothing is asserted.

Usage: bench/serve_ab.py [--libra PATH] [--workload W] [--steps S] [--batch B] [--samples n]
[--fleet SPEC] [--buckets LAYOUT] [--time-scale F]
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import urllib.request

# The gateway takes weight updates only with its admin token; libra load sends this one.
os.environ["LIBRA_ADMIN_TOKEN"] = secrets.token_hex(16)


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr))
    return p.stdout


def simulate(a, trace, policy):
    out = run([a.libra, "sim", "--trace", trace, "--steps", str(a.steps), "--batch",
               str(a.batch), "--samples", str(a.samples), "--json", "--set", "sim.modes=rollout",
               "--set", "sched.policy=" + policy, "--set", "sched.buckets=" + a.buckets])
    r = json.loads(out)["modes"]["rollout"]
    return [s["step_s"] for s in r["steps"]], r["run"]["requests_by_instance"]


class Proc:
    def __init__(self, cmd, lines):
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = [json.loads(self.p.stdout.readline()) for _ in range(lines)]

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=30)


def live(a, trace, mode):
    n = sum(int(x.split("x")[1]) if "x" in x else 1 for x in a.fleet.split(","))
    emu = Proc([a.libra, "emu", "--instances", a.fleet, "--time-scale", a.time_scale], n)
    try:
        args = [a.libra, "serve", "--mode", mode, "--set", "sched.buckets=" + a.buckets]
        for inst in emu.lines:
            args += ["--engine", inst["url"]]
        gw = Proc(args, 1)
        try:
            out = run([a.libra, "load", "--engines", gw.lines[0]["url"], "--trace", trace,
                       "--steps", str(a.steps), "--batch", str(a.batch), "--samples",
                       str(a.samples), "--time-scale", a.time_scale, "--set",
                       "rl.max_staleness=0", "--set", "rl.sync_interval=1", "--json"],
                      timeout=3600)
            with urllib.request.urlopen(gw.lines[0]["url"] + "/libra/v1/status") as r:
                served = [e["requests"] for e in json.load(r)["engines"]]
        finally:
            gw.stop()
    finally:
        emu.stop()
    doc = json.loads(out)
    scale = float(a.time_scale)
    return [s["wall_s"] / scale for s in doc["steps"]], served


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libra", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                    "release", "libra"))
    ap.add_argument("--workload", default="r2e-gym")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--fleet", default="tp1x2,tp2,tp4")
    ap.add_argument("--buckets", default="tp1x2:4000,tp2x1:12000,tp4x1:30000")
    ap.add_argument("--time-scale", default="0.01")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "ab.jsonl")
        run([a.libra, "trace", "gen", a.workload, "--steps", str(a.steps), "--batch",
             str(a.batch), "--samples", str(a.samples), "--seed", "1", "-o", trace])
        rows = []
        for policy, mode in (("cmlfq", "cmlfq"), ("load_balance", "shadow")):
            sim_steps, sim_req = simulate(a, trace, policy)
            live_steps, live_req = live(a, trace, mode)
            for source, steps, req in (("sim", sim_steps, sim_req), ("live", live_steps,
                                                                       live_req)):
                mean = sum(steps) / len(steps)
                print(json.dumps({"name": "serve_ab_%s_%s" % (policy, source), "unit": "s/step",
                                  "value": round(mean, 1), "n": len(steps),
                                  "input": "%s trace, %d steps x %d, fleet %s" % (
                                      a.workload, a.steps, a.batch, a.fleet),
                                  "instructions": None, "steps_s": [round(s, 1) for s in steps],
                                  "requests_by_instance": req}))
                rows.append((policy, source, mean, steps, req))
    print("\n%-13s %-5s %10s  %-40s %s" % ("router", "from", "mean s", "rollout s per step",
                                          "turns by instance"))
    for policy, source, mean, steps, req in rows:
        print("%-13s %-5s %10.1f  %-40s %s" % (policy, source, mean,
                                              " ".join("%.0f" % s for s in steps), req))


if __name__ == "__main__":
    main()
