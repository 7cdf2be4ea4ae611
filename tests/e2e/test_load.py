"""End-to-end tests of `libra load` against `libra emu` (docs/load.md): real processes on
loopback, ports chosen by the OS, 200x faster than real time."""

import json
import re
import subprocess

import pytest
import threading
import time

from emu_util import LIBRA, Emu, FakeEngine, QuietHandler, get, post

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


# One version of staleness, weights after every step: each update meets the next batch's turns.
ONE_AHEAD = ["--set", "rl.max_staleness=1", "--set", "rl.sync_interval=1"]


@pytest.mark.parametrize("mode,transport", [("drain", "disk_reload"),
                                            ("abort_resume", "nccl"), ("keep", "nccl")])
def test_every_sync_mode_updates_with_turns_in_flight(mode, transport):
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        p = load(emu, "--json", "--set", f"rl.sync_mode={mode}", "--set",
                 f"rl.transport={transport}", *ONE_AHEAD)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
        assert doc["weight_updates"] == 2
        for inst in emu.instances:
            assert get(inst["port"], "/get_weight_version")[1] == {"weight_version": "2"}
        resent = sum(s["resubmitted"] for s in doc["steps"])
        # Only abort_resume sends turns back: the updates met the next batch's turns in flight.
        assert (resent > 0) == (mode == "abort_resume"), resent


@pytest.mark.parametrize("style,mode", [("areal", "abort_resume"), ("slime", "abort_resume"),
                                        ("skyrl", "abort_resume"), ("skyrl", "drain"),
                                        ("skyrl", "keep")])
def test_every_client_style_runs_a_job_with_a_weight_update(style, mode):
    # skyrl speaks vLLM: its pause and weight endpoints are the development-mode ones.
    with Emu("--instances", "tp1x4", "--dev-mode", scale=SCALE) as emu:
        p = load(emu, "--json", "--style", style, *ONE_AHEAD,
                 "--set", f"rl.sync_mode={mode}", "--set", "rl.transport=nccl")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["style"] == style
        assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
        assert doc["weight_updates"] == 2
        # The engines answered the trained batches' turns, and those of any group dropped.
        served, trained = (sum(e["turns"] for e in doc["engines"]),
                           sum(s["turns"] for s in doc["steps"]))
        dropped = sum(s["stale_groups"] + s["filtered_groups"] for s in doc["steps"])
        assert served == trained if dropped == 0 else served > trained
        resent = sum(s["resubmitted"] for s in doc["steps"])
        if style == "slime":  # its update waits for the rollout in flight: it meets no turn
            assert resent == 0
            # ... so the batch it ran ahead is complete and fresh when the trainer is free
            assert [s["mean_staleness"] for s in doc["steps"]] == [0, 1, 1]
            for inst in emu.instances:
                assert get(inst["port"], "/get_weight_version")[1] == {"weight_version": "2"}
        else:  # AReaL pauses with abort, SkyRL with its mode: only abort sends turns back
            assert (resent > 0) == (style == "areal" or mode == "abort_resume"), resent


def test_the_table_names_the_steps_and_engines():
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        p = load(emu)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert re.fullmatch(r"libra load: plain client, 2 engines, 3 steps of 8 trajectories "
                            r"\(2 x 4\), trainer tp\d+ pp\d+ cp\d+ dp\d+ on \d+ GPUs, "
                            r"checkpoint \d+\.\d s, time x 0.005", lines[0]), lines[0]
        assert lines[2].split()[:3] == ["step", "traj", "turns"]
        assert lines[2].split()[-2:] == ["train", "s"]
        assert [line.split()[1] for line in lines[3:6]] == ["8", "8", "8"]
        # the trainer's step on each batch it trained, none on the last (not trained)
        train = [float(line.split()[-1]) for line in lines[3:6]]
        assert train[0] > 0 and train[1] > 0 and train[2] == 0, lines[3:6]
        assert lines[-2] == "groups: 6 launched, 0 filtered (0 tokens), 0 too stale (0 tokens)"
        assert lines[-1] == "weight updates: 1"


