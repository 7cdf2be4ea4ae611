"""End-to-end tests of `libra plan` (docs/cli.md, docs/planner.md): the default plan, its JSON
document, infeasible and bad input, a trace as the length sample, determinism.

Needs LIBRA_BIN (the built binary) and LIBRA_SOURCE_DIR.
"""

import json
import os
import re
import subprocess

LIBRA = os.environ["LIBRA_BIN"]


def run(*args):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120)


def plan_json(*args):
    r = run("plan", "--json", *args)
    assert r.returncode in (0, 1), r.stderr
    return r, json.loads(r.stdout)


def test_default_plan_is_feasible_and_printed():
    r = run("plan")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("48 × a800-80g (8 per node), qwen3-14b, async, batch 32")
    for needle in ("step time", "training ", "rollout ", "buckets ", "nodes (GPU: role)",
                   "verification: 20 candidates (the best by analytic step; the best fleet of "
                   "each kind simulated: all TP1, all TP2, all TP4, all TP8; 4 colocated plans; "
                   "and the splits a search around the fastest added), each simulated for 17",
                   "optimality gap 0 % of the analytic step (proven optimal)"):
        assert needle in out, needle
    assert re.search(r"libra: plan: searched in [0-9.]+ ms", r.stderr)
    assert re.search(r"libra: plan: verified in [0-9.]+ ms", r.stderr)


def test_progress_only_when_asked_off_a_terminal():
    """The progress line (docs/cli.md, --progress): the verification's steps simulated, on
    stderr only when asked for off a terminal; the plan printed is the same."""
    quiet, loud = run("plan"), run("plan", "--progress")
    assert loud.returncode == 0 and quiet.returncode == 0
    lines = [ln for ln in loud.stderr.splitlines() if ln.startswith("libra plan: ")]
    assert lines and "libra plan: " not in quiet.stderr
    assert re.match(r"libra plan: (\d+)/\1 steps simulated \(100%\), ", lines[-1]), lines[-1]
    assert loud.stdout == quiet.stdout


def test_gap_tolerance_states_its_bound():
    _, exact = plan_json("--gpus", "128", "--verify", "0")
    r, tol = plan_json("--gpus", "128", "--gap-tolerance", "0.02", "--verify", "0")
    assert r.returncode == 0
    bound = 1 - 1 / 1.02
    assert abs(tol["search"]["gap"] - bound) < 1e-12 and not tol["search"]["stopped"]
    assert exact["objective"]["step_s"] <= tol["objective"]["step_s"] <= \
        exact["objective"]["step_s"] * 1.02
    assert "(at most; plan.gap_tolerance)" in run("plan", "--gap-tolerance", "0.02").stdout
    bad = run("plan", "--gap-tolerance", "0.5")
    assert bad.returncode == 2 and "--gap-tolerance: must be in 0..0.1" in bad.stderr


def test_the_scoring_budget_stops_the_search_the_same_on_every_machine():
    args = ("--gpus", "512", "--verify", "0", "--set", "plan.max_scored=10")
    r, a = plan_json(*args)
    assert r.returncode == 0
    search = a["search"]
    assert search["stopped"] and search["stopped_by"] == "plan.max_scored"
    assert 10 <= search["rollout_scored"] < 20 and search["gap"] > 0
    _, b = plan_json(*args)  # a count, not a clock: the same plan every time
    assert b["objective"] == a["objective"] and b["search"] == a["search"]
    assert "(stopped by plan.max_scored)" in run("plan", *args).stdout
    _, exact = plan_json("--gpus", "512", "--verify", "0", "--set", "plan.max_scored=0")
    assert not exact["search"]["stopped"] and exact["search"]["stopped_by"] is None
    assert exact["objective"]["step_s"] <= a["objective"]["step_s"]


