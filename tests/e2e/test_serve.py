"""End-to-end tests of `libra serve` (docs/serve.md): the gateway between `libra load` (or a
plain HTTP client) and `libra emu` or a scripted engine, real processes on loopback."""

import http.client
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest

from emu_util import (ADMIN, BAD_BYTES_REQUESTS, LIBRA, TOKEN, Emu, ScriptedVllm, Serve, answer,
                      get, post, raw_request, stream)

SCALE = "0.005"
QUICK = ["--time-scale", SCALE, "--steps", "3", "--batch", "8", "--set", "rl.sync_interval=1"]
BUCKETS = ["--set", "sched.buckets=tp1:2000,tp2:6000,tp4:40960"]


def load(url, *args, timeout=240):
    """`libra load` against the gateway at url, its weight updates sent with the admin token."""
    quick = QUICK
    if "--steps" in args:  # a flag is given once: args' --steps replaces QUICK's
        k = QUICK.index("--steps")
        quick = QUICK[:k] + QUICK[k + 2:]
    return subprocess.run([LIBRA, "load", "--engines", url, *quick, *BUCKETS, *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "LIBRA_ADMIN_TOKEN": TOKEN})


def urls(emu):
    return [i["url"] for i in emu.instances]


# ---- client styles -------------------------------------------------------------------------------

@pytest.mark.parametrize("style,extra", [("plain", []), ("areal", ["--rid-identity"]),
                                         ("slime", []), ("skyrl", [])])
def test_every_client_style_completes_a_job_through_the_gateway(style, extra):
    with Emu("--instances", "tp1x2,tp2,tp4", "--dev-mode", scale=SCALE) as emu, \
            Serve(*urls(emu), args=[*BUCKETS, *extra]) as gw:
        assert [e["tp"] for e in gw.info["engines"]] == [1, 1, 2, 4]  # asked, not told
        assert gw.info["mode"] == "cmlfq"
        p = load(gw.url, "--json", "--style", style, "--set", "rl.transport=nccl")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
        assert doc["weight_updates"] == 2
        for inst in emu.instances:  # the update reached every engine through the gateway
            version = get(inst["port"], "/get_weight_version")[1]["weight_version"]
            assert version == ("default" if style == "skyrl" else "2")  # vLLM's names none
        status = get(gw.port, "/libra/v1/status")[1]
        assert status["step"] == 2  # each new weight version is a step
        served = sum(e["requests"] for e in status["engines"])
        assert served == sum(s["turns"] for s in doc["steps"])  # each answer, partial ones too
        metrics = get(gw.port, "/metrics")[1]
        single = [l for l in metrics.splitlines() if l.startswith("libra_single_turn")]
        # every style but AReaL without its opt-in names its trajectories
        assert single == ["libra_single_turn_requests_total 0"], single


# ---- bytes ---------------------------------------------------------------------------------------