def test_progress_counts_the_steps_when_asked():
    """--progress (docs/cli.md): the steps whose batch is complete, on stderr, off a terminal
    only when asked; the table on stdout is the same either way."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        quiet, loud = load(emu), load(emu, "--progress")
    assert quiet.returncode == 0 and loud.returncode == 0, loud.stderr
    assert "libra load: " not in quiet.stderr
    lines = [ln for ln in loud.stderr.splitlines() if ln.startswith("libra load: ")]
    assert lines and lines[-1].startswith("libra load: 3/3 steps (100%), "), lines
    assert loud.stdout.splitlines()[0] == quiet.stdout.splitlines()[0]


def test_an_engine_that_dies_is_reported_and_its_turns_go_elsewhere():
    # 5 emulated seconds (25 ms of wall clock): dead before the client's first turns on it end,
    # so one of them is sent again; a later death races the client's idle moments (a weight
    # update, not a turn, can be the first to find it dead).
    with Emu("--instances", "tp1x3", "--fail", "instance=1,after_s=5", scale=SCALE) as emu:
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


def trace_with_setup(tmp_path, setup_us=400_000_000):
    """A generated R2E-Gym trace (3 batches of 8) whose every trajectory has setup_us (400 s by
    default) before its first turn."""
    trace = str(tmp_path / "t.jsonl")
    g = subprocess.run([LIBRA, "trace", "gen", "r2e-gym", "--steps", "3", "--batch", "8",
                        "-o", trace], capture_output=True, text=True)
    assert g.returncode == 0, g.stderr
    lines = open(trace, encoding="utf-8").read().splitlines()
    trajs = [json.loads(line) for line in lines[1:]]
    for t in trajs:
        t["setup_us"] = setup_us
    open(trace, "w", encoding="utf-8").write(
        "\n".join([lines[0]] + [json.dumps(t) for t in trajs]) + "\n")
    return trace


def test_a_trajectory_waits_its_setup_before_its_first_turn(tmp_path):
    """setup_us (docs/trace-format.md): the environment's start is waited, scaled like tool
    time, before the first turn; the trace written keeps it."""
    trace, out = trace_with_setup(tmp_path), str(tmp_path / "seen.jsonl")  # 2 s of wall clock
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        p = load(emu, "--trace", trace, "--json", "-o", out)
    assert p.returncode == 0, p.stderr
    for step in json.loads(p.stdout)["steps"]:
        # a lower bound by construction (a timer never fires early), not a speed figure
        assert step["wall_s"] >= 400 * float(SCALE), step
    assert all(t["setup_us"] == 400_000_000 for t in records(out))


def test_a_trajectory_timeout_cancels_and_masks_the_slow_ones(tmp_path):
    """rl.trajectory_timeout_s, scaled like tool time: R2E-Gym's long trajectories are stopped
    (the turn in flight cancelled, the tool wait dropped), left out of the trained batch and
    written as aborted; stopped during their setup, before any engine knew them, too."""
    out = str(tmp_path / "seen.jsonl")
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        p = load(emu, "--json", "-o", out, "--set", "rl.trajectory_timeout_s=60")
        steps = json.loads(p.stdout)["steps"] if p.returncode == 0 else None
        assert steps is not None, p.stderr
        stopped = sum(s["timed_out"] for s in steps)
        assert stopped > 0 and any(s["trajectories"] < 8 for s in steps), steps
        assert all(s["trajectories"] + s["timed_out"] == 8 for s in steps), steps
        assert sum(s["timed_out_tokens"] for s in steps) <= sum(
            s["generated_tokens"] for s in steps)
        aborted = [t for t in records(out) if t["finish"] == "aborted"]
        assert len(aborted) >= stopped  # the batches' stopped ones (the last batch's too)

        trace = trace_with_setup(tmp_path)  # longer than the timeout: stopped before a turn
        p = load(emu, "--trace", trace, "--json", "--set", "rl.trajectory_timeout_s=100")
    # nothing trained: an error naming the key, the steps still reported
    assert p.returncode == 1 and "rl.trajectory_timeout_s 100 s stopped every" in p.stderr
    steps = json.loads(p.stdout)["steps"]
    assert all(s["trajectories"] == 0 and s["timed_out"] == 8 and s["turns"] == 0
               for s in steps), steps


def records(path):
    """The trajectories of a trace written with -o (its header checked and left out)."""
    lines = open(path, encoding="utf-8").read().splitlines()
    assert json.loads(lines[0])["import"]["source"] == "libra load"
    return [json.loads(line) for line in lines[1:]]


@pytest.mark.parametrize("staleness", [0, 2])
def test_batches_run_ahead_of_the_weights_as_far_as_the_staleness_allows(tmp_path, staleness):
    # Weights after every step. With two versions of staleness every group of the three
    # batches may start on the first weights: batch 2 rolls out while the fleet is at version
    # 0 and is trained at version 2. With none, each batch starts on the weights of the one
    # before it.
    out = str(tmp_path / "seen.jsonl")
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        p = load(emu, "--json", "-o", out, "--set", f"rl.max_staleness={staleness}",
                 "--set", "rl.sync_interval=1")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
    assert doc["weight_updates"] == 2 and doc["groups_launched"] == 6
    started = [0, 0, 0] if staleness == 2 else [0, 1, 2]  # the fleet's version at the start
    assert [s["mean_staleness"] for s in doc["steps"]] == \
        [step - v for step, v in enumerate(started)]
    trajs = records(out)
    assert len(trajs) == 24
    for t in trajs:
        assert t["version_start"] == started[t["step"]] and t["version_end"] >= t["version_start"]


def test_groups_too_stale_for_the_trainer_are_dropped_and_replaced(tmp_path):
    # No staleness, half a batch more in flight (rl.overprovision_frac): of the three groups
    # started on the first weights two make batch 0, the third can never be trained (the
    # trainer is past version 0 once it is complete), so it is dropped and another started.
    out = str(tmp_path / "seen.jsonl")
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        p = load(emu, "--json", "-o", out, "--set", "rl.max_staleness=0",
                 "--set", "rl.sync_interval=1", "--set", "rl.overprovision_frac=0.5")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    steps = doc["steps"]
    assert [s["trajectories"] for s in steps] == [8, 8, 8]  # every batch still full
    assert [s["mean_staleness"] for s in steps] == [0, 0, 0]  # and never stale
    stale = sum(s["stale_groups"] for s in steps)
    assert stale >= 1 and sum(s["filtered_groups"] for s in steps) == 0
    assert sum(s["wasted_tokens"]["stale"] for s in steps) > 0
    assert doc["groups_launched"] == 6 + stale  # each dropped group replaced, none left over
    trajs = records(out)
    trained = [t for t in trajs if t["finish"] != "aborted"]
    assert len(trajs) == 24 + 4 * stale
    assert all(t["version_start"] == t["step"] for t in trained)
    dropped = [t for t in trajs if t["finish"] == "aborted"]
    assert dropped and all(t["version_start"] < t["step"] for t in dropped)


def test_dynamic_sampling_drops_filtered_groups_and_fills_the_batch_as_the_simulator_does():
    # DAPO's dynamic sampling (dapo-math-verl): groups whose rewards are all equal are not
    # trained but replaced. Without staleness which groups start, at which version, is fixed,
    # so the client meets the same filtered groups as the simulator's async mode; and its
    # trainer, on the layout of the simulator's libra mode before verification, trains each
    # batch for the time that mode's trainer gives the same batch.
    shape = ["--workload", "dapo-math-verl", "--samples", "4", "--set", "rl.max_staleness=0",
             "--set", "rl.sync_interval=1"]
    sim = subprocess.run([LIBRA, "sim", "--steps", "3", "--batch", "8", *shape, "--set",
                          "sim.modes=async,libra", "--set", "plan.verify_candidates=0", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert sim.returncode == 0, sim.stderr
    modes = json.loads(sim.stdout)["modes"]
    simulated = modes["async"]["steps"]
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        p = load(emu, "--json", *shape)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    steps = doc["steps"]
    assert [s["trajectories"] for s in steps] == [8, 8, 8]
    filtered = sum(s["filtered_groups"] for s in steps)
    assert filtered >= 1 and doc["groups_launched"] == 6 + filtered
    assert [s["wasted_tokens"]["filtered"] for s in steps] == \
        [s["wasted_tokens"]["filtered"] for s in simulated]
    assert [s["generated_tokens"] for s in steps] == [s["trained_tokens"] for s in simulated]
    libra = modes["libra"]
    assert [s["trained_tokens"] for s in libra["steps"]] == [s["generated_tokens"] for s in steps]
    # the trainer's layout, and the checkpoint it writes before each disk update: the
    # simulator's trainer is busy that long after each step (its sync_s; weights every step)
    assert doc["trainer"] == {k: libra["layout"]["train"][k] for k in ("tp", "pp", "cp", "dp")} | \
        {"gpus": libra["layout"]["train_gpus"], "save_s": pytest.approx(
            libra["steps"][0]["sync_s"], rel=1e-12)}, (doc["trainer"], libra["layout"])
    assert doc["trainer"]["save_s"] > 0
    # the last batch is not trained by the client
    assert [s["train_s"] for s in steps] == \
        pytest.approx([s["train_s"] for s in libra["steps"][:2]] + [0], rel=1e-12)
    assert steps[0]["train_s"] != steps[1]["train_s"]  # each batch its own time


def test_a_trace_dynamic_sampling_filters_whole_is_refused(tmp_path):
    # Every group's rewards equal: under dapo-math-verl's dynamic sampling no batch could fill.
    trace = str(tmp_path / "t.jsonl")
    subprocess.run([LIBRA, "trace", "gen", "dapo-math", "--steps", "1", "--batch", "8",
                    "--samples", "4", "--seed", "1", "-o", trace], check=True, timeout=60)
    lines = open(trace, encoding="utf-8").read().splitlines()
    same = [lines[0]] + [json.dumps({**json.loads(l), "reward": 1.0}) for l in lines[1:]]
    open(trace, "w", encoding="utf-8").write("\n".join(same) + "\n")
    args = [LIBRA, "load", "--engines", "http://127.0.0.1:9", "--trace", trace, *QUICK,
            "--samples", "4"]
    p = subprocess.run([*args, "--workload", "dapo-math-verl"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2, p.stderr
    why = "rl.dynamic_sampling gen_batch filters every group of the trace (2 of rl.samples = 4)"
    assert why in p.stderr
    # Without dynamic sampling the same trace is played (and stops: nothing listens there).
    p = subprocess.run([*args, "--workload", "dapo-math"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 1 and "every engine stopped answering" in p.stderr


def test_errors():
    p = subprocess.run([LIBRA, "load"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--engines is required" in p.stderr
    p = subprocess.run([LIBRA, "load", "--engines", "ftp://x"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "not an http:// URL" in p.stderr
    # A URL no call could reach, an engine given twice or an empty item (a URL left out?) is
    # refused before anything runs.
    for engines, why in (("http://127.0.0.1:99999", "a bad port"),
                         ("http://127.0.0.1:9,,http://127.0.0.1:10", "an empty item in"),
                         ("http://127.0.0.1:9,", "an empty item in"),
                         ("http://u:p@127.0.0.1:9", "credentials in a URL"),
                         ("http://127.0.0.1:9,http://127.0.0.1:9/", "given twice"),
                         ("HTTP://127.0.0.1:9,http://127.0.0.1:9", "given twice"),
                         ("http://127.0.0.1:9,http://localhost:9", "are one engine (both reach "
                          "127.0.0.1:9)")):
        p = subprocess.run([LIBRA, "load", "--engines", engines, *QUICK], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 2 and why in p.stderr and p.stdout == "", (engines, p.stderr)
    p = subprocess.run([LIBRA, "load", "--engines", "http://x", "--style", "verl"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--style: expected plain, areal, slime or skyrl" in p.stderr
    # Rules the job cannot run are refused before anything is sent, as libra sim refuses them.
    p = subprocess.run([LIBRA, "load", "--engines", "http://x", *QUICK, "--set",
                        "rl.max_staleness=0"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "rl.max_staleness: 0 is below rl.sync_interval - 1" in p.stderr
    p = subprocess.run([LIBRA, "load", "--engines", "http://x", *QUICK, "--set",
                        "rl.transport=reshard"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "rl.transport: reshard" in p.stderr
    # The trainer's layout is libra's, planned async: a colocated mode would change nothing.
    for flag in (["--mode", "colocated"], ["--set", "plan.mode=colocated"]):
        p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", *QUICK, *flag],
                           capture_output=True, text=True, timeout=30)
        label = flag[0] if flag[0] == "--mode" else "--set plan.mode"
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr.startswith(f"libra: {label}: plan.mode is not used by libra load (it is "
                                   "read by libra plan, libra route eval and libra serve)"), p.stderr
    # An output that cannot be written is found before the run, not after it.
    p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", *QUICK, "-o",
                        "/nonexistent-dir/t.jsonl"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 3 and p.stdout == "", p.stdout
    assert p.stderr == "libra: cannot write '/nonexistent-dir/t.jsonl': no such file or directory\n"
    # Nothing listens there: the run stops with the reason, exit 1.
    p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", *QUICK],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "every engine stopped answering" in p.stderr
    # Stopped, and its trace could not be written either: the stop's status, both reasons.
    p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", *QUICK, "-o",
                        "/dev/full"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "every engine stopped answering" in p.stderr
    assert "libra: cannot write '/dev/full': no space left on device" in p.stderr


def test_an_experiment_without_a_trainer_layout_is_refused():
    """The trainer trains on the planner's layout: where the planner finds none (two GPUs for
    Qwen3-235B-A22B), nothing is sent and the planner's reason is given, exit 2."""
    p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", *QUICK, "--gpus", "2",
                        "--model", "qwen3-235b-a22b"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert "load: the trainer: the planner finds no feasible plan: " in p.stderr, p.stderr
    assert p.stdout == ""


