#!/usr/bin/env python3
"""Each router's share of the oracle's gain in the simulator (docs/reproduction.md "Routers in
the simulator").

For the default experiment and the three paper setups (examples/sim-*-qwen3-*.json, their
heterogeneous layouts), `libra sim SETUP --set sim.modes=libra --set sched.policy=P --json` for
every policy P, and each policy's trained tokens/s as (P - load_balance) / (oracle -
load_balance): 0 is load_balance, 1 the oracle (which routes by the true remaining tokens). A
negative share loses to load_balance; the oracle routes by bucket thresholds, not by cost, so a
share above 1 is possible, and where the oracle does no better than load_balance the share is
undefined ("-"). Each cell: tokens/s, its change against load_balance, and the share.

usage: bench/route_sim_share.py [--libra build/release/libra] [--steps N] [--set KEY=VALUE ...]
(--set: passed to every run, e.g. --set sched.empirical_shrink=false)
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUPS = [None, "examples/sim-search-r1-qwen3-14b.json", "examples/sim-dapo-math-qwen3-4b.json",
          "examples/sim-r2e-gym-qwen3-14b.json"]
POLICIES = ["load_balance", "cmlfq", "cmlfq_h", "predictor", "plas", "la_mlfq", "length_aware",
            "oracle"]


def tokens_per_s(libra, setup, policy, steps, settings):
    args = [libra, "sim", *([os.path.join(ROOT, setup)] if setup else []), "--set",
            "sim.modes=libra", "--set", "sched.policy=" + policy, "--json"]
    for kv in settings:
        args += ["--set", kv]
    if steps:
        args += ["--steps", str(steps)]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}: {p.stderr}")
    doc = json.loads(p.stdout)["modes"]["libra"]
    return doc["run"]["trained_tokens_per_s"], doc["layout"]["instances"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libra", default=os.path.join(ROOT, "build", "release", "libra"))
    ap.add_argument("--steps", type=int, default=0, help="0: each setup's own rl.steps")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config key for every run")
    a = ap.parse_args()
    print("| setup | fleet | " + " | ".join(POLICIES) + " |")
    print("|---|---|" + "---|" * len(POLICIES))
    for setup in SETUPS:
        rate = {}
        for pol in POLICIES:
            rate[pol], fleet = tokens_per_s(a.libra, setup, pol, a.steps, a.set)
        lb, top = rate["load_balance"], rate["oracle"]
        cells = [f"{rate[p]:.0f} ({100 * (rate[p] / lb - 1):+.1f} %, "
                 + (f"{(rate[p] - lb) / (top - lb):+.2f})" if top > lb else "-)")
                 for p in POLICIES]
        print(f"| {setup or 'default'} | {fleet} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
