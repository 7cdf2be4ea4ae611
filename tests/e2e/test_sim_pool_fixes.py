"""End-to-end tests of libra sim's elastic pool records (docs/sim.md "The elastic hybrid pool",
"Perfetto", "Online replanning") and of the keys a run's modes do not read.

- the Perfetto trace of a step holds the pool's phases up to the step's end and what the pool
  decided at it; none of it lands in the next step's trace;
- each step's pool record counts the GPUs at one instant, within the cluster;
- the rl.* dynamic-sampling bounds, ehp.enabled and the training-space plan.* keys given as
  flags are refused where no mode of the run reads them;
- the pool's note shows on the text's pool line; a replan is numbered by the step it follows;
- colocated's trace shows its switches beside the training steps.
"""

import json
import os
import subprocess

import pytest
from test_config_keys import experiment_file

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
POOL = ("--model", "qwen3-4b", "--set", "plan.fsdp=search", "--set", "sim.modes=libra", "--set",
        "ehp.enabled=true", "--set", "plan.verify_candidates=0")
R2E = ("examples/sim-drift-r2e-gym-qwen3-14b.json", "--set", "sim.modes=libra", "--set",
       "ehp.enabled=true", "--set", "sim.planner=false", "--set", "sched.buckets=tp8x3:30000",
       "--set", "ehp.signal=reference")
REPLAN = ("--workload", "dapo-math", "--model", "qwen3-4b", "--gpus", "24", "--batch", "64",
          "--steps", "40", "--set", "sim.modes=libra", "--set", "plan.min_tp_sizes=2")
ROLLOUT = ("--steps", "6", "--set", "sim.modes=rollout", "--set", "sched.buckets=tp8x2:30000")
ROUNDS = "colocated or rollout in sim.modes, or libra with sim.planner"
EPS = 1e-3  # microseconds of rounding


def sim(*args):
    return subprocess.run([LIBRA, "sim", *args], capture_output=True, text=True, timeout=240,
                          cwd=SOURCE_DIR)


def ok(*args):
    p = sim(*args)
    assert p.returncode == 0, p.stderr
    return p.stdout


def traced(tmp_path, args, step):
    """The step's trace events of the pool, and its window in microseconds."""
    path = tmp_path / f"p{step}.json"
    doc = json.loads(ok(*args, "--set", f"sim.trace_step={step}", "--perfetto", str(path),
                        "--json"))
    steps = doc["modes"]["libra"]["steps"]
    window = (steps[step - 1]["end_s"] * 1e6, steps[step]["end_s"] * 1e6)
    events = json.loads(path.read_text())["traceEvents"]
    return [e for e in events if e.get("pid") == 4 and e["ph"] != "M"], window


@pytest.mark.parametrize("args,step", [(POOL + ("--steps", "40"), 5), (POOL + ("--steps", "40"), 6),
                                       (R2E, 67), (R2E, 68)])
def test_a_steps_trace_holds_the_pools_slices_and_instants_up_to_its_end(tmp_path, args, step):
    events, (start, end) = traced(tmp_path, args, step)
    for e in events:
        last = e["ts"] + e.get("dur", 0)
        assert start + EPS < last <= end + EPS, (e, start, end)


def test_a_hybrid_training_at_the_steps_end_shows_in_its_trace(tmp_path):
    events, (_, end) = traced(tmp_path, POOL + ("--steps", "40"), 5)
    train = [e for e in events if e["name"] == "training"]
    assert train and abs(train[-1]["ts"] + train[-1]["dur"] - end) < EPS, events
    assert any(e["name"] == "returned to rollout" for e in events), events


# a hybrid's GPU fails: in step 5 while the replica trains (294 s), or at 100 s while it serves
# rollout; either way it leaves the pool for good (docs/ehp.md "A failed member"), so no later
# step trains it or counts the dead instance's GPUs
SERVING = 100


def failed(fail_s):
    return ("--set", f"sim.fail_time_s={fail_s}", "--set", "sim.fail_instance=3", "--steps", "40")


@pytest.mark.parametrize("fail_s", [294, SERVING])
def test_a_steps_pool_record_counts_one_instant_within_the_cluster(fail_s):
    doc = json.loads(ok(*POOL, *failed(fail_s), "--json"))
    libra = doc["modes"]["libra"]
    gpus, core = 48, libra["layout"]["train_gpus"]
    replica = libra["layout"]["pool"]["replica_gpus"]
    dead = int(libra["layout"]["instances"].split("x")[0][2:])  # one TP size: the dead one's
    for st in libra["steps"]:
        p = st["pool"]
        alive = gpus - (dead if st["end_s"] > fail_s else 0)
        assert p["hybrid_gpus"] == p["hybrid_replicas"]["active"] * replica, st["step"]
        assert p["train_gpus"] == core + p["hybrid_gpus"], st["step"]
        assert p["train_gpus"] + p["rollout_gpus"] <= alive, (st["step"], p)
    if fail_s == 294:  # the replica that failed mid-step is out of training at its end
        assert libra["steps"][5]["pool"]["train_gpus"] == core
    text = ok(*POOL, *failed(fail_s))
    line = next(s for s in text.splitlines() if s.startswith("elastic pool"))
    training = float(line.split("mean GPUs training ")[1].split(",")[0])
    rollout = float(line.split("in rollout ")[1].split()[0])
    assert training + rollout <= gpus, line


