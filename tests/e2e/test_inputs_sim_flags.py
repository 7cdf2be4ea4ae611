"""End-to-end tests of odd flag combinations of `libra sim` and `libra plan` (docs/cli.md,
docs/sim.md "Sweeps, seeds, threads and progress", "Attribution" and "Perfetto").

- `--sweep attribution=...` is refused as an unknown key (it crashed on a value that is no bar,
  and ran the bars it named without `--attribution`, or twice beside it).
- A sweep over two traces (`--sweep workload.trace=A,B`) runs each cell on its own trace (the
  cells read before the second trace pointed at freed memory).
- A grid whose points times its seeds exceed 100000 runs is refused before anything runs (one
  that overflowed the count printed an empty sweep and exited 0; a large one aborted out of
  memory).
- `--attribution` refuses a flag giving a key every libra bar sets (`sim.modes`,
  `plan.homogeneous_rollout`, `ehp.enabled`), which the bars replaced unseen; a replanning key
  still acts on the bars that replan as configured.
- `--perfetto FILE` is written before the result: one that cannot be written leaves standard
  output empty. `--perfetto -` while the result goes to standard output too is refused (two
  documents in one stream); with `-o FILE` it writes the trace to standard output.
- `libra plan --homogeneous-rollout` given twice is taken, as a flag without a value may be
  repeated to no effect.
- A message about a flag's value names both its spellings where it has two (`-o/--output`).

Needs LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import json
import os
import shutil
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
SMALL = ("--gpus", "16", "--model", "qwen3-4b", "--batch", "8", "--steps", "2")


def run(*args, timeout=120, cwd=None):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)


def refused(r, code=2):
    assert r.returncode == code and r.stdout == "", (r.returncode, r.stderr)
    return r.stderr


# ---- --sweep attribution ----------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ("--sweep", "attribution=bogus"),
    ("--sweep", "attribution=libra,async"),
    ("--attribution", "--sweep", "attribution=libra"),
])
def test_sweeping_the_attribution_key_is_refused(args):
    err = refused(run("sim", *SMALL, *args))
    assert "--sweep: unknown key 'attribution'" in err, err


# ---- a sweep over traces ----------------------------------------------------------------------

def test_a_sweep_over_traces_runs_each_cell_on_its_trace(tmp_path):
    first = tmp_path / "a.jsonl"
    r = run("trace", "gen", "r2e-gym", "--steps", "2", "--batch", "8", "-o", str(first))
    assert r.returncode == 0, r.stderr
    names = ["a.jsonl", "b.jsonl", "c.jsonl"]
    for name in names[1:]:
        shutil.copy(first, tmp_path / name)
    r = run("sim", *SMALL, "--sweep", "workload.trace=" + ",".join(names), "--json",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cells = json.loads(r.stdout)["cells"]
    assert [c["set"]["workload.trace"] for c in cells] == names
    assert all("error" not in c for c in cells), [c.get("error") for c in cells]
    # one trace's bytes under three names: the same runs
    modes = [json.dumps(c["result"]["modes"], sort_keys=True) for c in cells]
    assert modes[0] == modes[1] == modes[2]


# ---- grids too large ----------------------------------------------------------------------------

KEYS = ("rl.steps", "rl.samples", "rl.max_staleness", "sim.tune_steps", "rl.sync_interval",
        "sim.warmup_steps", "rl.batch_trajectories", "sim.queue_cap")


@pytest.mark.parametrize("keys,values,seeds", [
    (KEYS, 256, ()),  # 256^8 = 2^64 runs: the count wrapped to 0
    (KEYS[:3], 1000, ()),  # 10^9 runs
    (KEYS[:1], 1000, ("--seeds", "100000")),
])
def test_a_grid_of_too_many_runs_is_refused(keys, values, seeds):
    grid = ",".join(str(v) for v in range(1, values + 1))
    args = [a for k in keys for a in ("--sweep", f"{k}={grid}")]
    err = refused(run("sim", "--json", *args, *seeds))
    assert "times the seeds is more than 100000 runs" in err, err


# ---- --attribution and the keys its bars set ------------------------------------------------

@pytest.mark.parametrize("setting", ["sim.modes=colocated", "ehp.enabled=false",
                                     "plan.homogeneous_rollout=true"])
def test_attribution_refuses_a_flag_its_bars_replace(setting):
    key = setting.split("=")[0]
    err = refused(run("sim", *SMALL, "--attribution", "--set", setting))
    assert f"--set {key}: --attribution sets {key} in its bars" in err, err


def test_attribution_takes_a_replanning_flag():
    r = run("sim", *SMALL, "--attribution", "--set", "plan.replan_interval_steps=3", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["grid"][-1]["key"] == "attribution"


# ---- --perfetto and standard output -------------------------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_perfetto_file_that_cannot_be_written_leaves_stdout_empty():
    err = refused(run("sim", *SMALL, "--perfetto", "/dev/full"), 3)
    assert "cannot write '/dev/full'" in err, err


@pytest.mark.parametrize("extra", [(), ("--json",), ("-o", "-")])
def test_perfetto_on_stdout_beside_the_result_is_refused(extra):
    err = refused(run("sim", *SMALL, "--perfetto", "-", *extra))
    assert "--perfetto '-' is standard output" in err, err


def test_perfetto_on_the_pipe_standard_output_is_refused():
    """/dev/stdout on a pipe is standard output too: the trace and the table would interleave in
    it (only a regular file was recognised)."""
    r = subprocess.run(f"{LIBRA} sim {' '.join(SMALL)} --perfetto /dev/stdout | cat", shell=True,
                       capture_output=True, text=True, timeout=120)
    assert "--perfetto '/dev/stdout' is standard output" in r.stderr, (r.stderr, r.stdout[:200])
    assert r.stdout == ""


def test_perfetto_on_stdout_with_the_result_in_a_file(tmp_path):
    out = tmp_path / "result.json"
    r = run("sim", *SMALL, "--json", "--perfetto", "-", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "traceEvents" in json.loads(r.stdout)
    assert json.loads(out.read_text())["schema"] == "libra.sim/1"


# ---- plan: a flag without a value repeated ----------------------------------------------------

def test_plan_takes_homogeneous_rollout_twice():
    once = run("plan", *SMALL, "--verify", "0", "--homogeneous-rollout", "--json")
    twice = run("plan", *SMALL, "--verify", "0", "--homogeneous-rollout",
                "--homogeneous-rollout", "--json")
    assert once.returncode == 0 and twice.returncode == 0, twice.stderr
    assert once.stdout == twice.stdout


@pytest.mark.parametrize("args,flag", [
    (("-o", ""), "-o/--output: an empty value"),
    (("--output=",), "-o/--output: an empty value"),
    (("-o", "a", "--output", "b"), "-o/--output given twice: it takes one value"),
    (("--seed", ""), "--seed: an empty value"),
])
def test_a_flag_with_two_spellings_is_named_by_both(args, flag):
    """A message about a flag's value names both of its spellings where it has two: it cannot
    tell which one was typed (`-o ''` was named `--output` alone)."""
    assert refused(run("sim", *args)).startswith(f"libra: sim: {flag}\n")


# ---- steps of a run ---------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--json", "--timeline", "01:2"], "--timeline: expected A:B"),
    (["--json", "--timeline", "1:02"], "--timeline: expected A:B"),
])
def test_a_timeline_step_with_a_leading_zero_is_refused(args, message):
    """01:2 ran 1:2's run under another config digest, as 032 would be another batch of 32."""
    assert message in refused(run("sim", "--steps", "3", *args))


def test_the_default_warm_up_is_capped_for_a_short_run():
    r = run("sim", "--steps", "1", "--set", "sim.modes=libra")
    assert r.returncode == 0, r.stderr
    assert "1 steps (0 warm-up)" in r.stdout.splitlines()[0]
