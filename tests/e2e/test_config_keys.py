"""Every config key does what docs/config.md says, or is refused (docs/config.md).

A setting that is accepted must change what the command it is for does; one whose mechanism
is not built yet must be refused with an error naming it. For each key of the schema (the
keys `libra config show` prints), CHANGES gives a valid non-default value and a short run of
the command the key is for; the run with the value must differ from the run without it in
what the command computed, not only in the settings it echoes (ECHOES). REFUSED gives the
keys kept for mechanisms not built yet: setting them must exit 2 naming the key. No key is
exempt: a key that no command's output can show has no place in the schema. A key in neither
table fails test_every_key_is_classified, so a new key must come with its case. Needs
LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import functools
import json
import os
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
FULL = ("sim", "--steps", "3")
# The baselines' layouts pinned and libra's plan unverified: a tenth of FULL's time.
SIM = FULL + ("--set", "sim.colocated_tp=4", "--set", "sim.async_train_gpus=16", "--set",
              "sim.async_tp=4", "--set", "plan.verify_candidates=0")
TUNED = FULL + ("--set", "sim.modes=colocated,async")  # the baselines tuned by simulation
VERIFIED = FULL + ("--set", "sim.modes=libra")  # libra's plan chosen by simulation
LIBRA_ONLY = SIM + ("--set", "sim.modes=libra")
FLEET_SET = "sched.buckets=tp1x4:4000,tp2x2:12000,tp4x1:30000"
# libra on a fixed fleet of three buckets, where the routers' choices matter.
FLEET = LIBRA_ONLY + ("--set", "sim.planner=false", "--set", FLEET_SET)
# Search-R1's batch of 2,560 outgrows the router's history of 5,000 trajectories in two steps,
# after which a rebuild forgets the oldest.
SEARCH_FLEET = SIM + ("--workload", "search-r1", "--set", "sim.modes=libra", "--set",
                      "sim.planner=false", "--set", "sched.buckets=tp1x8:2000,tp2x4:5120")
UPDATE_EVERY_STEP = SIM + ("--set", "rl.sync_interval=1", "--set", "rl.transport=nccl")
DYNAMIC_SAMPLING = SIM + ("--workload", "dapo-math-verl", "--batch", "64", "--set",
                          "sim.modes=colocated")
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
PERFETTO = ("perfetto", "--steps", "3", "--set", "sim.modes=libra")

# key -> (non-default value, the run it changes).
CHANGES = {
    "cluster.hardware": ("h800", SIM),
    "cluster.gpus": ("32", SIM),
    "cluster.gpus_per_node": ("4", SIM),
    "model.name": ("qwen3-8b", SIM),
    "workload.name": ("search-r1", SIM + ("--batch", "40")),
    "workload.trace": ("tests/data/trace/small.jsonl", SIM),
    "rl.batch_trajectories": ("64", SIM),
    "rl.samples": ("8", SIM),
    "rl.steps": ("4", SIM),
    "rl.max_staleness": ("0", UPDATE_EVERY_STEP),
    "rl.sync_interval": ("2", SIM),
    "rl.sync_mode": ("abort_resume", UPDATE_EVERY_STEP),
    "rl.transport": ("nccl", SIM),
    "rl.overprovision_frac": ("0.5", SIM),
    "rl.max_gen_batches": ("1", DYNAMIC_SAMPLING),
    "rl.minibatches": ("4", SIM),
    "rl.old_logprob": ("false", SIM),
    "rl.reference": ("true", SIM),
    "plan.mode": ("colocated", PLAN),
    "plan.time_limit_s": ("0.000001", LONG_PLAN),
    "plan.gap_tolerance": ("0.05", PLAN),
    "plan.max_scored": ("10", PLAN),
    "plan.min_train_gpus": ("24", LIBRA_ONLY),
    "plan.min_rollout_gpus": ("40", PLAN),
    "plan.granularity_gpus": ("24", LIBRA_ONLY),
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
    "sched.attempt_shrink": ("0", FLEET + ("--set", "sched.policy=cmlfq_h")),
    "sim.modes": ("libra", SIM),
    "sim.seed": ("2", SIM),
    "sim.warmup_steps": ("0", SIM),
    "sim.tune_steps": ("1", TUNED),
    "sim.tune_grid": ("3", TUNED + ("--gpus", "128")),
    "sim.colocated_tp": ("2", TUNED),
    "sim.async_train_gpus": ("16", TUNED),
    "sim.async_tp": ("2", TUNED),
    "sim.planner": ("false", LIBRA_ONLY + ("--set", FLEET_SET)),
    "sim.context_mode": ("chat", SIM),
    "sim.prefix_cache": ("false", SIM),
    "sim.max_seqs": ("8", SIM),
    "sim.max_batched_tokens": ("1024", SIM),
    "sim.queue_cap": ("1", SIM),
    "sim.fail_time_s": ("100", SIM),
    "sim.fail_instance": ("3", SIM + ("--set", "sim.fail_time_s=100")),
    "sim.trace_step": ("1", PERFETTO),
}

# key -> a valid non-default value that must be refused: the mechanism is not built yet.
REFUSED = {
    "plan.replan_min_gain_frac": "0.2",
    "plan.replan_horizon_steps": "3",
    "ehp.enabled": "true",
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
    assert not set(CHANGES) & set(REFUSED)
    assert sorted(keys - set(CHANGES) - set(REFUSED)) == [], "keys without a case"
    assert sorted((set(CHANGES) | set(REFUSED)) - keys) == [], "cases of keys not in the schema"


@pytest.mark.parametrize("key", sorted(CHANGES))
def test_key_changes_its_command(key):
    value, run = CHANGES[key]
    assert outcome(run, f"{key}={value}") != outcome(run), (
        f"--set {key}={value} does not change `libra {' '.join(run)}`")


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_key_not_implemented_is_refused(key):
    proc = libra(*SIM, "--set", f"{key}={REFUSED[key]}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert f"--set {key}: not implemented: " in proc.stderr
    # its default stays accepted, so a config file that spells out every key still loads
    default = json.loads(libra("config", "show").stdout)
    section, name = key.split(".")
    proc = libra(*SIM, "--set", f"{key}={json.dumps(default[section][name])}")
    assert proc.returncode == 0, proc.stderr
