"""End-to-end tests of `libra sim` (docs/sim.md).

The simulator's arithmetic is tested in tests/unit/test_sim_*.c; here the command's contract:
the table, the JSON document and the JSON Lines (envelope, modes, steps), byte-identical output
for the same seed, the Chrome trace-event file of --perfetto, the GPU timeline of --timeline,
replaying a trace, the examples, and clear errors (and exit codes) for bad experiment files.
"""

import json
import os
import re
import subprocess

from pytest import approx

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
WASTES = {"prompt", "reprefill", "preempt", "filtered", "stale", "aborted", "failure", "surplus"}
QUICK = ["--steps", "4", "--set", "sim.tune_steps=2", "--set", "sim.warmup_steps=1"]


def sim(*args, check=True):
    p = subprocess.run([LIBRA, "sim", *args], capture_output=True, text=True, timeout=240)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return str(path)


def test_table_lists_every_default_mode():
    out = sim(*QUICK).stdout
    lines = out.splitlines()
    assert lines[0].startswith("libra sim: r2e-gym on qwen3-14b, 48 x a800-80g; batch 32")
    head = next(i for i, line in enumerate(lines) if line.startswith("mode "))
    rows = [line.split()[0] for line in lines[head + 1:head + 4]]
    assert rows == ["colocated", "async", "libra"] and lines[head + 4] == ""
    assert "(tuned)" in out and "(verified)" in out
    assert "libra trained tokens/s:" in out
    assert "planner fidelity (libra)" in out


def test_json_document():
    doc = json.loads(sim("--json", *QUICK).stdout)
    assert doc["schema"] == "libra.sim/1"
    assert {"libra_version", "seed", "config_digest"} <= set(doc)
    assert set(doc["modes"]) == {"colocated", "async", "libra"}
    for name, m in doc["modes"].items():
        run = m["run"]
        assert run["steps"] == 4 and len(m["steps"]) == 4
        assert run["trained_tokens_per_s"] > 0
        assert 0 <= run["rollout_utilisation"] <= 1 and 0 <= run["train_utilisation"] <= 1
        assert all(0 <= st["rollout_utilisation"] <= 1 for st in m["steps"])
        waste = run["wasted_tokens"]
        assert set(waste) == WASTES
        discarded = sum(waste[k] for k in ("filtered", "stale", "aborted", "failure", "surplus"))
        assert run["generated_tokens"] == (run["trained_tokens_all"] + discarded
                                           + run["unconsumed_tokens"])
        assert len(run["staleness_histogram"]) == 4 + 2  # rl.max_staleness 4, then rejected
    assert doc["modes"]["colocated"]["tuning"]["candidates"]
    assert len(doc["modes"]["async"]["tuning"]["candidates"]) == 20  # 5 splits x 4 TPs
    assert doc["modes"]["libra"]["tuning"] is None
    assert doc["modes"]["libra"]["planner"]["predicted"]["step_s"] > 0
    assert doc["modes"]["libra"]["routing"]["all"]["trajectories"] > 0
    assert doc["ratios"]["libra_over_colocated_tokens"] > 0


def test_same_seed_same_bytes_and_seed_matters():
    a = sim("--json", "--seed", "7", *QUICK).stdout
    b = sim("--json", "--seed", "7", *QUICK).stdout
    assert a == b
    c = sim("--json", "--seed", "8", *QUICK).stdout
    assert json.loads(c)["seed"] == 8 and c != a


def test_dynamic_sampling_fills_the_batch_by_its_recipe():
    """rl.dynamic_sampling decides how a colocated step fills its batch (docs/sim.md "Modes"):
    off trains every group; regenerate launches the missing groups again and never more;
    gen_batch (verl's DAPO recipe) runs rounds of rl.gen_batch_factor batches to their end, the
    kept groups beyond the batch wasted as surplus; over-provisioning on top of it is refused."""
    base = ("--workload", "dapo-math-verl", "--batch", "64", "--steps", "3", "--set",
            "sim.modes=colocated", "--set", "sim.colocated_tp=4", "--json")

    def run(*sets):
        args = [a for s in sets for a in ("--set", s)]
        return json.loads(sim(*base, *args).stdout)["modes"]["colocated"]["run"]

    off = run("rl.dynamic_sampling=off")
    regenerate = run("rl.dynamic_sampling=regenerate")
    gen_batch = run()  # the preset's recipe
    for r in (off, regenerate, gen_batch):
        assert r["trajectories"] == 64 and r["wasted_tokens"]["aborted"] == 0
    assert off["wasted_tokens"]["filtered"] == 0 and off["wasted_tokens"]["surplus"] == 0
    assert regenerate["wasted_tokens"]["filtered"] > 0
    assert regenerate["wasted_tokens"]["surplus"] == 0
    assert gen_batch["wasted_tokens"]["filtered"] > 0 and gen_batch["wasted_tokens"]["surplus"] > 0
    assert gen_batch["generated_tokens"] > 2 * off["generated_tokens"]  # 3 batches a round
    one = run("rl.gen_batch_factor=1")
    assert one["generated_tokens"] < gen_batch["generated_tokens"]
    p = sim(*base, "--set", "rl.overprovision_frac=0.1", check=False)
    assert p.returncode == 2 and "already the over-provisioning" in p.stderr
    text = [a for a in base if a != "--json"]
    assert "; dynamic sampling: rounds of 3 batches; seed 1" in sim(*text).stdout.splitlines()[0]
    off = sim(*text, "--set", "rl.dynamic_sampling=off").stdout.splitlines()[0]
    assert "dynamic sampling" not in off


