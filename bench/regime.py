#!/usr/bin/env python3
"""The regime study and its sensitivity tables (docs/reproduction.md "Regime study").

For each of the paper's three setups (examples/sim-r2e-gym-qwen3-14b.json,
examples/sim-search-r1-qwen3-14b.json, examples/sim-dapo-math-qwen3-4b.json) and each value of
a swept key, `libra sim --attribution` (docs/sim.md "Attribution"), every bar a measured run:

  colocated (tuned) -> disaggregated async (tuned) -> + planner (one TP size) -> + heterogeneous
  TP with C-MLFQ -> + elastic pool -> + online replanning (libra), and libra without
  heterogeneous TP and without the pool (without replanning is the +pool bar)

Every setup runs with the planner free: plan.tp_pattern and sched.buckets cleared,
plan.min_train_gpus and plan.min_rollout_gpus at the config's defaults (8, one node each) and
sim.planner true (the examples pin libra's batch-32 reference layout). Each (setup, sweep) is
one `libra sim FILE --sweep KEY=... --attribution --seed-list ... --json` command. Tables give
trained tokens/s as the median over seeds [first quartile, third quartile] (R-7) and the
ratios between bars computed per seed.

Parts (--part, comma-separated; default all):
  regime     rl.batch_trajectories 32, 128, 512, 2560, each rounded down to a multiple of the
             setup's rl.samples
  staleness  rl.max_staleness 0, 1, 2, 4, 8 with rl.sync_interval 1, and 4, 8, 16 with 5
  sync       rl.sync_interval 1, 2, 3, 5 with rl.max_staleness 4
  transport  rl.transport nccl, disk_reload, disk_restart
  tools      the workload preset's tool service times (service_median_s and timeout_s of every
             tool pool) x 0.25, 1, 4, 16: preset files written to a temporary directory
  causal     the workload preset's causal.strength 0, the calibrated value, 0.5, 1; and, since
             the free planner's fleets leave C-MLFQ one bucket, the same strengths on each
             example's own pinned heterogeneous layout, libra alone, cmlfq against load_balance
The sensitivity parts run each setup at its own batch (32, 320, 512). Every table is followed by
how often libra's verified choice was a heterogeneous fleet and how its best heterogeneous
candidate fared in the verification runs.

Runs use Debian's /usr/bin/python3 and the standard library only.

  bench/regime.py [--libra build/release/libra] [--part regime,...] [--steps 30]
                  [--seed-list 1,2,3] [--jobs 2] [--out DIR] [--tabulate DIR] [--quick]

--out DIR keeps every sweep's JSON (libra.sim-sweep/1; `libra report DIR/FILE -o report.html`
draws one) and the generated preset file; --tabulate DIR prints the tables again from them,
running nothing (same --part, --steps and --seed-list). --quick is a smoke run: R2E-Gym only, the first two
values of each part, one seed, 6 steps.
"""

import argparse
import collections
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

from procutil import quartiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUPS = [  # (label, example file, workload preset)
    ("R2E-Gym, Qwen3-14B", "examples/sim-r2e-gym-qwen3-14b.json", "r2e-gym"),
    ("Search-R1, Qwen3-14B", "examples/sim-search-r1-qwen3-14b.json", "search-r1"),
    ("DAPO-Math, Qwen3-4B", "examples/sim-dapo-math-qwen3-4b.json", "dapo-math"),
]
# the planner free at every point (the examples pin libra's reference layout for batch 32)
FREE = ["plan.tp_pattern=", "sched.buckets=", "plan.min_train_gpus=8", "plan.min_rollout_gpus=8",
        "sim.planner=true"]
BATCHES = [32, 128, 512, 2560]
TOOL_SCALES = ["0.25", "1", "4", "16"]
CAUSAL = ["0", None, "0.5", "1"]  # None: the preset's calibrated strength
UNSETTLED_FRAC = 0.25  # libra sim's own threshold (src/cli/cmd_sim.c)
ATTRIBUTION_BARS = 8  # the values of libra sim --attribution's grid key (docs/sim.md)
BARS = [("colocated", "colocated (tuned)"), ("async", "async (tuned)"),
        ("+planner", "+ planner (one TP)"), ("+hetero", "+ het. TP, C-MLFQ"),
        ("+pool", "+ pool"), ("libra", "+ replanning (libra)")]