def test_json_document_is_consistent():
    r, doc = plan_json()
    assert r.returncode == 0
    assert doc["schema"] == "libra.plan/1"
    assert re.fullmatch(r"[0-9a-f]{16}", doc["config_digest"])
    assert doc["seed"] == 1 and doc["libra_version"]
    assert doc["feasible"] and doc["mode"] == "async"
    obj, train, roll = doc["objective"], doc["train"], doc["rollout"]
    parts = obj["parts"]  # docs/planner.md §2.4: the step is its largest term
    assert obj["step_s"] == max(obj["train_s"] + parts["update_train_s"], obj["rollout_s"])
    assert obj["rollout_s"] == max(parts["fixed_point_s"], parts["fleet_s"], parts["span_s"])
    assert parts["fleet_s"] == max(parts["work_s"], parts["little_s"]) + \
        parts["update_s"] / parts["interval"]
    assert parts["window"] == 5 and parts["interval"] == 5  # staleness 4, updates every 5
    assert parts["drain_s"] == parts["reprefill_s"] == 0  # nothing carries over an update
    assert obj["bound_by"] in ("training", "span", "fleet", "fixed point")
    assert train["gpus"] + roll["gpus"] == doc["gpus"] == 48
    assert train["gpus"] == train["tp"] * train["pp"] * train["cp"] * train["dp"]
    tp_gpus = sum(int(k[2:]) * v for k, v in roll["instances"].items())
    assert tp_gpus == roll["gpus"]
    search = doc["search"]
    assert search["gap"] == 0 and not search["stopped"]
    assert search["train_scored"] + search["train_pruned"] == search["train_space"]
    assert search["rollout_scored"] + search["rollout_pruned"] == search["rollout_space"]
    roles = [g["role"] for node in doc["placement"] for g in node["gpus"]]
    assert roles.count("train") == train["gpus"] and roles.count("rollout") == roll["gpus"]
    # the buckets' text form parses back to the JSON form's instances
    counts = {}
    for part in roll["buckets_text"].split(","):
        for tp in part.split(":")[0].split("+"):
            size, n = re.fullmatch(r"tp(\d)x(\d+)", tp).groups()
            counts[size] = counts.get(size, 0) + int(n)
    assert sum(counts.values()) == roll["instance_count"]


def test_the_plan_says_what_dynamic_sampling_keeps():
    """Under dynamic sampling the plan names the rule, the share of the sample's groups kept
    and a colocated step's expected generation rounds; without it every group is kept."""
    args = ("--workload", "dapo-math-verl", "--model", "qwen2.5-7b", "--gpus", "32", "--batch",
            "1024", "--set", "plan.verify_candidates=0")
    sample = plan_json(*args)[1]["sample"]
    assert 0 < sample["kept_share"] < 1 and sample["generation_rounds"] >= 1
    assert "dynamic sampling gen_batch: " in run("plan", *args).stdout
    _, colocated = plan_json(*args, "--set", "plan.mode=colocated", "--set",
                             "rl.dynamic_sampling=regenerate")
    assert colocated["sample"]["generation_rounds"] > 1  # the missing groups, each its tail
    _, off = plan_json(*args, "--set", "rl.dynamic_sampling=off")
    assert off["sample"]["kept_share"] == 1 and off["sample"]["generation_rounds"] == 1
    assert "dynamic sampling" not in run("plan", *args, "--set",
                                         "rl.dynamic_sampling=off").stdout


def test_plan_and_sim_plan_on_one_sample():
    """libra plan and libra sim's libra mode plan on the same length sample (the fewest whole
    batches holding 256 trajectories, at most 8, spread over the run's steps), so they predict
    the same step."""
    for batch, batches in (("16", 8), ("64", 4), ("512", 1)):
        _, doc = plan_json("--batch", batch, "--verify", "0", "--steps", "1")
        assert doc["sample"]["batches"] == batches
        sim = run("sim", "--batch", batch, "--set", "sim.modes=libra", "--steps", "1", "--json",
                  "--set", "plan.verify_candidates=0")
        assert sim.returncode == 0, sim.stderr
        predicted = json.loads(sim.stdout)["modes"]["libra"]["planner"]["predicted"]
        assert predicted["step_s"] == doc["objective"]["step_s"]


