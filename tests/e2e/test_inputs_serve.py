"""Bad and odd inputs to `libra serve` and `libra emu`: each test guards a defect an input once
triggered (a crash, an event silently dropped, a ready line cut short)."""

import http.client
import json
import subprocess
import socket
import threading
import time

from emu_util import (ADMIN, LIBRA, TOKEN, Background, Emu, ScriptedVllm, Serve, answer, get, post,
                      raw_request)

COMPLETION = json.dumps({"choices": [{"text": "ok", "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


def held_engine():
    """A vLLM engine that answers each completion once .release is set."""
    release = threading.Event()

    def reply(handler, path, body):
        release.wait(30)
        answer(handler, COMPLETION)

    engine = ScriptedVllm(reply)
    engine.release = release
    return engine


def turn(port, traj, events=None):
    libra = {"trajectory": traj}
    if events is not None:
        libra["events"] = events
    return post(port, "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 4, "libra": libra})


def test_finish_while_a_turn_is_in_flight_is_refused():
    """A finish for a trajectory whose turn is being proxied, posted to the events call or
    inline in a request that reuses its id, is refused with 409 and changes nothing: it once
    freed the trajectory under the proxy, which wrote to it when the turn ended (a
    heap-use-after-free that crashed the gateway). Once the turn is answered the finish is
    taken."""
    engine = held_engine()
    with Serve(engine.url + ",tp=1") as gw:
        running = Background(turn, gw.port, "t1")
        while not engine.bodies:
            threading.Event().wait(0.01)
        finish = {"events": [{"kind": "finish", "status": "completed"}]}
        try:
            status, doc = post(gw.port, "/libra/v1/trajectories/t1/events", finish)
            assert status == 409 and "in flight" in doc["error"]["message"], doc
            status, doc = turn(gw.port, "t1", finish["events"])
            assert status == 409 and "in flight" in doc["error"]["message"], doc
            assert len(engine.bodies) == 1  # the refused request reached no engine
        finally:
            engine.release.set()
        assert running.result()[0] == 200
        assert post(gw.port, "/libra/v1/trajectories/t1/events", finish) == (
            200, {"trajectory": "t1", "events": 1})


def test_an_event_after_the_finish_is_refused():
    """Events after a finish, which ends the trajectory, are refused with 400 naming the event:
    the events call once answered them 200 and dropped them."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, COMPLETION))
    with Serve(engine.url + ",tp=1") as gw:
        assert turn(gw.port, "t2")[0] == 200
        after = [{"kind": "finish"}, {"kind": "tool_return", "tool": "bash"}]
        status, doc = post(gw.port, "/libra/v1/trajectories/t2/events", {"events": after})
        assert status == 400, doc
        assert doc["error"]["message"].startswith("events.1: an event after the finish events.0")
        status, doc = turn(gw.port, "t2", [{"kind": "finish"}, {"kind": "finish"}])
        assert status == 400, doc
        assert doc["error"]["message"].startswith("libra.events.1: an event after the finish")
        # nothing was changed: the trajectory is live and takes its finish
        assert post(gw.port, "/libra/v1/trajectories/t2/events",
                    {"events": [{"kind": "finish"}]})[0] == 200


def test_returns_before_a_reusing_requests_finish_end_with_the_old_trajectory(tmp_path):
    """A request that reuses a trajectory's id with events [tool_return, finish] ends the old
    trajectory with that return in its last turn, as the events call does with the same events:
    the return was dropped."""
    capture = tmp_path / "capture.jsonl"
    engine = ScriptedVllm(lambda h, path, body: answer(h, COMPLETION))
    with Serve(engine.url + ",tp=1", args=("--capture", str(capture))) as gw:
        assert turn(gw.port, "t5")[0] == 200
        ret = {"kind": "tool_return", "tool": "bash", "status": "success", "payload_tokens": 7}
        assert turn(gw.port, "t5", [ret, {"kind": "finish", "status": "completed"}])[0] == 200
        assert post(gw.port, "/libra/v1/trajectories/t5/events",
                    {"events": [{"kind": "finish"}]})[0] == 200
    old, new = [json.loads(line) for line in capture.read_text().splitlines()[1:]]
    (call,) = old["turns"][-1]["calls"]
    assert (call["tool"], call["status"], call["payload_tokens"]) == ("bash", "success", 7)
    assert len(new["turns"]) == 1


LONG_HOST = "127." + "0" * 200 + ".0.1"  # 127.0.0.1 spelt in 206 bytes


def test_ready_lines_are_whole_for_a_long_host():
    """The emulator's ready lines and the gateway's url carry a long --host / --listen whole:
    they were written into fixed buffers, which cut the lines short (and the emulator's ran past
    its buffer from the second instance on)."""
    # a line cut short leaves Emu waiting for the rest: fail instead of hanging
    emu = Background(Emu, "--instances", "tp1x3", "--host", LONG_HOST).result(timeout=30)
    with emu:
        assert [i["instance"] for i in emu.instances] == [0, 1, 2]
        for i in emu.instances:
            assert i["url"] == "http://%s:%d" % (LONG_HOST, i["port"])
        with Serve(emu.instances[0]["url"], args=("--listen", LONG_HOST + ":0")) as gw:
            assert gw.url == "http://%s:%d" % (LONG_HOST, gw.port)
            assert post(gw.port, "/libra/v1/trajectories/x/events", {"events": []})[0] == 404


def test_a_repeated_member_of_libras_objects_is_refused():
    """A member given twice in the events call's body or in a request's libra object is refused
    with 400 naming it: the gateway read the first of the two where the client's JSON library
    meant the last, and answered `{"events": [], "events": [finish]}` 200 with the finish
    dropped. An identity integer of any size still passes."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, COMPLETION))
    with Serve(engine.url + ",tp=1") as gw:
        assert turn(gw.port, "t3")[0] == 200
        for body, member in (('{"events": [], "events": [{"kind": "finish"}]}', "events"),
                             ('{"events": [{"kind": "finish", "kind": "x"}]}', "events.0.kind"),
                             ('{"kind": "finish", "status": "aborted", "status": "completed"}',
                              "event.status")):
            status, doc = post(gw.port, "/libra/v1/trajectories/t3/events", raw=body)
            assert (status, doc["error"]["message"]) == (400, member + ": given twice"), doc
        body = '{"prompt": [1], "max_tokens": 4, "libra": {"trajectory": "t3", "trajectory": "t4"}}'
        status, doc = post(gw.port, "/v1/completions", raw=body)
        assert (status, doc["error"]["message"]) == (400, "libra.trajectory: given twice"), doc
        assert len(engine.bodies) == 1  # only the first turn reached the engine
        assert post(gw.port, "/libra/v1/trajectories/t3/events",
                    {"events": [{"kind": "finish"}]}) == (200, {"trajectory": "t3", "events": 1})
        assert turn(gw.port, 7 ** 300)[0] == 200


def test_a_fault_item_given_twice_is_refused():
    """`libra emu --fail instance=0,after_s=1,after_s=2` is refused (exit 2, naming the item):
    the last value silently won, a fault at another time than one of the two read."""
    for flag, spec in (("--fail", "instance=0,after_s=1,after_s=2"),
                       ("--stall", "instance=0,instance=0,after_s=1,for_s=1"),
                       ("--stall", "instance=0,after_s=1,for_s=1,for_s=2")):
        run = subprocess.run([LIBRA, "emu", flag, spec], capture_output=True, text=True,
                             timeout=30)
        assert run.returncode == 2 and "given twice" in run.stderr, (flag, spec, run.stderr)
        assert run.stdout == ""


def test_what_the_gateway_would_not_read_is_refused_by_name():
    """A misspelt member of the libra object or of an event, an empty identity, an unknown or
    repeated query parameter of an admin call and an identity or credential header given twice
    were taken and did nothing (a reward, a payload or a trajectory silently lost; the first of
    two values read); each is refused with 400 naming it, and no engine sees the request."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, COMPLETION))
    events = "/libra/v1/trajectories/t5/events"
    with Serve(engine.url + ",tp=1") as gw:
        assert turn(gw.port, "t5")[0] == 200
        for path, body, message in (
                ("/v1/completions", {"prompt": [1], "max_tokens": 4, "libra": {"trajectroy": "t6"}},
                 "libra: unknown member 'trajectroy' (expected trajectory, prompt, sample, resume, "
                 "events, emu)"),
                ("/v1/completions", {"prompt": [1], "max_tokens": 4, "libra": {"trajectory": ""}},
                 "libra.trajectory: expected a non-empty identity"),
                (events, {"events": [{"kind": "tool_return", "tool": "bash", "payload_token": 5}]},
                 "events.0: unknown member 'payload_token' (expected kind, tool, status, "
                 "payload_tokens, exec_s)"),
                (events, {"kind": "finish", "rewrd": 1},
                 "event: unknown member 'rewrd' (expected kind, status, reward)"),
                (events, {"events": [], "extra": 1},
                 "body: unknown member 'extra' (expected events)")):
            status, doc = post(gw.port, path, body)
            assert (status, doc["error"]["message"]) == (400, message), (body, doc)
        for name in (b"X-Session-ID", b"Authorization"):
            status, doc = raw_request(gw.port, b"POST /v1/completions HTTP/1.1\r\n%s: a\r\n"
                                      b"%s: b\r\nContent-Length: 2\r\n\r\n{}" % (name, name))
            assert (status, doc["error"]["message"]) == (
                400, "header %s given twice" % name.decode()), doc
        assert len(engine.bodies) == 1
        status, doc = post(gw.port, "/add_worker?url=%s&worker_type=prefill" % engine.url,
                           headers=ADMIN)
        assert status == 400 and doc["error"]["message"].startswith('worker_type: only "regular"')
        status, doc = post(gw.port, "/add_worker?url=%s&priority=9" % engine.url, headers=ADMIN)
        assert status == 400 and "no query parameter 'priority'" in doc["error"]["message"], doc
        status, doc = get(gw.port, "/libra/v1/state?limit=0&limit=5")
        assert (status, doc["error"]["message"]) == (400, "query parameter 'limit' given twice")
        # the credential's scheme is case-insensitive (RFC 9110 §11.1)
        status, doc = get(gw.port, "/libra/v1/admin/mode",
                          headers={"Authorization": "bearer " + TOKEN})
        assert status == 200, doc


def test_the_gateway_answers_head_and_names_the_methods_a_path_takes():
    """HEAD is a GET without the body (RFC 9110 §9.3.2) and a 405 says in Allow what the path
    takes; a head the server cannot read is refused naming what is wrong."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, COMPLETION))
    with Serve(engine.url + ",tp=1") as gw:
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
        conn.request("HEAD", "/healthz")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.read() == b""
        assert int(resp.getheader("Content-Length")) > 0
        conn.request("DELETE", "/generate")
        resp = conn.getresponse()
        assert resp.status == 405 and resp.getheader("Allow") == "POST, PUT", resp.getheaders()
        resp.read()
        conn.request("POST", "/healthz")
        resp = conn.getresponse()
        assert resp.status == 405 and resp.getheader("Allow") == "GET, HEAD"
        conn.close()
        for head, message in (
                (b"GET /healthz HTTP/9.9", "request line: HTTP version not supported "
                 "(HTTP/1.0 and HTTP/1.1 are)"),
                (b"POST /healthz HTTP/1.1\r\nContent-Length: -1",
                 "Content-Length: expected a decimal number of at most 18 digits"),
                (b"POST /healthz HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2",
                 "Content-Length given twice with different values"),
                (b"POST /healthz HTTP/1.1\r\nTransfer-Encoding: identity",
                 "Transfer-Encoding: only chunked is supported"),
                (b"POST /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1",
                 "Transfer-Encoding and Content-Length together: the body's length is unclear")):
            status, doc = raw_request(gw.port, head + b"\r\n\r\n")
            assert (status, doc["error"]["message"]) == (400, message), (head, doc)


def test_the_connections_past_the_limit_are_refused_not_the_first():
    """With --max-connections N, the connections accepted past N are answered 503 and closed;
    the first N keep being served. The count was checked at each request, so a connection
    held within the limit was refused while later ones, idle, pushed the count over it."""
    with Emu("--max-connections", "3") as emu:
        p = emu.port()
        request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        first = [socket.create_connection(("127.0.0.1", p)) for _ in range(3)]
        for conn in first:
            conn.sendall(request)
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        later = [socket.create_connection(("127.0.0.1", p)) for _ in range(2)]
        time.sleep(0.2)  # the server has accepted them
        for conn in first:
            conn.sendall(request)
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        for conn in later:
            conn.sendall(request)
            answer_bytes = conn.recv(4096)
            assert answer_bytes.startswith(b"HTTP/1.1 503"), answer_bytes
            assert b"too many connections (at most 3)" in answer_bytes
        for conn in first + later:
            conn.close()


def test_a_turn_sent_while_its_trajectory_runs_one_is_counted_not_recorded():
    """A second request under the identity of a trajectory whose turn is in flight (parallel
    sampling under one id) goes to the running turn's engine and is not recorded, since a
    trajectory's record is one sequence of turns; it was dropped without a trace, and is now
    counted in libra_parallel_turns_total."""
    engine = held_engine()
    with Serve(engine.url + ",tp=1") as gw:
        first = Background(turn, gw.port, "p1")
        while not engine.bodies:
            time.sleep(0.01)
        second = Background(turn, gw.port, "p1")
        while len(engine.bodies) < 2:
            time.sleep(0.01)
        engine.release.set()
        assert first.result()[0] == 200 and second.result()[0] == 200
        metrics = get(gw.port, "/metrics")[1]
        assert "\nlibra_parallel_turns_total 1\n" in metrics, metrics
        (p1,) = get(gw.port, "/libra/v1/state")[1]["trajectories"]
        assert p1["id"] == "libra:p1" and p1["turns"] == 1, p1
