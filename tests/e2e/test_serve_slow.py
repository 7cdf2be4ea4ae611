"""The gateway's long waits, each over 20 s of wall time, so labelled slow (about 100 s in all):
a turn silent for longer than 60 s is not cut (libevent's default timeout is 50 s, the
client's none here; RL turns of 10-30 minutes are normal); a turn on an engine that stops
answering without closing its connection moves on once the engine is declared dead, not at --request-cap-s."""

import http.server
import threading
import time

from emu_util import ADMIN, Emu, Serve, answer_as_vllm, generate, get, post, tokens_lasting

PROMPT = list(range(64))


def test_a_turn_silent_for_70_s_passes_the_gateway():
    tokens = tokens_lasting(70, PROMPT)
    with Emu(scale="1") as emu, Serve(emu.instances[0]["url"],
                                      args=["--set", "sched.buckets=tp1:40960"]) as gw:
        t0 = time.monotonic()
        status, out = generate(gw.port, PROMPT, tokens, timeout=300,
                               libra={"trajectory": 1, "emu": {"gen_tokens": tokens}})
        elapsed = time.monotonic() - t0
    assert status == 200 and out["meta_info"]["completion_tokens"] == tokens
    assert elapsed > 60, elapsed


class Silent(http.server.BaseHTTPRequestHandler):
    """A vLLM that registers, then, from its first turn on, answers nothing at all."""

    protocol_version = "HTTP/1.1"
    gone = threading.Event()

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.gone.is_set():
            time.sleep(120)
        answer_as_vllm(self)

    def do_POST(self):
        self.gone.set()
        time.sleep(120)


def test_a_turn_on_an_engine_declared_dead_goes_to_another():
    silent = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    silent.daemon_threads = True
    threading.Thread(target=silent.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d,tp=1" % silent.server_address[1]
    with Emu() as emu, Serve(url, args=["--set", "sched.buckets=tp1:40960", "--poll-s",
                                        "0.2"]) as gw:
        result = {}

        def turn():
            result["answer"] = generate(gw.port, PROMPT, 8, timeout=120,
                                        libra={"trajectory": "t", "resume": True})

        client = threading.Thread(target=turn)
        client.start()
        assert Silent.gone.wait(10)  # the turn is on the silent engine
        status, _ = post(gw.port, "/add_worker?url=" + emu.instances[0]["url"], headers=ADMIN)
        assert status == 200
        client.join(90)  # the request cap is 3600 s: a turn still waiting is one left on it
        assert not client.is_alive(), "the turn waited on the dead engine"
        status, out = result["answer"]
        assert status == 200 and out["meta_info"]["completion_tokens"] == 8
        engines = get(gw.port, "/libra/v1/engines")[1]["engines"]
        assert [(e["id"], e["state"]) for e in engines] == [(0, "dead"), (1, "active")]
    silent.shutdown()