def test_router_takes_the_sched_config():
    """The simulator's C-MLFQ reads sched.shrink_visits as route eval does (the reference R2E
    layout has four buckets, so the estimate moves trajectories)."""
    example = os.path.join(SOURCE_DIR, "examples", "sim-r2e-gym-qwen3-14b.json")
    args = [example, "--json", "--set", "sim.modes=libra", "--steps", "20"]
    on = json.loads(sim(*args).stdout)["modes"]
    off = json.loads(sim(*args, "--set", "sched.shrink_visits=0").stdout)["modes"]
    assert on and on != off  # the config digest differs anyway: compare the results


def test_tuning_searches_many_splits_coarse_to_fine():
    """With more splits than sim.tune_grid, async's tuning tries evenly spaced splits per TP,
    then the untried ones around the best, until the best one's neighbours are tried."""
    args = ["--json", "--gpus", "96", "--set", "sim.modes=async", "--steps", "3", "--set",
            "sim.tune_steps=2"]
    splits = list(range(8, 96, 8))  # 11 splits of 96 GPUs, TP 1..8
    full = json.loads(sim(*args).stdout)["modes"]["async"]
    assert len(full["tuning"]["candidates"]) == len(splits) * 4
    coarse = json.loads(sim(*args, "--set", "sim.tune_grid=4").stdout)["modes"]["async"]
    tried = coarse["tuning"]["candidates"]
    assert 4 * 4 <= len(tried) < len(splits) * 4
    for tp in (1, 2, 4, 8):
        rates = {c["train_gpus"]: c["trained_tokens_per_s"] for c in tried if c["tp"] == tp}
        assert {8, 32, 64, 88} <= set(rates)  # the first round: 4 evenly spaced
        ok = {s: r for s, r in rates.items() if r is not None}
        best = splits.index(max(ok, key=lambda s: (ok[s], -s)))
        for n in (best - 1, best + 1):
            assert n < 0 or n >= len(splits) or splits[n] in rates
    best = max((c for c in tried if c["trained_tokens_per_s"] is not None),
               key=lambda c: c["trained_tokens_per_s"])
    assert coarse["layout"]["train_gpus"] == best["train_gpus"]


def test_libra_layout_is_verified_by_simulation():
    """libra's layout is the planner's candidate that simulates best (plan.verify_candidates of
    them, the best of each kind of fleet, its colocated plans, one per TP size, and the splits
    a search around the fastest reaches, plan.verify_steps each but no more than the
    experiment's own, on a seed other than the length sample's); 0 keeps the analytic
    optimum."""
    args = ["--json", "--set", "sim.modes=libra", "--steps", "3"]
    doc = json.loads(sim(*args).stdout)
    libra = doc["modes"]["libra"]
    v = libra["planner"]["verification"]
    assert v["steps"] == 3 and v["seed"] != doc["seed"]  # no longer than the experiment
    cands = v["candidates"]
    ranked = [c for c in cands if not c["colocated"]]
    assert len(ranked) >= 16 and sum(c["colocated"] for c in cands) == 4
    predicted = [c["predicted_step_s"] for c in cands]
    assert predicted == sorted(predicted)
    assert any(c["origin"] == "optimum" for c in cands)
    assert any(c["origin"].startswith("all TP") for c in cands)  # single-TP fleets proposed too
    chosen = [c for c in cands if c["chosen"]]
    assert len(chosen) == 1
    # the fastest, or, among the close ones raced on a second seed, the best mean of the two
    raced = [c for c in cands if "second_seed_trained_tokens_per_s" in c]
    if raced:
        def mean(c):
            return (c["trained_tokens_per_s"] + c["second_seed_trained_tokens_per_s"]) / 2
        assert mean(chosen[0]) == max(mean(c) for c in raced)
    else:
        assert chosen[0]["trained_tokens_per_s"] == max(
            c["trained_tokens_per_s"] for c in cands if c["trained_tokens_per_s"] is not None)
    assert libra["layout"]["origin"] == "verified"
    assert libra["layout"]["train_gpus"] == chosen[0]["train_gpus"]
    assert libra["layout"]["instances"] == chosen[0]["instances"]
    analytic = json.loads(sim(*args, "--set", "plan.verify_candidates=0").stdout)["modes"]["libra"]
    assert analytic["layout"]["origin"] == "planner"
    assert "verification" not in analytic["planner"]
    optimum = next(c for c in cands if c["origin"] == "optimum")
    assert analytic["layout"]["instances"] == optimum["instances"]


def test_simulator_rebuilds_the_trees():
    """C-MLFQ's trees are rebuilt every sched.rebuild_interval steps from the most recent 5000
    trajectories: over 14 steps of 512 a rebuild at every step forgets the oldest, which
    learning them all (an interval past the run) does not."""
    example = os.path.join(SOURCE_DIR, "examples", "sim-dapo-math-qwen3-4b.json")
    args = [example, "--json", "--set", "sim.modes=libra", "--steps", "14"]
    every = json.loads(sim(*args, "--set", "sched.rebuild_interval=1").stdout)["modes"]
    never = json.loads(sim(*args, "--set", "sched.rebuild_interval=1000").stdout)["modes"]
    assert every["libra"]["routing"] != never["libra"]["routing"]


