#!/usr/bin/env python3
"""Routers judged by regret on every workload preset and on the real set (docs/routing.md
"Regret, measured").

Each preset's trace is `libra trace gen PRESET --steps STEPS --seed SEED`, evaluated
prequentially after TRAIN steps under its paper setup (examples/sim-*.json) twice: with the
paper's bucket layout (the setup's sched.buckets, where it names one), and with the layout the
planner bands from the trace's own lengths on that cluster (`--set sched.buckets=`). The real
set is tau-bench's airline runs (bench/data/tau-bench), imported, cross-validated
leaving tasks out (`--folds 5`) under the R2E-Gym paper setup's cluster: its paper layout and
the planner's banding. Prints one markdown table per trace
and, last, whether cmlfq_h's mean regret per decision is at most the majority class's, PLAS's
and the predictor's on every one (exit 1 if not).

usage: bench/route_regret.py [--libra build/release/libra] [--steps 40] [--seed 1]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(ROOT, "bench", "data", "tau-bench", "gpt-4o-airline.json")
PRESETS = [  # preset, its paper setup
    ("search-r1", "examples/sim-search-r1-qwen3-14b.json"),
    ("dapo-math", "examples/sim-dapo-math-qwen3-4b.json"),
    ("dapo-math-verl", "examples/sim-dapo7b-h20-32-colocated.json"),
    ("r2e-gym", "examples/sim-r2e-gym-qwen3-14b.json"),
]
BASELINES = ("majority class", "plas", "predictor")
LAYOUTS = [("paper layout", []), ("planner's banding", ["--set", "sched.buckets="])]


def run(libra, *args):
    p = subprocess.run([libra, *args], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"{' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p.stdout


def cell(x, digits):
    """A regret as text: N/A where null (load_balance's own, docs/routing.md "Metrics")."""
    return "N/A" if x is None else f"{x:.{digits}f}"


def table(title, doc):
    """Prints the regret table of one route eval document; returns {row: per-decision regret}."""
    pol = doc["policies"]
    fixed = next(iter(pol.values()))["all"]["regret"]
    rows = [(name, m["all"]["regret"]) for name, m in pol.items()]
    rows += [("majority class", fixed["majority_class"]), ("best constant", fixed["best_constant"])]
    rg = doc["regret"]
    deadline = (f"deadline {rg['deadline_s']:.0f} s, {rg['late_gpus']} GPUs" if "deadline_s" in rg
                else "no deadline: " + rg["no_deadline"])
    print(f"\n{title}: buckets {doc['buckets']}, {deadline}, "
          f"{fixed['decisions']} decisions\n")
    print("| policy | regret / decision | regret / trajectory | path regret / trajectory |")
    print("|---|---|---|---|")
    out = {}
    for name, r in rows:
        label = name + (f" (bucket {r['bucket']})" if "bucket" in r else "")
        print(f"| {label} | {cell(r['per_decision_gpu_s'], 3)} | "
              f"{cell(r['per_trajectory_gpu_s'], 2)} | {cell(r['path_per_trajectory_gpu_s'], 2)} |")
        out[name] = r["per_decision_gpu_s"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libra", default=os.path.join(ROOT, "build", "release", "libra"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train", type=int, default=2)
    a = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for preset, setup in PRESETS:
            trace = os.path.join(tmp, preset + ".jsonl")
            run(a.libra, "trace", "gen", preset, "--steps", str(a.steps), "--seed", str(a.seed),
                "-o", trace)
            for how, extra in LAYOUTS:
                doc = json.loads(run(a.libra, "route", "eval", trace, "--config",
                                     os.path.join(ROOT, setup), *extra, "--train-steps",
                                     str(a.train), "--json"))
                results[f"{preset}, {how}"] = table(
                    f"{preset} ({setup}, {a.steps} steps, seed {a.seed}), {how}", doc)
        trace = os.path.join(tmp, "tau.jsonl")
        run(a.libra, "trace", "import", "--from", "tau-bench", REAL, "-o", trace)
        for how, extra in LAYOUTS:
            doc = json.loads(run(a.libra, "route", "eval", trace, "--folds", "5", "--config",
                                 os.path.join(ROOT, PRESETS[3][1]), *extra, "--json"))
            results[f"tau-bench airline (real), {how}"] = table(
                f"tau-bench airline, GPT-4o (real; 5-fold leave-tasks-out), {how}", doc)
    print()
    ok = True
    for trace, r in results.items():
        worse = [b for b in BASELINES if r["cmlfq_h"] > r[b] + 1e-9]
        ok &= not worse
        print(f"{trace}: cmlfq_h {r['cmlfq_h']:.3f}"
              + (f" above {', '.join(worse)}" if worse else " <= " + ", ".join(BASELINES)))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
