"""End-to-end tests of `libra sim --sweep/--seeds/--jobs/--progress/--attribution` (docs/sim.md
"Sweeps", "Attribution").

A sweep's cell is a whole experiment and a pure function of its config: each cell must equal
the single run with the same settings and seed, whatever the number of threads; a cell that
fails must not stop the others; the summary's median and quartiles must be those of the cells.
"""

import json
import os
import statistics
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
QUICK = ["--steps", "4", "--set", "sim.tune_steps=2", "--set", "sim.warmup_steps=1"]
GRID = ["--sweep", "rl.batch_trajectories=16,32", "--sweep", "sched.shrink_visits=0,50"]


def sim(*args, check=True):
    p = subprocess.run([LIBRA, "sim", *args], capture_output=True, text=True, timeout=240)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def sweep_doc(*args):
    return json.loads(sim("--json", *QUICK, *GRID, "--seeds", "3", *args).stdout)


def quantile(values, q):
    """R-7, as libra's stats_quantile."""
    v = sorted(values)
    h = (len(v) - 1) * q
    lo = int(h)
    return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])


def test_each_cell_is_the_single_run_whatever_the_jobs():
    docs = [sweep_doc("--jobs", str(j)) for j in (1, 2, 3)]
    assert docs[0] == docs[1] == docs[2]
    doc = docs[0]
    assert doc["schema"] == "libra.sim-sweep/1"
    assert [g["key"] for g in doc["grid"]] == ["rl.batch_trajectories", "sched.shrink_visits"]
    assert doc["seeds"] == [1, 2, 3] and len(doc["cells"]) == 2 * 2 * 3
    for cell in doc["cells"]:
        sets = [f"{k}={v}" for k, v in cell["set"].items()]
        single = sim("--json", *QUICK, *sum((["--set", s] for s in sets), []),
                     "--seed", str(cell["seed"]), "--jobs", "1").stdout
        assert cell["result"] == json.loads(single), (cell["set"], cell["seed"])
        assert cell["config_digest"] == cell["result"]["config_digest"]


def test_summary_is_median_and_quartiles_of_the_cells():
    doc = sweep_doc()
    for point in doc["summary"]:
        cells = [c for c in doc["cells"] if c["point"] == point["point"]]
        assert all(c["set"] == point["set"] for c in cells) and len(cells) == 3
        for mode, figs in point["modes"].items():
            rates = [c["result"]["modes"][mode]["run"]["trained_tokens_per_s"] for c in cells]
            got = figs["trained_tokens_per_s"]
            assert got["seeds"] == 3
            assert got["median"] == pytest.approx(statistics.median(rates), rel=1e-12)
            assert got["q1"] == pytest.approx(quantile(rates, 0.25), rel=1e-12)
            assert got["q3"] == pytest.approx(quantile(rates, 0.75), rel=1e-12)


def test_text_table_and_jsonl():
    out = sim(*QUICK, *GRID, "--seed-list", "4,9").stdout.splitlines()
    assert out[0].startswith("libra sim: sweep of 4 grid points x 2 seeds = 8 runs (0 failed)")
    head = next(i for i, line in enumerate(out) if line.startswith("rl.batch_trajectories"))
    rows = out[head + 1:head + 5]
    assert [r.split()[:2] for r in rows] == [["16", "0"], ["16", "50"], ["32", "0"], ["32", "50"]]
    assert all("[" in r and "]" in r for r in rows)
    lines = sim("--jsonl", *QUICK, *GRID, "--seed-list", "4,9").stdout.splitlines()
    head = json.loads(lines[0])
    assert head["schema"] == "libra.sim-sweep/1" and head["seeds"] == [4, 9]
    cells = [json.loads(line) for line in lines[1:]]
    assert len(cells) == 8 and [c["seed"] for c in cells[:2]] == [4, 9]


def test_a_failed_cell_does_not_stop_the_others():
    p = sim("--json", *QUICK, "--sweep", "cluster.gpus=2,48", "--seeds", "2", check=False)
    assert p.returncode == 1  # the failed cells' exit: no layout can run (a negative result)
    assert "2 of 4 runs failed, the first: cluster.gpus=2, seed " in p.stderr, p.stderr
    doc = json.loads(p.stdout)
    failed = [c for c in doc["cells"] if "error" in c]
    assert len(failed) == 2 and all(c["set"]["cluster.gpus"] == "2" for c in failed)
    assert all(c["error"]["kind"] == "infeasible" and c["error"]["message"] for c in failed)
    ok = [c for c in doc["cells"] if "result" in c]
    assert len(ok) == 2 and all(c["result"]["modes"] for c in ok)
    assert doc["summary"][0]["failed"] == 2 and doc["summary"][1]["failed"] == 0


