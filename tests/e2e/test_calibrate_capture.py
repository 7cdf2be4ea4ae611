"""`libra calibrate` on a `libra serve --capture` trace (docs/calibrate.md, "libra serve
captures"), end to end over real sockets: trajectories of scripted lengths go through the
gateway to an emulated engine running in real time (`libra emu --time-scale 1`, the cost
model's engine under the built-in constants), the gateway times every turn into its capture,
and calibrating on the capture must give back the emulator's constants. Needs LIBRA_BIN.
"""

import json
import random
import subprocess
import threading
import time

from emu_util import ADMIN, LIBRA, Background, Emu, Serve, post

MODEL = "qwen3-4b"
TRAJECTORIES = 48
TURNS = 5  # at most, per trajectory
PAYLOAD = 40  # tokens of each tool return


def turn(port, traj, ids, gen, stream, events):
    """One turn of trajectory traj; returns the ids the engine generated."""
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": gen}, "stream": stream,
            "libra": {"trajectory": traj, "emu": {"gen_tokens": gen}, "events": events}}
    status, answer = post(port, "/generate", body)
    assert status == 200, answer
    if stream:  # SGLang's chunks each hold every token so far
        chunks = [l[6:] for l in answer.splitlines() if l.startswith("data: {")]
        answer = json.loads(chunks[-1])
    return answer["output_ids"]


def trajectory(port, traj, rng, stream):
    """A trajectory that starts within 3 s and runs 1 to TURNS turns, so that the engine's batch
    goes through every size up to TRAJECTORIES."""
    time.sleep(rng.uniform(0.0, 3.0))
    ids = [(traj * 7919 + k) % 50000 + 1 for k in range(rng.randint(100, 600))]
    events = []
    for _ in range(rng.randint(1, TURNS)):
        out = turn(port, traj, ids, rng.randint(10, 200), stream, events)
        ids = ids + out + [7] * PAYLOAD
        events = [{"kind": "tool_return", "tool": "search", "status": "success",
                   "payload_tokens": PAYLOAD, "exec_s": 0.0}]
    status, _ = post(port, "/libra/v1/trajectories/%d/events" % traj,
                     {"events": [{"kind": "finish", "status": "completed", "reward": 1.0}]})
    assert status == 200


def test_a_capture_calibrates_the_engine_it_timed(tmp_path):
    capture = tmp_path / "capture.jsonl"
    with Emu("--instances", "tp1", "--model", MODEL, scale="1") as emu, \
            Serve(emu.instances[0]["url"],
                  args=["--capture", str(capture), "--model", MODEL,
                        "--set", "sched.buckets=tp1:32768"]) as gw:
        rng = random.Random(7)
        threads = [threading.Thread(target=trajectory,
                                    args=(gw.port, t, random.Random(rng.random()), t % 4 == 0))
                   for t in range(TRAJECTORIES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive()
    lines = [json.loads(l) for l in capture.read_text().splitlines()[1:]]
    assert len(lines) == TRAJECTORIES
    for line in lines:
        streamed = int(line["extra"]["id"].split(":")[1]) % 4 == 0
        for u in line["turns"]:
            assert u["instance"] == 0 and u["tp"] == 1 and u["sent_us"] <= u["done_us"]
            assert ("first_us" in u) == streamed
            assert not streamed or u["sent_us"] <= u["first_us"] <= u["done_us"]

    proc = subprocess.run([LIBRA, "calibrate", str(capture), "--model", MODEL, "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    points = doc["decode_points"]
    assert len(points) >= 2 and all(p["backend"] == "capture" and p["tp"] == 1 for p in points)
    timed = sum(len(line["turns"]) for line in lines)
    assert sum(p["turns"] for p in points) + doc["unused_turns"] == timed
    assert doc["fits"]["decode"]["max_error"] < 0.05, points
    # the emulator runs the built-in constants. The fixed cost is a sixth of an iteration and
    # the per-sequence cost a tenth at most, so a per cent of error in the measured iterations
    # (the gateway's own time is in them) is several per cent of each
    c = {k["name"]: k for k in doc["constants"]}
    for name, within in (("decode_t_fix_s", 0.2), ("decode_t_seq_s", 0.4)):
        assert c[name]["fitted"] and abs(c[name]["value"] / c[name]["before"] - 1) < within, c

    # a capture records each turn's TP size: the option is refused, not ignored
    proc = subprocess.run([LIBRA, "calibrate", str(capture) + ",tp=2", "--model", MODEL],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "option tp does not apply to a libra serve capture" in proc.stderr


def test_a_turn_an_engine_call_disturbed_is_not_timed(tmp_path):
    """A control call that changes the engine (here SGLang's /flush_cache) reaches it while a
    turn generates: that turn's time is not the engine's generation alone, so the capture
    records it without a timing; a turn sent afterwards is timed."""
    capture = tmp_path / "capture.jsonl"
    with Emu("--instances", "tp1", "--model", MODEL, scale="1") as emu, \
            Serve(emu.instances[0]["url"],
                  args=["--capture", str(capture), "--model", MODEL,
                        "--set", "sched.buckets=tp1:32768"]) as gw:
        long_turn = Background(turn, gw.port, 1, list(range(1, 200)), 400, False, [])
        time.sleep(0.3)
        post(gw.port, "/flush_cache", {}, headers=ADMIN)
        long_turn.result()
        turn(gw.port, 2, list(range(1, 200)), 20, False, [])
        for traj in (1, 2):
            status, _ = post(gw.port, "/libra/v1/trajectories/%d/events" % traj,
                             {"events": [{"kind": "finish", "status": "completed"}]})
            assert status == 200
    lines = {json.loads(l)["extra"]["id"]: json.loads(l)
             for l in capture.read_text().splitlines()[1:]}
    assert "tp" not in lines["libra:1"]["turns"][0]
    assert lines["libra:2"]["turns"][0]["tp"] == 1


def test_a_capture_of_one_batch_size_cannot_tell_the_cost_per_sequence(tmp_path):
    """Twelve turns decoding side by side, 0.1 s per iteration: one band, one decode point,
    which fixes the iteration but not how it divides between the fixed cost and the cost per
    sequence; the refusal says what would, and --hold fits the fixed cost alone."""
    capture = tmp_path / "one-band.jsonl"
    head = {"libra_trace": 1, "workload": "search-r1", "model": MODEL}
    turn_ = {"prompt_tokens": 100, "cached_tokens": 0, "generated_tokens": 101, "instance": 0,
             "tp": 1, "sent_us": 0, "first_us": 1000000, "done_us": 11000000}
    lines = [json.dumps(head)] + [json.dumps(
        {"step": 0, "prompt_id": i, "epoch": 0, "sample": 0, "version_start": 0,
         "finish": "completed", "turns": [turn_]}) for i in range(12)]
    capture.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([LIBRA, "calibrate", str(capture), "--model", MODEL],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "the one decode point runs 12.00 sequences per iteration" in proc.stderr
    assert "(a capture: traffic at other decode batches)" in proc.stderr
    proc = subprocess.run([LIBRA, "calibrate", str(capture), "--model", MODEL, "--hold",
                           "decode_t_seq_s", "--json"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    point = json.loads(proc.stdout)["decode_points"][0]
    assert point["turns"] == 12 and abs(point["measured_s"] - 0.1) < 1e-9
    assert abs(point["decode_seqs"] - 12) < 1e-9 and point["prefill_tokens"] == 0
