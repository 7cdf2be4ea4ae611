#!/usr/bin/env python3
"""The drift experiment (docs/reproduction.md "Drift"): how each mode's layout, chosen at the
start, fares as the workload drifts.

Runs `libra sim examples/sim-drift-r2e-gym-qwen3-14b.json --batch B --json` for each batch and
prints, per mode, the layout, trained tokens/s over the run, and the mean step and training
time over the first and last WINDOW measured steps (markdown).

usage: bench/drift.py [--libra build/release/libra] [--batch 32,256] [--window 20]
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "sim-drift-r2e-gym-qwen3-14b.json")


def mean(steps, key):
    return sum(s[key] for s in steps) / len(steps)


def rows(result, window):
    for name, mode in sorted(result["modes"].items()):
        measured = mode["steps"][mode["run"]["warmup_steps"]:]
        first, last = measured[:window], measured[-window:]
        lay = mode["layout"]
        text = "all GPUs, " if lay["colocated"] else "%d train + " % lay["train_gpus"]
        yield (name, text + lay["instances"], mode["run"]["trained_tokens_per_s"], mean(first, "step_s"),
               mean(last, "step_s"), mean(first, "train_s"), mean(last, "train_s"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libra", default=os.path.join(ROOT, "build", "release", "libra"))
    ap.add_argument("--batch", default="32,256")
    ap.add_argument("--window", type=int, default=20)
    args = ap.parse_args()
    for batch in args.batch.split(","):
        cmd = [args.libra, "sim", EXAMPLE, "--batch", batch, "--json"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
        print(f"\n`libra sim examples/sim-drift-r2e-gym-qwen3-14b.json --batch {batch}`\n")
        print(f"| mode | layout | trained tokens/s | step s, first {args.window} | "
              f"step s, last {args.window} | train s, first | train s, last |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for r in rows(json.loads(out.stdout), args.window):
            print("| %s | %s | %.0f | %.1f | %.1f | %.1f | %.1f |" % r)


if __name__ == "__main__":
    main()