def test_routing_splits_add_up_to_every_decision():
    """The simulator splits decisions by what its prompt had seen when each was made: a turn
    after a sibling finished is "siblings", a split shown wherever it holds a decision (it was
    left out when no trajectory began in it, 72 % of the decisions in none of the splits); a
    split's trajectories are those with a decision in it, all's each once."""
    doc = json.loads(sim("--json", "--steps", "10").stdout)
    for mode in ("async", "libra"):
        r = doc["modes"][mode]["routing"]
        splits = [r[k] for k in ("seen", "never", "siblings")]
        assert r["siblings"]["decisions"] > 0, r
        assert sum(x["decisions"] for x in splits) == r["all"]["decisions"], r
        assert max(x["trajectories"] for x in splits) <= r["all"]["trajectories"], r
        assert sum(x["trajectories"] for x in splits) >= r["all"]["trajectories"], r


def test_rollout_modes_staleness_counts_every_batch():
    """A fixed fleet without a trainer rolls out under one policy: every batch it accepts is of
    staleness 0, as colocated's (its histogram was all zeros)."""
    doc = json.loads(sim("--json", "--steps", "4", "--set", "sim.modes=rollout", "--set",
                         "sched.buckets=tp1x4:4000,tp2x2:12000,tp4x2:30000").stdout)
    mode = doc["modes"]["rollout"]
    hist = mode["run"]["staleness_histogram"]
    assert hist[0] == sum(s["trajectories"] for s in mode["steps"]) > 0 and sum(hist[1:]) == 0


def test_jsonl_header_and_steps():
    lines = sim("--jsonl", *QUICK).stdout.splitlines()
    head = json.loads(lines[0])
    assert head["schema"] == "libra.sim/1" and set(head["modes"]) == {"colocated", "async",
                                                                       "libra"}
    steps = [json.loads(line) for line in lines[1:]]
    assert len(steps) == 3 * 4
    assert [s["mode"] for s in steps[:4]] == ["colocated"] * 4
    assert [s["step"] for s in steps[:4]] == [0, 1, 2, 3]
    assert all(set(s["wasted_tokens"]) == WASTES and s["trained_tokens_per_s"] > 0 for s in steps)
    # the header is --json's document less the steps, its lines: routing and ratios were lost
    whole = json.loads(sim("--json", *QUICK).stdout)
    for mode in whole["modes"].values():
        mode.pop("steps")
    assert head == whole


def test_perfetto_file_is_a_trace_event_document(tmp_path):
    path = str(tmp_path / "step.json")
    sim("--perfetto", path, *QUICK)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    assert doc["otherData"]["mode"] == "libra" and doc["otherData"]["step"] == 1
    phases = {e["ph"] for e in events}
    assert {"X", "C", "M"} <= phases
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"rollout instances", "trajectories", "trainer"} <= names
    for e in events:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
    turns = [e for e in events if e["ph"] == "X" and e["name"].startswith("turn ")]
    assert turns and all("instance" in e["args"] for e in turns)
    assert any(e["name"] == "tools" for e in events)
    assert any(e["name"] == "train" and e["pid"] == 3 for e in events)


def test_an_output_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    p = sim("--steps", "2", "-o", str(tmp_path / "no-such-dir" / "out.txt"), check=False)
    assert p.returncode == 3 and p.stdout == "", p.stdout
    assert p.stderr.startswith("libra: cannot write ") and "no such file or directory" in p.stderr
    for flag in ("-o", "--perfetto"):  # a directory: the rename onto it at the end would fail
        p = sim("--steps", "2", flag, str(tmp_path), check=False)
        assert p.returncode == 3 and p.stdout == "", p.stdout
        assert p.stderr == f"libra: cannot write '{tmp_path}': is a directory\n"
    out = tmp_path / "out.txt"
    sim("--steps", "2", "-o", str(out))
    assert out.read_text().startswith("libra sim: ") and os.listdir(tmp_path) == ["out.txt"]


def test_a_perfetto_file_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    p = sim("--steps", "2", "--perfetto", str(tmp_path / "no-such-dir" / "step.json"),
            check=False)
    assert p.returncode == 3 and p.stdout == "", p.stdout
    assert p.stderr.startswith("libra: cannot write ") and "no such file or directory" in p.stderr
    assert os.listdir(tmp_path) == []


