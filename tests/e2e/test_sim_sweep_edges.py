"""Edge cases of `libra sim` runs and sweeps (docs/sim.md): a run that trains nothing, a sweep's
bad trace points, the sweep headline, the Perfetto mode and the --seeds message with a trace."""

import json
import os
import subprocess

LIBRA = os.environ["LIBRA_BIN"]
SMALL = ["--steps", "3", "--batch", "4", "--set", "sim.modes=async"]


def run(*args, cwd=None):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=240, cwd=cwd)


def test_a_run_that_trains_nothing_is_an_error_though_one_finished():
    """A 5 s timeout stops 19 of the 20 trajectories; the one that finishes is in no trained
    group, so nothing trained: the error naming the key, not a table of zeros."""
    p = run("sim", *SMALL, "--set", "rl.trajectory_timeout_s=5", "--json")
    assert p.returncode == 2, p.stdout[:300]
    assert "rl.trajectory_timeout_s 5 s stopped 19 of the 20 trajectories" in p.stderr, p.stderr
    assert "nothing trained" in p.stderr


def test_a_sweep_has_no_zeros_in_its_medians():
    """The runs whose measured steps trained nothing (some trained in the warm-up only) fail."""
    p = run("sim", *SMALL, "--sweep", "rl.trajectory_timeout_s=4,5", "--seeds", "8", "--json")
    doc = json.loads(p.stdout)
    for cell in doc["cells"]:
        assert "error" in cell or cell["result"]["modes"]["async"]["run"]["trained_tokens"] > 0
    for point in doc["summary"]:
        assert point["modes"]["async"]["trained_tokens_per_s"]["median"] > 0


def trace(tmp_path, name, *args):
    path = str(tmp_path / name)
    p = run("trace", "gen", *args, "-o", path)
    assert p.returncode == 0, p.stderr
    return path


def test_a_sweep_refuses_a_trace_point_before_anything_runs(tmp_path):
    tr = trace(tmp_path, "tr.jsonl", "r2e-gym", "--steps", "1", "--batch", "8")
    p = run("sim", "--steps", "1", "--batch", "8", "--trace", tr, "--sweep", "rl.samples=4,8",
            "--set", "sim.modes=async", "--json")
    assert p.returncode == 2 and p.stdout == "", p.stdout[:300]
    assert p.stderr.startswith("libra: sim: --sweep: 'rl.samples=8': "), p.stderr
    assert "not rl.samples = 8" in p.stderr and "usage" not in p.stderr.lower()


def test_a_sweep_refuses_a_short_trace_before_anything_runs(tmp_path):
    tr = trace(tmp_path, "tr.jsonl", "r2e-gym", "--steps", "1", "--batch", "4")
    short = tmp_path / "trq.jsonl"
    short.write_text("".join(open(tr).readlines()[:4]))  # the header and 3 records
    p = run("sim", "--steps", "1", "--batch", "4", "--sweep", f"workload.trace={tr},{short}",
            "--set", "sim.modes=async", "--json")
    assert p.returncode == 2 and p.stdout == "", p.stdout[:300]
    assert p.stderr.startswith(f"libra: sim: --sweep: 'workload.trace={short}': "), p.stderr
    assert "the trace holds 3 trajectories" in p.stderr


def test_the_sweep_headline_names_a_swept_trace(tmp_path):
    tr = trace(tmp_path, "tr.jsonl", "r2e-gym", "--steps", "1", "--batch", "4")
    sr = trace(tmp_path, "sr.jsonl", "search-r1", "--steps", "1", "--batch", "4",
               "--samples", "4")
    p = run("sim", "--steps", "1", "--batch", "4", "--sweep", f"workload.trace={tr},{sr}",
            "--set", "sim.modes=async")
    assert p.returncode == 0, p.stderr
    assert f"(0 failed); {{{tr},{sr}}} on qwen3-14b, 48 x a800-80g\n" in p.stdout, p.stdout


def test_the_sweep_headline_shortens_a_long_list_whole_values():
    """More than 6 values: the first 3, "...", the last; a few values are listed whole."""
    gpus = ",".join(str(g) for g in range(48, 601, 8))
    p = run("sim", "--steps", "1", "--batch", "4", "--set", "sim.modes=rollout", "--set",
            "sched.buckets=tp8x2:30000", "--sweep", f"cluster.gpus={gpus}", "--jobs", "2")
    assert p.returncode == 0, p.stderr
    assert "on qwen3-14b, {48,56,64,...,600} x a800-80g\n" in p.stdout.splitlines(True)[0]
    p = run("sim", "--steps", "1", "--batch", "4", "--set", "sim.modes=rollout", "--set",
            "sched.buckets=tp8x2:30000", "--sweep", "cluster.gpus=16,24,32,40,48,56")
    assert "on qwen3-14b, {16,24,32,40,48,56} x a800-80g\n" in p.stdout, p.stdout + p.stderr


def test_perfetto_names_the_mode_run_not_its_layout_kind(tmp_path):
    """Libra's verified plan here is colocated; the recording is of libra's run."""
    p = run("sim", "--steps", "1", "--batch", "8", "--set", "sim.modes=libra", "--perfetto",
            "p.json", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["modes"]["libra"]["layout"]["colocated"] is True
    assert json.loads((tmp_path / "p.json").read_text())["otherData"]["mode"] == "libra"


def test_seeds_with_a_trace_say_the_trajectories_are_the_traces(tmp_path):
    """One seed with a trace is refused as several are (docs/sim.md "seeds with a trace"), by
    a message that does not call the trace unset."""
    tr = trace(tmp_path, "tr.jsonl", "r2e-gym", "--steps", "1", "--batch", "8")
    config = tmp_path / "cts.json"
    config.write_text(json.dumps({"workload": {"trace": tr}, "sim": {"seed": 5},
                                  "rl": {"steps": 3, "batch_trajectories": 8}}))
    for flag, seeds in (("--seeds", "1"), ("--seed-list", "5")):
        p = run("sim", str(config), "--sweep", "rl.sync_interval=1,5", flag, seeds)
        assert p.returncode == 2 and p.stdout == "", p.stdout[:300]
        assert p.stderr == (f"libra: {flag}: sim.seed=5 has no effect without generated "
                            "trajectories: the trajectories are the trace's (workload.trace "
                            f"{tr}), replayed whatever the seed\n"), p.stderr
