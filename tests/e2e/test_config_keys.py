"""Every config key does what docs/config.md says (docs/config.md).

A setting that is accepted must change what the command it is for does. For each key of the
schema (the keys `libra config show` prints), CHANGES gives a valid non-default value and a
short run of the command the key is for; the run with the value must differ from the run
without it in what the command computed, not only in the settings it echoes (ECHOES). No key
is exempt: a key that no command's output can show has no place in the schema. A key without a
case fails test_every_key_is_classified, so a new key must come with its case.

A command takes a flag only for the keys it reads (docs/cli.md "Which keys each command
reads", the table `libra config doc` generates from the schema): for every command and key,
`--set KEY=VALUE` with CHANGES' value must be refused naming the key where the table says the
command does not read it, and taken where it says it does; a key shown to change a command's
output must be one the table says it reads; each command's --help lists the flags of the keys
it reads; and every command takes every example experiment file whole. Needs LIBRA_BIN and
LIBRA_SOURCE_DIR.
"""

import functools
import glob
import json
import os
import re
import socket
import subprocess
import tempfile

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]

ENVELOPE = ("schema", "libra_version", "seed", "config_digest")

# Parts of the output that repeat a setting rather than result from it ("*": every member).
ECHOES = {
    "sim": ("modes.*.layout.router", "modes.*.run.steps", "modes.*.run.warmup_steps",
            "modes.*.tuning.steps", "modes.*.planner.verification.steps",
            "modes.*.planner.verification.seed"),
    "plan": ("mode", "gpus", "gpus_per_node", "sample.source", "verification.steps",
             "verification.seed"),
}

# Short runs, as (command, args...). "perfetto" is `libra sim` with --perfetto, compared by
# the trace file it writes.
# (--set rl.steps, not --steps: a key --steps set would refuse a --set of its own)
FULL = ("sim", "--set", "rl.steps=3")
UNVERIFIED = FULL + ("--set", "plan.verify_candidates=0")  # libra's plan unverified
# The baselines' layouts pinned and libra's plan unverified: a tenth of FULL's time. (A pinned
# layout is refused without its mode in sim.modes: the runs of fewer modes do not pin it.)
SIM = UNVERIFIED + ("--set", "sim.colocated_tp=4", "--set", "sim.async_train_gpus=16", "--set",
                    "sim.async_tp=4")
TUNED = FULL + ("--set", "sim.modes=colocated,async")  # the baselines tuned by simulation
VERIFIED = FULL + ("--set", "sim.modes=libra")  # libra's plan chosen by simulation
LIBRA_ONLY = UNVERIFIED + ("--set", "sim.modes=libra")
COLOCATED_ONLY = UNVERIFIED + ("--set", "sim.colocated_tp=4", "--set", "sim.modes=colocated")
FLEET_SET = "sched.buckets=tp1x4:4000,tp2x2:12000,tp4x1:30000"
# libra on a fixed fleet of three buckets, where the routers' choices matter.
FLEET = LIBRA_ONLY + ("--set", "sim.planner=false", "--set", FLEET_SET)
# Search-R1's batch of 2,560 outgrows the router's history of 5,000 trajectories in two steps,
# after which a rebuild forgets the oldest.
# libra with the elastic pool on the Search-R1 paper setup, whose three hybrids the two signal
# rules borrow differently within six steps.
POOL = ("sim", os.path.join(SOURCE_DIR, "examples", "sim-search-r1-qwen3-14b.json"), "--steps",
        "6", "--set", "sim.modes=libra", "--set", "plan.verify_candidates=0", "--set",
        "ehp.enabled=true")
SEARCH_FLEET = LIBRA_ONLY + ("--workload", "search-r1", "--set", "sim.planner=false", "--set",
                             "sched.buckets=tp1x8:2000,tp2x4:5120")
