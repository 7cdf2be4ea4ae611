#!/usr/bin/env python3
"""Planner fidelity and plans that win, on the default experiment, every file in examples/ and
random experiments from a seeded generator (docs/planner.md §7).

  fidelity  the analytic prediction (plan.verify_candidates 0) against a full-length
            simulation: libra sim's libra mode on sim.seed 2 while the planner's length sample
            is drawn at plan.sample_seed 1; the ratio simulated / predicted step
  colocated the planner's colocated plan of each TP size (plan.mode colocated, plan.tp_pattern
            of that size, no verification) against the simulator's colocated mode pinned to
            the same TP for the experiment's whole length on sim.seed 2; the ratio simulated /
            predicted step per TP size
  wins      libra's verified plan, the analytic plan, the tuned async split and colocated, in
            trained tokens/s on seeds 2-4 (--seed-list; medians), the length sample at seed 1
            and the verification on a seed derived from each run's; the planner free (an
            example's plan.tp_pattern and sched.buckets cleared)

Each experiment is one libra command (its cells on --jobs threads); experiments run one after
another. libra's layout is always the planner's (sim.planner true, also where an example pins a
fleet). An experiment the generator draws that libra refuses (no feasible plan, a setting the
job cannot run) is reported with its error and replaced by the next draw.

  bench/fidelity.py fidelity --random 30 [--libra build/release/libra] [--seed 1]
  bench/fidelity.py wins --random 30
  bench/fidelity.py colocated --random 30
"""

import argparse
import glob
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARDWARE = ["a100-80g", "a800-80g", "h100-sxm", "h800", "h20", "h200"]
MODELS = ["qwen3-4b", "qwen3-8b", "qwen2.5-7b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b"]
WORKLOADS = {"r2e-gym": 4, "search-r1": 5, "dapo-math": 16, "dapo-math-verl": 16}
SYNC_MODES = ["drain", "abort_resume", "keep"]
TRANSPORTS = ["nccl", "disk_reload", "disk_restart"]
STEPS = 30


