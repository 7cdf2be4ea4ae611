"""End-to-end tests of `libra load` against `libra emu` (docs/load.md): real processes on
loopback, ports chosen by the OS, 200x faster than real time."""

import json
import subprocess

import pytest
import threading
import time

from emu_util import LIBRA, Emu, get, post

SCALE = "0.005"  # 200x faster than real time: functional runs, not timing
QUICK = ["--time-scale", SCALE, "--steps", "3", "--batch", "8", "--set", "rl.sync_interval=2"]


def load(emu, *args, urls=None, timeout=240):
    urls = urls or ",".join(i["url"] for i in emu.instances)
    return subprocess.run([LIBRA, "load", "--engines", urls, *QUICK, *args],
                          capture_output=True, text=True, timeout=timeout)


def test_a_job_runs_every_trajectory_and_updates_the_weights():
    with Emu("--instances", "tp1x2,tp2,tp4", scale=SCALE) as emu:
        p = load(emu, "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["schema"] == "libra.load/1" and "config_digest" in doc
        steps = doc["steps"]
        assert [s["trajectories"] for s in steps] == [8, 8, 8]
        assert all(s["generated_tokens"] > 0 and s["resubmitted"] == 0 for s in steps)
        assert sum(e["turns"] for e in doc["engines"]) == sum(s["turns"] for s in steps)
        assert all(e["turns"] > 0 and not e["dead"] for e in doc["engines"])
        assert sum(s["cached_tokens"] for s in steps) > 0  # sticky turns hit the prefix cache
        assert doc["weight_updates"] == 1
        for inst in emu.instances:  # every engine got the update, in order
            assert get(inst["port"], "/get_weight_version")[1] == {"weight_version": "1"}


@pytest.mark.parametrize("mode,transport", [("drain", "disk_reload"),
                                            ("abort_resume", "nccl"), ("keep", "nccl")])
def test_every_sync_mode_updates_with_turns_in_flight(mode, transport):
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        p = load(emu, "--json", "--set", f"rl.sync_mode={mode}", "--set",
                 f"rl.transport={transport}", "--set", "rl.max_staleness=1")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
        assert doc["weight_updates"] == 1
        for inst in emu.instances:
            assert get(inst["port"], "/get_weight_version")[1] == {"weight_version": "1"}
        resent = doc["steps"][2]["resubmitted"]
        # Only abort_resume sends turns back: the update met step 2's first turns in flight.
        assert (resent > 0) == (mode == "abort_resume"), resent


@pytest.mark.parametrize("style,mode", [("areal", "abort_resume"), ("slime", "abort_resume"),
                                        ("skyrl", "abort_resume"), ("skyrl", "drain"),
                                        ("skyrl", "keep")])
def test_every_client_style_runs_a_job_with_a_weight_update(style, mode):
    # skyrl speaks vLLM: its pause and weight endpoints are the development-mode ones.
    with Emu("--instances", "tp1x4", "--dev-mode", scale=SCALE) as emu:
        p = load(emu, "--json", "--style", style, "--set", "rl.max_staleness=1",
                 "--set", f"rl.sync_mode={mode}", "--set", "rl.transport=nccl")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["style"] == style
        assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
        assert doc["weight_updates"] == 1
        assert sum(e["turns"] for e in doc["engines"]) == sum(s["turns"] for s in doc["steps"])
        resent = doc["steps"][2]["resubmitted"]
        if style == "slime":  # it waits for idle engines: the update meets nothing in flight
            assert resent == 0
            for inst in emu.instances:
                assert get(inst["port"], "/get_weight_version")[1] == {"weight_version": "1"}
        else:  # AReaL pauses with abort, SkyRL with its mode: only abort sends turns back
            assert (resent > 0) == (style == "areal" or mode == "abort_resume"), resent


def test_the_table_names_the_steps_and_engines():
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        p = load(emu)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0].startswith("libra load: plain client, 2 engines, 3 steps of 8 trajectories (2 x 4), trainer step")
        assert lines[2].split()[:3] == ["step", "traj", "turns"]
        assert [line.split()[1] for line in lines[3:6]] == ["8", "8", "8"]
        assert lines[-1] == "weight updates: 1"


def test_an_engine_that_dies_is_reported_and_its_turns_go_elsewhere():
    with Emu("--instances", "tp1x3", "--fail", "instance=1,after_s=200", scale=SCALE) as emu:
        doc = json.loads(load(emu, "--json").stdout)
        assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
        assert [e["dead"] for e in doc["engines"]] == [False, True, False]
        assert sum(s["resubmitted"] for s in doc["steps"]) > 0


def test_aborted_turns_are_resubmitted_and_no_trajectory_is_lost():
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        def pause_now_and_then():
            for _ in range(3):
                time.sleep(0.5)
                for inst in emu.instances:
                    post(inst["port"], "/pause_generation", {"mode": "abort"})
                time.sleep(0.1)
                for inst in emu.instances:
                    post(inst["port"], "/continue_generation")
        t = threading.Thread(target=pause_now_and_then, daemon=True)
        t.start()
        doc = json.loads(load(emu, "--json").stdout)
        t.join()
        assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
        assert sum(s["resubmitted"] for s in doc["steps"]) > 0


def test_the_finished_trajectories_are_written_as_a_trace(tmp_path):
    out = str(tmp_path / "seen.jsonl")
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        p = load(emu, "-o", out)
    assert p.returncode == 0, p.stderr
    lines = open(out, encoding="utf-8").read().splitlines()
    header = json.loads(lines[0])
    assert header["workload"] == "r2e-gym" and header["import"]["source"] == "libra load"
    trajs = [json.loads(line) for line in lines[1:]]
    assert len(trajs) == 3 * 8 and sorted({t["step"] for t in trajs}) == [0, 1, 2]
    assert any(turn["cached_tokens"] > 0 for t in trajs for turn in t["turns"])
    v = subprocess.run([LIBRA, "trace", "validate", out], capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr


def test_errors():
    p = subprocess.run([LIBRA, "load"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--engines is required" in p.stderr
    p = subprocess.run([LIBRA, "load", "--engines", "ftp://x"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "not an http:// URL" in p.stderr
    p = subprocess.run([LIBRA, "load", "--engines", "http://x", "--style", "verl"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--style: expected plain, areal, slime or skyrl" in p.stderr
    # Nothing listens there: the run stops with the reason, exit 1.
    p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", *QUICK],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "every engine stopped answering" in p.stderr