UPDATE_EVERY_STEP = SIM + ("--set", "rl.sync_interval=1", "--set", "rl.transport=nccl")
DYNAMIC_SAMPLING = COLOCATED_ONLY + ("--workload", "dapo-math-verl", "--batch", "64")
# libra on R2E-Gym, Qwen3-4B, 24 GPUs, held to two TP sizes, seed 3, under a replan rule that
# takes any gain: a window plans another fleet than the one the run started on (online
# replanning).
REPLAN = ("sim", "--workload", "r2e-gym", "--model", "qwen3-4b", "--gpus", "24", "--batch",
          "64", "--samples", "16", "--steps", "24", "--seed", "3", "--set", "sim.modes=libra",
          "--set", "plan.min_tp_sizes=2", "--set", "plan.verify_candidates=0", "--set",
          "plan.replan_min_gain_frac=0", "--set", "plan.replan_horizon_steps=1000000")
# The planner's analytic optimum, unverified by simulation (which would take longer).
PLAN = ("plan", "--set", "plan.verify_candidates=0")
# DAPO-Math's 32k-token sequences: at the best split of 48 GPUs no training layout of
# Qwen3-14B fits without the fallback options (recompute, FSDP).
DAPO_PLAN = PLAN + ("--workload", "dapo-math")
# Search-R1's short turns on 128 GPUs, where the optimum mixes TP1 and TP2 instances.
MIXED_PLAN = PLAN + ("--model", "qwen3-4b", "--workload", "search-r1", "--gpus", "128")
# A search that polls its clock (every 32 steps) before it ends.
LONG_PLAN = PLAN + ("--gpus", "512", "--set", "plan.granularity_gpus=1", "--set",
                    "plan.min_tp_sizes=3", "--set", "plan.max_scored=0")
PERFETTO = ("perfetto", "--set", "rl.steps=3", "--set", "sim.modes=libra")

# key -> (non-default value, the run it changes).
CHANGES = {
    "cluster.hardware": ("h800", SIM),
    "cluster.gpus": ("32", SIM),
    "cluster.gpus_per_node": ("4", SIM),
    "model.name": ("qwen3-8b", SIM),
    "workload.name": ("search-r1", SIM + ("--batch", "40")),
    "workload.trace": ("tests/data/trace/small.jsonl", SIM + ("--set", "rl.samples=2")),
    "rl.batch_trajectories": ("64", SIM),
    "rl.samples": ("8", SIM),
    "rl.steps": ("4", SIM),
    "rl.max_staleness": ("0", UPDATE_EVERY_STEP),
    "rl.sync_interval": ("2", SIM),
    "rl.sync_mode": ("abort_resume", UPDATE_EVERY_STEP),
    "rl.transport": ("nccl", SIM),
    "rl.overprovision_frac": ("0.5", SIM),
    "rl.trajectory_timeout_s": ("120", SIM),
    "rl.dynamic_sampling": ("regenerate", DYNAMIC_SAMPLING),
    "rl.gen_batch_factor": ("1", DYNAMIC_SAMPLING),
    "rl.max_gen_batches": ("1", DYNAMIC_SAMPLING + ("--set", "rl.dynamic_sampling=regenerate")),
    "rl.minibatches": ("4", SIM),
    "rl.old_logprob": ("false", SIM),
    "rl.reference": ("true", SIM),
    "plan.mode": ("colocated", PLAN),
    "plan.time_limit_s": ("0.000001", LONG_PLAN),
    "plan.gap_tolerance": ("0.05", PLAN),
    "plan.max_scored": ("10", PLAN),
    "plan.min_train_gpus": ("32", LIBRA_ONLY),
    "plan.min_rollout_gpus": ("40", PLAN),
    "plan.granularity_gpus": ("40", LIBRA_ONLY),
    "plan.cp_min_seq_tokens": ("65536", PLAN + ("--model", "qwen3-4b")),
    "plan.group_integrity": ("true", PLAN + ("--gpus", "64")),
    "plan.homogeneous_rollout": ("true", MIXED_PLAN),
    "plan.verify_candidates": ("0", VERIFIED),
    "plan.verify_steps": ("1", VERIFIED + ("--set", "rl.sync_interval=1")),
    "plan.sample_seed": ("7", SIM),
    "plan.recompute": ("search", DAPO_PLAN),
    "plan.fsdp": ("off", DAPO_PLAN),
    "plan.min_tp_sizes": ("3", SIM),
    "plan.tp_pattern": ("1,1,2,4", SIM),
    "sched.policy": ("load_balance", FLEET),
    "sched.buckets": ("tp1:4000,tp2:12000,tp4:30000", SIM),
    "sched.rebuild_interval": ("1", SEARCH_FLEET),
    "sched.shrink_visits": ("0", FLEET),
    "sched.empirical_shrink": ("false", FLEET),
    "sched.attempt_shrink": ("0", FLEET + ("--set", "sched.policy=cmlfq_h")),
    "sim.modes": ("colocated,libra", COLOCATED_ONLY),
    "sim.seed": ("2", SIM),
    "sim.warmup_steps": ("0", SIM),
    "sim.tune_steps": ("1", TUNED),
    "sim.tune_grid": ("3", TUNED + ("--gpus", "128")),
    "sim.colocated_tp": ("2", TUNED),
    "sim.async_train_gpus": ("16", TUNED),
    "sim.async_tp": ("2", TUNED),
    # the fleet's counts act in the rollout mode beside the planned libra mode
    "sim.planner": ("false", UNVERIFIED + ("--set", "sim.modes=libra,rollout", "--set",
                                           FLEET_SET)),
    "sim.context_mode": ("chat", SIM),
    "sim.prefix_cache": ("false", SIM),
    "sim.max_seqs": ("8", SIM),
    "sim.max_batched_tokens": ("1024", SIM),
    "sim.queue_cap": ("1", SIM),
    "sim.fail_time_s": ("100", SIM),
    "sim.fail_instance": ("3", SIM + ("--set", "sim.fail_time_s=100")),
    "sim.trace_step": ("1", PERFETTO),
    "sim.timeline_steps": ("1:2", LIBRA_ONLY),
    "ehp.enabled": ("true", LIBRA_ONLY),
    "ehp.signal": ("reference", POOL),
    "plan.replan_interval_steps": ("0", REPLAN),
    "plan.replan_pressure": ("false", REPLAN),
    "plan.replan_min_gain_frac": ("0.5", REPLAN),
    "plan.replan_horizon_steps": ("1", REPLAN),
}


