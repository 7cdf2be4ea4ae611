"""Starting `libra emu` and talking HTTP to it, for the e2e tests (standard library only)."""

import http.client
import http.server
import json
import os
import signal
import socket
import sys
import subprocess
import threading
import time

LIBRA = os.environ["LIBRA_BIN"]


class Process:
    """A libra process run for a test: stopped with SIGTERM on leaving the with block, which
    then wants exit status 0 and, when quiet, nothing on standard error — under the sanitizer
    build a leak or a memory error fails the test. When the test failed first, the process's
    stderr (a sanitizer report, say) goes with the failure's output."""

    name, quiet = "libra", True

    def stop(self):
        """Stops it with SIGTERM; returns (exit status, standard error)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=20)
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc, err

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *rest):
        rc, err = self.stop()
        if exc_type is None:
            assert rc == 0 and (err == "" or not self.quiet), (rc, err)
        elif err:
            sys.stderr.write("%s exited %s; its stderr:\n%s" % (self.name, rc, err))


class Emu(Process):
    """A running `libra emu`; instances are dicts of its ready lines."""

    name = "libra emu"

    def __init__(self, *args, scale="0.01"):
        self.proc = subprocess.Popen(
            [LIBRA, "emu", "--time-scale", scale, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.instances = []
        line = self.proc.stdout.readline()
        while line:
            self.instances.append(json.loads(line))
            if len(self.instances) == self.expected(args):
                break
            line = self.proc.stdout.readline()
        assert self.instances, self.proc.stderr.read()

    @staticmethod
    def expected(args):
        spec = args[args.index("--instances") + 1] if "--instances" in args else "tp1"
        return sum(int(item.split("x")[1]) if "x" in item else 1 for item in spec.split(","))

    def port(self, i=0):
        return self.instances[i]["port"]

def raw_request(port, data, timeout=30):
    """Sends data as it is (a request no client library would write) and returns the status and
    the JSON body of the answer, read until the server closes or the body is complete."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


# Requests whose errors quote what a client sent that is not UTF-8 once decoded (a percent
# escape of a byte that begins no character, or a message cut to its buffer in the middle of
# one): each once crashed the daemon that answered it.
BAD_BYTES_REQUESTS = [
    b"GET /%ff HTTP/1.1\r\n\r\n",
    b"PUT /healthz%ff HTTP/1.1\r\n\r\n",
    b"GET /healthz?%ff=1 HTTP/1.1\r\n\r\n",
    b"GET /a" + b"%c3%a9" * 300 + b" HTTP/1.1\r\n\r\n",
]


