"""More edges of `libra serve` (docs/serve.md): a trajectory's next turn never goes to an engine
of older weights (503 when no engine is new enough; a resubmitted turn fails rather than move
back), an engine made suspect by a failed transfer is noted so and dies after 5 failed health
checks, a return of unknown status is captured as `other`, a turn beside its trajectory's
running one has no routing decision, `/libra/v1/engines/{id}` is no route, and
`/libra/v1/state` writes its counts as integers and its engines as `/libra/v1/status` does.

Needs LIBRA_BIN."""

import contextlib
import http.client
import json
import re
import time

from cli_run import run
from emu_util import ADMIN, Background, Emu, Serve, get, post, tokens_lasting, wait_for

BUCKETS = ["--set", "sched.buckets=tp1:4000"]


@contextlib.contextmanager
def serving(*urls, args=()):
    """A gateway stopped when the block ends; its (exit status, standard error) are then
    gw.stopped."""
    gw = Serve(*urls, args=[*BUCKETS, *args])
    try:
        yield gw
    finally:
        gw.stopped = gw.stop()


def generate_headers(port, body, timeout=60):
    """POST /generate of body: (status, the X-Libra-* headers, lower-cased)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/generate", body=json.dumps(body))
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders() if k.lower()[:7] == "x-libra"}


def turn(tid, ids, gen=3, **libra):
    return {"input_ids": ids, "sampling_params": {"max_new_tokens": gen},
            "libra": {"trajectory": tid, "emu": {"gen_tokens": gen}, **libra}}


def engine_action(port, engine, action):
    status, doc = post(port, "/libra/v1/engines/%d/%s" % (engine, action), headers=ADMIN)
    assert status == 200, doc


def update_engine_0(port, url1):
    """Engine 0 takes version v8 (a step), then engine 1 (url1, step 0) is added."""
    status, doc = post(port, "/update_weights_from_disk",
                       {"model_path": "/m", "weight_version": "v8"}, headers=ADMIN)
    assert status == 200, doc
    status, doc = post(port, "/add_worker?url=" + url1, headers=ADMIN)
    assert status == 200, doc
    steps = [e["step"] for e in get(port, "/libra/v1/engines")[1]["engines"]]
    assert steps == [1, 0], steps


def test_a_next_turn_waits_for_an_engine_as_new_as_its_last():
    with Emu("--instances", "tp1x2") as emu:
        urls = [i["url"] for i in emu.instances]
        with serving(urls[0]) as gw:
            update_engine_0(gw.port, urls[1])
            engine_action(gw.port, 1, "lend")
            status, head = generate_headers(gw.port, turn("old1", [6] * 4))
            assert status == 200 and head["x-libra-instance"] == "0", head
            engine_action(gw.port, 0, "lend")
            engine_action(gw.port, 1, "reclaim")
            status, doc = post(gw.port, "/generate", turn("old1", [6] * 4 + [1] * 4))
            assert status == 503, doc
            assert doc["error"]["message"] == (
                "no engine that takes turns has weights of step 1 or later, as the engine of the "
                "trajectory's last turn had: send the turn again once one has"), doc
            # a new trajectory goes to the old engine; old1, once engine 0 is back, to it
            assert generate_headers(gw.port, turn("new1", [7] * 4))[1]["x-libra-instance"] == "1"
            engine_action(gw.port, 0, "reclaim")
            status, head = generate_headers(gw.port, turn("old1", [6] * 4 + [1] * 4))
            assert status == 200 and head["x-libra-instance"] == "0", head


def test_a_resubmitted_turn_does_not_move_to_an_older_engine():
    """docs/serve.md "Failures": the turn whose engine fails goes to another engine, never one
    older than its trajectory's last; with none, the client gets 502."""
    slow = tokens_lasting(20, [5] * 4)
    with Emu() as old:
        new = Emu()
        try:
            with serving(new.instances[0]["url"]) as gw:
                update_engine_0(gw.port, old.instances[0]["url"])
                engine_action(gw.port, 1, "lend")
                assert post(gw.port, "/generate", turn("r1", [5] * 4))[0] == 200
                engine_action(gw.port, 1, "reclaim")
                ids = [5] * 4 + [2] * 4
                call = Background(post, gw.port, "/generate", turn("r1", ids, slow, resume=True))
                wait_for(lambda: get(gw.port, "/libra/v1/engines")[1]["engines"][0]["in_flight"])
                new.proc.kill()
                status, doc = call.result()
                assert status == 502, doc
                assert get(gw.port, "/libra/v1/engines")[1]["engines"][1]["requests"] == 0
        finally:
            new.stop()