@pytest.mark.parametrize("setting,modes", [
    ("rl.max_gen_batches=2", "async"),
    ("rl.gen_batch_factor=5", "async"),
    ("rl.max_gen_batches=2", "libra"),
])
def test_dynamic_sampling_bounds_are_refused_where_no_mode_reads_them(setting, modes, tmp_path):
    # gen_batch from the file, which libra plan reads whatever sim.modes (its flag is refused)
    ds = "gen_batch" if "factor" in setting else "regenerate"
    path = experiment_file(tmp_path / "x.json", [f"rl.dynamic_sampling={ds}"])
    extra = ("--set", "sim.planner=false", "--set", "sched.buckets=tp8x3:30000") \
        if modes == "libra" else ()
    p = sim(path, "--steps", "2", "--set", f"sim.modes={modes}", *extra, "--set", setting)
    key = setting.split("=")[0]
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.startswith(f"libra: --set {key}: {setting} has no effect without {ROUNDS}"), \
        p.stderr


def test_gen_batch_is_refused_where_it_acts_as_regenerate():
    p = sim("--steps", "2", "--set", "sim.modes=async", "--set", "rl.dynamic_sampling=gen_batch")
    assert p.returncode == 2 and p.stdout == "", p.stderr
    want = ("libra: --set rl.dynamic_sampling: rl.dynamic_sampling=\"gen_batch\" has no effect "
            f"beyond regenerate's without {ROUNDS}")
    assert p.stderr.startswith(want), p.stderr


@pytest.mark.parametrize("modes", ["colocated", "libra", "rollout"])
def test_dynamic_sampling_bounds_change_the_modes_that_read_them(modes):
    fleet = ("--set", "sched.buckets=tp8x2:30000") if modes == "rollout" else ()
    base = ("--steps", "12", "--set", f"sim.modes={modes}", *fleet, "--set",
            "rl.dynamic_sampling=regenerate", "--json")

    def run(*args):
        doc = json.loads(ok(*base, *args))
        doc.pop("config_digest")
        return doc
    assert run("--set", "rl.max_gen_batches=1") != run()


TRAINING = "colocated, async or libra"


@pytest.mark.parametrize("setting,needs", [
    ("ehp.enabled=true", "libra"), ("plan.sample_seed=7", TRAINING),
    ('plan.recompute="search"', TRAINING), ('plan.fsdp="search"', TRAINING),
    ("plan.cp_min_seq_tokens=9000", TRAINING), ("plan.group_integrity=true", TRAINING)])
def test_a_rollout_run_refuses_keys_of_training(setting, needs):
    p = sim(*ROLLOUT, "--set", setting.replace('"', ""))
    key = setting.split("=")[0]
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.startswith(f"libra: --set {key}: {setting} has no effect without {needs} "
                               "in sim.modes (sim.modes is"), p.stderr


def test_the_pools_note_shows_on_its_text_line():
    args = ("--steps", "20", "--set", "sim.modes=libra", "--set", "ehp.enabled=true", "--set",
            "plan.verify_candidates=0")
    note = json.loads(ok(*args, "--json"))["modes"]["libra"]["layout"]["pool"]["note"]
    assert note
    line = next(s for s in ok(*args).splitlines() if s.startswith("elastic pool"))
    assert note in line, line


def test_a_replan_is_numbered_by_the_step_it_follows():
    doc = json.loads(ok(*REPLAN, "--json"))
    replan = doc["modes"]["libra"]["run"]["replan"]
    taken = [d for d in replan["decisions"] if d["accepted"]]
    assert [d["step"] for d in taken] == [10]
    assert replan["routing_since_step"] == 11
    assert "  after step 10: tp2x6,tp4x1 -> tp4x2,tp8x1" in ok(*REPLAN)


def test_colocated_trace_shows_the_switches(tmp_path):
    path = tmp_path / "pc.json"
    doc = json.loads(ok("--steps", "6", "--set", "sim.modes=colocated", "--perfetto", str(path),
                        "--json"))
    steps = doc["modes"]["colocated"]["steps"]
    k = json.loads(path.read_text())["otherData"]["step"]
    events = json.loads(path.read_text())["traceEvents"]
    switches = [e for e in events if e.get("pid") == 3 and e["ph"] == "X" and e["name"] != "train"]
    assert {e["name"] for e in switches} == {"switch to training", "reshard to rollout"}
    assert sum(e["dur"] for e in switches) / 1e6 == pytest.approx(steps[k]["switch_s"])