def test_a_trainer_whose_layout_cannot_lend_is_refused():
    """--trainer costs its steps with the pool's hybrid replicas as libra sim does: an
    experiment whose training layout has none to lend (Qwen3-14B at batch 8 on 8 GPUs, one
    replica: the core needs every replica) is refused before anything is sent, with the simulator's reason."""
    p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", "--trainer", *QUICK],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert ("--trainer: the experiment's training layout has no replica to lend (the core "
            "needs every training replica to hold the model state, and no other layout of its 8 "
            "GPUs can lend)" in p.stderr), p.stderr
    assert p.stdout == ""


def test_a_trainer_without_a_pool_to_play_is_refused():
    """--trainer pointed at an engine (or a gateway without --pool-replica) has no pool to
    play the trainer of: the run stops with the gateway's reason, not a job without a trainer."""
    with Emu("--instances", "tp1", scale=SCALE) as emu:
        p = load(emu, "--trainer", "--model", "qwen3-4b", timeout=60)  # a layout that lends
    assert p.returncode == 1, p.stderr
    assert "--trainer: GET " in p.stderr and "answered 404" in p.stderr, p.stderr


# ---- engines that answer what no engine should --------------------------------------------------
# A fake SGLang engine over a real socket: reply(handler, request) answers each /generate as the
# test says; the update's calls answer 200 {}, anything else 404 (as SGLang does). Garbage from
# an engine stops the run with what was wrong and which engine, exit 1 (docs/load.md "Engines
# that answer garbage"): never a hang, unbounded memory or numbers taken into the report.

