"""A key that acts only in some modes of `libra sim`, or only in `libra plan`'s verification, is
refused where it would change nothing (docs/config.md "Keys that act only with another
setting"; docs/cli.md: a value either changes the output or is refused).

- `libra sim`'s keys of one mode (the tuning of colocated and async, their pinned layouts, the
  planned libra mode's replanning) are read by no other command: set to a value other than
  their default while none of their modes is in sim.modes, they are refused by `libra sim`
  (exit 2, naming the key and sim.modes) and by `libra config check` (exit 1), from a flag and
  by every point of a sweep, the attribution's bars included (each cell is the single run of
  its config), and from a file whose own sim.modes lacks their modes (a flag that leaves the
  modes out for one run leaves the file's value aside). With one of their modes in sim.modes
  they are taken and change the output.
- `libra plan` reads the simulator's and the routers' keys only to simulate its candidates:
  with plan.verify_candidates 0 (or plan.mode colocated, which it does not verify) a flag
  setting one is refused; with verification on it changes the plan. `libra sim` reads them
  whatever the verification, so a config file's values are taken, by `libra plan` and by
  `libra config check` alike.
- Defaults are never refused, keys other commands read are not refused for want of a mode, and
  every example experiment stays valid.

Needs LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import glob
import json
import os
import socket
import subprocess

import pytest
from test_config_keys import experiment_file as write_experiment

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
MISSING = "/nonexistent/libra-test/trace.jsonl"


def libra(*args):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=240,
                          cwd=SOURCE_DIR, env=env)


def sets(*settings):
    return [a for s in settings for a in ("--set", s)]


def experiment_file(path, *settings):
    """Writes settings ("KEY=VALUE", ...) as a config file (test_config_keys's writer)."""
    return write_experiment(path, settings)


def computed(command, *args):
    """What a run computed: its JSON less the envelope and the settings it echoes."""
    proc = libra(command, *args, "--json")
    assert proc.returncode == 0, f"{command} {' '.join(args)}: {proc.stderr}"
    doc = json.loads(proc.stdout)
    for key in ("schema", "libra_version", "seed", "config_digest"):
        doc.pop(key, None)
    for mode in doc.get("modes", {}).values():
        (mode.get("tuning") or {}).pop("steps", None)
    (doc.get("verification") or {}).pop("steps", None)
    (doc.get("verification") or {}).pop("seed", None)
    return json.dumps(doc, sort_keys=True)


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Arguments with which a command stops right after resolving its config, and its exit status.
STOP = {
    "sim": (("--trace", MISSING), 3),
    "plan": (("--trace", MISSING), 3),
    "load": (("--engines", f"http://127.0.0.1:{closed_port()}", "--trace", MISSING), 3),
    "serve": (("--engine", f"http://127.0.0.1:{closed_port()}", "--set",
               "sched.buckets=tp1:100000"), 3),
}


def stop_run(command, *args):
    stop, code = STOP[command]
    return libra(command, *stop, *args), code


# ---- libra sim: keys of some modes -------------------------------------------------------------

QUICK = ("--set", "rl.steps=3")
# key -> (a value other than its default, the modes that read it, sim.modes without them,
#         a run of one of its modes that the value changes)
MODE_KEYS = {
    "sim.colocated_tp": ("2", "colocated", "async,libra",
                         QUICK + ("--set", "sim.modes=colocated")),
    "sim.async_tp": ("2", "async", "colocated,libra",
                     QUICK + ("--set", "sim.modes=async", "--set", "sim.async_train_gpus=16")),
    "sim.async_train_gpus": ("16", "async", "libra",
                             QUICK + ("--set", "sim.modes=async", "--set", "sim.async_tp=4")),
    "sim.tune_grid": ("3", "async", "colocated",
                      QUICK + ("--gpus", "128", "--set", "sim.modes=async", "--set",
                               "sim.async_tp=4")),
    "sim.tune_steps": ("1", "colocated or async", "libra",
                       QUICK + ("--set", "sim.modes=colocated")),
}
# libra on R2E-Gym, Qwen3-4B, 24 GPUs, under a replan rule that takes any gain
# (test_config_keys.py REPLAN; a key --set twice takes its last value)
REPLAN = ("--workload", "r2e-gym", "--model", "qwen3-4b", "--gpus", "24", "--batch", "64",
          "--samples", "16", "--steps", "24", "--seed", "3", "--set", "sim.modes=libra", "--set",
          "plan.min_tp_sizes=2", "--set", "plan.verify_candidates=0", "--set",
          "plan.replan_min_gain_frac=0", "--set", "plan.replan_horizon_steps=1000000")
MODE_KEYS.update({
    "plan.replan_interval_steps": ("0", "libra", "async", REPLAN),
    "plan.replan_pressure": ("false", "libra", "async", REPLAN),
    "plan.replan_min_gain_frac": ("0.5", "libra", "colocated", REPLAN),
    "plan.replan_horizon_steps": ("1", "libra", "colocated,async", REPLAN),
})


def needs(key):
    return f"without {MODE_KEYS[key][1]} in sim.modes"


@pytest.mark.parametrize("key", sorted(MODE_KEYS))
def test_a_key_of_modes_not_run_is_refused_by_sim(key):
    value, _, modes, _ = MODE_KEYS[key]
    proc = libra("sim", "--steps", "1", *sets(f"sim.modes={modes}", f"{key}={value}"))
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    want = (f"libra: --set {key}: {key}={value} has no effect {needs(key)}")
    assert proc.stderr.startswith(want), proc.stderr
    assert f"(sim.modes is {json.dumps(modes.split(','), separators=(',', ':'))}, from --set " \
           "sim.modes)" in proc.stderr, proc.stderr


@pytest.mark.parametrize("key", sorted(MODE_KEYS))
def test_config_check_refuses_the_same_file(key, tmp_path):
    value, _, modes, _ = MODE_KEYS[key]
    path = experiment_file(tmp_path / "x.json", f"sim.modes={modes}", f"{key}={value}")
    for args, code in ((("config", "check", path), 1), (("sim", path, "--steps", "1"), 2)):
        proc = libra(*args)
        assert proc.returncode == code and proc.stdout == "", proc.stderr
        assert proc.stderr.startswith(f"libra: {path}:1:"), proc.stderr
        assert f"{key}: {key}={value} has no effect {needs(key)}" in proc.stderr
    # the flags of config check, as those of sim
    proc = libra("config", "check", path, "--set", f"sim.modes={MODE_KEYS[key][1].split()[0]}")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


@pytest.mark.parametrize("key", sorted(MODE_KEYS))
def test_with_its_mode_the_key_is_taken_and_changes_the_output(key):
    value, _, _, run = MODE_KEYS[key]
    assert computed("sim", *run, "--set", f"{key}={value}") != computed("sim", *run)


def test_a_key_of_one_of_the_modes_run_is_taken():
    """Several modes run: a key of one of them acts there."""
    args = ("--set", "sim.modes=colocated,libra", "--set", "plan.verify_candidates=0")
    for key in ("sim.colocated_tp", "sim.tune_steps", "plan.replan_pressure"):
        proc, code = stop_run("sim", *args, "--set", f"{key}={MODE_KEYS[key][0]}")
        assert proc.returncode == code, proc.stderr


def test_tuning_keys_are_refused_where_every_layout_they_would_tune_is_pinned():
    """sim.tune_steps tunes the baselines' layouts that are not pinned, sim.tune_grid async's
    splits: with each pinned they change nothing. One layout left to tune takes them."""
    pins = ("sim.colocated_tp=2", "sim.async_tp=1", "sim.async_train_gpus=16")
    proc = libra("sim", "--steps", "1", *sets("sim.modes=colocated,async", *pins,
                                              "sim.tune_steps=1"))
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith(
        "libra: --set sim.tune_steps: sim.tune_steps=1 has no effect with every baseline's "
        "layout pinned (sim.colocated_tp, sim.async_tp, sim.async_train_gpus): nothing is "
        "tuned"), proc.stderr
    proc = libra("sim", "--steps", "1", *sets("sim.modes=async", "sim.async_train_gpus=16",
                                              "sim.tune_grid=3"))
    assert proc.returncode == 2 and proc.stderr.startswith(
        "libra: --set sim.tune_grid: sim.tune_grid=3 has no effect with sim.async_train_gpus "
        "pinning async's split: no splits are searched"), proc.stderr
    for unpinned in ("sim.colocated_tp=0", "sim.async_tp=0", "sim.async_train_gpus=0"):
        proc, code = stop_run("sim", *sets("sim.modes=colocated,async", *pins, unpinned,
                                           "sim.tune_steps=1"))
        assert proc.returncode == code, (unpinned, proc.stderr)


def test_defaults_are_never_refused(tmp_path):
    default = json.loads(libra("config", "show").stdout)
    for key, (_, _, modes, _) in MODE_KEYS.items():
        section, name = key.split(".")
        text = json.dumps(default[section][name])
        proc, code = stop_run("sim", *sets(f"sim.modes={modes}", f"{key}={text}"))
        assert proc.returncode == code, (key, proc.stderr)
        path = experiment_file(tmp_path / "x.json", f"sim.modes={modes}", f"{key}={text}")
        proc = libra("config", "check", path)
        assert proc.returncode == 0, (key, proc.stderr)


def test_a_grid_refuses_a_key_inert_at_every_point():
    """A value that acts at some point of a sweep acts on the sweep: async's pinned TP serves
    the async cells of a sweep over the modes, and a sweep's tuning steps the attribution's
    tuned bars. A value inert at every point is refused as a single run refuses it, naming the
    first point's switch."""
    proc = libra("sim", "--json", "--steps", "3", "--sweep", "sim.modes=colocated,async",
                 "--set", "sim.async_tp=2")
    assert proc.returncode == 0, proc.stderr
    layouts = [c["result"]["modes"] for c in json.loads(proc.stdout)["cells"]]
    assert layouts[1]["async"]["layout"]["instances"].startswith("tp2x"), layouts[1]
    proc = libra("sim", "--steps", "1", "--sweep", "sim.modes=colocated,libra", "--set",
                 "sim.async_tp=2")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr == ("libra: --set sim.async_tp: sim.async_tp=2 has no effect without "
                           "async in sim.modes (sim.modes is [\"colocated\"], from --sweep "
                           "sim.modes), nor at any other point of the grid\n")
    proc = libra("sim", "--steps", "1", "--set", "sim.modes=libra", "--sweep",
                 "sim.async_tp=1,2")
    assert proc.returncode == 2 and proc.stderr == (  # no value: each has no effect
        "libra: --sweep sim.async_tp: sim.async_tp has no effect without async in sim.modes "
        "(sim.modes is [\"libra\"], from --set sim.modes), at any point of the grid\n"), \
        proc.stderr
    # a swept key inert at every point is refused even where it takes its default: the
    # default's point ran beside the others and the grid's rows were one run
    for values in ("0,2", "2,0"):
        proc = libra("sim", "--steps", "1", "--set", "sim.modes=colocated", "--sweep",
                     "sim.async_tp=" + values)
        assert proc.returncode == 2 and proc.stderr.endswith(
            "sim.async_tp has no effect without async in sim.modes (sim.modes is "
            "[\"colocated\"], from --set sim.modes), at any point of the grid\n"), proc.stderr
    # a key that acts with what the sweep sets is judged at the grid's points, not without
    # them: the pool's signal rule beside a swept pool (bench/pool.py's reference run)
    proc = libra("sim", "--json", "--steps", "3", "--set", "sim.modes=libra", "--sweep",
                 "ehp.enabled=true", "--set", "ehp.signal=reference")
    assert proc.returncode == 0, proc.stderr
    proc = libra("sim", "--steps", "3", "--set", "sim.modes=libra", "--sweep",
                 "ehp.enabled=false", "--set", "ehp.signal=reference")
    assert proc.returncode == 2 and "has no effect without ehp.enabled" in proc.stderr
    # one point (seeds alone) is a single run's config
    proc = libra("sim", "--steps", "1", "--seeds", "2", "--set", "sim.modes=libra", "--set",
                 "sim.async_tp=2")
    assert proc.returncode == 2 and proc.stderr == (
        "libra: --set sim.async_tp: sim.async_tp=2 has no effect without async in sim.modes "
        "(sim.modes is [\"libra\"], from --set sim.modes)\n"), proc.stderr
    # the attribution's colocated and async bars tune; its libra bars do not
    tuned = {}
    for steps in ("1", "2"):
        proc = libra("sim", "--json", "--steps", "3", "--attribution", "--set",
                     "plan.verify_candidates=0", "--set", f"sim.tune_steps={steps}")
        assert proc.returncode == 0, proc.stderr
        cells = json.loads(proc.stdout)["cells"]
        tuned[steps] = [m["tuning"] for c in cells for m in c["result"]["modes"].values()]
    assert tuned["1"] != tuned["2"]


def test_a_flag_leaving_a_mode_out_leaves_the_files_value_aside(tmp_path):
    """A file's pinned async split serves its async runs; a flag (or a sweep's point) that runs
    another mode leaves it aside. The same flag giving the value is refused, and so is a file
    whose own sim.modes lacks async."""
    example = os.path.join(SOURCE_DIR, "examples", "sim-dapo7b-h20-128-fully-async.json")
    for args in (("--set", "sim.modes=libra"), ("--sweep", "sim.modes=colocated,async"),
                 ("--attribution",)):
        proc, code = stop_run("sim", example, *args)
        assert proc.returncode == code, (args, proc.stderr)
    proc = libra("config", "check", example, "--set", "sim.modes=colocated,libra")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    # nor is the pinned split checked against the cluster where async does not run
    proc = libra("config", "check", example, "--gpus", "64")
    assert proc.returncode == 1 and "sim.async_train_gpus: 64 of 64 GPUs" in proc.stderr
    proc = libra("config", "check", example, "--gpus", "64", "--set", "sim.modes=libra")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    proc, _ = stop_run("sim", example, "--set", "sim.modes=libra", "--set", "sim.async_tp=2")
    assert proc.returncode == 2 and proc.stderr.startswith(
        "libra: --set sim.async_tp: sim.async_tp=2 has no effect without async"), proc.stderr
    path = experiment_file(tmp_path / "x.json", "sim.modes=libra", "sim.async_tp=2")
    proc, _ = stop_run("sim", path, "--set", "sim.modes=libra")
    assert proc.returncode == 2 and proc.stderr.startswith(f"libra: {path}:1:"), proc.stderr


def test_a_sweep_over_the_modes_still_runs():
    proc = libra("sim", "--json", "--steps", "2", "--set", "plan.verify_candidates=0",
                 "--sweep", "sim.modes=colocated,libra")
    assert proc.returncode == 0, proc.stderr
    cells = json.loads(proc.stdout)["cells"]
    assert [list(c["result"]["modes"]) for c in cells] == [["colocated"], ["libra"]]


def test_keys_other_commands_read_are_not_refused_for_a_mode(tmp_path):
    """sim.planner, ehp.*, plan.* and sched.* are read by plan, load or serve too: neither they
    nor libra config check refuse them because libra is not in sim.modes."""
    path = experiment_file(tmp_path / "x.json", "sim.modes=colocated", "sim.planner=false",
                           "ehp.enabled=true", "plan.min_tp_sizes=2", "sched.policy=load_balance",
                           "plan.verify_candidates=4")
    proc = libra("config", "check", path)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    for command in STOP:
        proc, code = stop_run(command, path)
        assert proc.returncode == code, (command, proc.stderr)


def test_every_example_experiment_is_valid():
    for path in sorted(glob.glob(os.path.join(SOURCE_DIR, "examples", "*.json"))):
        proc = libra("config", "check", path)
        assert proc.returncode == 0 and proc.stdout == "ok\n", (path, proc.stderr)


# ---- libra plan: keys it reads only to simulate ------------------------------------------------

R2E = os.path.join(SOURCE_DIR, "examples", "sim-r2e-gym-qwen3-14b.json")
THREE_TPS = ("--set", "plan.min_tp_sizes=3")  # a fleet of three TP sizes, routed
# key -> (a value other than its default, a plan whose verification the value changes)
SIMULATED = {
    "sim.warmup_steps": ("0", ()),
    "sim.context_mode": ("chat", ()),
    "sim.prefix_cache": ("false", ()),
    "sim.queue_cap": ("1", ()),
    "sim.fail_time_s": ("100", ()),
    "sim.fail_instance": ("3", ("--set", "sim.fail_time_s=100")),
    "plan.verify_steps": ("5", ()),
    "sched.policy": ("load_balance", THREE_TPS),
    "sched.shrink_visits": ("0", THREE_TPS),
    "sched.attempt_shrink": ("0", THREE_TPS + ("--set", "sched.policy=cmlfq_h")),
    "sched.empirical_shrink": ("false", (R2E,)),
    # Search-R1's batches outgrow the router's history within the verification's steps
    "sched.rebuild_interval": ("1", ("--workload", "search-r1", "--set",
                                     "plan.tp_pattern=1,1,2,4")),
}


def test_the_simulated_keys_are_plans_sim_keys():
    """Every simulator key libra plan reads (the readers table) but the ones its search reads
    (the seed of its length sample, the engine's batch limits) has its case here."""
    doc = libra("config", "doc").stdout
    row = next(line for line in doc.splitlines() if line.startswith("| `libra plan` |"))
    sim_cell = row.strip("|").split("|")[7]
    read = {f"sim.{k}" for k in sim_cell.replace("`", "").replace(" ", "").split(",")}
    assert read - {"sim.seed", "sim.max_seqs", "sim.max_batched_tokens"} == {
        k for k in SIMULATED if k.startswith("sim.")}


@pytest.mark.parametrize("key", sorted(SIMULATED))
def test_a_simulated_key_is_refused_by_plan_without_verification(key):
    value, _ = SIMULATED[key]
    for off, why in ((("--verify", "0"), "with plan.verify_candidates 0: libra plan simulates "
                      "nothing"),
                     (("--mode", "colocated"), "with plan.mode colocated: libra plan verifies "
                      "nothing (it simulates candidates for plan.mode async)")):
        proc, _ = stop_run("plan", *off, "--set", f"{key}={value}")
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert proc.stderr.startswith(f"libra: --set {key}: {key}="), proc.stderr
        if key == "sim.fail_instance" or (key == "plan.verify_steps" and off[0] == "--verify"):
            assert "has no effect without" in proc.stderr  # its own switch, checked first
        else:
            assert proc.stderr.endswith(f" has no effect {why}\n"), proc.stderr


@pytest.mark.parametrize("key", sorted(SIMULATED))
def test_with_verification_a_simulated_key_changes_the_plan(key):
    value, run = SIMULATED[key]
    assert computed("plan", *run, "--set", f"{key}={value}") != computed("plan", *run)


@pytest.mark.parametrize("key", ["sim.queue_cap", "sched.policy", "sched.shrink_visits"])
def test_sim_and_config_check_take_what_plan_refuses(key, tmp_path):
    """libra sim simulates whatever plan.verify_candidates says, so it takes the flags; a file
    serves both commands, so libra plan and libra config check take its values."""
    value, _ = SIMULATED[key]
    proc, code = stop_run("sim", "--set", "plan.verify_candidates=0", "--set", f"{key}={value}")
    assert proc.returncode == code, proc.stderr
    path = experiment_file(tmp_path / "x.json", "plan.verify_candidates=0", f"{key}={value}")
    proc = libra("config", "check", path)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    for command in ("plan", "sim"):
        proc, code = stop_run(command, path)
        assert proc.returncode == code, (command, proc.stderr)


# ---- sched.buckets' instance counts -------------------------------------------------------------

COUNTED = "sched.buckets=tp1x4:4000,tp2x2:12000,tp4x1:40000"
BARE = '("tp1:4000,tp2:12000,tp4:40000")'


def test_instance_counts_no_fleet_is_built_from_are_refused(tmp_path):
    """Instance counts build a fleet in libra sim's rollout mode and in libra's without the
    planner (sim and load); the planner chooses libra's fleet, and plan, route eval and serve
    take the buckets' bounds and TP sizes alone. Counts no command would build are refused,
    naming the buckets without them; a flag giving them to a command that builds none too."""
    for command in ("sim", "plan", "load"):
        proc, _ = stop_run(command, "--set", COUNTED)
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert proc.stderr == (
            f"libra: --set sched.buckets: instance counts have no effect in libra {command}: "
            "only libra sim's rollout mode and libra with sim.planner false run a fleet of "
            f"them; give the buckets alone {BARE}\n"), proc.stderr
    planned = experiment_file(tmp_path / "planned.json", COUNTED)
    proc = libra("config", "check", planned)
    assert proc.returncode == 1 and "no effect with sim.planner true and no rollout mode" \
        in proc.stderr, proc.stderr
    # a file whose counts are libra's fleet without the planner serves plan and serve too
    fleet = experiment_file(tmp_path / "fleet.json", COUNTED, "sim.planner=false")
    proc = libra("config", "check", fleet)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    for command in ("sim", "plan", "serve"):
        proc, code = stop_run(command, fleet)
        assert proc.returncode == code, (command, proc.stderr)
    proc, code = stop_run("sim", "--set", "sim.modes=rollout", "--set", COUNTED)
    assert proc.returncode == code, proc.stderr
    # a flag that turns the planner on for one run leaves the file's counts aside, as it does
    # check_inert's keys: the file's fleet serves its other runs (bench/fidelity.py's runs of
    # examples/sim-search-r1-qwen3-14b.json were refused)
    proc = libra("sim", fleet, "--set", "sim.modes=libra", "--set", "sim.planner=true",
                 "--steps", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    layout = json.loads(proc.stdout)["modes"]["libra"]["layout"]
    assert layout["origin"] != "pinned" and layout["buckets"] == BARE[2:-2], layout


def test_a_grid_runs_counts_where_a_point_builds_their_fleet():
    """A sweep over the planner compares its fleet with the counted one; a grid none of whose
    points builds the fleet is refused as a single run is."""
    proc = libra("sim", "--json", "--steps", "2", "--set", "sim.modes=libra", "--set", COUNTED,
                 "--set", "plan.verify_candidates=0", "--sweep", "sim.planner=true,false")
    assert proc.returncode == 0, proc.stderr
    layouts = [c["result"]["modes"]["libra"]["layout"] for c in json.loads(proc.stdout)["cells"]]
    assert layouts[0] != layouts[1] and layouts[1]["instances"] == "tp1x4,tp2x2,tp4x1", layouts
    proc = libra("sim", "--steps", "2", "--set", "sim.modes=libra", "--set", COUNTED, "--sweep",
                 "rl.max_staleness=2,4")
    assert proc.returncode == 2 and proc.stderr.endswith(
        f"{BARE}, nor at any other point of the grid\n"), proc.stderr