# The attribution's runs, written out here as docs/sim.md "Attribution" defines them.
LIBRA_MODE = ["sim.modes=libra"]
NO_REPLAN = ["plan.replan_interval_steps=0", "plan.replan_pressure=false"]
BARS = {
    "colocated": ["sim.modes=colocated"],
    "async": ["sim.modes=async"],
    "+planner": LIBRA_MODE + ["plan.homogeneous_rollout=true", "ehp.enabled=false"] + NO_REPLAN,
    "+hetero": LIBRA_MODE + ["plan.homogeneous_rollout=false", "ehp.enabled=false"] + NO_REPLAN,
    "+pool": LIBRA_MODE + ["plan.homogeneous_rollout=false", "ehp.enabled=true"] + NO_REPLAN,
    "libra": LIBRA_MODE + ["plan.homogeneous_rollout=false", "ehp.enabled=true"],
    "-hetero": LIBRA_MODE + ["plan.homogeneous_rollout=true", "ehp.enabled=true"],
    "-pool": LIBRA_MODE + ["plan.homogeneous_rollout=false", "ehp.enabled=false"],
}
LADDER = ["colocated", "async", "+planner", "+hetero", "+pool", "libra"]
LEFT_OUT = ["libra", "-hetero", "-pool", "+pool"]  # the last: libra without replanning


def rate(cell):
    (mode,) = cell["result"]["modes"].values()
    return mode["run"]["trained_tokens_per_s"]


def test_attribution_bars_are_their_runs():
    doc = json.loads(sim("--json", *QUICK, "--attribution", "--seeds", "2").stdout)
    assert doc["grid"] == [{"key": "attribution", "values": list(BARS)}]
    assert len(doc["cells"]) == 16
    by = {(c["set"]["attribution"], c["seed"]): c for c in doc["cells"]}
    for (bar, seed), cell in by.items():
        sets = sum((["--set", s] for s in BARS[bar]), [])
        # a libra bar leaves the tuned bars' sim.tune_steps aside, which its single run refuses
        tuned = BARS[bar][0] in ("sim.modes=colocated", "sim.modes=async")
        quick = QUICK if tuned else ["--steps", "4", "--set", "sim.warmup_steps=1"]
        single = json.loads(sim("--json", *quick, *sets, "--seed", str(seed)).stdout)
        assert cell["result"] == single, (bar, seed)
        assert list(single["modes"]) == [BARS[bar][0].split("=")[1]]
    (point,) = doc["attribution"]
    assert point["set"] == {}

    def check(entry, bar, over):
        assert entry["bar"] == bar
        rates = [rate(by[bar, s]) for s in (1, 2)]
        assert entry["trained_tokens_per_s"]["median"] == pytest.approx(statistics.median(rates))
        if over is None:
            assert entry["over_previous"]["seeds"] == 0
            return
        ratios = [rate(by[bar, s]) / rate(by[over, s]) for s in (1, 2)]
        got = entry["over_previous" if "over_previous" in entry else "over_libra"]
        assert got["median"] == pytest.approx(statistics.median(ratios), rel=1e-12)
        assert got["q1"] == pytest.approx(quantile(ratios, 0.25), rel=1e-12)

    for i, entry in enumerate(point["ladder"]):
        check(entry, LADDER[i], LADDER[i - 1] if i else None)
    for i, entry in enumerate(point["leave_one_out"]):
        check(entry, LEFT_OUT[i], "libra")
    assert point["leave_one_out"][3]["label"] == "libra - online replanning"


def test_attribution_text_and_grid():
    out = sim(*QUICK, "--sweep", "rl.sync_interval=1,2", "--attribution").stdout.splitlines()
    assert out[0].startswith("libra sim: sweep of 16 grid points x 1 seed = 16 runs (0 failed)")
    for interval in ("1", "2"):
        at = out.index(f"rl.sync_interval={interval}")
        assert out[at + 1].split()[:3] == ["the", "ladder", "trained"]
        assert [r[:34].strip() for r in out[at + 2:at + 8]] == [
            "colocated (tuned)", "+ disaggregated async (tuned)", "+ planner (one TP size)",
            "+ heterogeneous TP, C-MLFQ", "+ elastic pool", "+ online replanning (libra)"]
        assert out[at + 8].startswith("leave one out")
        assert out[at + 12].startswith("libra - online replanning")