def libra(*args):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120,
                          cwd=SOURCE_DIR, env=env)


def schema_keys():
    proc = libra("config", "show")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return {f"{section}.{key}" for section, keys in doc.items() if isinstance(keys, dict)
            for key in keys}


def drop(doc, path):
    """Removes path ("a.*.b") from doc, wherever it is present."""
    head, _, rest = path.partition(".")
    if not isinstance(doc, dict):
        return
    for key in list(doc) if head == "*" else [head]:
        if key in doc:
            if rest:
                drop(doc[key], rest)
            else:
                del doc[key]


@functools.lru_cache(maxsize=None)
def outcome(run, setting=None):
    """What `run` computed, with setting ("KEY=VALUE") on top when given: the JSON document
    less the envelope and the echoes, or the text of the Perfetto trace."""
    command, *args = run
    if setting:
        args += ["--set", setting]
    if command == "perfetto":
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            proc = libra("sim", *args, "--perfetto", path)
            assert proc.returncode == 0, proc.stderr
            with open(path, encoding="utf-8") as f:
                return f.read()
    proc = libra(command, *args, "--json")
    assert proc.returncode == 0, f"{command} {' '.join(args)}: {proc.stderr}"
    doc = json.loads(proc.stdout)
    for path in ENVELOPE + ECHOES[command]:
        drop(doc, path)
    return json.dumps(doc, sort_keys=True)


def test_every_key_is_classified():
    keys = schema_keys()
    assert sorted(keys - set(CHANGES)) == [], "keys without a case"
    assert sorted(set(CHANGES) - keys) == [], "cases of keys not in the schema"


@pytest.mark.parametrize("key", sorted(CHANGES))
def test_key_changes_its_command(key):
    value, run = CHANGES[key]
    assert outcome(run, f"{key}={value}") != outcome(run), (
        f"--set {key}={value} does not change `libra {' '.join(run)}`")


# ---- which keys each command reads ----------------------------------------------------------

COMMANDS = ("cost", "plan", "route eval", "sim", "emu", "load", "serve", "calibrate")


