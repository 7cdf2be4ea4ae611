#!/usr/bin/env python3
"""How often libra's verification picks a candidate that a longer run ranks lower
(docs/planner.md §8).

For each experiment and each sim.seed of --seed-list (1, 2, 3), `libra sim EXPERIMENT --set
sim.modes=libra --json` runs the planner's verification as it is (plan.verify_steps 15: each
candidate 2 + 15 steps on a seed derived from sim.seed, the close ones again on a second) and
keeps its choice. The same command with `--set plan.verify_steps=LONG` on judging seeds 11, 12
and 13 then simulates every candidate for LONG measured steps on each judging seed's own
verification seed; a candidate's long figure is its median over the three. Each choice is
judged against the best candidate by that figure (the candidates differ a little from run to
run: the pattern search around the fastest adds some that depend on the short figures).
Reported per experiment: the best by the long runs, and per verification its choice, the
choice's long figure over the best's (1.000: no loss) and its rank among the long figures.

The experiments: the built-in default (R2E-Gym at batch 32), the Search-R1 and DAPO-Math setups
with the planner free as bench/regime.py runs them (examples/sim-search-r1-qwen3-14b.json and
sim-dapo-math-qwen3-4b.json with plan.tp_pattern and sched.buckets cleared), Search-R1 at batch
125, and three cells of the regime study whose 30-step rates had settled least.
Runs use Debian's /usr/bin/python3 and the standard library only.
  bench/misrank.py [--libra build/release/libra] [--long 58] [--seed-list 1,2,3] [--jobs 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FREE = ["plan.tp_pattern=", "sched.buckets=", "plan.min_train_gpus=8", "plan.min_rollout_gpus=8",
        "sim.planner=true"]
R2E, SR1, DAPO = ("examples/sim-r2e-gym-qwen3-14b.json", "examples/sim-search-r1-qwen3-14b.json",
                  "examples/sim-dapo-math-qwen3-4b.json")
NO_REPLAN = ["plan.replan_interval_steps=0", "plan.replan_pressure=false"]
EXPERIMENTS = [
    ("default (R2E-Gym, batch 32)", None, []),
    ("Search-R1, batch 320", SR1, FREE),
    ("Search-R1, batch 125", SR1, FREE + ["rl.batch_trajectories=125"]),
    ("DAPO-Math, batch 512", DAPO, FREE),
    # cells of the regime study whose 30-step rates had settled least (docs/reproduction.md)
    ("R2E-Gym, staleness 8, weights every 5 steps", R2E,
     FREE + ["rl.max_staleness=8", "rl.sync_interval=5"]),
    ("Search-R1, staleness 8, weights every 5 steps, pool", SR1,
     FREE + ["rl.max_staleness=8", "rl.sync_interval=5", "ehp.enabled=true"] + NO_REPLAN),
    ("DAPO-Math, weights every 3 steps", DAPO, FREE + ["rl.sync_interval=3"]),
]
JUDGING_SEEDS = [11, 12, 13]  # none is a judged seed


def key(c):
    """A candidate as the verification lists it: its training GPUs, fleet and kind."""
    return (c["train_gpus"], c["instances"], c["colocated"])


def verification(args, example, sets, seed, steps=None):
    """The candidates' figures of one verification: {key: (tokens/s, chosen)}."""
    cmd = [args.libra, "sim"] + ([os.path.join(ROOT, example)] if example else [])
    for s in sets + ["sim.modes=libra"] + ([f"plan.verify_steps={steps}"] if steps else []):
        cmd += ["--set", s]
    cmd += ["--seed", str(seed), "--jobs", str(args.jobs), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    v = json.loads(p.stdout)["modes"]["libra"]["planner"]["verification"]
    return {key(c): (c["trained_tokens_per_s"], c["chosen"]) for c in v["candidates"]}, v["steps"]


def name(k):
    train, instances, colocated = k
    return f"colocated {instances}" if colocated else f"{train} + {instances}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libra", default=os.path.join(ROOT, "build", "release", "libra"))
    ap.add_argument("--long", type=int, default=58, help="plan.verify_steps of the judging runs")
    ap.add_argument("--seed-list", default="1,2,3", help="sim.seed of the verifications judged")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    seeds = [int(x) for x in args.seed_list.split(",")]
    print(f"| experiment | best by plan.verify_steps={args.long} (median of seeds "
          f"{JUDGING_SEEDS[0]}-{JUDGING_SEEDS[-1]}) | verified choice (plan.verify_steps 15) by "
          "seed: choice / best, rank |")
    print("|---|---|---|")
    losses = []
    for label, example, sets in EXPERIMENTS:
        shorts = {seed: verification(args, example, sets, seed)[0] for seed in seeds}
        longs = {}
        for seed in JUDGING_SEEDS:
            figures, long_steps = verification(args, example, sets, seed, args.long)
            for k, (x, _) in figures.items():
                if x is not None:
                    longs.setdefault(k, []).append(x)
        judged = {k: statistics.median(xs) for k, xs in longs.items()
                  if len(xs) == len(JUDGING_SEEDS)}
        best = max(judged, key=judged.get)
        ranked = sorted(judged, key=judged.get, reverse=True)
        cells = []
        for seed, short in shorts.items():
            chosen = next(k for k, (_, c) in short.items() if c)
            if chosen not in judged:
                cells.append(f"{seed}: {name(chosen)}, not among the long runs' candidates")
                continue
            losses.append(judged[chosen] / judged[best])
            cells.append(f"{seed}: {name(chosen)} {losses[-1]:.3f}, {ranked.index(chosen) + 1}")
        print(f"| {label} | {name(best)} ({judged[best]:.0f}; {long_steps} steps, "
              f"{len(judged)} candidates) | {'; '.join(cells)} |", flush=True)
    print(f"\n{len(losses)} verifications judged; the choice below 0.98 of the best in "
          f"{sum(1 for x in losses if x < 0.98)}, the least {min(losses):.3f}.")


if __name__ == "__main__":
    main()