@pytest.mark.parametrize("args,message", [
    (["--set", "sim.planner=false"], "--attribution measures the planner's mechanisms"),
    (["--set", "plan.replan_interval_steps=0", "--set", "plan.replan_pressure=false"],
     "its last bar is online replanning"),
    (["--sweep", "ehp.enabled=true,false"], "--sweep ehp.enabled: --attribution sets it"),
])
def test_attribution_refuses_what_it_cannot_measure(args, message):
    p = sim(*QUICK, "--attribution", *args, check=False)
    assert p.returncode == 2 and message in p.stderr and p.stdout == ""


@pytest.mark.parametrize("args,message", [
    (["--sweep", "rl.steps=x,4"], "--sweep rl.steps"),
    (["--sweep", "nope.key=1"], "unknown key 'nope.key'"),
    (["--sweep", "rl.steps"], "--sweep needs KEY=V1,V2"),
    (["--sweep", "rl.steps=4,,5"], "an empty value"),
    (["--sweep", "rl.steps=4", "--sweep", "rl.steps=5"], "swept twice"),
    (["--seeds", "2", "--seed-list", "1,2"], "exclude each other"),
    (["--seeds", "0"], "--seeds: expected an integer in [1, "),
    (["--seed-list", "1,x"], "--seed-list: expected an integer"),
    (["--seed-list", "3,1,3"], "--seed-list: seed 3 is listed twice"),
    (["--sweep", "rl.steps=4,5,4"], "--sweep rl.steps: '4' is listed twice"),
    (["--jobs", "0"], "--jobs: expected an integer in [1, "),
    (["--seeds", "2", "--perfetto", "x.json"], "--perfetto records one run"),
    (["--sweep", "sim.seed=1,2"], "--sweep sim.seed: seeds are the grid's other axis"),
    (["--sweep", "rl.max_staleness=4,4.0"],
     "--sweep: 'rl.max_staleness=4' and 'rl.max_staleness=4.0' are one experiment"),
    # a bucket layout in two spellings is one layout (its config holds the one spelling)
    (["--set", "sim.modes=async,libra", "--sweep",
      "sched.buckets=tp1+tp2:30000,tp2+tp1:30000"],
     "--sweep: 'sched.buckets=tp1+tp2:30000' and 'sched.buckets=tp2+tp1:30000' are "
     "one experiment"),
    (["--sweep", "rl.transport=nccl,reshard"],
     "--sweep: 'rl.transport=reshard': rl.transport: reshard moves weights in place"),
    (["--sweep", "rl.overprovision_frac=0.5,0.50", "--sweep", "rl.max_staleness=4,5"],
     "'rl.overprovision_frac=0.5, rl.max_staleness=4' and 'rl.overprovision_frac=0.50, "
     "rl.max_staleness=4' are"),
    (["--sweep", "rl.steps=3,4"], "--sweep rl.steps: --steps sets it too"),
    (["--seed", "5", "--seed-list", "1,2"], "--seed and --seed-list both set the seeds"),
    (["--seed-list", "1,2", "--set", "sim.seed=5"], "--set sim.seed and --seed-list both set"),
    # the seeds pass the bound: the error says which seeds, not only the bound
    (["--seed", "9007199254740991", "--seeds", "2"],
     "--seeds 2 from sim.seed 9007199254740991 passes the seeds' bound, 2^53 - 1"),
])
def test_bad_sweeps(args, message):
    p = sim(*QUICK, *args, check=False)
    assert p.returncode == 2 and message in p.stderr and p.stdout == ""