def test_an_output_fifo_gets_the_whole_table_once(tmp_path):
    """Checking -o before the run must not open a FIFO: its reader would see the input end."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        sim("--steps", "2", "-o", str(fifo))
        out, _ = reader.communicate(timeout=60)
    finally:
        reader.kill()
    assert out.startswith("libra sim: ") and "tokens/s" in out, out


def test_perfetto_step_past_the_last_is_refused(tmp_path):
    """sim.trace_step names the step --perfetto records: one the run does not reach is refused,
    not replaced by the first after the warm-up."""
    path = tmp_path / "step.json"
    p = sim("--perfetto", str(path), *QUICK, "--set", "sim.trace_step=4", check=False)
    assert p.returncode == 2 and p.stdout == "" and not path.exists()
    assert "sim.trace_step: step 4 is past the last step, 3" in p.stderr
    sim("--perfetto", str(path), *QUICK, "--set", "sim.trace_step=3")
    with open(path, encoding="utf-8") as f:
        assert json.load(f)["otherData"]["step"] == 3


def test_perfetto_step_without_perfetto_is_refused():
    """A flag that sets sim.trace_step without --perfetto would change nothing but the digest."""
    for args in (["--set", "sim.trace_step=2"], ["--sweep", "sim.trace_step=1,2"]):
        p = sim(*QUICK, *args, check=False)
        assert p.returncode == 2 and p.stdout == "", args
        assert "sim.trace_step is the step --perfetto records, and there is no --perfetto FILE" \
            in p.stderr
    assert sim(*QUICK, "--set", "sim.trace_step=-1").returncode == 0  # the default asks nothing


def test_timeline_of_a_step_range():
    plain = json.loads(sim("--json", *QUICK).stdout)
    doc = json.loads(sim("--json", *QUICK, "--timeline", "1:9").stdout)
    for name, m in doc["modes"].items():
        tl = m.pop("timeline")
        assert tl["steps"] == {"first": 1, "last": 3}  # cut at the last step run
        assert tl["from_s"] == m["steps"][0]["end_s"] and tl["to_s"] == m["steps"][3]["end_s"]
        assert tl["trainer"]["gpus"] == m["layout"]["train_gpus"]
        assert len(tl["instances"]) == m["layout"]["instance_count"]
        for row in [tl["trainer"], *tl["instances"]]:
            ends = [x for iv in row["intervals"] for x in iv[:2]]
            assert ends == sorted(ends) and {iv[2] for iv in row["intervals"]} <= {
                "rollout", "train", "sync"}
        # recording changes nothing else
        assert m == plain["modes"][name]
    head = json.loads(sim("--jsonl", *QUICK, "--timeline", "2:2").stdout.splitlines()[0])
    assert all(m["timeline"]["steps"] == {"first": 2, "last": 2} for m in head["modes"].values())
    p = sim("--json", *QUICK, "--timeline", "4:5", check=False)
    assert p.returncode == 2 and "sim.timeline_steps: step 4 is past the last step, 3" in p.stderr
    p = sim(*QUICK, "--timeline", "3", check=False)
    assert p.returncode == 2 and "--timeline: expected A:B" in p.stderr
    # the table does not show a timeline: asked for without --json or --jsonl, it is refused
    for args in (["--timeline", "1:2"], ["--set", "sim.timeline_steps=1:2"],
                 ["--sweep", "sim.timeline_steps=1:2,2:3"]):
        p = sim(*QUICK, *args, check=False)
        assert p.returncode == 2 and p.stdout == "", args
        assert "the GPU timeline is recorded in the JSON, which the table does not" in p.stderr
    assert sim(*QUICK, "--set", "sim.timeline_steps=").returncode == 0  # off: nothing asked


def test_rollout_mode_with_a_fleet_and_failure():
    doc = json.loads(sim("--json", "--steps", "3", "--set", "sim.modes=rollout", "--set",
                         "sched.buckets=tp1x4:4000,tp2x2:12000,tp4x2:30000", "--set",
                         "sim.fail_time_s=30", "--set", "sim.fail_instance=4", "--set",
                         "sim.warmup_steps=0").stdout)
    run = doc["modes"]["rollout"]["run"]
    assert doc["modes"]["rollout"]["layout"]["instances"] == "tp1x4,tp2x2,tp4x2"
    assert run["counts"]["failed_turns"] >= 1
    assert run["counts"]["finished"] == run["counts"]["started"]
    assert run["trained_tokens_all"] == run["generated_tokens"] - run["wasted_tokens"]["failure"]


def test_a_failure_after_the_run_ended_is_noted():
    """A failure time past a mode's end changes nothing there: stderr names the modes that ended
    before it; one that fired is not named."""
    base = ("--steps", "3", "--set", "sim.modes=rollout", "--set",
            "sched.buckets=tp1x4:4000,tp2x2:12000,tp4x2:30000", "--set", "sim.warmup_steps=0")
    p = sim(*base, "--set", "sim.fail_time_s=1000000")
    assert re.search(r"libra: sim: note: sim\.fail_time_s is 1000000 s, after these runs ended "
                     r"\(rollout at [0-9.]+ s\): no instance failed in them\n", p.stderr), p.stderr
    assert "fail_time_s" not in sim(*base, "--set", "sim.fail_time_s=30").stderr


def test_trace_replay(tmp_path):
    trace = str(tmp_path / "t.jsonl")
    subprocess.run([LIBRA, "trace", "gen", "search-r1", "--steps", "2", "--batch", "20", "-o",
                    trace], check=True, capture_output=True)
    doc = json.loads(sim("--json", "--trace", trace, "--workload", "search-r1", "--batch", "20",
                         "--samples", "5", "--steps", "3", "--set", "sim.modes=colocated",
                         "--set", "sim.colocated_tp=2", "--set", "sim.warmup_steps=0").stdout)
    run = doc["modes"]["colocated"]["run"]
    assert doc["modes"]["colocated"]["layout"]["origin"] == "pinned"
    assert run["trajectories"] == 60


def test_trace_smaller_than_a_group_is_an_error(tmp_path):
    """A trace of fewer trajectories than one GRPO group (none, or one of four) is refused before
    any layout is made (it once divided by zero building the planner's sample)."""
    source = os.path.join(SOURCE_DIR, "tests", "data", "trace", "small.jsonl")
    with open(source, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    for n, words in ((0, "0 trajectories"), (1, "1 trajectory")):
        trace = tmp_path / f"t{n}.jsonl"
        trace.write_text("".join(lines[:1 + n]), encoding="utf-8")
        for mode in ("colocated", "libra"):
            p = sim("--trace", str(trace), "--steps", "2", "--set", f"sim.modes={mode}",
                    "--set", "rl.samples=2", check=False)
            assert p.returncode == 2 and p.stdout == ""
            assert p.stderr == (f"libra: sim: the trace holds {words}, fewer than one group of "
                                "rl.samples = 2\n")


def test_a_trace_whose_groups_are_not_rl_samples_is_refused():
    """A trace's header gives its GRPO group size; under another rl.samples its consecutive runs
    of rl.samples records would be groups cut across prompts (small.jsonl's groups of 2 were
    replayed as groups of 4, its dynamic sampling and advantages judged on two prompts at
    once). sim, plan and load name the trace's header; a sweep each failed cell. route eval
    replays the trace's own groups."""
    source = os.path.join(SOURCE_DIR, "tests", "data", "trace", "small.jsonl")
    want = (f"{source}:1:1: the trace's GRPO groups are 2 trajectories (its header's "
            "group_size), not rl.samples = 4: set rl.samples to 2")
    p = sim("--trace", source, "--steps", "2", check=False)
    assert p.returncode == 2 and p.stdout == "" and p.stderr == f"libra: sim: {want}\n", p.stderr
    p = subprocess.run([LIBRA, "plan", "--trace", source], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr == f"libra: plan: {want}\n", p.stderr
    p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", "--trace", source],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr == f"libra: load: {want}\n", p.stderr
    p = sim("--trace", source, "--steps", "2", "--sweep", "rl.max_staleness=4,5", "--json",
            check=False)
    # refused before any cell runs, at the grid's first point
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr == f"libra: sim: --sweep: 'rl.max_staleness=4': {want}\n", p.stderr
    assert sim("--trace", source, "--steps", "2", "--set", "rl.samples=2").returncode == 0
    p = subprocess.run([LIBRA, "route", "eval", source], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_a_trace_whose_groups_no_rl_samples_can_be_is_refused(tmp_path):
    """A header's group_size past rl.samples' range cannot be trained: the advice to set
    rl.samples to it (2^63 - 1) named a value rl.samples refuses."""
    source = os.path.join(SOURCE_DIR, "tests", "data", "trace", "small.jsonl")
    with open(source, encoding="utf-8") as f:
        header, *records = f.read().splitlines()
    doc = json.loads(header)
    doc["group_size"] = 2**63 - 1
    # one group, as a group_size asks of its runs (docs/trace-format.md, rule 7)
    records = [json.dumps({**json.loads(r), "step": 0, "prompt_id": 0}) for r in records]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([json.dumps(doc), *records]) + "\n", encoding="utf-8")
    for command in ("sim", "plan"):
        p = subprocess.run([LIBRA, command, "--trace", str(path)], capture_output=True,
                           text=True)
        assert p.returncode == 2 and p.stderr == (
            f"libra: {command}: {path}:1:1: the trace's GRPO groups are {2**63 - 1} "
            "trajectories (its header's group_size), more than rl.samples can be (1024): its "
            "groups cannot be trained\n"), p.stderr


def test_dynamic_sampling_that_drops_every_group_is_an_error(tmp_path):
    """Dynamic sampling replaces every group whose rewards are all equal: with groups of one
    sample, or a trace whose groups all have equal rewards, every group is dropped and a run
    that replaces them would never end (it did, in the async modes). Both are refused before
    anything runs, and config check refuses the first as every command does."""
    p = sim("--workload", "dapo-math-verl", "--samples", "1", "--batch", "8", "--steps", "1",
            "--set", "sim.modes=async", check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("libra: --samples: 1 with rl.dynamic_sampling gen_batch: a group of one "
                        "sample always has equal rewards, so every group would be dropped and "
                        "nothing would train\n")
    config = write(tmp_path, "one.json", {"workload": {"name": "dapo-math"},
                                          "rl": {"samples": 1, "batch_trajectories": 8,
                                                 "dynamic_sampling": "regenerate"}})
    p = subprocess.run([LIBRA, "config", "check", config], capture_output=True, text=True)
    assert p.returncode == 1 and "rl.samples" in p.stderr and "nothing would train" in p.stderr
    trace = str(tmp_path / "t.jsonl")
    subprocess.run([LIBRA, "trace", "gen", "dapo-math", "--steps", "1", "--batch", "16",
                    "--samples", "4", "-o", trace], check=True, capture_output=True)
    with open(trace, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    with open(trace, "w", encoding="utf-8") as f:
        for r in records:
            if "turns" in r:
                r["reward"] = 1.0
            f.write(json.dumps(r) + "\n")
    for mode in ("async", "colocated", "libra"):
        p = sim("--trace", trace, "--samples", "4", "--batch", "16", "--steps", "2", "--set",
                "rl.dynamic_sampling=regenerate", "--set", f"sim.modes={mode}", check=False)
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr == ("libra: sim: rl.dynamic_sampling regenerate filters every group of the "
                            "trace (4 of rl.samples = 4): no batch can fill\n")


def test_tool_pools_report_calls_waits_and_utilisation():
    """run.tool_pools: R2E-Gym's sandbox tools run a worker per call (no wait, no utilisation)
    and its validator on 64 workers; a large batch queues for them, a small one barely."""
    def pools(batch):
        doc = json.loads(sim("--json", "--steps", "2", "--batch", str(batch), "--set",
                             "sim.modes=colocated", "--set", "sim.colocated_tp=8").stdout)
        return {p["tool"]: p for p in doc["modes"]["colocated"]["run"]["tool_pools"]}
    small, large = pools(32), pools(2048)
    assert list(large) == ["execute_bash", "file_editor", "search", "validator"]
    for name, p in large.items():
        assert p["calls"] > small[name]["calls"] > 0
        if name != "validator":
            assert p["workers"] == 0 and p["utilisation"] is None and p["mean_wait_s"] == 0
    v, w = large["validator"], small["validator"]
    assert v["workers"] == 64 and 0 < w["utilisation"] < v["utilisation"] <= 1
    assert v["mean_wait_s"] > 10 * w["mean_wait_s"]


def test_a_warm_up_as_long_as_the_run_leaves_one_step_measured():
    """The header states the warm-up the rates exclude: sim.warmup_steps, at most steps - 1."""
    for warmup in ("2", "5"):
        p = sim("--steps", "3", "--set", f"sim.warmup_steps={warmup}", "--set",
                "sim.modes=colocated")
        assert ", 3 steps (2 warm-up), " in p.stdout.splitlines()[0]
        assert "the rates cover 1 step after 2 of warm-up" in p.stderr


def halves_from_steps(m):
    """Trained tokens/s over each half of the measured steps, from the per-step records."""
    w = m["run"]["warmup_steps"]
    steps, start = m["steps"][w:], m["steps"][w - 1]["end_s"] if w else 0.0
    mid = len(steps) // 2
    split = steps[mid - 1]["end_s"]
    first = sum(s["trained_tokens"] for s in steps[:mid]) / (split - start)
    second = sum(s["trained_tokens"] for s in steps[mid:]) / (steps[-1]["end_s"] - split)
    return first, second, start


def test_rates_over_each_half_say_whether_the_run_settled():
    """run.trained_tokens_per_s_halves are the halves' rates, which weigh up to the run's own;
    a mode that moved by more than 25 % between them is named on stderr (the drift example's
    trajectories grow over the run), one that did not is not (the default)."""
    drift = os.path.join(SOURCE_DIR, "examples", "sim-drift-r2e-gym-qwen3-14b.json")
    p = sim(drift, "--json")
    for name, m in json.loads(p.stdout)["modes"].items():
        run = m["run"]
        first, second, start = halves_from_steps(m)
        assert run["trained_tokens_per_s_halves"] == [approx(first), approx(second)]
        split = m["steps"][run["warmup_steps"] + (len(m["steps"]) - run["warmup_steps"]) // 2 - 1]
        weighed = (first * (split["end_s"] - start) + second * (run["simulated_s"] - split["end_s"]))
        assert weighed / run["measured_s"] == approx(run["trained_tokens_per_s"])
        assert second > 1.25 * first, name
    note = [line for line in p.stderr.splitlines() if "between the halves" in line]
    assert len(note) == 1 and "libra 1506 -> 2144" in note[0] and "not a steady-state figure" in note[0]
    assert "between the halves" not in sim().stderr
    p = sim(drift, "--seeds", "2", "--set", "sim.modes=colocated")
    assert "in 2 of 2 runs a mode's trained tokens/s moved by more than 25 %" in p.stderr
    one = json.loads(sim("--json", "--steps", "3", "--set", "sim.warmup_steps=2", "--set",
                         "sim.modes=colocated").stdout)
    assert one["modes"]["colocated"]["run"]["trained_tokens_per_s_halves"] == [0, 0]


def test_an_async_mode_with_no_split_says_which_bounds_leave_none():
    p = sim("--steps", "3", "--gpus", "8", "--set", "sim.modes=async", check=False)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == ("libra: sim: async: no split of 8 GPUs trains on plan.min_train_gpus = 8 "
                        "or more and rolls out on plan.min_rollout_gpus = 8 or more, in steps of "
                        "plan.granularity_gpus = 8\n")


def test_a_list_with_an_empty_member_is_refused():
    p = sim("--steps", "3", "--set", "sim.modes=colocated,", check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("libra: --set sim.modes: members must be among ")


def test_perfetto_and_output_naming_one_file_are_refused(tmp_path):
    out = str(tmp_path / "x.json")
    for other in (out, f"{tmp_path}/./x.json"):  # no file there yet: one name in one directory
        p = sim("--steps", "3", "--perfetto", out, "-o", other, check=False)
        assert p.returncode == 2 and p.stdout == ""
        assert "--perfetto and -o name one file" in p.stderr


def test_tuning_failures_name_their_causes():
    """When no candidate of a tuning sweep can run, the error counts the causes (here every TP
    of a 2-GPU colocated job: the model's training state does not fit) and exits 1; beside
    other modes it says how to run them without it."""
    p = sim("--steps", "3", "--gpus", "2", "--set", "sim.modes=colocated", check=False)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == ("libra: sim: colocated: no colocated layout can run: all 4 candidates "
                        "tried failed: 4 x no training layout of 2 GPUs: training memory: no "
                        "layout fits the GPUs\n")
    # a baseline that cannot run stops the other modes too: the error says how to run them
    one = ("--steps", "3", "--batch", "1", "--samples", "1")
    p = sim(*one, check=False)
    assert p.returncode == 1 and p.stdout == ""
    assert "rl.minibatches mini-batches of rl.batch_trajectories" in p.stderr
    assert p.stderr.endswith(" (sim.modes without colocated runs the others)\n"), p.stderr
    assert sim(*one, "--set", "sim.modes=async,libra").returncode == 0


def test_examples_run():
    examples = os.path.join(SOURCE_DIR, "examples")
    for name in sorted(os.listdir(examples)):
        if not name.startswith("sim-"):
            continue
        out = sim(os.path.join(examples, name), "--steps", "2", "--set",
                  "sim.warmup_steps=0").stdout  # tuning takes the run's 2 steps
        assert "trained tokens/s" in out or "tokens/s" in out, name


def test_bad_experiment_files(tmp_path):
    cases = [
        ({"sim": {"modes": ["verl"]}}, 2, "sim.modes: members must be among colocated, async"),
        ({"rl": {"sync_mode": "pause"}}, 2, "rl.sync_mode: must be one of"),
        ({"sim": {"warmup": 3}}, 2, "unknown key"),
        ({"rl": {"transport": "reshard"}, "sim": {"modes": ["async"], "async_tp": 2,
                                                  "async_train_gpus": 32}},
         2, "rl.transport: reshard"),
        ({"rl": {"sync_mode": "keep"}, "sim": {"modes": ["libra"]}}, 2,
         "rl.sync_mode: keep generates through the update"),
        ({"rl": {"max_staleness": 1}, "sim": {"modes": ["libra"]}}, 2,
         "rl.max_staleness: 1 is below rl.sync_interval - 1"),
        ({"sim": {"modes": ["rollout"]}}, 2, "sched.buckets: the rollout layout needs a fleet"),
        ({"sim": {"modes": ["rollout"]}, "sched": {"buckets": "tp8x9:1000"}}, 2,
         "sched.buckets: the fleet takes 72 of 48 GPUs"),
    ]
    for i, (cfg, code, msg) in enumerate(cases):
        path = write(tmp_path, f"bad{i}.json", cfg)
        p = sim(path, "--steps", "2", check=False)
        assert p.returncode == code, (cfg, p.returncode, p.stderr)
        assert msg in p.stderr, (cfg, p.stderr)
        assert p.stderr.startswith("libra: "), p.stderr
        assert p.stdout == "", p.stdout
    p = sim(write(tmp_path, "syntax.json", "{\"rl\": {"), check=False)
    assert p.returncode == 2 and "syntax.json:1:" in p.stderr
    p = sim(str(tmp_path / "missing.json"), check=False)
    assert p.returncode == 3 and "cannot read" in p.stderr
    p = sim("--trace", str(tmp_path / "missing.jsonl"), check=False)
    assert p.returncode == 3
    p = sim("a.json", "b.json", check=False)
    assert p.returncode == 2 and "at most one experiment file" in p.stderr


def test_replans_need_a_model_that_fits_the_running_fleet():
    """A replan is accepted only where the simulated step over the model's prediction for the
    running fleet is within 1.25 either way (docs/planner.md §5). On DAPO-Math at staleness 2
    with weights every step the window's model predicts the running fleet at about twice its
    step; the replans it proposes are refused for that, and the run is step for step the run
    without replanning."""
    example = os.path.join(SOURCE_DIR, "examples", "sim-dapo-math-qwen3-4b.json")
    args = [example, "--steps", "30", "--json", "--set", "sim.modes=libra", "--set",
            "plan.tp_pattern=", "--set", "sched.buckets=", "--set", "sim.planner=true", "--set",
            "rl.max_staleness=2", "--set", "rl.sync_interval=1"]
    run = json.loads(sim(*args).stdout)["modes"]["libra"]["run"]
    decisions = run["replan"]["decisions"]
    unfit = [d for d in decisions if not 1 / 1.25 <= d["correction"] <= 1.25]
    assert unfit and not any(d["accepted"] for d in unfit)
    assert all(d["why"] == "the model does not fit the running plan" for d in unfit
               if d["candidate"] != d["fleet"])
    static = json.loads(sim(*args, "--set", "plan.replan_interval_steps=0", "--set",
                            "plan.replan_pressure=false").stdout)["modes"]["libra"]["run"]
    assert run["replan"]["accepted"] == 0
    assert run["trained_tokens_per_s"] == static["trained_tokens_per_s"]


def test_a_trajectory_timeout_stops_and_masks_the_slow_ones():
    """rl.trajectory_timeout_s: R2E-Gym's long tail stopped at 60 s in every mode, its tokens
    counted as aborted waste, none of the stopped trained; the table's header says so, and
    libra plan says its predicted steps do not cut at it (only its verification's simulations
    do: without one the flag is refused)."""
    args = (*QUICK, "--set", "rl.trajectory_timeout_s=60")
    doc = json.loads(sim(*args, "--json").stdout)
    for name, mode in doc["modes"].items():
        counts, run = mode["run"]["counts"], mode["run"]
        assert counts["timed_out"] > 0 and counts["timed_out"] <= counts["aborted"], name
        assert run["wasted_tokens"]["aborted"] > 0, name
        assert any(s["trajectories"] < 32 for s in mode["steps"]), name  # masked ones left out
    plain = json.loads(sim(*QUICK, "--json").stdout)
    assert all(m["run"]["counts"]["timed_out"] == 0 for m in plain["modes"].values())
    assert "trajectories stopped and masked after 60 s" in sim(*args).stdout.splitlines()[0]
    plan = (LIBRA, "plan", "--gpus", "16", "--set", "rl.steps=4", "--set",
            "rl.trajectory_timeout_s=60")
    p = subprocess.run([*plan, "--verify", "1"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "trajectory timeout 60 s: the verification's simulations" in (
        p.stdout)
    p = subprocess.run([*plan, "--verify", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr == (
        "libra: --set rl.trajectory_timeout_s: rl.trajectory_timeout_s=60.0 has no effect with "
        "plan.verify_candidates 0: libra plan simulates nothing\n"), p.stderr


def test_the_pool_lends_an_hsdp_layouts_shard_groups():
    """An HSDP layout holds a whole copy of the state in each shard group: the pool lends the
    planner's HSDP layout as it is, a group a replica (it had judged it plain FSDP, said
    "FSDP shards the whole state over every replica" and swapped in a Megatron layout)."""
    doc = json.loads(sim("--model", "qwen3-4b", "--set", "plan.fsdp=search", "--set",
                         "sim.modes=libra", "--set", "ehp.enabled=true", "--set",
                         "plan.verify_candidates=0", "--steps", "40", "--json").stdout)
    libra = doc["modes"]["libra"]
    layout, pool = libra["layout"], libra["layout"]["pool"]
    assert layout["train"]["fsdp"] and layout["train"]["shard_dp"] == 2, layout
    group = layout["train"]["shard_dp"] * layout["train"]["tp"] * layout["train"]["cp"]
    assert pool["note"] == "" and pool["replica_gpus"] == group, pool
    assert layout["train"]["dp"] == pool["core_replicas"] * layout["train"]["shard_dp"]
    assert layout["train_gpus"] == pool["core_replicas"] * group
    trained = {s["pool"]["train_gpus"] for s in libra["steps"]}
    assert max(trained) > layout["train_gpus"], trained  # a lent group trained
    assert all((g - layout["train_gpus"]) % group == 0 for g in trained), trained
    # the run's pool sums the steps' decisions and holds nothing else: its split was zeros
    run_pool = libra["run"]["pool"]
    assert list(run_pool) == ["decisions"], run_pool
    for k, v in run_pool["decisions"].items():
        assert v == sum(s["pool"]["decisions"][k] for s in libra["steps"]), k


def test_a_traces_records_past_its_last_whole_group_are_noted(tmp_path):
    """docs/sim.md: groups are consecutive runs of rl.samples records; those past the last whole
    group are never drawn, which a run says (as libra load does) rather than drop silently."""
    with open(os.path.join(SOURCE_DIR, "docs", "trace-format.md"), encoding="utf-8") as f:
        example = f.read().split("group size 2):\n\n```\n", 1)[1].split("```", 1)[0]
    trace = tmp_path / "three.jsonl"  # the documented example: 3 records, groups of 2
    trace.write_text(example)
    args = [LIBRA, "sim", "--trace", str(trace), "--steps", "2", "--batch", "2", "--samples",
            "2", "--gpus", "16", "--set", "sim.modes=async"]
    for extra in ([], ["--sweep", "rl.max_staleness=4,5"]):
        r = subprocess.run(args + extra, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        note = ("libra: sim: note: the trace's last 1 trajectory fills no group of 2 "
                "(rl.samples): it is never played")
        assert r.stderr.count(note) == 1, r.stderr


def records_file(path, n, header):
    """n records of one one-turn trajectory each, in groups of 2, after header."""
    lines = [json.dumps(header)]
    for i in range(n):
        lines.append(json.dumps({"step": 0, "prompt_id": i // 2, "epoch": 0, "sample": i % 2,
                                 "version_start": 0, "version_end": 0, "finish": "completed",
                                 "reward": float(i % 2), "turns": [
                                     {"prompt_tokens": 100, "generated_tokens": 50}]}))
    path.write_text("\n".join(lines) + "\n")


def test_each_grouping_of_a_sweep_notes_its_leftover_records(tmp_path):
    """A sweep over rl.samples leaves a different tail of the trace undrawn in each: every one
    is noted (only the first cell's was)."""
    trace = tmp_path / "seven.jsonl"
    records_file(trace, 7, {"libra_trace": 1, "workload": "r2e-gym", "model": "qwen3-14b"})
    r = subprocess.run([LIBRA, "sim", "--trace", str(trace), "--sweep", "rl.samples=2,4",
                        "--set", "rl.batch_trajectories=4", "--steps", "1", "--gpus", "16",
                        "--set", "sim.modes=async"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for left, samples in ((1, 2), (3, 4)):
        assert f"the trace's last {left} trajector" in r.stderr, r.stderr
        assert f"no group of {samples} (rl.samples)" in r.stderr, r.stderr


def test_a_refused_trace_gets_its_error_alone(tmp_path):
    """A trace the run refuses (its header's groups are not rl.samples) is not also told what
    a run would have left undrawn."""
    trace = tmp_path / "five.jsonl"
    records_file(trace, 5, {"libra_trace": 1, "workload": "r2e-gym", "model": "qwen3-14b",
                            "group_size": 2})
    r = subprocess.run([LIBRA, "sim", "--trace", str(trace), "--set", "rl.samples=4", "--steps",
                        "1", "--set", "rl.batch_trajectories=4"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "note:" not in r.stderr and "rl.samples = 4" in r.stderr, r.stderr