def test_a_failed_transfer_notes_the_suspect_engine_and_death_takes_5_checks():
    slow = tokens_lasting(20, [5] * 4)
    emu = Emu()
    try:
        with serving(emu.instances[0]["url"], args=["--poll-s", "1"]) as gw:
            call = Background(post, gw.port, "/generate", turn("s1", [5] * 4, slow))
            wait_for(lambda: get(gw.port, "/libra/v1/engines")[1]["engines"][0]["in_flight"])
            emu.proc.kill()
            killed = time.monotonic()
            assert call.result()[0] == 502
            wait_for(lambda: get(gw.port, "/libra/v1/engines")[1]["engines"][0]["state"]
                     == "dead", timeout=15, what="the engine's death")
            # 5 checks a second apart, the first within a second of the kill
            assert time.monotonic() - killed > 3.5
    finally:
        emu.stop()
    err = gw.stopped[1]
    assert re.search(r"engine 0 \(\S+\) is suspect: a transfer failed", err), err
    assert "engine 0 (%s) is dead: 5 health checks failed in a row" % emu.instances[0]["url"] \
        in err, err


def test_a_return_of_unknown_status_is_captured_as_the_router_took_it(tmp_path):
    """As a success: `other` is a status the router keys apart, so a replay of the capture
    would route otherwise than the gateway did."""
    capture = tmp_path / "capture.jsonl"
    with Emu() as emu, serving(emu.instances[0]["url"], args=["--capture", str(capture)]) as gw:
        assert post(gw.port, "/generate", turn("c1", [1] * 4))[0] == 200
        told = [{"kind": "tool_return", "tool": "bash", "payload_tokens": 4}]
        assert post(gw.port, "/generate", turn("c1", [1] * 11, events=told))[0] == 200
        assert post(gw.port, "/generate", turn("c1", [1] * 20))[0] == 200  # no events
        assert post(gw.port, "/libra/v1/trajectories/c1/events",
                    {"kind": "finish", "status": "completed"})[0] == 200
    record = json.loads(capture.read_text().splitlines()[1])
    calls = [c for t in record["turns"] for c in t.get("calls", [])]
    assert [(c["tool"], c["status"]) for c in calls] == [("bash", "success"),
                                                         ("unknown", "success")], calls
    assert run("trace", "validate", str(capture)).returncode == 0
    r = run("route", "eval", str(capture), "--policy", "cmlfq", "--train-steps", "0",
            "--buckets", "tp1:4000")
    assert r.returncode == 0, r.stderr


def test_a_turn_beside_the_running_one_reports_no_routing_decision():
    slow = tokens_lasting(3, [5] * 4)
    with Emu() as emu, serving(emu.instances[0]["url"]) as gw:
        first = Background(generate_headers, gw.port, turn("p1", [5] * 4, slow))
        wait_for(lambda: get(gw.port, "/libra/v1/engines")[1]["engines"][0]["in_flight"])
        status, head = generate_headers(gw.port, turn("p1", [5] * 4))
        assert status == 200 and head["x-libra-decision"] == "none", head
        assert first.result()[1]["x-libra-decision"] == "first"


def test_an_engine_path_without_an_action_is_no_route():
    with Emu() as emu, serving(emu.instances[0]["url"]) as gw:
        for path in ("/libra/v1/engines/", "/libra/v1/engines/0", "/libra/v1/engines/0/x"):
            status, doc = get(gw.port, path)
            assert status == 404 and doc["error"]["type"] == "not_found_error", (path, doc)
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        conn.request("GET", "/libra/v1/engines/0/drain")
        resp = conn.getresponse()
        resp.read()
        conn.close()
        assert resp.status == 405 and resp.getheader("Allow") == "POST"


def test_the_state_counts_are_integers_and_its_engines_are_the_status_array():
    with Emu() as emu, serving(emu.instances[0]["url"]) as gw:
        state = get(gw.port, "/libra/v1/state")[1]
        assert all(type(state["trees"][k]) is int
                   for k in ("prompts", "nodes", "learnt", "learn_pending", "steps")), state
        status = get(gw.port, "/libra/v1/status")[1]
        assert state["engines"] == status["engines"], state
        assert isinstance(state["engines"], list) and state["engines"][0]["id"] == 0