def request(port, method, path, body=None, raw=None, timeout=60, headers=None):
    """Returns (status, parsed JSON or text or None)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    conn.request(method, path, body=data, headers=headers or {})
    resp = conn.getresponse()
    text = resp.read().decode("utf-8", "replace")
    conn.close()
    try:
        return resp.status, json.loads(text) if text else None
    except ValueError:
        return resp.status, text


def answer_as_vllm(handler):
    """A scripted engine's GET, as the gateway's registration and health checks ask a vLLM:
    /version and /health answer 200, anything else 404."""
    body = {"/version": b'{"version": "scripted"}', "/health": b""}.get(handler.path)
    handler.send_response(404 if body is None else 200)
    handler.send_header("Content-Length", str(len(body or b"")))
    handler.end_headers()
    handler.wfile.write(body or b"")


class FakeEngine(http.server.ThreadingHTTPServer):
    """A test's engine on a free loopback port, serving handler_class on a daemon thread."""

    daemon_threads = True

    def __init__(self, handler_class):
        super().__init__(("127.0.0.1", 0), handler_class)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """An HTTP/1.1 handler that logs nothing."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


class ScriptedVllm(FakeEngine):
    """An engine that registers as a vLLM (answer_as_vllm), records every POST as (path, body)
    in .bodies and answers it as the test says: reply(handler, path, body) writes the answer."""

    def __init__(self, reply):
        self.bodies = []
        self.reply = reply
        super().__init__(_ScriptedVllmHandler)


class _ScriptedVllmHandler(QuietHandler):

    def do_GET(self):
        answer_as_vllm(self)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.bodies.append((self.path, body))
        self.server.reply(self, self.path, body)


def answer(handler, body, ctype="application/json"):
    """A scripted engine's 200 answer of body."""
    handler.send_response(200)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def stream(port, path, body, timeout=60):
    """POSTs body and reads its streamed (SSE) answer: (status, the data of each event, whether
    the body ended whole). A body cut without the chunked coding's last chunk is what
    http.client raises IncompleteRead for (httpx and aiohttp raise too): whole is then False."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, body=json.dumps(body))
    resp = conn.getresponse()
    try:
        data, whole = resp.read(), True
    except http.client.IncompleteRead as e:
        data, whole = e.partial, False
    conn.close()
    events = []
    for block in data.decode("utf-8", "replace").split("\n\n"):
        lines = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if lines:
            events.append("\n".join(lines))
    return resp.status, events, whole


def post(port, path, body=None, **kw):
    return request(port, "POST", path, body, **kw)


def get(port, path, **kw):
    return request(port, "GET", path, **kw)


def generate(port, ids, gen, cap=None, timeout=60, **extra):
    """SGLang /generate of ids that generates gen tokens (libra's script), capped at cap;
    extra members join the body."""
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": cap or gen},
            "libra": {"emu": {"gen_tokens": gen}}}
    body.update(extra)
    return post(port, "/generate", body, timeout=timeout)


def tokens_lasting(seconds, prompt):
    """How many tokens one request of prompt generates in about seconds of emulated time (wall
    time at --time-scale 1): the emulated time per token, measured on a fast emulator."""
    with Emu(scale="0.01") as fast:
        meta = generate(fast.port(), prompt, 2000)[1]["meta_info"]
    return int(seconds / (meta["e2e_latency"] / 2000))


class Background:
    """Runs fn(*args) on a thread; .result() joins and returns what it returned."""

    def __init__(self, fn, *args, **kw):
        self.value = None
        self.thread = threading.Thread(target=self.run, args=(fn, args, kw), daemon=True)
        self.thread.start()

    def run(self, fn, args, kw):
        self.value = fn(*args, **kw)

    def result(self, timeout=60):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "request did not finish"
        return self.value


def wait_for(cond, timeout=10, what="the condition"):
    """Polls cond every 20 ms until it is true; fails the test after timeout seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def running(port):
    """(running, waiting) of an instance's /v1/loads."""
    _, doc = get(port, "/v1/loads")
    load = doc["loads"][0]
    return load["num_running_reqs"], load["num_waiting_reqs"]


TOKEN = "libra-e2e-admin-token-0123456789"  # the gateways' admin token (LIBRA_ADMIN_TOKEN)
ADMIN = {"Authorization": "Bearer " + TOKEN}  # headers of an admin call


class Serve(Process):
    """A running `libra serve` in front of engine URLs; .info is its ready line. Its notes on
    standard error (mode switches, turns sent elsewhere, engines added) are allowed. Its admin
    token is TOKEN unless token says otherwise (None: none)."""

    name, quiet = "libra serve", False

    def __init__(self, *urls, args=(), env=None, token=TOKEN):
        cmd = [LIBRA, "serve"]
        if "--listen" not in args:  # a flag takes one value: args' own --listen replaces it
            cmd += ["--listen", "127.0.0.1:0"]
        for u in urls:
            cmd += ["--engine", u]
        full = {k: v for k, v in os.environ.items() if k != "LIBRA_ADMIN_TOKEN"}
        if token:
            full["LIBRA_ADMIN_TOKEN"] = token
        self.proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env={**full, **(env or {})})
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()
        self.info = json.loads(line)
        self.port = self.info["port"]
        self.url = self.info["url"]


def assert_weights_never_go_back(decisions):
    """No trajectory's turn went to an engine of an older step than its last before (the
    gateway's --decisions file)."""
    steps = {}
    for line in decisions.read_text().splitlines():
        d = json.loads(line)
        steps.setdefault(d["trajectory"], []).append(d["step"])
    assert steps and all(v == sorted(v) for v in steps.values())