FAKE = ["--time-scale", "0.001", "--batch", "4"]
ABORTED = {"type": "abort", "message": "x"}


class FakeSglang(FakeEngine):
    """Records every request as (method, path, parsed JSON body or None) in .seen."""

    def __init__(self, reply, handler=None):
        self.seen, self.reply = [], reply
        super().__init__(handler or _FakeSglangHandler)

    def handle_error(self, request, client_address):
        pass  # the client left mid-answer: it stopped, as the test wants


class _FakeSglangHandler(QuietHandler):

    def do_GET(self):
        self.server.seen.append(("GET", self.path, None))
        self.send_answer(404, b'{"detail": "Not Found"}')

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.loads(raw) if raw else None
        self.server.seen.append(("POST", self.path, body))
        if self.path in ("/generate", "/v1/completions"):  # a turn: SGLang's or vLLM's
            self.server.reply(self, body)
        elif self.path.startswith("/libra/"):
            self.send_answer(404, b'{"detail": "Not Found"}')
        else:
            self.send_answer(200, b"{}")

    def send_answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def sglang_answer(request, ids=None, **meta):
    """A well-formed answer to a /generate request: max_new_tokens ids (or ids), finish reason
    length, meta_info's members overridden by meta (None leaves one out)."""
    n = request["sampling_params"]["max_new_tokens"]
    ids = [7] * n if ids is None else ids
    info = {"finish_reason": {"type": "length", "length": len(ids)},
            "prompt_tokens": len(request["input_ids"]), "completion_tokens": len(ids),
            "cached_tokens": 0}
    info.update(meta)
    return {"output_ids": ids, "meta_info": {k: v for k, v in info.items() if v is not None}}