def test_bodies_pass_byte_for_byte_without_libras_object():
    big = json.dumps({"text": "x" * (1 << 20), "meta_info": {"completion_tokens": 7}}).encode()
    engine = ScriptedVllm(lambda h, path, body: answer(h, big))
    ids = ",".join(str(i % 50000) for i in range(40000))  # about 200 KB
    head = '{"input_ids": [%s], "sampling_params": {"max_new_tokens": 7},' % ids
    tail = ' "rid": "r1", "unknown": {"kept": [1, 2.50, "\\u00e9"]}}'
    body = head + ' "libra": {"trajectory": 1, "events": []},' + tail
    assert len(body) > 200_000
    with Serve(engine.url + ",tp=1", args=BUCKETS) as gw:
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
        conn.request("POST", "/generate", body=body,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        got = resp.read()
        assert resp.status == 200
        assert got == big
        assert resp.getheader("X-Libra-Instance") == "0"
        assert resp.getheader("X-Libra-Decision") == "first"
        conn.close()
    path, sent = engine.bodies[-1]
    assert path == "/generate"
    assert sent == (head + tail).encode()  # libra's member cut out, nothing else touched
    engine.shutdown()


def test_tokenizer_calls_reach_one_engine_without_a_token():
    """SkyRL's newer inference layer sends vLLM's /tokenize and /detokenize to the URL it
    generates through: a read, answered by one engine, as the other reads are."""
    def reply(h, path, body):
        doc = json.loads(body)
        out = {"tokens": [1, 2, 3], "count": 3} if path == "/tokenize" else {"prompt": "abc"}
        out["echo"] = doc
        answer(h, json.dumps(out).encode())
    engines = [ScriptedVllm(reply), ScriptedVllm(reply)]
    with Serve(*[e.url + ",tp=1" for e in engines], args=BUCKETS) as gw:
        status, out = post(gw.port, "/tokenize", {"prompt": "abc"})
        assert status == 200 and out == {"tokens": [1, 2, 3], "count": 3,
                                         "echo": {"prompt": "abc"}}
        status, out = post(gw.port, "/detokenize", {"tokens": [1, 2, 3]})
        assert status == 200 and out["prompt"] == "abc"
    calls = [p for e in engines for p, _ in e.bodies if p in ("/tokenize", "/detokenize")]
    assert sorted(calls) == ["/detokenize", "/tokenize"]  # one engine each, not every one
    for e in engines:
        e.shutdown()


def test_sse_chunks_arrive_in_order_and_unchanged():
    events = [b'data: {"choices": [{"delta": {"content": "%d"}}]}\n\n' % i for i in range(5)]
    events.append(b"data: [DONE]\n\n")
    first_seen = threading.Event()

    def reply(h, path, body):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for i, ev in enumerate(events):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
            h.wfile.flush()
            if i == 0:  # the rest only once the client has the first: it streams
                assert first_seen.wait(30)
        h.wfile.write(b"0\r\n\r\n")

    engine = ScriptedVllm(reply)
    with Serve(engine.url + ",tp=1", args=BUCKETS) as gw:
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                "trajectory_id": "t1"}
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body))
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type") == "text/event-stream"
        got = resp.read1(len(events[0]))
        while len(got) < len(events[0]):
            got += resp.read1(len(events[0]) - len(got))
        assert got == events[0]
        first_seen.set()
        rest = resp.read()
        assert got + rest == b"".join(events)
        conn.close()
    engine.shutdown()


def sse_then(events, end):
    """A scripted engine's reply: a chunked SSE answer of events, then end(handler) (it cuts
    the answer: closes the connection, or stalls)."""
    def reply(h, path, body):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for ev in events:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
            h.wfile.flush()
        end(h)
    return reply


def close_now(h):
    h.close_connection = True  # closed once the reply returns: no last chunk


CHUNK = b'data: {"meta_info": {"completion_tokens": 1}}\n\n'


@pytest.mark.parametrize("events,args,code", [
    ([CHUNK, CHUNK], [], 502),                                 # the engine died between events
    ([CHUNK, b'data: {"meta_info": {"compl'], [], 502),        # ... in the middle of one
    ([CHUNK, b'data: {"meta_info": {}}\n'], [], 502),           # ... before an event's blank line
    ([CHUNK], ["--request-cap-s", "1"], 504),                  # the gateway's cap passed
])
def test_a_stream_cut_short_ends_with_an_error_event_and_no_last_chunk(events, args, code):
    """The status is sent: the answer can only say it is cut, in its events (an error event of
    its own, whatever the engine's bytes stopped in) and its framing, so that a client resends
    the turn instead of taking a part for the whole."""
    engine = ScriptedVllm(sse_then(events, close_now if code == 502 else lambda h: time.sleep(3)))
    with Serve(engine.url + ",tp=1", args=[*BUCKETS, *args]) as gw:
        body = {"input_ids": [1, 2, 3], "stream": True, "libra": {"trajectory": "cut"}}
        status, got, whole = stream(gw.port, "/generate", body)
        assert status == 200 and not whole
        assert got[0] == CHUNK[6:-2].decode() and "[DONE]" not in got, got
        error = json.loads(got[-1])["error"]
        assert error["code"] == code and error["type"] in ("upstream_error", "timeout"), error
        assert get(gw.port, "/libra/v1/status")[0] == 200
    engine.shutdown()


# ---- clients and engines that go away -------------------------------------------------------------

def test_a_client_that_disconnects_aborts_the_engine_request():
    with Emu("--instances", "tp1", scale="1") as emu, \
            Serve(*urls(emu), args=BUCKETS) as gw:
        s = socket.create_connection(("127.0.0.1", gw.port))
        body = json.dumps({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 100000},
                           "libra": {"trajectory": "gone"}}).encode()
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        port = emu.port(0)
        for _ in range(200):
            if get(port, "/v1/loads")[1]["loads"][0]["num_running_reqs"] == 1:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the request never reached the engine")
        s.close()
        for _ in range(200):
            if get(port, "/v1/loads")[1]["loads"][0]["num_running_reqs"] == 0:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the engine still runs the request of a client that left")
        metrics = get(gw.port, "/metrics")[1]
        assert 'libra_errors_total{cause="client_gone"} 1' in metrics


