"""Engines and clients that misbehave against a running `libra serve`, over real sockets: each
test guards a defect one of them once triggered (a status the client never saw, a request or a
credential altered on its way to the engine, a state dir a restart refused, a message that
named the wrong cause)."""

import http.client
import http.server
import json
import subprocess
import time

from emu_util import (LIBRA, FakeEngine, QuietHandler, ScriptedVllm, Serve, answer, get, post,
                      request)

COMPLETION = json.dumps({"choices": [{"text": "ok", "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


class Engine(FakeEngine):
    """An SGLang-like engine: GET paths answer from .gets ({path: (status, bytes)}; 404 for
    others), with .seen the path (query included) and headers of every call; POSTs answer
    COMPLETION."""

    def __init__(self, gets):
        self.gets, self.seen = gets, []
        super().__init__(_EngineHandler)


class _EngineHandler(QuietHandler):

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.server.seen.append((self.path, dict(self.headers)))
        gets = self.server.gets
        self.reply(*(gets(self.path) if callable(gets) else gets.get(self.path, (404, b"{}"))))

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.seen.append((self.path, dict(self.headers)))
        self.reply(200, COMPLETION)


def sglang(version=lambda: "v1", tp=b"1"):
    """An SGLang engine of TP tp (its JSON text) whose weight version is version()."""
    def gets(path):
        if path == "/get_server_info":
            return 200, b'{"tp_size": %s, "version": "0.5", "model_path": "m"}' % tp
        if path == "/get_weight_version":
            return 200, json.dumps({"weight_version": version()}).encode()
        return (200, b"{}") if path == "/health" else (404, b"{}")
    return Engine(gets)


def until(cond, what, limit_s=10):
    end = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < end, "timed out waiting for " + what
        time.sleep(0.05)


def test_a_body_over_the_limit_is_answered_413_to_a_client_that_sends_it_whole():
    """A client that sends a body over --max-body-bytes before it reads (as http.client,
    requests and most others do) gets the 413 that says why: the gateway closed the connection
    with the body unread, so the kernel reset it and the client saw a broken pipe or a reset
    instead of any answer."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, COMPLETION))
    with Serve(engine.url + ",tp=1", args=("--max-body-bytes", "100000")) as gw:
        for size in (400_000, 4_000_000):
            body = b'{"prompt": [1], "pad": "' + b"x" * size + b'"}'
            conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
            conn.request("POST", "/v1/completions", body=body)
            resp = conn.getresponse()
            doc = json.loads(resp.read())
            conn.close()
            assert resp.status == 413 and "over the limit" in doc["error"]["message"], doc
        assert not engine.bodies  # nothing reached the engine
        assert get(gw.port, "/healthz")[0] == 200
    engine.shutdown()


def test_a_head_over_its_limit_is_answered_400_with_a_small_body_limit():
    """A head over 64 KiB gets the head's 400, not the body's 413, under a small
    --max-body-bytes."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, COMPLETION))
    with Serve(engine.url + ",tp=1", args=("--max-body-bytes", "1000")) as gw:
        status, doc = request(gw.port, "GET", "/healthz", headers={"X-Big": "a" * 70000})
        assert status == 400 and "headers over the limit" in doc["error"]["message"], doc
        assert get(gw.port, "/healthz")[0] == 200
    engine.shutdown()


def test_a_long_authorization_header_reaches_the_engine_whole():
    """A generation request's Authorization (a vLLM --api-key, a JWT of a few KB) goes on to
    the engine as the client sent it: it was cut to 496 bytes, which an engine refuses."""
    engine = sglang()
    with Serve(engine.url) as gw:
        token = "Bearer " + "j" * 3000
        body = {"input_ids": [1, 2], "libra": {"trajectory": "auth"}}
        status, _ = post(gw.port, "/generate", body, headers={"Authorization": token})
        assert status == 200
        (headers,) = [h for path, h in engine.seen if path == "/generate"]
        assert headers["Authorization"] == token
    engine.shutdown()


def test_a_control_calls_long_query_reaches_the_engine_whole():
    """A call passed on to the engines keeps its whole query: it was cut at about 750 bytes."""
    engine = sglang()
    with Serve(engine.url) as gw:
        query = "/get_model_info?tag=" + "q" * 3000
        assert get(gw.port, query)[0] == 404  # the engine's answer, passed on
        assert query in [path for path, _ in engine.seen]
    engine.shutdown()


def test_a_weight_version_of_any_length_is_a_step_and_a_restart_takes_it(tmp_path):
    """An engine whose weight version is longer than the 63 bytes the gateway keeps (a
    checkpoint path) still makes a step of each new version, and the state dir that recorded
    it restarts: it held the version whole, which its restart then refused as a bad row
    (exit 2)."""
    version = {"v": "/ckpt/" + "run-" * 20 + "step-1"}
    engine = sglang(lambda: version["v"])
    args = ("--poll-s", "0.1", "--state-dir", str(tmp_path))
    with Serve(engine.url, args=args) as gw:
        first = get(gw.port, "/libra/v1/status")[1]["step"]
        version["v"] = "/ckpt/" + "run-" * 20 + "step-2"
        until(lambda: get(gw.port, "/libra/v1/status")[1]["step"] == first + 1, "a step")
        (shown,) = [e["weight_version"] for e in get(gw.port, "/libra/v1/engines")[1]["engines"]]
        assert shown.startswith("/ckpt/run-") and len(shown.encode()) < 64
    with Serve(engine.url, args=args) as gw:
        assert get(gw.port, "/libra/v1/status")[1]["step"] == first + 1
    engine.shutdown()


def test_an_engine_refused_at_registration_is_told_what_its_answer_lacked():
    """An engine whose /get_server_info has no usable tp_size, or whose /version answers 200
    without a version, is refused naming what its answer lacked: the messages said it did not
    answer at all ('it does not answer SGLang's /get_server_info', 'nor vLLM's /version
    (200)')."""
    engine = sglang(tp=b'"2"')
    run = subprocess.run([LIBRA, "serve", "--engine", engine.url], capture_output=True,
                         text=True, timeout=30)
    assert run.returncode == 2, run.stderr
    assert "no tp_size of 1 or more" in run.stderr and "does not answer" not in run.stderr, \
        run.stderr
    engine.shutdown()
    vllm = Engine({"/version": (200, b'{"version": 3}'), "/health": (200, b"")})
    run = subprocess.run([LIBRA, "serve", "--engine", vllm.url + ",tp=1"], capture_output=True,
                         text=True, timeout=30)
    assert run.returncode == 3, run.stderr
    assert "/version (200 without a version string)" in run.stderr, run.stderr
    vllm.shutdown()


def test_an_answer_over_the_limit_is_a_502_not_a_gateway_that_holds_it():
    """An engine's answer held whole (not streamed) past --max-answer-bytes is answered 502
    and its transfer dropped, whether its Content-Length says so or its bytes, read to the
    close, pass the limit: an engine that never stopped sending grew the gateway's memory
    without bound. The gateway then serves the next turn."""
    size = 3_000_000

    def reply(h, path, body):
        prompt = json.loads(body)["prompt"]
        if prompt == [3]:
            return answer(h, COMPLETION)
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        if prompt == [2]:
            h.send_header("Content-Length", str(size))
        else:  # no length: read to the close
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        try:
            for _ in range(size // 100_000):
                h.wfile.write(b" " * 100_000)
        except OSError:
            pass  # the gateway stopped reading

    engine = ScriptedVllm(reply)
    with Serve(engine.url + ",tp=1", args=("--max-answer-bytes", "1000000")) as gw:
        for prompt in ([1], [2]):
            status, doc = post(gw.port, "/v1/completions",
                               {"prompt": prompt, "libra": {"trajectory": "big%d" % prompt[0]}})
            assert status == 502, (status, doc)
            assert "passed --max-answer-bytes (1000000)" in doc["error"]["message"], doc
        status, doc = post(gw.port, "/v1/completions",
                           {"prompt": [3], "libra": {"trajectory": "small"}})
        assert status == 200, (status, doc)
    engine.shutdown()
