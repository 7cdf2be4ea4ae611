#!/usr/bin/env python3
"""The elastic pool live, against the simple alternatives (docs/serve.md "Steering by the
signal"): what `libra serve --pool-steer` gives a trainer, on `libra emu` engines with `libra
load --trainer` playing the trainer, beside a pool left alone and one reclaimed up front.

The fleet: eight emulated TP1 engines serving Qwen3-4B on A800s at time scale 0.01, six of them
core rollout and two the hybrid replicas of the pool; the trainer's layout is the experiment's,
split into a core and hybrid replicas as `libra sim`'s pool splits it, and each step is the
cost model's time for its batch with the hybrids the gateway shows active (docs/load.md "The
trainer's step"). Two scenarios,
each on a fresh gateway. In the first, two jobs run one after the other through the same
gateway, as `tests/e2e/test_serve_pool.py` runs them:

  training-bound  Search-R1, batch 150, 12 steps, a Qwen3-32B trainer on H20s
  rollout-bound   DAPO-Math, batch 32, 5 steps, a Qwen3-4B trainer (it carries on from the
                  first job's last step)

In the second, one job drifts from the first kind toward the second:

  drifting        Search-R1 whose turns grow 8-fold and whose trajectories take more turns over
                  8 versions (a preset of this file), batch 150, 24 steps, the 32B trainer

Three policies for the pool:

  rollout   no steering: the replicas serve rollout throughout (the pool's default)
  train     no steering, both replicas reclaimed before the first job: they train throughout
  steered   --pool-steer: the gateway lends and reclaims by the signal

For each policy and repetition it prints each job's wall seconds (the `libra load` process,
start to exit) and the generated tokens of the batches it trained per wall second, then the medians with the
interquartile range, and each job's lends and reclaims. Markdown on stdout; --json for the
raw runs. Wall figures on a shared machine: compare the policies within one run.

usage: bench/pool_live.py [--libra build/release/libra] [--reps 3]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from procutil import quartiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "bench-pool-live-admin-token-0123456789"
SCALE = "0.01"
BUCKETS = ["--set", "sched.buckets=tp1:40960"]
# Each scenario runs its jobs one after the other through one gateway.
SCENARIOS = {
    "two jobs": {
        "training-bound": ["--workload", "search-r1", "--batch", "150", "--steps", "12",
                           "--model", "qwen3-32b", "--hardware", "h20"],
        "rollout-bound": ["--workload", "dapo-math", "--batch", "32", "--steps", "5", "--model",
                          "qwen3-4b"],
    },
    "drift": {
        "drifting": ["--presets", "PRESETS", "--workload", "search-r1-drift-8", "--batch", "150",
                     "--steps", "24", "--model", "qwen3-32b", "--hardware", "h20"],
    },
}
# Search-R1 whose turns grow 8-fold and whose trajectories take more turns over 8 versions.
DRIFT = {"workloads": [{"name": "search-r1-drift-8", "base": "search-r1",
                        "drift": {"enabled": True, "versions": 8, "generated_scale": 8,
                                  "finish_logit": -4}}]}
POLICIES = ("rollout", "train", "steered")


def call(url, method="GET", body=None):
    req = urllib.request.Request(url, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + TOKEN,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def until(fn, what, limit_s=60):
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    sys.exit("never: " + what)


def start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "LIBRA_ADMIN_TOKEN": TOKEN})


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)


def run_policy(libra, policy, jobs, presets):
    """One repetition: the jobs through a fresh gateway; returns {job: figures}."""
    emu = start([libra, "emu", "--instances", "tp1x8", "--model", "qwen3-4b", "--time-scale",
                 SCALE])
    urls = [json.loads(emu.stdout.readline())["url"] for _ in range(8)]
    args = [libra, "serve", "--listen", "127.0.0.1:0", "--workload", "search-r1", "--batch",
            "150", *BUCKETS]
    for u in urls[:6]:
        args += ["--engine", u]
    for u in urls[6:]:
        args += ["--pool-replica", u + ",tp=1"]
    if policy == "steered":
        args.append("--pool-steer")
    gw = start(args)
    base = json.loads(gw.stdout.readline())["url"]
    try:
        if policy == "train":
            for h in (0, 1):
                call(base + "/libra/v1/pool/reclaim", "POST", {"replica": h, "reason": "bench"})
            until(lambda: all(r["ready"] for r in call(base + "/libra/v1/pool")["requests"]),
                  "the reclaims are ready")
        out = {}
        for name, job in jobs.items():
            job = [presets if a == "PRESETS" else a for a in job]
            before = call(base + "/libra/v1/pool")["counts"]
            t0 = time.monotonic()
            p = subprocess.run([libra, "load", "--engines", base, "--trainer", "--json",
                                "--time-scale", SCALE, "--set", "rl.sync_interval=1", *job,
                                *BUCKETS], capture_output=True, text=True,
                               env={**os.environ, "LIBRA_ADMIN_TOKEN": TOKEN})
            wall = time.monotonic() - t0
            if p.returncode != 0:
                sys.exit(f"{policy} {name}: libra load exit {p.returncode}: {p.stderr.strip()}")
            doc = json.loads(p.stdout)
            after = call(base + "/libra/v1/pool")["counts"]
            tokens = sum(s["generated_tokens"] for s in doc["steps"])
            out[name] = {"wall_s": wall, "tokens_per_s": tokens / wall,
                         "reclaims": after["reclaims"] - before["reclaims"],
                         "lends": after["lends"] - before["lends"]}
        return out
    finally:
        stop(gw)
        stop(emu)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--libra", default=os.path.join(ROOT, "build/release/libra"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print the raw runs as JSON")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        presets = os.path.join(tmp, "drift.json")
        with open(presets, "w") as f:
            json.dump(DRIFT, f)
        runs = {p: [] for p in POLICIES}
        for _ in range(a.reps):  # interleaved, so that the machine's noise hits every policy
            for p in POLICIES:
                one = {}
                for jobs in SCENARIOS.values():
                    one.update(run_policy(a.libra, p, jobs, presets))
                runs[p].append(one)
    if a.json:
        print(json.dumps(runs, indent=1))
        return
    print(f"| job | pool | wall s, median (IQR) | generated tokens/s, median | vs rollout | "
          f"reclaims | lends |")
    print("|---|---|---|---:|---:|---:|---:|")
    for job in [j for jobs in SCENARIOS.values() for j in jobs]:
        base = quartiles([r[job]["wall_s"] for r in runs["rollout"]])[1]
        for p in POLICIES:
            q1, med, q3 = quartiles([r[job]["wall_s"] for r in runs[p]])
            tps = quartiles([r[job]["tokens_per_s"] for r in runs[p]])[1]
            rec = "/".join(str(r[job]["reclaims"]) for r in runs[p])
            lend = "/".join(str(r[job]["lends"]) for r in runs[p])
            print(f"| {job} | {p} | {med:.2f} ({q1:.2f}-{q3:.2f}) | {tps:,.0f} | "
                  f"{base / med:.2f}x | {rec} | {lend} |")


if __name__ == "__main__":
    main()
