"""End-to-end tests of `libra trace gen` (docs/workloads.md): the trace it writes is valid and
reproducible, steps and epochs follow the prompt pool, flags and preset files are honoured,
bad input gets a clear error and exit 2 with nothing written, and a signal that stops gen or
import leaves no partial file.

Needs LIBRA_BIN (the built binary).
"""

import json
import os
import signal
import subprocess
import time

import pytest

LIBRA = os.environ["LIBRA_BIN"]
EXIT_USAGE = 2


def run(*args, env=None):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120,
                          env=env)


def read_trace(path):
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    return lines[0], lines[1:]


def test_same_flags_same_bytes_and_a_valid_trace(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert run("trace", "gen", "r2e-gym", "--steps", "3", "--seed", "5", "-o", str(a)).returncode == 0
    r = run("trace", "gen", "r2e-gym", "--steps", "3", "--seed", "5")
    assert r.returncode == 0
    b.write_text(r.stdout)
    assert a.read_bytes() == b.read_bytes()
    v = run("trace", "validate", str(a))
    assert v.returncode == 0 and "valid, 96 trajectories" in v.stdout
    c = run("trace", "gen", "r2e-gym", "--steps", "3", "--seed", "6")
    assert c.stdout != r.stdout


def test_header_steps_groups_and_versions(tmp_path):
    path = tmp_path / "t.jsonl"
    assert run("trace", "gen", "search-r1", "--steps", "2", "--batch", "20", "--samples", "5",
               "-o", str(path)).returncode == 0
    header, trajs = read_trace(path)
    assert header["workload"] == "search-r1" and header["group_size"] == 5
    gen = header["generator"]
    assert gen["preset"] == "search-r1" and gen["seed"] == 1 and gen["steps"] == 2
    assert gen["batch_trajectories"] == 20 and gen["params"]["prompts"] == 169615
    assert len(trajs) == 40
    for i, t in enumerate(trajs):
        assert t["step"] == i // 20 and t["version_start"] == t["step"] == t["version_end"]
        assert t["sample"] == i % 5
        assert t["prompt_id"] == trajs[i - i % 5]["prompt_id"]  # a group shares its prompt
    assert len({t["prompt_id"] for t in trajs}) == 8


def test_epochs_visit_every_prompt_once(tmp_path):
    presets = tmp_path / "p.json"
    presets.write_text('{"workloads": [{"name": "tiny", "base": "r2e-gym", "prompts": 5}]}')
    path = tmp_path / "t.jsonl"
    r = run("trace", "gen", "tiny", "--presets", str(presets), "--steps", "5", "--batch", "8",
            "--samples", "4", "-o", str(path))
    assert r.returncode == 0, r.stderr
    _, trajs = read_trace(path)
    groups = trajs[::4]  # 10 prompt draws: two epochs of the 5-prompt pool
    for epoch in (0, 1):
        drawn = [g["prompt_id"] for g in groups if g["epoch"] == epoch]
        assert sorted(drawn) == [0, 1, 2, 3, 4]


def test_dynamic_sampling_marks_identical_groups(tmp_path):
    path = tmp_path / "t.jsonl"
    assert run("trace", "gen", "dapo-math-verl", "--steps", "1", "--batch", "320",
               "-o", str(path)).returncode == 0
    _, trajs = read_trace(path)
    for k in range(0, len(trajs), 16):
        group = trajs[k:k + 16]
        same = len({t["reward"] for t in group}) == 1
        for t in group:
            assert (t["finish"] == "filtered") == (same and t["finish"] != "truncated")


def test_bad_input_exits_2_and_writes_nothing(tmp_path):
    out = tmp_path / "out.jsonl"
    cases = [
        (["nope"], "unknown workload preset 'nope'"),
        (["r2e-gym", "--batch", "30"], "--batch 30 is not a multiple of --samples 4"),
        (["r2e-gym", "--steps", "0"], "--steps: expected an integer"),
        (["r2e-gym", "--seed", "-1"], "--seed: expected an integer"),
        # no wider than the keys libra sim replays the trace under (rl.batch_trajectories,
        # rl.samples) and draws it again with (sim.seed): a trace it could not run, or whose
        # seed it cannot take
        (["r2e-gym", "--batch", "2000000"], "--batch: expected an integer in [1, 1048576]"),
        (["r2e-gym", "--samples", "1025"], "--samples: expected an integer in [1, 1024]"),
        (["r2e-gym", "--seed", str(2**53)], "--seed: expected an integer in [0, "
         f"{2**53 - 1}]"),
        ([], "gen needs one WORKLOAD"),
        (["r2e-gym", "extra"], "gen needs one WORKLOAD"),
    ]
    for args, message in cases:
        r = run("trace", "gen", *args, "-o", str(out))
        assert r.returncode == EXIT_USAGE, args
        assert message in r.stderr, (args, r.stderr)
        assert not out.exists()


def test_bad_preset_file_reports_its_position(tmp_path):
    presets = tmp_path / "p.json"
    presets.write_text('{"workloads": [{"name": "x", "base": "r2e-gym",\n  "causal": {"strenght": 1}}]}')
    r = run("trace", "gen", "x", "--presets", str(presets))
    assert r.returncode == EXIT_USAGE
    assert r.stderr.startswith(f"libra: {presets}:2:14: workloads.0.causal.strenght: unknown key")
    env = dict(os.environ, LIBRA_PRESETS=str(presets))
    assert run("trace", "gen", "r2e-gym", env=env).returncode == EXIT_USAGE


def test_help():
    r = run("trace", "gen", "--help")
    assert r.returncode == 0 and "usage: libra trace gen WORKLOAD" in r.stdout


def test_help_names_every_built_in_preset():
    """The help listed four of the built-in presets; r2e-gym-drift was left out."""
    doc = json.loads(run("presets", "--json", env={**os.environ, "LIBRA_PRESETS": ""}).stdout)
    builtin = [w["name"] for w in doc["workloads"] if w["origin"] == "builtin"]
    assert "r2e-gym-drift" in builtin
    help_text = run("trace", "gen", "--help").stdout
    assert "  " + ", ".join(builtin) + "\n" in help_text, help_text


def wait_for_file(directory, timeout_s=60.0):
    """The first file to appear in directory (polled), or None."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        names = os.listdir(directory)
        if names:
            return names[0]
        time.sleep(0.02)
    return None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stopped_gen_leaves_no_partial_file(tmp_path, sig):
    """The trace streams into OUT.tmpPID.0, renamed into place at the end: a signal that stops
    the run first removes it, and still ends the process by that signal."""
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.Popen([LIBRA, "trace", "gen", "search-r1", "--steps", "100000", "-o",
                          str(out / "t.jsonl")], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        assert wait_for_file(out) == f"t.jsonl.tmp{p.pid}.0"
        p.send_signal(sig)
        assert p.wait(timeout=60) == -sig
    finally:
        p.kill()
    assert os.listdir(out) == []


def test_an_ignored_hangup_stays_ignored(tmp_path):
    """Under nohup (SIGHUP ignored) a hangup does not stop the run; SIGTERM still cleans up."""
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.Popen([LIBRA, "trace", "gen", "search-r1", "--steps", "100000", "-o",
                          str(out / "t.jsonl")], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        assert wait_for_file(out) == f"t.jsonl.tmp{p.pid}.0"
        p.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        assert p.poll() is None
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == -signal.SIGTERM
    finally:
        p.kill()
    assert os.listdir(out) == []


def test_a_stopped_import_leaves_no_partial_file(tmp_path):
    """trace import waiting on an input that has not ended (a FIFO held open) is stopped the
    same way."""
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.Popen([LIBRA, "trace", "import", "--from", "csv", str(fifo), "-o",
                          str(out / "t.jsonl")], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        with open(fifo, "w") as w:
            w.write("traj_id,step,prompt_id,turn,prompt_tokens,generated_tokens\n")
            w.flush()
            assert wait_for_file(out) == f"t.jsonl.tmp{p.pid}.0"
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=60) == -signal.SIGTERM
    finally:
        p.kill()
    assert os.listdir(out) == []


def test_a_batch_of_the_presets_prompts_past_the_keys_range_is_refused(tmp_path):
    """Without --batch the batch is the preset's prompts per step times --samples: past
    rl.batch_trajectories' range it made a trace no other command replays."""
    presets = tmp_path / "wide.json"
    presets.write_text(json.dumps({"workloads": [
        {"name": "wide", "base": "search-r1", "samples": 1, "batch_trajectories": 2**20,
         "dynamic_sampling": "off"}]}))
    out = tmp_path / "w.jsonl"
    r = run("trace", "gen", "wide", "--presets", str(presets), "--samples", "2", "--steps", "1",
            "-o", str(out))
    assert r.returncode == 2 and not out.exists(), r.stderr
    assert r.stderr.startswith(
        "libra: trace: --samples 2: the preset's 1048576 prompts per step would make a batch "
        "past rl.batch_trajectories' 1048576: give --batch\n"), r.stderr
    r = run("trace", "gen", "wide", "--presets", str(presets), "--samples", "2", "--batch", "8",
            "--steps", "1", "-o", str(out))
    assert r.returncode == 0, r.stderr
