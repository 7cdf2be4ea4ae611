#!/usr/bin/env python3
"""What adapting the layout to drift could buy (docs/reproduction.md "The bound on adapting"):
every static async layout of an experiment (by default the drift experiment), and an oracle
that switches between them for free, beside the modes as they ship.

For each experiment and batch, one `libra sim FILE --batch B --set sim.modes=async --sweep
sim.async_train_gpus=... --sweep sim.async_tp=... --seed-list SEEDS --json` simulates every
static split and rollout TP for the whole run, and two `libra sim FILE --batch B --seed-list
SEEDS --sweep ehp.enabled=false,true --json` the modes (colocated and async tuned on the first
steps, libra planned and verified), libra with and without online replanning (off:
plan.replan_interval_steps=0 and plan.replan_pressure=false) and with and without the elastic
pool. Per seed:

- best static in hindsight: the grid cell with the most trained tokens per second over the
  measured steps of the whole run (a sweep run after the fact: no static layout does better);
- switching oracle: the run cut into windows of W measured steps, each window on the cell that
  is fastest in it, with no switching cost and no transient (an upper bound on any replanning
  among these layouts: a replanner pays to switch and cannot know a window before it runs).

Prints trained tokens/s per row, median [interquartile range] over the seeds, and each row's
median ratio to libra's static plan. Rates of grid cells and the oracle are Σ trained tokens
over Σ step seconds of the measured steps, the definition of the run's trained_tokens_per_s.

usage: bench/hindsight.py [--libra build/release/libra] [--example NAME ...] [--batch 32,256]
                          [--seeds 1,2,3,4,5] [--window 20] [--splits 8,16,24,32,40]
                          [--tp 1,2,4,8] [--steps N] [--set KEY=VALUE ...]
(--example: a file of examples/ without .json, repeatable, default sim-drift-r2e-gym-qwen3-14b;
--batch: default the file's own batch; --steps: default the file's own length; --set: passed
to every run, e.g. the regime study's sets that free libra's planner from a file's reference
layout)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

from procutil import quartiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTRA = []  # --steps and --set, passed to every run


def sim(libra, example, *args):
    cmd = [libra, "sim", os.path.join(ROOT, "examples", example + ".json"), *EXTRA, *args,
           "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):  # 1: some cells failed, each says why
        sys.exit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)["cells"]


def measured(mode):
    return mode["steps"][mode["run"]["warmup_steps"]:]


def rate(steps):
    return sum(s["trained_tokens"] for s in steps) / sum(s["step_s"] for s in steps)


def grid(libra, example, batch, seeds, splits, tps):
    """{seed: {(train GPUs, tp): measured steps}}; infeasible cells are left out."""
    by = {}
    for c in sim(libra, example, *batch, "--set", "sim.modes=async", "--seed-list", seeds,
                 "--sweep", "sim.async_train_gpus=" + splits, "--sweep", "sim.async_tp=" + tps):
        if "error" in c:
            continue  # a split whose training does not fit, or a TP the model does not fit
        key = (int(c["set"]["sim.async_train_gpus"]), int(c["set"]["sim.async_tp"]))
        by.setdefault(c["seed"], {})[key] = measured(c["result"]["modes"]["async"])
    return by


def oracle(cells, window):
    """Trained tokens/s of the fastest cell in each window of measured steps."""
    n = min(len(s) for s in cells.values())
    tokens = seconds = 0.0
    for a in range(0, n, window):
        best = max(cells.values(), key=lambda s: rate(s[a:a + window]))
        tokens += sum(s["trained_tokens"] for s in best[a:a + window])
        seconds += sum(s["step_s"] for s in best[a:a + window])
    return tokens / seconds


NO_REPLAN = ("--set", "plan.replan_interval_steps=0", "--set", "plan.replan_pressure=false")


def shipped(libra, example, batch, seeds):
    """{row: {seed: trained tokens/s}} of the modes as they ship, libra with and without online
    replanning and the pool, and seed 1's layouts."""
    rows, layouts = {}, {}
    cells = [(c, False) for c in sim(libra, example, *batch, *NO_REPLAN, "--set",
                                    "sim.modes=colocated,async,libra", "--seed-list", seeds,
                                    "--sweep", "ehp.enabled=false,true")]
    cells += [(c, True) for c in sim(libra, example, *batch, "--set", "sim.modes=libra",
                                    "--seed-list", seeds, "--sweep", "ehp.enabled=false,true")]
    for c, replan in cells:
        if "error" in c:
            sys.exit(f"{example} seed {c['seed']}: {c['error']['message']}")
        pool = c["set"]["ehp.enabled"] == "true"
        for name, mode in c["result"]["modes"].items():
            if pool and name != "libra":
                continue
            row = name + (" + replanning" if replan else "") + (" + pool" if pool else "")
            if row == "libra":
                row = "libra (static plan)"
            rows.setdefault(row, {})[c["seed"]] = mode["run"]["trained_tokens_per_s"]
            lay = mode["layout"]
            if c["seed"] == int(seeds.split(",")[0]):
                layouts[row] = ("%d train + %s" % (lay["train_gpus"], lay["instances"])
                                if not lay["colocated"] else "all GPUs, " + lay["instances"])
    return rows, layouts


def table(args, example, batch):
    cells = grid(args.libra, example, batch, args.seeds, args.splits, args.tp)
    rows, layouts = shipped(args.libra, example, batch, args.seeds)
    hindsight, switching, picks = {}, {}, {}
    for seed, by in cells.items():
        best = max(by, key=lambda k: rate(by[k]))
        hindsight[seed] = rate(by[best])
        picks.setdefault(best, 0)
        picks[best] += 1
        switching[seed] = oracle(by, args.window)
    rows["best static in hindsight"] = hindsight
    layouts["best static in hindsight"] = ", ".join(
        "%d train + TP%d (%d of %d seeds)" % (k[0], k[1], v, len(cells))
        for k, v in sorted(picks.items()))
    rows[f"switching oracle (every {args.window} steps)"] = switching
    base = rows["libra (static plan)"]
    print(f"\n`{example}` {' '.join(batch)}, seeds {args.seeds}: trained tokens/s, median [IQR]\n")
    print("| row | layout | trained tokens/s | / libra (static) |")
    print("|---|---|---:|---:|")
    for row, by in rows.items():
        q1, med, q3 = quartiles(list(by.values()))
        ratio = statistics.median(by[s] / base[s] for s in by)
        print("| %s | %s | %.0f [%.0f–%.0f] | %.3f |" % (row, layouts.get(row, "per window"), med,
                                                         q1, q3, ratio))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libra", default=os.path.join(ROOT, "build", "release", "libra"))
    ap.add_argument("--example", action="append")
    ap.add_argument("--batch", default="")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--splits", default="8,16,24,32,40")
    ap.add_argument("--tp", default="1,2,4,8")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    if args.steps:
        EXTRA.extend(["--steps", str(args.steps)])
    for kv in args.set:
        EXTRA.extend(["--set", kv])
    batches = [["--batch", b] for b in args.batch.split(",")] if args.batch else [[]]
    for example in args.example or ["sim-drift-r2e-gym-qwen3-14b"]:
        for batch in batches:
            table(args, example, batch)


if __name__ == "__main__":
    main()
