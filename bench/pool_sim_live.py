#!/usr/bin/env python3
"""How often the live elastic pool asks for the lends and reclaims the simulator's pool makes
(docs/serve.md "The simulator's decisions, live"): the experiment of tests/e2e/pool_sim.py on
the trace of each seed, under each signal rule, run by `libra sim` and live (`libra emu`,
`libra serve --pool-steer`, `libra load --trainer` at time scale 0.02). For each run it prints
the simulator's requests, whether the live ones equal them, the simulator's signal ratios
T_train / T_rollout at the steps' ends that asked (the live ones part from them near a rule's
threshold), and the wall seconds; a seed whose trace leaves the training layout no replica to lend (the layout
is planned on the trace's lengths) is named and skipped. Markdown on stdout.

usage: bench/pool_sim_live.py [--libra build/release/libra] [--seeds 1,2,3,4,5]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ratios(sim):
    return [s["train_s"] / (s["rollout_utilisation"] * s["step_s"]) for s in sim["steps"][:-1]]


def text(requests):
    return " ".join("%s@%d" % (op, step) for op, step in requests) or "none"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--libra", default=str(ROOT / "build/release/libra"))
    ap.add_argument("--seeds", default="1,2,3,4,5")
    args = ap.parse_args()
    os.environ["LIBRA_BIN"] = os.path.abspath(args.libra)
    sys.path.insert(0, str(ROOT / "tests/e2e"))
    from pool_sim import drift_experiment, live, simulated  # needs LIBRA_BIN

    print("| seed | rule | simulator's requests | live equal | simulator's ratios | wall s |")
    print("|---:|---|---|---|---|---:|")
    equal = runs = 0
    for seed in (int(s) for s in args.seeds.split(",")):
        for rule in ("balance", "reference"):
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.monotonic()
                experiment = drift_experiment(Path(tmp), seed)
                sim, want, _ = simulated(experiment, rule)
                pool = sim["layout"]["pool"]
                if pool["hybrid_replicas"] == 0:  # this trace's lengths leave nothing to lend
                    print("| %d | %s | no hybrid replica: %s | | | |" % (seed, rule, pool["note"]))
                    continue
                _, got = live(experiment, rule, Path(tmp) / "decisions.jsonl")
                wall = time.monotonic() - t0
            runs += 1
            equal += got == want
            print("| %d | %s | %s | %s | %s | %.0f |" % (
                seed, rule, text(want), "yes" if got == want else "no: " + text(got),
                ", ".join("%.2f" % r for r in ratios(sim)), wall), flush=True)
    print("\nequal on %d of %d runs" % (equal, runs))


if __name__ == "__main__":
    main()