# (a, b): a's trained tokens/s over b's, seed by seed: libra against the baselines, each step
# of the ladder, and libra without heterogeneous TP and without the pool (without replanning
# is the ladder's +pool, the last step's inverse)
RATIOS = [("libra", "colocated"), ("libra", "async"), ("+planner", "async"),
          ("+hetero", "+planner"), ("+pool", "+hetero"), ("libra", "+pool"),
          ("-hetero", "libra"), ("-pool", "libra")]
NAMES = {"colocated": "colocated", "async": "async", "+planner": "+planner",
         "+hetero": "+het", "+pool": "+pool", "libra": "libra", "-hetero": "libra−het",
         "-pool": "libra−pool"}


class Sweep:
    """One --sweep of a part: its key, its values (label, value) per setup, and fixed settings."""

    def __init__(self, key, values, sets=(), title=""):
        self.key, self.values, self.sets, self.title = key, values, list(sets), title


def read_json(path):
    with open(path) as f:
        return json.load(f)


def base_presets():
    doc = read_json(os.path.join(ROOT, "data", "presets", "workloads.json"))
    return {w["name"]: w for w in doc["workloads"]}


def preset_file(path, setups):
    """Writes the tool-time and causal variants of each setup's workload preset; returns
    {(base, part, label): preset name}."""
    base = base_presets()
    out, names = [], {}
    for _, _, wl in setups:
        for scale in TOOL_SCALES:
            if scale == "1":
                names[(wl, "tools", scale)] = wl
                continue
            tools = json.loads(json.dumps(base[wl]["tools"]))
            for t in tools:
                t["pool"]["service_median_s"] *= float(scale)
                t["pool"]["timeout_s"] *= float(scale)
            name = f"{wl}-tools{scale}"
            out.append({"name": name, "base": wl, "tools": tools,
                        "source": f"{wl} with tool service times and timeouts x {scale}"})
            names[(wl, "tools", scale)] = name
        for k in CAUSAL:
            if k is None:
                names[(wl, "causal", None)] = wl
                continue
            name = f"{wl}-causal{k}"
            out.append({"name": name, "base": wl, "causal": {"strength": float(k)},
                        "source": f"{wl} with causal.strength {k}"})
            names[(wl, "causal", k)] = name
    with open(path, "w") as f:
        json.dump({"schema": "libra.presets/1", "workloads": out}, f, indent=1)
        f.write("\n")
    return names


