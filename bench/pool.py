#!/usr/bin/env python3
"""The elastic pool's ablation (docs/reproduction.md "The elastic pool"): libra with and
without the pool, and the pool under the reference's signal rule, on the three paper setups
and the drift experiment.

For each experiment runs `libra sim FILE --set sim.modes=libra --steps STEPS --seed-list SEEDS
--sweep ehp.enabled=false,true --json` and the pool alone with `--set ehp.signal=reference`,
and prints, per experiment, the median trained tokens/s over the seeds with its interquartile
range, the ratios to libra without the pool, and the pool's decisions over the
runs (joins requested, made active, returned). Markdown on stdout.

usage: bench/pool.py [--libra build/release/libra] [--steps 40] [--seeds 1,2,3]
"""

import argparse
import json
import os
import subprocess
import sys

from procutil import quartiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPERIMENTS = ["sim-r2e-gym-qwen3-14b", "sim-search-r1-qwen3-14b", "sim-dapo-math-qwen3-4b",
               "sim-drift-r2e-gym-qwen3-14b"]


def cells(libra, path, steps, seeds, enabled, *extra):
    cmd = [libra, "sim", path, "--set", "sim.modes=libra", "--steps", str(steps),
           "--seed-list", seeds, "--sweep", "ehp.enabled=" + enabled, "--json", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
    by = {}
    for c in json.loads(out.stdout)["cells"]:
        if "error" in c:
            sys.exit(f"{path}: cell {c['set']} seed {c['seed']}: {c['error']['message']}")
        mode = c["result"]["modes"]["libra"]
        key = c["set"]["ehp.enabled"]
        run = mode["run"]
        decisions = run.get("pool", {}).get("decisions", {})
        hybrids = mode["layout"].get("pool", {}).get("hybrid_replicas", 0)
        by.setdefault(key, []).append((run["trained_tokens_per_s"], decisions, hybrids))
    return by


def summary(runs):
    q1, med, q3 = quartiles([r[0] for r in runs])
    joins = sum(r[1].get("joins", 0) for r in runs)
    active = sum(r[1].get("activated", 0) for r in runs)
    returned = sum(r[1].get("returned", 0) for r in runs)
    return med, q1, q3, joins, active, returned, runs[0][2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libra", default=os.path.join(ROOT, "build", "release", "libra"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seeds", default="1,2,3")
    args = ap.parse_args()
    print(f"libra only, {args.steps} steps, seeds {args.seeds}: median trained tokens/s "
          "[IQR]; decisions summed over the seeds\n")
    print("| experiment | no pool | pool (balance) | pool (reference rule) | balance / no pool | "
          "reference / no pool | hybrids | joins, active, returned (balance) | "
          "joins, active, returned (reference) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for name in EXPERIMENTS:
        path = os.path.join(ROOT, "examples", name + ".json")
        bal = cells(args.libra, path, args.steps, args.seeds, "false,true")
        ref = cells(args.libra, path, args.steps, args.seeds, "true",
                    "--set", "ehp.signal=reference")
        off, on, rr = summary(bal["false"]), summary(bal["true"]), summary(ref["true"])
        print("| %s | %.0f [%.0f–%.0f] | %.0f [%.0f–%.0f] | %.0f [%.0f–%.0f] | %.2f | %.2f | %d | "
              "%d, %d, %d | %d, %d, %d |" % (
                  name, off[0], off[1], off[2], on[0], on[1], on[2], rr[0], rr[1], rr[2],
                  on[0] / off[0], rr[0] / off[0], on[6], on[3], on[4], on[5], rr[3], rr[4],
                  rr[5]))


if __name__ == "__main__":
    main()