def closed_port():
    """A port nothing listens on (bound and released at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


MISSING = "/nonexistent/libra-test/trace.jsonl"
# Arguments with which each command stops right after resolving its config, and its exit
# status then: a trace, ports file or calibration input that cannot be opened, an engine that
# cannot be reached (3), or a whole run of `libra cost` (0). The gateway needs a bucket layout
# for models other than the workload's reference one.
STOP = {
    "cost": ((), 0),
    "plan": (("--trace", MISSING), 3),
    "route eval": ((MISSING,), 3),
    # --json and --perfetto: the outputs that show a timeline and the step sim.trace_step names
    "sim": (("--trace", MISSING, "--json", "--perfetto", "/nonexistent/libra-test/step.json"), 3),
    "emu": (("--ports-file", "/nonexistent/libra-test/ports"), 3),
    "load": (("--engines", f"http://127.0.0.1:{closed_port()}", "--trace", MISSING), 3),
    "serve": (("--engine", f"http://127.0.0.1:{closed_port()}", "--set",
               "sched.buckets=tp1:100000"), 3),
    "calibrate": ((MISSING,), 3),
}


# A command's own flags that switch a key's mechanism on where its settings do not: the gateway's
# pool signal acts only with --pool-steer (of a --pool-replica).
FLAG_SWITCHES = {
    ("serve", "ehp.signal"): ("--pool-replica", f"http://127.0.0.1:{closed_port()},tp=1",
                              "--pool-steer"),
    # CHANGES's staleness 0 is below the default interval's - 1: the update rules refuse it
    **{(c, "rl.max_staleness"): ("--set", "rl.sync_interval=1")
       for c in ("plan", "sim", "route eval", "load")},
}


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def cell_keys(cell, section, own):
    """The keys a cell of the table names among the section's own: all, none, `a`, `b`, or all
    but `a`, `b`."""
    named = {f"{section}.{k}" for k in re.findall(r"`([a-z_]+)`", cell)}
    assert named <= own, cell
    if cell in ("all", "none"):
        return own if cell == "all" else set()
    return own - named if cell.startswith("all but ") else named


@functools.lru_cache(maxsize=None)
def reads():
    """command -> the keys it reads, from the table of `libra config doc`."""
    doc = libra("config", "doc").stdout
    lines = doc[doc.index("## Which keys each command reads"):].splitlines()
    header = next(line for line in lines if line.startswith("| command"))
    sections = [c.strip("`") for c in cells(header)[1:]]
    keys = schema_keys()
    out = {}
    for line in (line for line in lines if line.startswith("| `libra ")):
        row = cells(line)
        out[row[0].strip("`")[len("libra "):]] = set().union(*(
            cell_keys(cell, section, {k for k in keys if k.startswith(section + ".")})
            for section, cell in zip(sections, row[1:])))
    assert sorted(out) == sorted(COMMANDS)
    return out


def stop_run(command, *args, key=None):
    """`libra COMMAND ARGS` up to where it has resolved its config: (process, exit if taken).
    ARGS come last, so that their settings win; the stop's --trace is left out when key is
    workload.trace, which ARGS then set (two flags may not set one key), and when key is
    plan.sample_seed or sim.seed, which act in sim and plan only without a trace (the run stops
    at its output instead)."""
    stop, code = STOP[command]
    if key in ("workload.trace", "plan.sample_seed", "sim.seed") and "--trace" in stop:
        at = stop.index("--trace")
        stop = stop[:at] + stop[at + 2:]
        if key != "workload.trace":
            stop += ("-o", "/nonexistent/libra-test/out")
    return libra(*command.split(), *stop, *args), code


def test_outputs_changed_are_read():
    for key, (_, run) in CHANGES.items():
        command = "sim" if run[0] == "perfetto" else run[0]
        assert key in reads()[command], f"{key} changes libra {command}, which does not read it"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("key", sorted(CHANGES))
def test_flag_only_for_a_key_the_command_reads(command, key):
    value = MISSING if key == "workload.trace" else CHANGES[key][0]  # stop where the others do
    switch = [s for s in SWITCHED_ON.get(key, ()) if s.split("=")[0] in reads()[command]]
    proc, code = stop_run(command, *FLAG_SWITCHES.get((command, key), ()),
                          *[a for s in switch for a in ("--set", s)], "--set", f"{key}={value}",
                          key=key)
    if key in reads()[command]:
        assert proc.returncode == code, proc.stderr
        assert "is not used by" not in proc.stderr
    else:
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == ""
        assert proc.stderr.startswith(
            f"libra: --set {key}: {key} is not used by libra {command} (it is read by libra "), (
            proc.stderr)
        readers = sorted(c for c in COMMANDS if key in reads()[c])
        named = re.findall(r"libra ([a-z ]+?)(?:,| and |\)\n)", proc.stderr.split("read by ")[1])
        assert sorted(named) == readers, proc.stderr


# Keys that act only while another setting is on (docs/config.md "Keys that act only with
# another setting"): settings that switch each one's mechanism on, and settings that switch it
# off. SWITCHED_OFF: the keys every command that reads them refuses, from any source, and
# `libra config check` too; PARTLY_OFF: the keys only some of the commands that read them refuse
# (key, command), from a flag alone, while a file's value is taken (another command acts on it).
SWITCHED_ON = {
    "rl.gen_batch_factor": ("rl.dynamic_sampling=gen_batch",),
    "rl.max_gen_batches": ("rl.dynamic_sampling=regenerate",),
    "sim.fail_instance": ("sim.fail_time_s=100",),
    "ehp.signal": ("ehp.enabled=true",),
    "sched.attempt_shrink": ("sched.policy=cmlfq_h",),
}
SMALL_TRACE = (f"workload.trace={SOURCE_DIR}/tests/data/trace/small.jsonl", "rl.samples=2")
SWITCHED_OFF = {
    "rl.gen_batch_factor": ("rl.dynamic_sampling=regenerate",),
    "rl.max_gen_batches": ("rl.dynamic_sampling=off",),
    "plan.replan_interval_steps": ("sim.modes=colocated,async",),
    "plan.replan_pressure": ("sim.planner=false",),
    "plan.replan_min_gain_frac": ("plan.replan_interval_steps=0", "plan.replan_pressure=false"),
    "plan.replan_horizon_steps": ("sim.modes=async",),
    "plan.verify_steps": ("plan.verify_candidates=0",),
    "sim.tune_steps": ("sim.modes=libra",),
    "sim.tune_grid": ("sim.modes=colocated,libra",),
    "sim.colocated_tp": ("sim.modes=async,libra",),
    "sim.async_train_gpus": ("sim.modes=colocated",),
    "sim.async_tp": ("sim.modes=libra",),
    "sim.fail_instance": (),
    "plan.sample_seed": SMALL_TRACE,
}
# libra plan simulates only to verify its candidates (plan.verify_candidates above 0, async).
PLAN_SIMULATED = ("plan.verify_steps", "sched.policy",
                  "sched.rebuild_interval", "sched.shrink_visits", "sched.empirical_shrink",
                  "sched.attempt_shrink", "sim.warmup_steps", "sim.context_mode",
                  "sim.prefix_cache", "sim.queue_cap", "sim.fail_time_s", "sim.fail_instance",
                  "rl.overprovision_frac", "rl.trajectory_timeout_s")
PARTLY_OFF = {
    ("ehp.signal", "sim"): (),
    # a trace's runs replay it whatever the seed; load's token ids and route eval's placebo
    # take the seed with a trace too
    ("sim.seed", "sim"): SMALL_TRACE,
    ("sim.seed", "plan"): SMALL_TRACE,
    **{(key, "plan"): ("plan.verify_candidates=0",) for key in PLAN_SIMULATED},
    ("plan.verify_candidates", "plan"): ("plan.mode=colocated",),
    # a colocated plan reshards after every step: no staleness, update interval, mode or transport
    **{(key, "plan"): ("plan.mode=colocated",) for key in (
        "rl.max_staleness", "rl.sync_interval", "rl.sync_mode", "rl.transport")},
    **{(key, "sim"): ("sim.modes=colocated",) for key in (
        "rl.max_staleness", "rl.sync_interval", "rl.sync_mode", "rl.transport")},
    **{(key, "sim"): ("sim.modes=rollout", FLEET_SET) for key in (
        "rl.minibatches", "rl.old_logprob", "rl.reference", "plan.sample_seed", "plan.recompute",
        "plan.fsdp", "plan.cp_min_seq_tokens", "plan.group_integrity")},
    # dynamic sampling's rounds act in colocated, rollout and libra's planner, not in async
    ("rl.dynamic_sampling", "sim"): ("sim.modes=async",),
    ("rl.max_gen_batches", "sim"): ("sim.modes=async", "rl.dynamic_sampling=regenerate"),
    ("rl.gen_batch_factor", "sim"): ("sim.modes=async",),
    ("ehp.enabled", "sim"): ("sim.modes=colocated",),
    # the router's keys act in the modes that route over buckets, the planner's in libra's
    **{(key, "sim"): ("sim.modes=colocated",) for key in (
        "sched.policy", "sched.buckets", "sched.rebuild_interval", "sched.shrink_visits",
        "sched.empirical_shrink", "sched.attempt_shrink", "sim.planner",
        "plan.homogeneous_rollout", "plan.verify_candidates", "plan.verify_steps",
        "plan.max_scored", "plan.gap_tolerance", "plan.min_tp_sizes", "plan.tp_pattern")},
    # the splits' bounds act where splits are searched: libra's planner, async's tuning
    **{(key, "sim"): ("sim.modes=colocated",) for key in (
        "plan.min_train_gpus", "plan.min_rollout_gpus", "plan.granularity_gpus")},
}
# the value set where CHANGES's would act even with the switch off (0: verification off)
PARTLY_VALUE = {("plan.verify_candidates", "plan"): "4", ("plan.verify_candidates", "sim"): "4",
                # regenerate acts in async too; gen_batch differs from it only in the rounds
                ("rl.dynamic_sampling", "sim"): "gen_batch",
                # CHANGES's 0 is below the sync interval: libra plan refuses the file's value
                ("rl.max_staleness", "sim"): "8", ("rl.max_staleness", "plan"): "8"}


def dependent_rows():
    """(key, refused by) of each row of the table of `libra config doc`."""
    doc = libra("config", "doc").stdout
    part = doc[doc.index("## Keys that act only with another setting"):].split("\n## ")[0]
    return {(cells(line)[0].strip("`"), cells(line)[2]) for line in part.splitlines()
            if line.startswith("| `")}


# rows of the table tested on their own (test_attempt_shrink_without_cmlfq_h_is_refused)
OWN_ROWS = {("sched.attempt_shrink", "libra plan and libra serve, from a flag")}


def test_every_dependent_key_has_its_cases():
    rows = dependent_rows()
    assert {k for k, by in rows if by == "every command that reads it"} == set(SWITCHED_OFF)
    assert {(k, by) for k, by in rows if by != "every command that reads it"} == {
        (k, f"libra {c}, from a flag") for k, c in PARTLY_OFF} | OWN_ROWS


@pytest.mark.parametrize("command", [("plan", "--gpus", "16", "--set", "rl.steps=6"),
                                     ("serve", "--engine", "http://127.0.0.1:9")])
def test_attempt_shrink_without_cmlfq_h_is_refused(command):
    """cmlfq_h alone weighs a prompt's attempts: libra plan's verification and the gateway
    under another policy would take the flag to no effect (libra sim and route eval refuse it
    by their own rows)."""
    proc = libra(*command, "--set", "sched.attempt_shrink=5")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr == ("libra: --set sched.attempt_shrink: sched.attempt_shrink=5.0 has no "
                           "effect without sched.policy cmlfq_h\n"), proc.stderr


def file_value(key, text):
    """A --set value as the config file writes it."""
    if key == "sim.modes":
        return text.split(",")
    if text in ("true", "false"):
        return text == "true"
    try:
        return json.loads(text)
    except ValueError:
        return text


def experiment_file(path, settings):
    """Writes settings ("KEY=VALUE", ...) as a config file."""
    doc = {}
    for s in settings:
        k, v = s.split("=", 1)
        section, name = k.split(".")
        doc.setdefault(section, {})[name] = file_value(k, v)
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("key", sorted(SWITCHED_OFF))
def test_a_dependent_key_set_while_its_mechanism_is_off_is_refused(key, tmp_path):
    """From a flag (exit 2, naming the flag) and from a file (file:line:col), by every command
    that reads the key and by `libra config check`."""
    off = [a for s in SWITCHED_OFF[key] for a in ("--set", s)]
    value = CHANGES[key][0]
    proc = libra("sim", "--steps", "1", *off, "--set", f"{key}={value}")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith(f"libra: --set {key}: {key}="), proc.stderr
    assert "has no effect with" in proc.stderr  # "without NEEDS", or the switch that is off
    path = experiment_file(tmp_path / "x.json", (f"{key}={value}", *SWITCHED_OFF[key]))
    for args in (("config", "check", path), ("sim", path, "--steps", "1")):
        proc = libra(*args)
        assert proc.returncode != 0 and proc.stdout == "", proc.stderr
        assert proc.stderr.startswith(f"libra: {path}:1:"), proc.stderr
        assert f"{key}: {key}=" in proc.stderr and "has no effect with" in proc.stderr


@pytest.mark.parametrize("key,command", sorted(PARTLY_OFF))
def test_a_partly_dependent_key_is_refused_from_a_flag_of_its_command(key, command, tmp_path):
    """Refused from a flag by the command that needs the switch; from a file taken by it and by
    `libra config check`: another command that reads the key acts on the file's value."""
    off = PARTLY_OFF[key, command]
    value = PARTLY_VALUE.get((key, command), CHANGES[key][0])
    proc, _ = stop_run(command, *[a for s in off for a in ("--set", s)], "--set",
                       f"{key}={value}", key=key if key == "sim.seed" else None)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith(f"libra: --set {key}: {key}="), proc.stderr
    assert "has no effect" in proc.stderr
    if key in SWITCHED_OFF:  # also inert for every command while its own switch is off
        return
    path = experiment_file(tmp_path / "x.json", (f"{key}={value}", *off))
    proc, code = stop_run(command, path)
    assert proc.returncode == code, proc.stderr
    proc = libra("config", "check", path)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