def test_one_trace_spelled_two_ways_is_one_experiment(tmp_path):
    trace = tmp_path / "t.jsonl"
    subprocess.run([LIBRA, "trace", "gen", "search-r1", "--steps", "2", "--batch", "20",
                    "--samples", "5", "-o", str(trace)], check=True, timeout=60)
    spelled = f"{trace},{tmp_path}/./t.jsonl"
    p = sim(*QUICK, "--sweep", f"workload.trace={spelled}", check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert f"'workload.trace={trace}' and 'workload.trace={tmp_path}/./t.jsonl' are one " \
        "experiment" in p.stderr


def test_a_config_the_simulator_refuses_is_named_as_the_run_names_it(tmp_path):
    """Seeds alone: the error a single run gives, not "--sweep: '': ..." (no key was swept);
    a grid: the point's swept values (a swept value may mend the base, so the points are
    judged). Neither is a usage error."""
    path = tmp_path / "keep.json"
    path.write_text(json.dumps({"rl": {"sync_mode": "keep", "transport": "disk_restart"}}))
    single = sim(str(path), check=False)
    assert single.returncode == 2, single.stderr
    assert single.stderr.startswith(f"libra: {path}:1:9: rl.sync_mode: keep "), single.stderr
    seeds = sim(str(path), "--seed-list", "2,3", check=False)
    assert seeds.returncode == 2 and seeds.stdout == "" and seeds.stderr == single.stderr
    grid = sim(str(path), "--sweep", "rl.batch_trajectories=32,64", check=False)
    assert grid.returncode == 2 and grid.stdout == ""
    assert grid.stderr == single.stderr.replace(
        f"libra: {path}:1:9: ", "libra: sim: --sweep: 'rl.batch_trajectories=32': ", 1)
    grid = sim("--sweep", "rl.sync_interval=1,9", check=False)
    assert grid.returncode == 2 and grid.stdout == ""
    assert grid.stderr.startswith("libra: sim: --sweep: 'rl.sync_interval=9': rl.max_staleness: "
                                  "4 is below rl.sync_interval - 1 = 8"), grid.stderr


def test_progress_only_when_asked_off_a_terminal():
    quiet = sim(*QUICK, "--seeds", "2")
    assert "libra sim:" not in quiet.stderr  # only the note that 3 measured steps are few
    def progress(p):
        return [line for line in p.stderr.splitlines() if line.startswith("libra sim: ")]

    last = progress(sim(*QUICK, "--seeds", "2", "--progress"))[-1]
    assert last.startswith("libra sim: cells 2/2, ") and " steps (100%)" in last
    one = progress(sim(*QUICK, "--progress"))[-1]
    assert "steps (100%)" in one and "cells" not in one


def test_short_runs_are_flagged():
    """Rates over a few steps after the warm-up mostly show the pipeline starting: said on
    stderr (the output itself is unchanged)."""
    short = sim(*QUICK)
    assert short.stderr == ("libra: sim: note: the rates cover 3 steps after 1 of warm-up, so "
                            "they mostly show how the pipeline starts; run 11 steps or more for "
                            "steady-state rates\n")
    assert "the rates cover" not in sim("--steps", "12", "--set", "sim.tune_steps=2").stderr


def test_a_trace_takes_no_seeds(tmp_path):
    """A trace's runs replay its recorded trajectories: sim.seed changes nothing in libra sim or
    libra plan there (each run's JSON differed in the seeds it names alone), so a seed or seeds
    given with one are refused; a file's seed is taken, as route eval and load read it."""
    trace = str(tmp_path / "t.jsonl")
    gen = subprocess.run([LIBRA, "trace", "gen", "r2e-gym", "--steps", "3", "--batch", "8",
                          "--seed", "1", "-o", trace], capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    shape = ["--trace", trace, "--batch", "8", "--gpus", "16", "--model", "qwen3-4b"]
    why = ("sim.seed=7 has no effect without generated trajectories (workload.trace unset: a "
           "trace's runs replay its recorded trajectories whatever the seed)\n")
    for command in ("sim", "plan"):
        p = subprocess.run([LIBRA, command, *shape, "--seed", "7"], capture_output=True,
                           text=True)
        assert p.returncode == 2 and p.stderr == f"libra: --seed: {why}", p.stderr
    for seeds, flag in ((["--seeds", "2"], "--seeds"), (["--seed-list", "1,7"], "--seed-list")):
        p = sim(*shape, "--steps", "3", *seeds, check=False)
        assert p.returncode == 2 and p.stderr.startswith(
            f"libra: sim: {flag}: a trace's runs replay its recorded trajectories whatever the "
            "seed"), p.stderr
    config = tmp_path / "x.json"
    config.write_text(json.dumps({"sim": {"seed": 7}}))
    assert sim(str(config), *shape, "--steps", "3").returncode == 0


def trace_experiment(tmp_path, doc):
    """A trace of 3 steps of batch 32 and a config file doc naming it (workload.trace)."""
    trace = tmp_path / "t.jsonl"
    subprocess.run([LIBRA, "trace", "gen", "r2e-gym", "--steps", "3", "--batch", "32",
                    "--samples", "4", "-o", str(trace)], check=True, timeout=60)
    path = tmp_path / "exp.json"
    path.write_text(json.dumps(doc).replace("TRACE", str(trace)))
    return str(path), str(trace)


def test_a_config_files_seed_is_left_aside_by_a_sweep_over_a_trace(tmp_path):
    """A file's sim.seed inert beside a trace is taken, as the single run takes it: a sweep gives
    a cell's seed only where --seeds or --seed-list does (a sweep without them refused the
    file's seed as if --seeds had given it), and names the flag that gave it."""
    path, trace = trace_experiment(
        tmp_path, {"workload": {"trace": "TRACE"}, "sim": {"seed": 5}, "rl": {"steps": 3}})
    assert subprocess.run([LIBRA, "config", "check", path], capture_output=True).returncode == 0
    assert sim(path, "--sweep", "sim.queue_cap=50,100").returncode == 0
    assert sim(path, "--set", "sim.tune_steps=2", "--attribution").returncode == 0
    seed_only = tmp_path / "seed.json"
    seed_only.write_text(json.dumps({"sim": {"seed": 5}}))
    assert sim(str(seed_only), "--trace", trace, "--steps", "3", "--sweep",
               "sim.queue_cap=50,100").returncode == 0
    p = sim(path, "--seed-list", "9", check=False)
    assert p.returncode == 2 and p.stderr.startswith(
        "libra: --seed-list: sim.seed=9 has no effect without generated trajectories"), p.stderr


def test_a_swept_value_inert_wherever_it_is_set_is_refused():
    """A value of a swept key that has no effect at any point it is set is refused as the single
    run's flag is, though another value of the key acts (0 turns verification off whatever the
    modes; 4 ran as the default there, and its cell was 0's)."""
    p = sim("--steps", "3", "--set", "sim.modes=async", "--sweep",
            "plan.verify_candidates=0,4", check=False)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr == ("libra: --sweep plan.verify_candidates: plan.verify_candidates=4 has no "
                        "effect without libra in sim.modes (sim.modes is [\"async\"], from --set "
                        "sim.modes)\n")
    p = sim("--steps", "3", "--set", "sim.modes=async", "--sweep", "rl.sync_interval=1,5",
            "--sweep", "plan.verify_candidates=0,4", check=False)
    assert p.returncode == 2 and p.stderr.endswith(
        "plan.verify_candidates=4 has no effect without libra in sim.modes (sim.modes is "
        "[\"async\"], from --set sim.modes), nor at any other point of the grid that sets it\n")


def test_points_that_run_one_capped_warm_up_or_tuning_are_one_experiment():
    """sim.warmup_steps runs at most rl.steps - 1 steps, sim.tune_steps at most rl.steps
    (docs/config.md): points whose values differ only past that cap ran one experiment under
    different digests, the defaults' included (2 steps of warm-up, 10 of tuning)."""
    for steps, key, a, b in (("3", "sim.warmup_steps", "2", "3"),
                             ("1", "sim.warmup_steps", "0", "2"),
                             ("3", "sim.tune_steps", "3", "50"),
                             ("1", "sim.tune_steps", "1", "10")):
        values = f"{a},{b},50" if key == "sim.warmup_steps" else f"{a},{b}"
        p = sim("--steps", steps, "--sweep", f"{key}={values}", check=False)
        assert p.returncode == 2 and p.stdout == "" and p.stderr == (
            f"libra: sim: --sweep: '{key}={a}' and '{key}={b}' are one experiment\n"), p.stderr
    assert sim("--steps", "3", "--sweep", "sim.warmup_steps=1,2").returncode == 0


def test_a_timeline_with_leading_zeros_is_refused():
    p = sim("--steps", "3", "--json", "--sweep", "sim.timeline_steps=1:2,01:2", check=False)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert "not '01:2'" in p.stderr and "leading zero" in p.stderr, p.stderr


def test_an_error_at_a_point_names_the_point():
    p = sim("--steps", "3", "--set", "plan.tp_pattern=4,4", "--sweep",
            "cluster.gpus_per_node=4,8", check=False)
    assert p.returncode == 2 and p.stderr.startswith(
        "libra: --sweep: 'cluster.gpus_per_node=4': --set plan.tp_pattern: its instances take 8 "
        "GPUs, a node has 4"), p.stderr
    p = sim("--steps", "3", "--sweep", "rl.samples=3,4", check=False)  # the error names it
    assert p.returncode == 2 and p.stderr.startswith(
        "libra: --sweep rl.samples: 3 does not divide rl.batch_trajectories (32, from workload "
        "preset 'r2e-gym')"), p.stderr


def test_no_note_on_rates_when_no_run_has_any():
    p = sim("--steps", "3", "--set", "rl.trajectory_timeout_s=1", "--sweep",
            "rl.batch_trajectories=16,32", check=False)
    assert p.returncode != 0 and "2 of 2 runs failed" in p.stderr, p.stderr
    assert "the rates cover" not in p.stderr


@pytest.mark.parametrize("args,message", [
    (["--seed-list", "-1"], "--seed-list: expected an integer in [0, 9007199254740991], not '-1'"),
    (["--sweep", "rl.batch_trajectories=32,32"], "--sweep rl.batch_trajectories: '32' is listed"
     " twice"),
    (["--sweep", "rl.batch_trajectories=32,,64"], "--sweep rl.batch_trajectories: an empty value"
     " in '32,,64'"),
])
def test_a_bad_value_has_no_usage_line(args, message):
    """docs/cli.md: a bad value says which flag and why, without the usage line."""
    p = sim("--steps", "1", *args, check=False)
    assert p.returncode == 2 and p.stderr == f"libra: sim: {message}\n", p.stderr


def test_the_text_header_names_the_swept_values_and_counts_in_the_singular():
    """The header's cluster and model show the grid's values where a key sweeps them (it showed
    the base config's, which no run had); one run is "1 run"; the footer mentions libra's
    ratios only where the table has them."""
    p = subprocess.run([LIBRA, "sim", "--set", "sim.modes=colocated", "--steps", "2",
                        "--sweep", "cluster.gpus=8,16", "--sweep", "model.name=qwen3-4b,qwen3-8b"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("libra sim: sweep of 4 grid points x 1 seed = 4 runs (0 failed); "
                               "r2e-gym on {qwen3-4b,qwen3-8b}, {8,16} x a800-80g\n"), p.stdout
    assert p.stdout.endswith("\ntrained tokens/s across seeds: median [first quartile, third "
                             "quartile]; --json has every run.\n"), p.stdout
    p = subprocess.run([LIBRA, "sim", "--set", "sim.modes=colocated", "--steps", "2",
                        "--seeds", "1"], capture_output=True, text=True, timeout=600)
    assert p.stdout.startswith("libra sim: sweep of 1 grid point x 1 seed = 1 run (0 failed)"), \
        p.stdout


def test_an_attribution_bar_that_contradicts_the_settings_is_refused_before_any_run():
    """docs/sim.md "Attribution": settings are checked first; the bar is named."""
    p = sim(*QUICK, "--attribution", "--set", "plan.min_tp_sizes=2", check=False)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert "libra: --attribution (+planner): one TP size for every rollout instance " \
           "contradicts plan.min_tp_sizes 2" in p.stderr, p.stderr


@pytest.mark.parametrize("base, sweep", [
    ({"rl": {"sync_mode": "keep"}}, "rl.transport=nccl,disk_reload"),
    ({"rl": {"max_staleness": 0}}, "rl.sync_interval=1"),
    ({"rl": {"max_staleness": 0}}, "sim.modes=colocated"),
    ({"sim": {"max_seqs": 9000}}, "sim.max_batched_tokens=9000,10000"),
])
def test_a_base_config_a_swept_key_mends_runs(tmp_path, base, sweep):
    """A cell is exactly the single run with its settings: a base config that breaks a rule
    across keys is not refused where every point's swept value mends it."""
    cfg = {"rl": {"steps": 3}, "cluster": {"gpus": 16}, "sim": {"modes": ["async"]},
           "plan": {"verify_candidates": 0}}
    for section, values in base.items():
        cfg[section].update(values)
    path = tmp_path / "base.json"
    path.write_text(json.dumps(cfg))
    p = sim(str(path), "--sweep", sweep, check=False)
    assert p.returncode == 0, p.stderr