def test_activation_recompute_when_nothing_fits_without():
    """Qwen3-32B with R2E-Gym's 32 K sequences fits 32 H100 only with full activation recompute:
    plan.recompute fallback (the default) searches it for each split where nothing fits without
    it and says so; off refuses the job; libra cost gives the chosen layout the same memory."""
    args = ["--gpus", "32", "--hardware", "h100-sxm", "--model", "qwen3-32b"]
    r, doc = plan_json(*args)
    assert r.returncode == 0 and doc["feasible"]
    train = doc["train"]
    assert train["recompute"] is True and train["sharding"] == "fsdp"  # over CP·DP: 16 ways
    text = run("plan", *args).stdout
    assert ", FSDP (ZeRO-3), full activation recompute" in text
    off, _ = plan_json(*args, "--set", "plan.recompute=off")
    assert off.returncode == 1
    cost = run("cost", *args[2:], "--gpus", str(train["gpus"]), "--tp", str(train["tp"]), "--pp",
               str(train["pp"]), "--cp", str(train["cp"]), "--dp", str(train["dp"]),
               "--micro-batch-tokens", str(train["micro_batch_tokens_per_gpu"] * train["cp"]),
               # Megatron's distributed optimizer shards what ZeRO-1 does
               "--zero", "3" if train["sharding"] == "fsdp" else "1", "--json")
    assert cost.returncode == 0, cost.stderr
    memory = json.loads(cost.stdout)["training"]["memory"]["total_bytes"]
    assert memory == train["memory_per_gpu"]["total_bytes"]
    # each split decides alone: on the first batches of the default job (a one-step run's
    # sample) 16 GPUs fit without recompute, 24 do not
    for split, recompute in ((16, False), (24, True)):
        pin = ["--verify", "0", "--steps", "1", "--set", f"plan.min_train_gpus={split}",
               "--set", f"plan.min_rollout_gpus={48 - split}"]
        _, pinned = plan_json(*pin)
        assert pinned["train"]["gpus"] == split and pinned["train"]["recompute"] is recompute
        off, _ = plan_json(*pin, "--set", "plan.recompute=off")
        assert off.returncode == (0 if split == 16 else 1)


def test_same_input_same_output():
    a, b = run("plan", "--json", "--gpus", "64"), run("plan", "--json", "--gpus", "64")
    assert a.returncode == 0 and a.stdout == b.stdout


def test_colocated_uses_every_gpu_for_both():
    r, doc = plan_json("--mode", "colocated", "--gpus", "16")
    assert r.returncode == 0, r.stderr
    assert doc["mode"] == "colocated"
    assert doc["train"]["gpus"] == doc["rollout"]["gpus"] == 16
    obj = doc["objective"]
    assert abs(obj["step_s"] - (obj["rollout_s"] + obj["train_s"] + obj["switch_s"])) < 1e-9 * obj["step_s"]


def test_homogeneous_reports_the_heterogeneous_gain():
    r = run("plan", "--homogeneous-rollout")
    assert r.returncode == 0, r.stderr
    assert "a heterogeneous fleet would take" in r.stdout
    _, doc = plan_json("--set", "plan.homogeneous_rollout=true")
    assert len([n for n in doc["rollout"]["instances"].values() if n]) == 1
    assert doc["heterogeneous"]["gain"] >= 0


def test_infeasible_names_the_constraint_and_exits_1():
    r = run("plan", "--gpus", "8")
    assert r.returncode == 1
    assert "libra: plan: no feasible plan: plan.min_train_gpus" in r.stderr
    r, doc = plan_json("--gpus", "8")
    assert r.returncode == 1 and doc["feasible"] is False and "min_train_gpus" in doc["why"]


def test_no_split_does_not_say_colocated_fails_where_it_plans():
    """8 GPUs meet each minimum of 8 but not both side by side: the split fails, colocated
    plans, and the reason says which needs what (it said colocated fails too)."""
    r = run("plan", "--gpus", "8")
    assert "a split needs the two minima side by side; colocated, where every GPU trains and " \
        "rolls out, needs cluster.gpus to meet each" in r.stderr, r.stderr
    assert run("plan", "--gpus", "8", "--mode", "colocated").returncode == 0