def flag_text(value):
    """A value of `libra config show` as --set writes it."""
    if isinstance(value, list):
        return ",".join(value)
    return value if isinstance(value, str) else json.dumps(value)


@pytest.mark.parametrize("command", COMMANDS)
def test_flag_giving_the_default_is_taken(command):
    """Every key the command does not read, set to its default, asks nothing of it."""
    default = json.loads(libra("config", "show").stdout)
    args = []
    for key in sorted(set(CHANGES) - reads()[command]):
        section, name = key.split(".")
        args += ["--set", f"{key}={flag_text(default[section][name])}"]
    proc, code = stop_run(command, *args)
    assert proc.returncode == code, proc.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_help_lists_the_flags_of_the_keys_read(command):
    flags = dict(re.findall(r"^  ([a-z_]+\.[a-z_]+) .*, --([a-z-]+)$",
                            libra("config", "--help").stdout, re.M))
    help_text = libra(*command.split(), "--help").stdout
    common = help_text[help_text.index("\ncommon flags:\n"):]
    listed = set(re.findall(r"^  --[a-z-]+ [A-Z,]+ +([a-z_]+\.[a-z_]+): ", common, re.M))
    own = set(re.findall(r"^  (--[a-z-]+)", help_text[:help_text.index("\ncommon flags:\n")],
                         re.M))
    want = {k for k, flag in flags.items() if k in reads()[command] and f"--{flag}" not in own}
    assert listed == want


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(SOURCE_DIR, "examples", "*.json"))))
def test_every_command_takes_an_experiment_file(command, path):
    experiment = ("--config", path) if command in ("route eval", "calibrate") else (path,)
    proc, code = stop_run(command, *experiment)
    assert proc.returncode == code, proc.stderr


@pytest.mark.parametrize("off", [("--verify", "0"), ("--mode", "colocated")])
def test_plan_refuses_a_seed_where_plan_sample_seed_draws_the_sample(off):
    """libra plan simulating nothing draws only its length sample, from plan.sample_seed when
    set: --seed would change nothing but the echoed seed and the digest."""
    proc = libra("plan", *off, "--set", "plan.sample_seed=3", "--seed", "7")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith("libra: --seed: sim.seed=7 has no effect"), proc.stderr
    assert libra("plan", *off, "--seed", "7").returncode == 0  # it seeds the sample
    proc = libra("plan", "--set", "plan.sample_seed=3", "--seed", "7", "--set", "rl.steps=2",
                 "--set", "plan.verify_steps=1", "--set", "plan.verify_candidates=1")
    assert proc.returncode == 0, proc.stderr  # it seeds the verification