@pytest.mark.parametrize("style", ["plain", "slime"])
def test_an_engine_killed_mid_run_loses_no_trajectory(style):
    # plain opts in (libra.resume): the gateway sends the turn elsewhere; slime does not: the
    # gateway answers 502 and the client sends the turn again. The engine dies 100 emulated
    # seconds in, when the run's groups (all started at once: three steps are within the
    # default staleness) are mostly generating.
    log = tempfile.NamedTemporaryFile(suffix=".jsonl")
    with Emu("--instances", "tp1x3", "--fail", "instance=1,after_s=100", scale=SCALE) as emu, \
            Serve(*urls(emu), args=[*BUCKETS, "--set", "sched.buckets=tp1:40960",
                                    "--decisions", log.name]) as gw:
        p = load(gw.url, "--json", "--style", style, "--set", "rl.transport=nccl")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
        status = get(gw.port, "/libra/v1/status")[1]
        states = [e["state"] for e in status["engines"]]
        assert states[0] == states[2] == "active" and states[1] in ("suspect", "dead"), states
        metrics = get(gw.port, "/metrics")[1]
        resumed = [l for l in metrics.splitlines() if l.startswith("libra_turns_resubmitted")]
        if style == "plain":
            assert resumed != ["libra_turns_resubmitted_total 0"], resumed
        else:
            assert sum(s["resubmitted"] for s in doc["steps"]) > 0
    again = [json.loads(l) for l in open(log.name) if '"again"' in l]
    # a turn sent again (by the gateway when it opted in, else by its client) goes to an engine
    # that is up, and is logged as such
    assert again, again
    assert all(l["instance"] != 1 for l in again)


# ---- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw,where", [
    ('{"input_ids": [1, 2', "body:"),
    ('{"input_ids": [1], "libra": {"events": [{"kind": "tool_return", "status": "meh"}]}}',
     "libra.events.0.status"),
    ('{"sampling_params": {}}', "input_ids"),
    ('[1, 2]', "body:"),
    ('{"input_ids": [1], "libra": 7}', "libra"),
    ('{"input_ids": [1], "libra": {"trajectory": [1]}}', "libra.trajectory"),
    ('{"input_ids": [1], "libra": {"trajectory": 1e300}}', "libra.trajectory"),
    ('{"input_ids": [1], "libra": {"trajectory": 1.5}}', "libra.trajectory"),
    ('{"input_ids": [1], "libra": {"trajectory": {"a": 1}}}', "libra.trajectory"),
    ('{"input_ids": [1], "libra": {"trajectory": true}}', "libra.trajectory"),
])
def test_malformed_bodies_get_400_with_a_json_error(raw, where):
    engine = ScriptedVllm(lambda h, path, body: answer(h, b"{}"))
    with Serve(engine.url + ",tp=1", args=BUCKETS) as gw:
        status, doc = post(gw.port, "/generate", raw=raw)
        assert status == 400
        assert where in doc["error"]["message"], doc
        assert doc["error"]["type"] == "invalid_request_error"
    assert engine.bodies == []  # nothing reached the engine
    engine.shutdown()