def replying(make):
    """A reply that answers 200 with the JSON make(request) returns."""
    return lambda h, request: h.send_answer(200, json.dumps(make(request)).encode())


def load_fake(engine, *args, steps=2, timeout=60):
    return subprocess.run([LIBRA, "load", "--engines", engine.url, *FAKE, "--steps", str(steps),
                           *args],
                          capture_output=True, text=True, timeout=timeout)


def generates(engine):
    return sum(1 for method, path, _ in engine.seen if path == "/generate")


def test_a_fake_engine_that_answers_well_runs_the_job():
    """The fake engines below are well formed but for what each test changes: one that answers
    as SGLang does runs the job. An engine that reports no cached_tokens reports no hits. The
    plain style's finish events are sent to the engine too; its 404 is not an error."""
    engine = FakeSglang(replying(lambda q: sglang_answer(q, cached_tokens=None)))
    p = load_fake(engine, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [s["trajectories"] for s in doc["steps"]] == [4, 4]
    assert sum(s["cached_tokens"] for s in doc["steps"]) == 0
    finishes = [b for m, path, b in engine.seen
                if path.startswith("/libra/v1/trajectories/") and path.endswith("/events")]
    assert len(finishes) == 8 and all(b["kind"] == "finish" for b in finishes), finishes


class SilentOnEventsHandler(_FakeSglangHandler):
    """Takes the finish events and never answers them (until long after the test)."""

    def do_POST(self):
        if self.path.startswith("/libra/"):
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            time.sleep(60)
            return
        super().do_POST()


def test_an_engine_silent_on_finish_events_does_not_hold_the_run():
    """The finish event is a notice: the run waits at most 5 s for its answers at the end."""
    engine = FakeSglang(replying(sglang_answer), SilentOnEventsHandler)
    t0 = time.monotonic()
    p = load_fake(engine, timeout=60)
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t0 < 20


def test_an_engine_that_aborts_every_turn_stops_the_run():
    """An abort that generated nothing, outside a weight update, counts against the retry cap
    and waits as a 502 does: the run stops, not a resubmission loop."""
    engine = FakeSglang(replying(lambda q: sglang_answer(q, ids=[], finish_reason=ABORTED)))
    t0 = time.monotonic()
    p = load_fake(engine, timeout=60)
    assert p.returncode == 1, p.stderr
    assert time.monotonic() - t0 < 30
    assert (f"engine {engine.url} aborted a turn 51 times in a row without a token, outside a "
            "weight update") in p.stderr, p.stderr
    assert generates(engine) <= 8 * 51, generates(engine)  # both groups start at once


def test_an_abort_that_generates_is_resubmitted_until_the_turn_is_whole():
    """An abort with tokens is progress (AReaL's interruptible generation): the rest is sent
    at once, however many times, and the turn counts every token once. Here every answer is an
    abort with half of what was asked (at least one token)."""
    def half(q):
        ids = [5] * max(1, q["sampling_params"]["max_new_tokens"] // 2)
        return sglang_answer(q, ids=ids, finish_reason=ABORTED)
    engine = FakeSglang(replying(half))
    p = load_fake(engine, "--json", steps=1, timeout=120)
    assert p.returncode == 0, p.stderr
    step = json.loads(p.stdout)["steps"][0]
    asked = [b["sampling_params"]["max_new_tokens"] for m, path, b in engine.seen
             if path == "/generate"]
    assert step["resubmitted"] > 0 and step["turns"] <= len(asked), (step, len(asked))
    assert step["generated_tokens"] <= sum(max(1, n // 2) for n in asked)


class EndlessHandler(_FakeSglangHandler):
    """Answers /generate 200 with an endless chunked body of 1 MiB chunks."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n"
        try:
            while True:
                self.wfile.write(chunk)
        except OSError:
            pass


class HugeLengthHandler(_FakeSglangHandler):
    """Announces a 1 TiB answer to /generate and sends a little of it."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(1 << 40))
        self.end_headers()
        try:
            self.wfile.write(b"{" * 4096)
        except OSError:
            pass


@pytest.mark.parametrize("handler", [EndlessHandler, HugeLengthHandler])
def test_an_answer_too_large_to_hold_stops_the_run(handler):
    """An engine's answer is held whole up to 64 MiB: beyond, the turn fails with the engine
    named, whatever the engine sends next (docs/load.md)."""
    engine = FakeSglang(None, handler)
    p = subprocess.Popen([LIBRA, "load", "--engines", engine.url, *FAKE, "--steps", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1, err
    assert f"engine {engine.url} answered a turn with more than 67108864 bytes" in err, err


@pytest.mark.parametrize("make,why", [
    (lambda q: sglang_answer(q, ids=[7] * (q["sampling_params"]["max_new_tokens"] + 1000)),
     "tokens, more than the turn's max_new_tokens"),  # the count and cap vary with the turn
    (lambda q: sglang_answer(q, ids=[7] * (q["sampling_params"]["max_new_tokens"] + 1),
                             finish_reason=ABORTED), "output_ids: "),
    (lambda q: sglang_answer(q, cached_tokens=1_000_000_000),
     "meta_info.cached_tokens: 1000000000 is more than the "),
    (lambda q: sglang_answer(q, cached_tokens="5"),
     "meta_info.cached_tokens: expected a count of tokens, not a string"),
    (lambda q: sglang_answer(q, cached_tokens=-1),
     "meta_info.cached_tokens: expected a count of tokens, not -1"),
    (lambda q: sglang_answer(q, cached_tokens=1.5),
     "meta_info.cached_tokens: expected a count of tokens, not a real number"),
    (lambda q: sglang_answer(q, ids=[7, 151936]),
     "output_ids[1]: 151936 is not a token id (the model's vocabulary holds 151936)"),
    (lambda q: sglang_answer(q, ids=[1 << 32]),
     "output_ids[0]: 4294967296 is not a token id (the model's vocabulary holds 151936)"),
    (lambda q: sglang_answer(q, ids=[-3]),
     "output_ids[0]: -3 is not a token id"),
    (lambda q: sglang_answer(q, ids=[7, "8"]),
     "output_ids[1]: expected a token id, not a string"),
])
def test_impossible_numbers_in_an_answer_stop_the_run(make, why):
    """More tokens than asked, more cached tokens than the prompt held, ids outside the
    model's vocabulary: refused, with the engine and the member named, nothing reported."""
    engine = FakeSglang(replying(make))
    p = load_fake(engine, "--json")
    assert p.returncode == 1, p.stderr
    assert f"engine {engine.url}: its answer to a turn is not one: " in p.stderr, p.stderr
    assert why in p.stderr, p.stderr
    assert json.loads(p.stdout)["steps"] == []


def test_more_tokens_than_asked_are_named_with_the_cap():
    engine = FakeSglang(replying(lambda q: sglang_answer(
        q, ids=[7] * (q["sampling_params"]["max_new_tokens"] + 1000))))
    p = load_fake(engine)
    assert p.returncode == 1, p.stderr
    caps = {b["sampling_params"]["max_new_tokens"] for m, path, b in engine.seen
            if path == "/generate"}
    assert any(f"output_ids: {cap + 1000} tokens, more than the turn's max_new_tokens ({cap})"
               in p.stderr for cap in caps), (caps, p.stderr)


@pytest.mark.parametrize("body,why", [
    (b"<html>busy</html>", "not JSON ("),
    (b"[1, 2]", "expected a JSON object, not an array"),
    (b'{"meta_info": {}}', "no output_ids"),
    (b'{"output_ids": "7 8", "meta_info": {}}',
     "output_ids: expected an array of token ids, not a string"),
    (b'{"output_ids": [7]}', "no meta_info"),
    (b'{"output_ids": [7], "meta_info": [1]}', "meta_info: expected an object, not an array"),
    (b'{"output_ids": [7], "meta_info": {"finish_reason": "abort"}}',
     "meta_info.finish_reason: expected an object, not a string"),
])
def test_a_shapeless_answer_says_what_is_wrong(body, why):
    engine = FakeSglang(lambda h, request: h.send_answer(200, body))
    p = load_fake(engine)
    assert p.returncode == 1, p.stderr
    assert f"engine {engine.url}: its answer to a turn is not one: {why}" in p.stderr, p.stderr


@pytest.mark.parametrize("body,why", [
    (b'{"choices": []}', "no choices[0]"),
    (b'{"choices": [{"token_ids": [7], "finish_reason": "length"}], '
     b'"usage": {"prompt_tokens_details": {"cached_tokens": "3"}}}',
     "usage.prompt_tokens_details.cached_tokens: expected a count of tokens, not a string"),
    (b'{"choices": [{"token_ids": null}]}', "choices[0].token_ids: expected an array"),
])
def test_a_shapeless_vllm_answer_says_what_is_wrong(body, why):
    engine = FakeSglang(lambda h, request: h.send_answer(200, body))
    p = load_fake(engine, "--style", "skyrl")
    assert p.returncode == 1, p.stderr
    assert f"engine {engine.url}: its answer to a turn is not one: {why}" in p.stderr, p.stderr