def test_bad_input_exits_2():
    for args, needle in ((["--mode", "sideways"], "--mode"),
                         (["--set", "plan.tp_pattern=1,3"], "plan.tp_pattern: column 3"),
                         (["--set", "plan.tp_pattern=4,2"], "a node has 8"),
                         (["--gpus", "0"], "--gpus")):
        r = run("plan", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert needle in r.stderr, (args, r.stderr)
        assert r.stdout == ""


def test_trace_as_length_sample(tmp_path):
    trace = tmp_path / "r2e.jsonl"
    r = run("trace", "gen", "r2e-gym", "--steps", "4", "--batch", "32", "-o", str(trace))
    assert r.returncode == 0, r.stderr
    r = run("plan", "--trace", str(trace))
    assert r.returncode == 0, r.stderr
    assert f"length sample: trace {trace}, 128 trajectories (4 batches)" in r.stdout
    r = run("trace", "gen", "r2e-gym", "--steps", "12", "--batch", "32", "-o", str(trace))
    assert r.returncode == 0, r.stderr
    r = run("plan", "--trace", str(trace))
    assert f"length sample: trace {trace}, 256 trajectories (8 batches)" in r.stdout
    r = run("plan", "--trace", str(tmp_path / "missing.jsonl"))
    assert r.returncode == 3


def fleet_text(instances):
    return ",".join(f"{k}x{v}" for k, v in sorted(instances.items(), key=lambda kv: int(kv[0][2:]))
                    if v)


def test_verification_chooses_as_libra_sim_does():
    """libra plan verifies the planner's candidates exactly as libra sim's libra mode does (the
    same candidates, figures and choice), prints both figures for each, and plans the winner."""
    r, doc = plan_json("--verify", "6", "--verify-steps", "4", "--steps", "20")
    assert r.returncode == 0, r.stderr
    v = doc["verification"]
    # 4 steps: 2 of warm-up, then whole weight-update intervals (5): 2 + 5
    assert v["steps"] == 7
    c = v["candidates"]
    predicted = [x["predicted_step_s"] for x in c]
    assert predicted == sorted(predicted)  # by analytic rank
    assert sum(x["colocated"] for x in c) == 4  # every colocated plan, whatever its rank
    fleets = {x["instances"] for x in c if not x["colocated"]}
    for tp in (1, 2, 4, 8):  # the best of each kind of fleet, whatever its rank
        assert any(f == f"tp{tp}x{f.split('x')[1]}" for f in fleets if "," not in f), tp
    sim = run("sim", "--set", "sim.modes=libra", "--steps", "20", "--json",
              "--set", "plan.verify_candidates=6", "--set", "plan.verify_steps=4")
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout)["modes"]["libra"]["planner"]["verification"] == v
    chosen = [c for c in v["candidates"] if c["chosen"]]
    assert len(chosen) == 1
    assert_raced(v)
    # the search around the fastest stopped where both splits beside it are simulated (48 GPUs,
    # in steps of 8, at least 8 of them training and 8 rolling out)
    if not chosen[0]["colocated"]:
        for split in (chosen[0]["train_gpus"] - 8, chosen[0]["train_gpus"] + 8):
            if 8 <= split <= 40:
                assert any(x["train_gpus"] == split and not x["colocated"] for x in c), split
    assert doc["train"]["gpus"] == chosen[0]["train_gpus"]
    assert fleet_text(doc["rollout"]["instances"]) == chosen[0]["instances"]
    assert abs(doc["objective"]["step_s"] - chosen[0]["predicted_step_s"]) < 1e-9
    text = run("plan", "--verify", "6", "--verify-steps", "4", "--steps", "20").stdout
    assert (f"verification: {len(c)} candidates (the best by analytic step; the best fleet of "
            "each kind simulated: all TP1, all TP2, all TP4, all TP8; 4 colocated plans; and the "
            "splits a search around the fastest added), each simulated for 7 steps") in text
    assert text.count("\n* ") == 1