def test_an_identity_of_up_to_4096_bytes_generates_and_takes_its_events():
    """One limit for both calls: an identity too long to keep whole is known by its hash, the
    one the events call computes from the {id} in its path."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, b'{"meta_info": {"completion_tokens": 1}}'))
    ids = ["L" * 240, "L" * 250, "M" * 4096, "\u00e9\"/" * 100, 7 ** 30]
    with Serve(engine.url + ",tp=1", args=[*BUCKETS, "--prompt-from-id", "-"]) as gw:
        for tid in ids:
            sources = [("libra", {"libra": {"trajectory": tid}})]
            if isinstance(tid, str):  # trajectory_id is a string or an object, not an integer
                sources.append(("trajectory_id", {"trajectory_id": tid}))
            for source, extra in sources:
                body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 2}, **extra}
                status, doc = post(gw.port, "/generate", body)
                assert status == 200, (source, doc)
                path = "/libra/v1/trajectories/%s/events" % urllib.parse.quote(str(tid), safe="")
                status, doc = post(gw.port, path, {"kind": "finish", "status": "completed"})
                assert status == 200 and doc["trajectory"] == str(tid), (source, tid, doc)
        for source, extra in (("libra.trajectory", {"libra": {"trajectory": "L" * 4097}}),
                              ("trajectory_id", {"trajectory_id": "L" * 4097})):
            status, doc = post(gw.port, "/generate", {"input_ids": [1], **extra})
            assert status == 400 and doc["error"]["message"].startswith(source + ": "), doc
        status, doc = post(gw.port, "/libra/v1/trajectories/%s/events" % ("L" * 4097),
                           {"kind": "finish", "status": "completed"})
        assert status == 400 and "4096 bytes" in doc["error"]["message"], doc
    engine.shutdown()


def test_errors_that_quote_bytes_not_utf8_are_json_and_the_gateway_lives_on():
    engine = ScriptedVllm(lambda h, path, body: answer(h, b"{}"))
    with Serve(engine.url + ",tp=1", args=BUCKETS) as gw:
        extra = [b"GET /workers/%ff HTTP/1.1\r\n\r\n",
                 b"POST /libra/v1/trajectories/%ff%fe/events HTTP/1.1\r\nContent-Length: 13"
                 b"\r\n\r\n{\"events\":[]}"]
        for data in BAD_BYTES_REQUESTS + extra:
            status, doc = raw_request(gw.port, data)
            assert 400 <= status < 500, doc
            assert "?" in doc["error"]["message"]
            assert get(gw.port, "/healthz")[0] == 200
    engine.shutdown()


def test_an_engine_without_a_tp_is_refused_with_the_reason():
    engine = ScriptedVllm(lambda h, path, body: answer(h, b"{}"))
    p = subprocess.run([LIBRA, "serve", "--engine", engine.url, *BUCKETS], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode != 0
    assert "TP unknown" in p.stderr and engine.url + ",tp=N" in p.stderr, p.stderr
    engine.shutdown()


@pytest.mark.parametrize("flag", ["--engine", "--pool-replica"])
@pytest.mark.parametrize("url,why", [("http://127.0.0.1:99999", "a bad port"),
                                     ("http://127.0.0.1:0", "a bad port"),
                                     ("http://u:p@127.0.0.1:9", "credentials in a URL")])
def test_an_engine_url_no_call_could_reach_is_a_usage_error(flag, url, why):
    """Checked when given (exit 2), not found out on the first call (exit 3)."""
    p = subprocess.run([LIBRA, "serve", flag, url, *BUCKETS], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "url: " + why in p.stderr, p.stderr


def test_one_engine_under_two_spellings_is_refused():
    """localhost and 127.0.0.1 reach one server: it would be registered, and routed to, twice."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, b"{}"))
    other = engine.url.replace("127.0.0.1", "localhost")
    p = subprocess.run([LIBRA, "serve", "--engine", engine.url + ",tp=1", "--engine",
                        other + "/,tp=1", *BUCKETS], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert "--engine %s and --engine %s: one engine (both reach 127.0.0.1:%s)" % (
        engine.url, other, engine.url.rsplit(":", 1)[1]) in p.stderr, p.stderr
    engine.shutdown()


@pytest.mark.parametrize("content,why", [
    ("", "empty file"),
    ("short\n", "16 to 4096 characters, not 5"),
    ("two words of a token\n", "space or control character"),
    ("x" * 5000 + "\n", "16 to 4096 characters, not 5000"),
    ("token\0with-a-nul-byte\n", "NUL byte"),
    (None, "is a directory"),
])
def test_an_admin_token_file_that_cannot_hold_a_token_is_refused(tmp_path, content, why):
    path = tmp_path / "token"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content.encode())
    p = subprocess.run([LIBRA, "serve", "--engine", "http://127.0.0.1:9", "--admin-token-file",
                        str(path), *BUCKETS], capture_output=True, text=True, timeout=30)
    assert p.returncode == (3 if content is None else 2) and why in p.stderr, p.stderr


@pytest.mark.parametrize("token", [" ", "short", "a token with spaces in it"])
def test_an_admin_token_in_the_environment_is_checked_as_from_a_file(token):
    p = subprocess.run([LIBRA, "serve", "--engine", "http://127.0.0.1:9", *BUCKETS],
                       capture_output=True, text=True, timeout=30,
                       env={**os.environ, "LIBRA_ADMIN_TOKEN": token})
    assert p.returncode == 2 and "LIBRA_ADMIN_TOKEN: the admin token" in p.stderr, p.stderr


