"""Edges of `libra load` (docs/load.md): values that cannot act refused, the finish events of a
stopped run delivered, the place of a JSON error in an engine's answer, and the man page's
account of the command. Engines are fakes on free loopback ports."""

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from cli_run import refused, run
from emu_util import LIBRA, FakeEngine, QuietHandler

QUICK = ["--time-scale", "0.0001", "--batch", "4", "--samples", "4"]


class Engine(FakeEngine):
    """A fake SGLang engine: every turn answered in full at once, the weight update's calls 200
    (or update_status for the load), a finish event answered 404 after events_s seconds. It
    records (time, path) of every POST in .posts."""

    def __init__(self, update_status=200, events_s=0.0, turn_body=None):
        self.posts, self.update_status, self.events_s = [], update_status, events_s
        self.turn_body = turn_body
        self.lock = threading.Lock()
        super().__init__(_EngineHandler)

    def handle_error(self, request, client_address):
        pass  # the client left mid-answer

    def events(self):
        with self.lock:
            return [t for t, path in self.posts if path.endswith("/events")]


class _EngineHandler(QuietHandler):

    def do_GET(self):
        self.send_answer(404, b'{"detail": "Not Found"}')

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.posts.append((time.monotonic(), self.path))
        if self.path == "/generate":
            self.send_answer(200, self.server.turn_body or turn_answer(json.loads(raw)))
        elif self.path.startswith("/libra/"):
            time.sleep(self.server.events_s)
            self.send_answer(404, b'{"detail": "Not Found"}')
        elif self.path == "/update_weights_from_disk":
            self.send_answer(self.server.update_status, b'{"error": "no weights"}')
        else:
            self.send_answer(200, b"{}")

    def send_answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def turn_answer(request):
    n = request["sampling_params"]["max_new_tokens"]
    info = {"finish_reason": {"type": "length", "length": n},
            "prompt_tokens": len(request["input_ids"]), "completion_tokens": n}
    return json.dumps({"output_ids": [7] * n, "meta_info": info}).encode()


def load(engine, *args):
    return run("load", "--engines", engine.url, *QUICK, "--steps", "2", *args, timeout=60)


# ---- values that cannot act are refused (exit 2, the flag and why) ------------------------------

@pytest.mark.parametrize("trainer,value,why", [
    ([], "true", "ehp.enabled true has no effect without --trainer"),
    (["--trainer"], "false", "ehp.enabled false cannot hold with --trainer"),
])
def test_an_ehp_enabled_flag_that_disagrees_with_trainer_is_refused(trainer, value, why):
    """ehp.enabled is the split of the trainer's layout into a core and hybrid replicas, which
    libra load makes exactly when --trainer plays the pool: a flag saying otherwise is refused."""
    engine = Engine()
    err = refused(load(engine, *trainer, "--set", "ehp.enabled=" + value))
    assert err.startswith("libra: load: --set ehp.enabled: " + why), err
    assert "usage:" not in err and engine.posts == [], err


def test_an_ehp_enabled_flag_that_agrees_is_taken():
    p = load(Engine(), "--set", "ehp.enabled=false")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("style", ["areal", "slime"])
@pytest.mark.parametrize("mode", ["drain", "keep"])
def test_a_sync_mode_flag_a_framework_style_does_not_follow_is_refused(style, mode):
    """areal and slime abort the turns in flight for a weight update, their framework's way:
    rl.sync_mode from a flag, but for abort_resume, would change nothing."""
    engine = Engine()
    err = refused(load(engine, "--style", style, "--set", "rl.sync_mode=" + mode))
    assert err.startswith(f"libra: load: --set rl.sync_mode: rl.sync_mode {mode} has no effect "
                          f"with --style {style}: "), err
    assert engine.posts == []


@pytest.mark.parametrize("style", ["areal", "slime"])
def test_the_sync_mode_a_framework_style_follows_is_taken_from_a_flag(style):
    p = load(Engine(), "--style", style, "--set", "rl.sync_mode=abort_resume")
    assert p.returncode == 0, p.stderr


# ---- a stopped run delivers the finish events on their way --------------------------------------

def exits_after_the_events_answer(engine, p, t_exit):
    """Every finish event the engine took was answered (events_s after it came) before the
    client exited: none was cut off."""
    events = engine.events()
    assert events, p
    assert t_exit >= max(events) + engine.events_s - 0.2, (t_exit - max(events), p)


def test_a_failed_weight_update_delivers_the_finish_events():
    engine = Engine(update_status=500, events_s=1.5)
    p = load(engine, "--set", "rl.sync_interval=1", "--set", "rl.sync_mode=keep",
             "--set", "rl.transport=disk_reload")
    t_exit = time.monotonic()
    assert p.returncode == 1 and "a weight update failed on" in p.stderr, p.stderr
    exits_after_the_events_answer(engine, p.stderr, t_exit)


def test_a_signal_delivers_the_finish_events():
    engine = Engine(events_s=1.5)
    proc = subprocess.Popen([LIBRA, "load", "--engines", engine.url, *QUICK, "--steps", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not engine.events() and time.monotonic() - t0 < 20:
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        t_exit = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143 and "libra: load: SIGTERM: interrupted" in err, err
    exits_after_the_events_answer(engine, err, t_exit)


# ---- where an answer that is not JSON goes wrong ------------------------------------------------

@pytest.mark.parametrize("body,why", [
    (b"hello world", "not JSON (at byte 0: '[' or '{' expected near 'hello')"),
    (b'{"output_ids": nope}', "not JSON (at byte 15: invalid token near 'nope')"),
    (b'  {"a": 1} junk', "not JSON (at byte 11: end of file expected near 'junk')"),
    (b'{"a": "cut', "not JSON (at byte 6: premature end of input near '\"cut')"),
])
def test_an_answer_that_is_not_json_names_the_byte_its_bad_token_starts_at(body, why):
    engine = Engine(turn_body=body)
    p = load(engine)
    assert p.returncode == 1, p.stderr
    assert f"engine {engine.url}: its answer to a turn is not one: {why}" in p.stderr, p.stderr


# ---- the man page ------------------------------------------------------------------------------

def man_section(name):
    with open(os.path.join(os.environ["LIBRA_SOURCE_DIR"], "man", "libra.1"),
              encoding="utf-8") as f:
        text = f.read()
    return re.search(r"\n\.S[SH] %s\n(.*?)\n\.S[SH] " % re.escape(name), text, re.S).group(1)


def test_the_man_page_gives_load_its_style_and_its_trace_output():
    """libra load's -o writes the trace, the table staying on standard output (docs/load.md,
    libra load --help): the man page says so, and names --style."""
    section = man_section("load")
    assert r"\-\-style" in section and r"\-o" in section, section
    assert "standard output" in section and "trace" in section, section
    common = man_section("COMMON FLAGS")
    o_flag = common[common.index(r".BI \-o "):]
    assert "libra load" in o_flag.split(".TP")[0], o_flag