def parts(setups, names):
    """{part: [Sweep]}; a Sweep's values are {example: [(label, value)]}."""
    samples = {ex: read_json(os.path.join(ROOT, ex))["rl"]["samples"] for _, ex, _ in setups}
    batch = {ex: read_json(os.path.join(ROOT, ex))["rl"]["batch_trajectories"] for _, ex, _ in setups}
    wl = {ex: w for _, ex, w in setups}

    def same(vals):
        return {ex: [(str(v), str(v)) for v in vals] for _, ex, _ in setups}

    def causal_label(ex, k):
        if k is None:
            strength = base_presets()[wl[ex]]["causal"]["strength"]
            return f"{strength:g} (calibrated)"
        return k

    return {
        "regime": [Sweep("rl.batch_trajectories",
                         {ex: [(str(b // samples[ex] * samples[ex]),) * 2 for b in BATCHES]
                          for _, ex, _ in setups})],
        "staleness": [Sweep("rl.max_staleness", same([0, 1, 2, 4, 8]), ["rl.sync_interval=1"],
                            "rl.sync_interval 1"),
                      Sweep("rl.max_staleness", same([4, 8, 16]), ["rl.sync_interval=5"],
                            "rl.sync_interval 5")],
        "sync": [Sweep("rl.sync_interval", same([1, 2, 3, 5]), ["rl.max_staleness=4"])],
        "transport": [Sweep("rl.transport", same(["nccl", "disk_reload", "disk_restart"]))],
        "tools": [Sweep("workload.name",
                        {ex: [("x " + s + (" (calibrated)" if s == "1" else ""),
                               names[(wl[ex], "tools", s)]) for s in TOOL_SCALES]
                         for _, ex, _ in setups})],
        "causal": [Sweep("workload.name",
                         {ex: [(causal_label(ex, k), names[(wl[ex], "causal", k)]) for k in CAUSAL]
                          for _, ex, _ in setups})],
    }, batch


def fmt(xs, digits):
    if not xs:
        return "–"
    lo, m, hi = quartiles(xs)
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def layout(mode):
    lay = mode["layout"]
    if lay["colocated"]:
        return "all GPUs, " + lay["instances"]
    pool = lay.get("pool")
    if pool and pool["hybrid_replicas"]:  # the elastic pool's hybrid replicas, beside the core
        return (f"{lay['train_gpus']} + {pool['hybrid_replicas']}x{pool['replica_gpus']} hybrid"
                f" + {lay['instances']}")
    return f"{lay['train_gpus']} + {lay['instances']}"


def run(args, example, sweep, values, presets, out_json):
    """One libra sim sweep with the attribution; returns (document, shell command as
    documented, seconds)."""
    common = ["--steps", str(args.steps), "--seed-list", args.seed_list,
              "--sweep", f"{sweep.key}=" + ",".join(values), "--attribution"]
    for s in FREE + sweep.sets:
        common += ["--set", s]
    cmd = [args.libra, "sim", os.path.join(ROOT, example)] + common + [
        "--jobs", str(args.jobs), "--json", "-o", out_json]
    shown = ["libra", "sim", example] + common + ["--json"]
    if presets:
        cmd += ["--presets", presets]
        shown += ["--presets", "$PRESETS"]
    shown = shlex.join(shown).replace("'$PRESETS'", "$PRESETS")
    if args.tabulate:
        return read_json(os.path.join(args.tabulate, os.path.basename(out_json))), shown, 0.0
    t0 = time.monotonic()
    p = subprocess.run(["nice"] + cmd if args.nice else cmd, capture_output=True, text=True)
    took = time.monotonic() - t0
    if not os.path.exists(out_json):
        sys.exit(f"{shlex.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    doc = read_json(out_json)
    print(f"  {took:6.1f} s  {shown}", file=sys.stderr, flush=True)
    return doc, shown, took


def heterogeneous(instances):
    return len(set(re.findall(r"tp(\d+)", instances))) > 1


def verification(cell, verified):
    """libra's verification in one run: [chosen fleet heterogeneous?, the best heterogeneous
    candidate's trained tokens/s over the chosen one's, or None when none was simulated]."""
    cands = cell["result"]["modes"]["libra"]["planner"].get("verification", {}).get("candidates")
    if not cands:
        return
    chosen = next(c for c in cands if c["chosen"])
    het = [c["trained_tokens_per_s"] for c in cands if heterogeneous(c["instances"])]
    verified.append((heterogeneous(chosen["instances"]),
                     max(het) / chosen["trained_tokens_per_s"] if het else None))


def unsettled(run):
    """Whether a run's trained tokens/s moved by more than 25 % between the halves of its
    measured steps (`libra sim` says so on stderr: docs/sim.md "Metrics")."""
    a, b = run["trained_tokens_per_s_halves"]
    return a > 0 and b > 0 and abs(b / a - 1) > UNSETTLED_FRAC


def collect(doc, rates, lays, errors, verified, moving):
    """Adds each cell's trained tokens/s and layout by (point of the swept key, seed, bar), and
    the cells whose rate has not settled to moving."""
    for cell in doc["cells"]:
        bar, point = cell["set"]["attribution"], cell["point"] // ATTRIBUTION_BARS
        if "error" in cell:
            errors.append(f"point {point} bar {bar} seed {cell['seed']}: "
                          f"{cell['error']['message']}")
            continue
        if bar == "libra":
            verification(cell, verified)
        (mode,) = cell["result"]["modes"].values()
        rates[(point, cell["seed"], bar)] = mode["run"]["trained_tokens_per_s"]
        lays[(point, cell["seed"], bar)] = layout(mode)
        if unsettled(mode["run"]):
            moving.add((point, cell["seed"], bar))


def layouts(lays, point, seeds, mode):
    by = collections.defaultdict(list)
    for s in seeds:
        if (point, s, mode) in lays:
            by[lays[(point, s, mode)]].append(s)
    if len(by) == 1:
        return next(iter(by))
    return "; ".join(f"{lay} (seed{'s' if len(ss) > 1 else ''} {','.join(map(str, ss))})"
                     for lay, ss in by.items())


def table(args, part, sweep, setups, presets, outdir, batch):
    seeds = [int(s) for s in args.seed_list.split(",")]
    rows, ratio_rows, lay_rows, commands, errors, verified = [], [], [], [], [], []
    moving_rows, runs = [], 0
    for label, example, _ in setups:
        values = sweep.values[example]
        if args.quick:
            values = values[:2]
        tag = f"{part}-{os.path.basename(example)[4:-5]}" + (
            "-" + sweep.title.replace(" ", "").replace("rl.", "") if sweep.title else "")
        rates, lays, moving = {}, {}, set()
        doc, cmd, took = run(args, example, sweep, [v for _, v in values], presets,
                             os.path.join(outdir, tag + ".json"))
        collect(doc, rates, lays, errors, verified, moving)
        runs += len(rates)
        commands.append(cmd)
        args.took += took
        what = label if part == "regime" else f"{label}, batch {batch[example]}"
        for point, (shown, _) in enumerate(values):
            r = {m: [rates[(point, s, m)] for s in seeds if (point, s, m) in rates] for m, _ in BARS}
            ratio = []
            for a, b in RATIOS:
                xs = [rates[(point, s, a)] / rates[(point, s, b)] for s in seeds
                      if (point, s, a) in rates and (point, s, b) in rates and rates[(point, s, b)] > 0]
                ratio.append(fmt(xs, 2))
            rows.append([what, shown] + [fmt(r[m], 0) for m, _ in BARS])
            ratio_rows.append([what, shown] + ratio)
            lay_rows.append([what, shown] + [layouts(lays, point, seeds, m) for m, _ in BARS])
            n = sum(1 for p, _, _ in moving if p == point)
            if n:
                moving_rows.append((what, shown, n))
    key = "batch" if part == "regime" else sweep.key.split(".")[-1].replace("name", "workload")
    if part in ("tools", "causal"):
        key = {"tools": "tool times", "causal": "causal.strength"}[part]
    title = {"regime": "Batch size", "staleness": "Staleness", "sync": "Sync interval",
             "transport": "Transport", "tools": "Tool-time scale", "causal": "Causal strength"}[part]
    print(f"\n### {title}" + (f" ({sweep.title})" if sweep.title else "") + "\n")
    print(f"`bench/regime.py --part {part}` runs ({args.steps} steps, 2 of warm-up; seeds "
          f"{args.seed_list}; median [q1, q3] over seeds; ratios per seed):\n")
    print("```sh")
    for c in commands:
        print(c)
    print("```\n")
    head = ["setup", key] + [name for _, name in BARS]
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "---:|" * (len(head) - 2))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print("\nRatios (seed by seed, then median [q1, q3]): libra against the baselines, each step "
          "of the ladder, and libra without heterogeneous TP and without the pool (libra without "
          "replanning is +pool, the inverse of libra/+pool):\n")
    head = ["setup", key] + [f"{NAMES[a]}/{NAMES[b]}" for a, b in RATIOS]
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "---:|" * (len(head) - 2))
    for r in ratio_rows:
        print("| " + " | ".join(r) + " |")
    print("\nLayouts (training GPUs + rollout instances; all GPUs: time-shared):\n")
    head = ["setup", key] + [name for _, name in BARS]
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "---|" * (len(head) - 2))
    for r in lay_rows:
        print("| " + " | ".join(r) + " |")
    het_chosen = sum(1 for h, _ in verified if h)
    tried = [r for _, r in verified if r is not None]
    print(f"\nlibra's verified choice (planner.md §8, {len(verified)} runs): a heterogeneous fleet "
          f"in {het_chosen}; heterogeneous fleets among the simulated candidates in "
          f"{len(tried)} runs" + (f", the best of them at {min(tried):.2f}-{max(tried):.2f} of "
                                  "the chosen candidate's trained tokens/s" if tried else "") + ".")
    where = "; ".join(f"{what}, {key} {shown}: {n}" for what, shown, n in moving_rows)
    print(f"\nRuns whose trained tokens/s moved by more than 25 % between the halves of their "
          f"measured steps (a drifting rate, a pipeline still settling, or a long tail that "
          f"{args.steps} steps do not average; `libra sim` notes each): "
          f"{sum(n for _, _, n in moving_rows)} of {runs}"
          + (f" ({where})" if where else "") + ".")
    for e in errors:
        print(f"\nfailed: {e}")
    sys.stdout.flush()


def pinned(args, setups, presets, names, outdir):
    """The causal knob where C-MLFQ has something to route: each example's own (heterogeneous,
    pinned) reference layout, libra alone, C-MLFQ against least-loaded routing."""
    seeds = [int(s) for s in args.seed_list.split(",")]
    commands, rows = [], []
    for label, example, wl in setups:
        ks = CAUSAL[:2] if args.quick else CAUSAL
        values = [names[(wl, "causal", k)] for k in ks]
        common = ["--steps", str(args.steps), "--seed-list", args.seed_list,
                  "--sweep", "workload.name=" + ",".join(values),
                  "--sweep", "sched.policy=cmlfq,load_balance", "--set", "sim.modes=libra"]
        out_json = os.path.join(outdir, f"causal-pinned-{os.path.basename(example)[4:-5]}.json")
        shown = shlex.join(["libra", "sim", example] + common + ["--json", "--presets", "$PRESETS"])
        shown = shown.replace("'$PRESETS'", "$PRESETS")
        commands.append(shown)
        if args.tabulate:
            doc = read_json(os.path.join(args.tabulate, os.path.basename(out_json)))
        else:
            cmd = [args.libra, "sim", os.path.join(ROOT, example)] + common + [
                "--jobs", str(args.jobs), "--json", "-o", out_json, "--presets", presets]
            t0 = time.monotonic()
            p = subprocess.run(["nice"] + cmd if args.nice else cmd, capture_output=True, text=True)
            took = time.monotonic() - t0
            args.took += took
            if not os.path.exists(out_json):
                sys.exit(f"{shlex.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
            print(f"  {took:6.1f} s  {shown}", file=sys.stderr, flush=True)
            doc = read_json(out_json)
        rate, lay = {}, {}
        for cell in doc["cells"]:
            if "error" in cell:
                continue
            mode = cell["result"]["modes"]["libra"]
            key = (cell["set"]["workload.name"], cell["set"]["sched.policy"], cell["seed"])
            rate[key] = mode["run"]["trained_tokens_per_s"]
            lay[cell["set"]["workload.name"]] = layout(mode)
        for k, v in zip(ks, values):
            shown_k = f"{base_presets()[wl]['causal']['strength']:g} (calibrated)" if k is None else k
            c = [rate[(v, "cmlfq", s)] for s in seeds if (v, "cmlfq", s) in rate]
            lb = [rate[(v, "load_balance", s)] for s in seeds if (v, "load_balance", s) in rate]
            ratio = [rate[(v, "cmlfq", s)] / rate[(v, "load_balance", s)] for s in seeds
                     if (v, "cmlfq", s) in rate and (v, "load_balance", s) in rate]
            rows.append([f"{label}, batch {read_json(os.path.join(ROOT, example))['rl']['batch_trajectories']}",
                         lay.get(v, "–"), shown_k, fmt(c, 0), fmt(lb, 0), fmt(ratio, 3)])
    print("\n### Causal strength on the reference layouts\n")
    print(f"`bench/regime.py --part causal` runs ({args.steps} steps, 2 of warm-up; seeds "
          f"{args.seed_list}; median [q1, q3] over seeds; ratios per seed), libra alone on each "
          "example's own heterogeneous layout:\n")
    print("```sh")
    for c in commands:
        print(c)
    print("```\n")
    print("| setup | libra layout (pinned) | causal.strength | C-MLFQ | load_balance | C-MLFQ/load_balance |")
    print("|---|---|---|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libra", default=os.path.join(ROOT, "build", "release", "libra"))
    ap.add_argument("--part", default="regime,staleness,sync,transport,tools,causal")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seed-list", default="1,2,3")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", help="keep every sweep's JSON and the preset file here")
    ap.add_argument("--no-nice", dest="nice", action="store_false",
                    help="run libra at normal priority (default: under nice)")
    ap.add_argument("--tabulate", metavar="DIR",
                    help="print the tables from the JSON an earlier --out DIR kept, running nothing")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: R2E-Gym, two values per part, one seed, 6 steps")
    args = ap.parse_args()
    setups = SETUPS
    if args.quick:
        setups, args.steps, args.seed_list = SETUPS[:1], 6, "1"
    wanted = args.part.split(",")
    args.took = 0.0
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        outdir = args.out or args.tabulate or tmp
        os.makedirs(outdir, exist_ok=True)
        presets = os.path.join(tmp, "regime-presets.json") if args.tabulate else \
            os.path.join(outdir, "regime-presets.json")
        names = preset_file(presets, setups)
        all_parts, batch = parts(setups, names)
        unknown = [p for p in wanted if p not in all_parts]
        if unknown:
            sys.exit(f"unknown part {','.join(unknown)}; parts: {','.join(all_parts)}")
        for part in wanted:
            for sweep in all_parts[part]:
                table(args, part, sweep, setups,
                      presets if part in ("tools", "causal") else None, outdir, batch)
            if part == "causal":
                pinned(args, setups, presets, names, outdir)
    print(f"\nrun time: {time.monotonic() - start:.0f} s ({args.took:.0f} s in libra sim), "
          f"--jobs {args.jobs}")


if __name__ == "__main__":
    main()