@pytest.mark.parametrize("listen", ["[::1]:0", "::1:0"])
def test_an_ipv6_loopback_listen_address_needs_no_token_and_gives_a_bracketed_url(listen):
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    engine = ScriptedVllm(lambda h, path, body: answer(h, b"{}"))
    with Serve(engine.url + ",tp=1", args=[*BUCKETS, "--listen", listen], token=None) as gw:
        assert gw.url == "http://[::1]:%d" % gw.port, gw.url
    engine.shutdown()


# ---- modes ---------------------------------------------------------------------------------------

def test_shadow_mode_routes_sticky_and_logs_both_decisions():
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x2,tp2,tp4", scale=SCALE) as emu:
        log = os.path.join(tmp, "decisions.jsonl")
        with Serve(*urls(emu), args=[*BUCKETS, "--mode", "shadow", "--decisions", log]) as gw:
            assert gw.info["mode"] == "shadow"
            p = load(gw.url, "--json")
            assert p.returncode == 0, p.stderr
        lines = [json.loads(l) for l in open(log)]
        assert lines and all(l["mode"] == "shadow" for l in lines)
        assert all("sticky" in l and l["policy"]["name"] == "cmlfq" for l in lines)
        # sticky least-requests: a trajectory's turns stay on its first engine
        first = {}
        for l in lines:
            assert first.setdefault(l["trajectory"], l["instance"]) == l["instance"]


def test_cmlfq_h_routes_a_live_job_by_cost():
    """sched.policy cmlfq_h behind the gateway: its decisions take the engines' load and the
    fleet's costs (docs/routing.md "cmlfq_h"); the job completes and every decision names it."""
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x2,tp2,tp4", scale=SCALE) as emu:
        log = os.path.join(tmp, "decisions.jsonl")
        with Serve(*urls(emu), args=[*BUCKETS, "--set", "sched.policy=cmlfq_h",
                                     "--decisions", log]) as gw:
            assert gw.info["mode"] == "cmlfq_h"
            p = load(gw.url, "--json")
            assert p.returncode == 0, p.stderr
        lines = [json.loads(l) for l in open(log)]
        assert lines and all(l["policy"]["name"] == "cmlfq_h" for l in lines)
        assert {l["policy"]["bucket"] for l in lines} <= {0, 1, 2}


def test_the_mode_changes_only_with_the_admin_token():
    token = "s3cret-token-of-the-test-0123456789"
    engine = ScriptedVllm(lambda h, path, body: answer(h, b"{}"))
    with Serve(engine.url + ",tp=1", args=BUCKETS, env={"LIBRA_ADMIN_TOKEN": token}) as gw:
        for auth in (None, "Bearer wrong", "Basic " + token, "Bearer " + token + "x"):
            headers = {"Authorization": auth} if auth else {}
            status, doc = post(gw.port, "/libra/v1/admin/mode", {"mode": "shadow"},
                               headers=headers)
            assert status == 401, auth
        status, doc = post(gw.port, "/libra/v1/admin/mode", {"mode": "shadow"},
                           headers={"Authorization": "Bearer " + token})
        assert status == 200 and doc["mode"] == "shadow"
        status, doc = post(gw.port, "/libra/v1/admin/mode", {"mode": "plas"},
                           headers={"Authorization": "Bearer " + token})
        assert status == 400 and "cmlfq" in doc["error"]["message"]
    engine.shutdown()


# ---- parity with the evaluator ---------------------------------------------------------------------