def assert_raced(v):
    """The candidates within 5 % of the fastest on the verification's seed (at most 4, the
    fastest first) ran again on its second seed, the others did not, and the best mean of the
    two seeds won among them (docs/planner.md §8)."""
    c = v["candidates"]
    assert v["second_seed"] != v["seed"]
    ran = [x for x in c if x["trained_tokens_per_s"] is not None]
    top = max(x["trained_tokens_per_s"] for x in ran)
    close = sorted((x for x in ran if x["trained_tokens_per_s"] >= 0.95 * top),
                   key=lambda x: -x["trained_tokens_per_s"])[:4]
    raced = [x for x in c if "second_seed_trained_tokens_per_s" in x]
    chosen = next(x for x in c if x["chosen"])
    if len(close) == 1:
        assert raced == [] and chosen is close[0]
        return
    assert sorted(c.index(x) for x in raced) == sorted(c.index(x) for x in close)

    def mean(x):
        return (x["trained_tokens_per_s"] + x["second_seed_trained_tokens_per_s"]) / 2
    assert mean(chosen) == max(mean(x) for x in raced)


def test_the_close_candidates_race_on_a_second_seed():
    """On the default experiment three splits of TP8 instances simulate within 5 % of each
    other; they run again on the second seed and the best mean wins, in libra plan's table
    too."""
    _, doc = plan_json()
    v = doc["verification"]
    assert_raced(v)
    assert sum("second_seed_trained_tokens_per_s" in x for x in v["candidates"]) >= 2
    text = run("plan").stdout
    assert f"those within 5 % of the fastest again on seed {v['second_seed']}" in text
    assert re.search(r"sim tokens/s +2nd seed\n", text)
    for x in v["candidates"]:
        row = next(line for line in text.splitlines()
                   if re.match(rf"[* ] {re.escape(x['origin'])} +{x['train_gpus']} ", line))
        second = x.get("second_seed_trained_tokens_per_s")
        assert row.split()[-1] == ("-" if second is None else f"{second:.1f}"), row


def test_verify_0_is_the_analytic_optimum():
    r, doc = plan_json("--verify", "0")
    assert r.returncode == 0
    assert doc["verification"] == {"none": "plan.verify_candidates 0: the analytic optimum"}
    _, verified = plan_json()
    optimum = [c for c in verified["verification"]["candidates"] if c["origin"] == "optimum"][0]
    assert doc["objective"]["step_s"] == optimum["predicted_step_s"]
    assert doc["train"]["gpus"] == optimum["train_gpus"]
    assert "verification: none (plan.verify_candidates 0" in run("plan", "--verify", "0").stdout
    colocated = run("plan", "--mode", "colocated", "--gpus", "16").stdout
    assert "verification: none (plan.mode colocated is not verified: the verification" in colocated
    for flag, value in (("--verify", "-1"), ("--verify-steps", "0"), ("--verify", "x")):
        bad = run("plan", flag, value)
        assert bad.returncode == 2 and flag in bad.stderr and bad.stdout == "", (flag, bad.stderr)
    # the steps a candidate runs, given while no candidate is simulated, would change nothing
    for args in (("--verify", "0", "--verify-steps", "7"),
                 ("--set", "plan.verify_candidates=0", "--set", "plan.verify_steps=7")):
        bad = run("plan", "--json", *args)
        assert bad.returncode == 2 and bad.stdout == "", (args, bad.stderr)
        assert "plan.verify_steps=7 has no effect without plan.verify_candidates above 0" in (
            bad.stderr), bad.stderr


def test_pool_keeps_the_static_plan_a_candidate():
    """With the elastic pool on, lending can force a slower training layout (DAPO-Math's
    planner layout, TP2 CP4 DP2, cannot lend: the pool runs TP4 CP2 on 8 GPUs with a hybrid);
    the verification simulates the planner's optimum without the pool beside it and keeps the
    faster: here the static plan, by about a fifth."""
    example = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "examples",
                           "sim-dapo-math-qwen3-4b.json")
    _, doc = plan_json(example, "--set", "ehp.enabled=true")
    cands = {c["origin"]: c for c in doc["verification"]["candidates"]}
    pooled, static = cands["optimum"], cands["optimum, no pool"]
    assert pooled["train_gpus"] == 8 and static["train_gpus"] == 16
    assert static["chosen"] and not pooled["chosen"]
    assert static["trained_tokens_per_s"] > pooled["trained_tokens_per_s"]
    assert doc["train"]["gpus"] == 16
    r = run("plan", example, "--set", "ehp.enabled=true")
    assert "the plan: optimum, no pool," in r.stdout
    _, off = plan_json(example)
    assert "optimum, no pool" not in {c["origin"] for c in off["verification"]["candidates"]}