def log_uniform_int(rng, lo, hi):
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def random_experiment(rng):
    """One experiment: hardware, model, workload, 16-512 GPUs, a batch of 32-2048 whole groups,
    staleness 0-8, a sync interval that fits it, a sync mode and a transport."""
    workload = rng.choice(sorted(WORKLOADS))
    samples = WORKLOADS[workload]
    groups = log_uniform_int(rng, math.ceil(32 / samples), 2048 // samples)
    staleness = rng.randint(0, 8)
    interval = rng.choice([s for s in (1, 2, 5) if s <= staleness + 1])
    return {
        "cluster": {"hardware": rng.choice(HARDWARE), "gpus": 8 * log_uniform_int(rng, 2, 64)},
        "model": {"name": rng.choice(MODELS)},
        "workload": {"name": workload},
        "rl": {"batch_trajectories": groups * samples, "samples": samples,
               "max_staleness": staleness, "sync_interval": interval,
               "sync_mode": rng.choice(SYNC_MODES), "transport": rng.choice(TRANSPORTS),
               "steps": STEPS},
    }


def describe(exp):
    c, rl = exp["cluster"], exp["rl"]
    return (f"{c['gpus']} {c['hardware']}, {exp['model']['name']}, {exp['workload']['name']}, "
            f"B {rl['batch_trajectories']}, k {rl['max_staleness']}, every {rl['sync_interval']} "
            f"by {rl['sync_mode']}+{rl['transport']}")


def run_libra(libra, path, args, jobs):
    p = subprocess.run([libra, "sim", path, "--json", "--jobs", str(jobs), "--set",
                        "plan.sample_seed=1", "--set", "sim.planner=true", *args],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    return json.loads(p.stdout), None


def fidelity(libra, path, jobs):
    doc, err = run_libra(libra, path, ["--set", "sim.modes=libra", "--set",
                                       "plan.verify_candidates=0", "--seed", "2"], jobs)
    if err:
        return None, err
    mode = doc["modes"]["libra"]
    pred, sim = mode["planner"]["predicted"], mode["planner"]["simulated"]
    return {"predicted_s": pred["step_s"], "simulated_s": sim["step_s"],
            "ratio": sim["step_s"] / pred["step_s"],
            "bound": mode["planner"].get("bound_by", ""),
            "layout": f"{mode['layout']['train_gpus']} + {mode['layout']['instances']}"}, None


def colocated(libra, path, jobs):
    """simulated / predicted step of the colocated plan of each TP size the planner finds."""
    out = {}
    for tp in (1, 2, 4, 8):
        pattern = ",".join([str(tp)] * (8 // tp))
        p = subprocess.run([libra, "plan", path, "--json", "--set", "plan.mode=colocated", "--set",
                            f"plan.tp_pattern={pattern}", "--set", "plan.verify_candidates=0",
                            "--set", "plan.sample_seed=1"], capture_output=True, text=True)
        if p.returncode != 0 or not json.loads(p.stdout)["feasible"]:
            continue
        predicted = json.loads(p.stdout)["objective"]["step_s"]
        doc, err = run_libra(libra, path, ["--set", "sim.modes=colocated", "--set",
                                           f"sim.colocated_tp={tp}", "--seed", "2"], jobs)
        if err:
            continue
        out[f"tp{tp}"] = doc["modes"]["colocated"]["run"]["mean_step_s"] / predicted
    return (out, None) if out else (None, "no colocated plan both plans and simulates")


def cells_by_mode(doc):
    """Trained tokens/s per mode for each seed of a --seed-list sweep document."""
    out = {}
    for cell in doc["cells"]:
        if "error" in cell:
            continue
        for name, mode in cell["result"]["modes"].items():
            out.setdefault(name, []).append(mode["run"]["trained_tokens_per_s"])
    return out


def wins(libra, path, jobs):
    # the planner free: an example's pinned fleet or buckets are its reference layout, not a plan
    seeds = ["--seed-list", "2,3,4", "--set", "plan.tp_pattern=", "--set", "sched.buckets="]
    doc, err = run_libra(libra, path, seeds + ["--set", "sim.modes=colocated,async,libra"], jobs)
    if err:
        return None, err
    analytic, err = run_libra(libra, path, seeds + ["--set", "sim.modes=libra", "--set",
                                                    "plan.verify_candidates=0"], jobs)
    if err:
        return None, err
    rates, plain = cells_by_mode(doc), cells_by_mode(analytic)
    if len(rates.get("libra", [])) != 3 or len(plain.get("libra", [])) != 3:
        return None, "a seed's run failed"
    med = {m: statistics.median(v) for m, v in rates.items()}
    return {"libra": med["libra"], "analytic": statistics.median(plain["libra"]),
            "async": med.get("async"), "colocated": med.get("colocated"),
            "vs_async": med["libra"] / med["async"] if med.get("async") else None,
            "vs_colocated": med["libra"] / med["colocated"] if med.get("colocated") else None}, None


def experiments(args):
    """(name, description, path) of the default, the examples and the random draws."""
    yield "default", "built-in default", None
    for path in sorted(glob.glob(os.path.join(SOURCE, "examples", "*.json"))):
        yield os.path.basename(path), "examples/" + os.path.basename(path), path
    rng = random.Random(args.seed)
    for i in range(args.random_draws):
        exp = random_experiment(rng)
        yield f"random-{i + 1}", describe(exp), exp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["fidelity", "colocated", "wins"])
    ap.add_argument("--random", type=int, default=30, help="random experiments wanted")
    ap.add_argument("--seed", type=int, default=1, help="the generator's seed")
    ap.add_argument("--libra", default=os.path.join(SOURCE, "build", "release", "libra"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-examples", action="store_true",
                    help="the default and the random experiments, not examples/")
    args = ap.parse_args()
    args.random_draws = 10 * args.random + 10
    measure = {"fidelity": fidelity, "colocated": colocated, "wins": wins}[args.what]
    kept_random, rows = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for name, desc, exp in experiments(args):
            is_random = name.startswith("random")
            if is_random and kept_random == args.random:
                break
            if name != "default" and not is_random and args.no_examples:
                continue
            path = exp
            if isinstance(exp, dict):
                path = os.path.join(tmp, name + ".json")
                with open(path, "w") as f:
                    json.dump(exp, f)
            if path is None:
                path = os.path.join(tmp, "default.json")
                with open(path, "w") as f:
                    f.write("{}")
            result, err = measure(args.libra, path, args.jobs)
            rows.append({"name": name, "experiment": desc, "result": result, "error": err})
            kept_random += is_random and result is not None
            print(json.dumps(rows[-1]), flush=True)
    summary(args.what, rows)


def summary(what, rows):
    ok = [r for r in rows if r["result"]]
    print(f"\n{len(ok)} experiments measured, {len(rows) - len(ok)} refused", file=sys.stderr)
    if what in ("fidelity", "colocated"):
        ratios = [x for r in ok for x in ([r["result"]["ratio"]] if what == "fidelity"
                                          else r["result"].values())]
        inside = sum(0.75 <= x <= 1.25 for x in ratios)
        print(f"simulated / predicted step: median {statistics.median(ratios):.2f}, "
              f"{inside} of {len(ratios)} within ±25 %", file=sys.stderr)
    else:
        lost = [r for r in ok if r["result"]["vs_async"] is not None and r["result"]["vs_async"] < 0.98
                or r["result"]["vs_colocated"] is not None and r["result"]["vs_colocated"] < 1.0]
        print(f"libra verified below 0.98x async or 1.0x colocated: {len(lost)} of {len(ok)}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