def test_a_captured_trace_replays_to_the_same_decisions():
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x2,tp2,tp4", scale=SCALE) as emu:
        capture, log = os.path.join(tmp, "capture.jsonl"), os.path.join(tmp, "live.jsonl")
        # the built-in preset's tool returns say little about the work to come (calibrated,
        # docs/workloads.md); at full causal strength the trees learn enough in 32
        # trajectories to move some, so the parity below covers moves, not only stays
        presets = os.path.join(tmp, "presets.json")
        with open(presets, "w", encoding="utf-8") as f:
            json.dump({"workloads": [{"name": "r2e-causal", "base": "r2e-gym",
                                      "causal": {"strength": 1}}]}, f)
        with Serve(*urls(emu), args=[*BUCKETS, "--capture", capture, "--decisions", log]) as gw:
            # synchronous RL (no staleness): no trajectory spans a weight-version change, so
            # each was routed under one model, the one its step's replay holds
            p = load(gw.url, "--json", "--steps", "4", "--set", "rl.max_staleness=0",
                     "--presets", presets, "--workload", "r2e-causal")
            assert p.returncode == 0, p.stderr
        replay = os.path.join(tmp, "replay.jsonl")
        p = subprocess.run([LIBRA, "route", "eval", capture, "--policy", "cmlfq",
                            "--train-steps", "0", "--decisions", replay, *BUCKETS],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        ids = [json.loads(l).get("extra", {}).get("id") for l in open(capture)][1:]
        live = {}
        for l in map(json.loads, open(log)):
            live.setdefault(l["trajectory"], []).append(
                (l["turn"], l["policy"]["bucket"], l["policy"]["reason"]))
        replayed = {}
        for l in map(json.loads, open(replay)):
            replayed.setdefault(ids[l["trajectory"]], []).append(
                (l["turn"], l["bucket"], l["reason"]))
        assert len(replayed) == 32
        assert {k: live[k] for k in replayed} == replayed
        moved = sum(1 for seq in replayed.values() for t, b, r in seq if r in ("promote", "demote"))
        assert moved > 0  # the trees learnt something that moved trajectories


# ---- abort-and-resume ----------------------------------------------------------------------------

def test_an_aborted_turn_that_opted_in_is_resumed_and_merged():
    from emu_util import Background, generate
    with Emu("--instances", "tp1", scale="0.2") as emu, \
            Serve(*urls(emu), args=["--set", "sched.buckets=tp1:40960"]) as gw:
        ids = list(range(1, 65))
        turn = Background(generate, gw.port, ids, 400, timeout=120,
                          libra={"trajectory": 5, "resume": True}, return_logprob=True)
        for _ in range(400):  # wait until the engine runs it
            if get(emu.port(0), "/v1/loads")[1]["loads"][0]["num_running_reqs"] == 1:
                break
            time.sleep(0.01)
        time.sleep(0.3)  # some tokens first
        assert post(gw.port, "/pause_generation", {"mode": "abort"}, headers=ADMIN)[0] == 200
        assert post(gw.port, "/update_weights_from_disk",
                    {"model_path": "m", "weight_version": "7"}, headers=ADMIN)[0] == 200
        assert post(gw.port, "/continue_generation", {}, headers=ADMIN)[0] == 200
        status, out = turn.result(timeout=120)
        assert status == 200, out
        meta = out["meta_info"]
        assert meta["completion_tokens"] == 400 == len(out["output_ids"])
        assert len(meta["output_token_logprobs"]) == 400
        segments = meta["libra_segments"]
        assert [s["weight_version"] for s in segments] == ["default", "7"], segments
        assert sum(s["completion_tokens"] for s in segments) == 400
        assert 0 < segments[0]["completion_tokens"] < 400
        assert meta["finish_reason"]["type"] == "length"
        metrics = get(gw.port, "/metrics")[1]
        assert "libra_turns_resumed_total 1" in metrics


def test_a_chat_client_without_events_is_learnt_from_its_messages():
    with tempfile.TemporaryDirectory() as tmp, Emu("--instances", "tp1", scale=SCALE) as emu:
        capture = os.path.join(tmp, "capture.jsonl")
        with Serve(*urls(emu), args=["--set", "sched.buckets=tp1:40960", "--capture",
                                     capture]) as gw:
            msgs = [{"role": "user", "content": "fix the bug"}]
            headers = {"X-Session-ID": "chat-1"}
            body = {"model": "qwen3-14b", "messages": msgs, "max_tokens": 8}
            assert post(gw.port, "/v1/chat/completions", body, headers=headers)[0] == 200
            msgs += [{"role": "assistant", "content": "",
                      "tool_calls": [{"id": "c1", "type": "function",
                                      "function": {"name": "bash", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c1",
                      "content": "Traceback (most recent call last): " + "x" * 4000}]
            assert post(gw.port, "/v1/chat/completions", body, headers=headers)[0] == 200
            status, doc = post(gw.port, "/libra/v1/trajectories/chat-1/events",
                               {"kind": "finish", "status": "completed"})
            assert status == 200, doc
        lines = [json.loads(l) for l in open(capture)]
        assert len(lines) == 2 and lines[1]["extra"]["id"] == "session:chat-1"
        call = lines[1]["turns"][0]["calls"][0]
        assert call["tool"] == "bash" and call["status"] == "failure"  # from its text
        assert 900 <= call["payload_tokens"] <= 1100  # about 4000 characters