def test_verification_keeps_the_colocated_plans():
    """The analytic step rates colocated plans far worse than async ones here (240.9 s and more
    against 82.1), yet where one batch fills the cluster the simulator can find them faster, so
    the verification simulates one per TP size beside the plans it ranks best; the list stays
    in the analytic rank's order."""
    _, doc = plan_json("--verify", "6", "--verify-steps", "2")
    cands = doc["verification"]["candidates"]
    assert len(cands) >= 6 + 4
    assert [c["origin"] for c in cands if c["colocated"]] == [
        f"colocated TP{t}" for t in (8, 4, 2, 1)]
    assert [c["origin"] for c in cands[:2]] == ["optimum", "best at 16"]
    assert not any(c["colocated"] for c in cands[:6])
    steps = [c["predicted_step_s"] for c in cands]
    assert steps == sorted(steps)


def test_verification_searches_around_the_fastest():
    """With one ranked candidate, the verification still simulates the best ranked plan of each
    kind of fleet near the optimum's split (one per TP size, whatever its analytic rank) and
    then walks the split from the fastest until both splits beside it are simulated."""
    _, doc = plan_json("--verify", "1", "--verify-steps", "4", "--steps", "20")
    cands = doc["verification"]["candidates"]
    assert cands[0]["origin"] == "optimum"
    single = {x["instances"].split("x")[0] for x in cands
              if not x["colocated"] and "," not in x["instances"]}
    assert single == {"tp1", "tp2", "tp4", "tp8"}
    chosen = next(x for x in cands if x["chosen"])
    assert chosen["origin"] == "optimum" and chosen["train_gpus"] == 24
    assert {x["train_gpus"] for x in cands if not x["colocated"]} >= {16, 24, 32}
    origins = [x["origin"] for x in cands]
    assert "best at 16" in origins and "best at 32" in origins  # proposed by the search alone


def test_the_verified_plan_is_the_same_whatever_the_threads():
    """The proposals are planned, and the candidates simulated, on the worker threads; each is
    added in the order proposed, so the candidates, their figures and the winner do not depend
    on how many threads ran them."""
    runs = [run("plan", "--gpus", "64", "--verify-steps", "4", "--json", "--jobs", jobs)
            for jobs in ("1", "3")]
    assert all(p.returncode == 0 for p in runs), runs[0].stderr
    assert runs[0].stdout == runs[1].stdout
    origins = [c["origin"] for c in json.loads(runs[0].stdout)["verification"]["candidates"]]
    assert "optimum" in origins and "colocated TP8" in origins and len(origins) > 10


def test_a_trajectory_longer_than_any_budget_is_named_as_such(tmp_path):
    """A trace may hold 2^40 tokens in a turn (docs/trace-format.md); a trajectory past every
    micro-batch budget makes no plan for that reason, not as 'impossible lengths' of an index
    into the length sample (there was a cap of 10^8 tokens the docs did not state)."""
    rows = [{"libra_trace": 1, "workload": "x", "group_size": 2}]
    for step in range(3):
        for prompt in range(2):
            for sample in range(2):
                long = (step, prompt, sample) == (2, 1, 1)
                rows.append({"step": step, "prompt_id": prompt, "epoch": 0, "sample": sample,
                             "version_start": step, "finish": "completed",
                             "turns": [{"prompt_tokens": 100,
                                        "generated_tokens": 10**12 if long else 50}]})
    trace = tmp_path / "long.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = run("plan", "--trace", str(trace), "--set", "rl.samples=2", "--set",
            "rl.batch_trajectories=4", "--verify", "0")
    assert p.returncode == 1 and p.stderr.endswith(
        "libra: plan: no feasible plan: the longest sequence exceeds every micro-batch token "
        "budget (8192..32768 per GPU, times CP)\n"), p.stderr
