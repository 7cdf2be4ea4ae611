"""End-to-end tests of the gateway's control plane (docs/serve.md "Engines", "Control calls",
"Security"): engines added, drained, lent and removed at run time; control calls as slime and
AReaL send them with trajectories in flight; turns held while paused; per-engine results of a
partial failure; the admin token. Real processes on loopback: `libra serve` in front of
`libra emu` and small scripted engines."""

import json
import socket
import subprocess
import time
from urllib.parse import quote

from emu_util import (ADMIN, LIBRA, TOKEN, Background, Emu, FakeEngine, QuietHandler, Serve, get,
                      post, request, wait_for)

ONE_BUCKET = ["--set", "sched.buckets=tp1:40960"]
PROMPT = list(range(1, 65))


def running(port):
    """Turns an emulated engine generates or queues (held at its gate included)."""
    load = get(port, "/v1/loads")[1]["loads"][0]
    return load["num_running_reqs"] + load["num_waiting_reqs"]


def engines(gw):
    return get(gw.port, "/libra/v1/engines")[1]


def turn(port, ids, n, libra=None, headers=None):
    """One SGLang /generate of n tokens (the emulator generates the cap it is given)."""
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": n}}
    if libra:
        body["libra"] = libra
    return post(port, "/generate", body, headers=headers, timeout=60)


def interruptible(port, ids, n, **kw):
    """A client that continues a turn its engine aborted (AReaL's interruptible generation,
    slime's partial rollout): the tokens so far appended, the cap lowered, until the budget is
    generated. Returns (output ids, the weight version of each segment)."""
    out, versions = [], []
    while len(out) < n:
        status, doc = turn(port, ids + out, n - len(out), **kw)
        assert status == 200, doc
        out += doc["output_ids"]
        versions.append(doc["meta_info"]["weight_version"])
        if doc["meta_info"]["finish_reason"]["type"] != "abort":
            break
    return out, versions


# ---- scripted engines -----------------------------------------------------------------------------

class Scripted(FakeEngine):
    """An engine that answers GET paths from a table ({path: (status, body)}; 404 for others)
    and every POST with post(path, body) -> (status, body)."""

    def __init__(self, gets, post=lambda path, body: (404, {})):
        self.gets, self.post = gets, post
        super().__init__(ScriptedHandler)


class ScriptedHandler(QuietHandler):

    def answer(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(*self.server.gets.get(self.path, (404, {"detail": "Not Found"})))

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.answer(*self.server.post(self.path, body))


def sglang_like(tp=1, update=(400, {"success": False, "message": "refused"})):
    """An SGLang engine of TP tp whose weight updates answer update."""
    info = {"tp_size": tp, "weight_version": "old", "version": "0.5.4", "model_path": "m"}
    gets = {"/get_server_info": (200, info), "/health": (200, {}),
            "/get_weight_version": (200, {"weight_version": "old"})}
    return Scripted(gets, lambda path, body: update)


# ---- slime and AReaL with trajectories in flight ------------------------------------------------

def test_a_slime_style_abort_loses_no_trajectory():
    """slime aborts at the end of a rollout: GET /workers from the gateway, then
    /abort_request {"abort_all": true} straight to each engine. Turns that opted in to
    abort-and-resume come back complete; the others come back 200 with finish_reason abort and
    the tokens so far, which the client continues (slime's partial rollout): none is lost."""
    with Emu("--instances", "tp1x2", scale="0.2") as emu, \
            Serve(*[i["url"] for i in emu.instances], args=ONE_BUCKET) as gw:
        slime = [Background(interruptible, gw.port, PROMPT, 600,
                            headers={"X-SMG-Routing-Key": "s%d-0" % k}) for k in range(3)]
        resumed = [Background(turn, gw.port, PROMPT, 600, {"trajectory": "r%d" % k,
                                                           "resume": True}) for k in range(3)]
        wait_for(lambda: running(emu.port(0)) + running(emu.port(1)) == 6, what="6 turns running")
        time.sleep(0.3)  # some tokens first
        workers = get(gw.port, "/workers")[1]
        assert workers["total"] == 2 and [w["id"] for w in workers["workers"]] == [0, 1]
        for w in workers["workers"]:  # as slime does: to each engine, no token
            assert post(int(w["url"].rsplit(":", 1)[1]), "/abort_request",
                        {"abort_all": True})[0] == 200
        for b in slime:
            ids, versions = b.result()
            assert len(ids) == 600 and len(versions) == 2  # aborted once, then continued
        for b in resumed:
            status, doc = b.result()
            assert status == 200 and doc["meta_info"]["completion_tokens"] == 600
            assert len(doc["meta_info"]["libra_segments"]) == 2
        metrics = get(gw.port, "/metrics")[1]
        assert "libra_turns_resumed_total 3" in metrics


def test_an_areal_style_update_holds_new_turns_and_loses_none():
    """AReaL sends pause (abort mode), the update and continue to the gateway. Turns in flight
    are aborted by the pause; those continued by their client or by the gateway (libra.resume)
    wait at the gateway, as does a turn sent while paused, and all go after the continue, on
    the new weights."""
    with Emu("--instances", "tp1x2", scale="0.2") as emu, \
            Serve(*[i["url"] for i in emu.instances], args=[*ONE_BUCKET, "--poll-s", "0.2"]) as gw:
        areal = [Background(interruptible, gw.port, PROMPT, 600) for _ in range(2)]
        resumed = [Background(turn, gw.port, PROMPT, 600, {"trajectory": "r%d" % k,
                                                           "resume": True}) for k in range(2)]
        wait_for(lambda: running(emu.port(0)) + running(emu.port(1)) == 4, what="4 turns running")
        time.sleep(0.3)
        status, doc = post(gw.port, "/pause_generation", {}, headers=ADMIN)
        assert status == 200 and doc["success"], doc
        assert [e["status"] for e in doc["engines"]] == [200, 200]
        assert doc["engines"][0]["body"]["message"].startswith("Generation paused")
        paused = Background(turn, gw.port, PROMPT, 50)  # sent while paused
        wait_for(lambda: get(gw.port, "/libra/v1/status")[1]["held"] == 5, what="5 held turns")
        assert running(emu.port(0)) + running(emu.port(1)) == 0  # none reached an engine
        assert [e["state"] for e in engines(gw)["engines"]] == ["paused", "paused"]
        assert "libra_requests_held 5" in get(gw.port, "/metrics")[1]
        status, doc = post(gw.port, "/update_weights_from_disk",
                           {"model_path": "m", "weight_version": "v2"}, headers=ADMIN)
        assert status == 200 and doc["success"], doc
        assert paused.thread.is_alive()  # still held
        assert post(gw.port, "/continue_generation", {}, headers=ADMIN)[0] == 200
        status, doc = paused.result()
        assert status == 200 and doc["meta_info"]["weight_version"] == "v2"
        for b in areal:
            ids, versions = b.result()
            assert len(ids) == 600 and versions == ["default", "v2"]
        for b in resumed:
            status, doc = b.result()
            assert status == 200 and doc["meta_info"]["completion_tokens"] == 600
            assert [s["weight_version"] for s in doc["meta_info"]["libra_segments"]] == \
                ["default", "v2"]
        status = get(gw.port, "/libra/v1/status")[1]
        assert status["held"] == 0 and not status["holding"]
        assert [e["weight_version"] for e in status["engines"]] == ["v2", "v2"]


def test_a_held_turn_obeys_the_request_cap_and_its_client_leaving():
    with Emu("--instances", "tp1") as emu, \
            Serve(emu.instances[0]["url"], args=[*ONE_BUCKET, "--request-cap-s", "1"]) as gw:
        assert post(gw.port, "/pause_generation", {"mode": "in_place"}, headers=ADMIN)[0] == 200
        status, doc = turn(gw.port, PROMPT, 5, {"trajectory": "capped"})
        assert status == 504 and doc["error"]["type"] == "timeout", (status, doc)  # held to the cap
        s = socket.create_connection(("127.0.0.1", gw.port))
        body = json.dumps({"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 5}}).encode()
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), body))
        wait_for(lambda: get(gw.port, "/libra/v1/status")[1]["held"] == 1, what="a held turn")
        s.close()
        wait_for(lambda: get(gw.port, "/libra/v1/status")[1]["held"] == 0, what="its client gone")
        assert 'libra_errors_total{cause="client_gone"} 1' in get(gw.port, "/metrics")[1]
        assert post(gw.port, "/continue_generation", {}, headers=ADMIN)[0] == 200
        assert turn(gw.port, PROMPT, 5, {"trajectory": "after"})[0] == 200
        assert get(emu.port(), "/v1/loads")[1]["loads"][0]["num_running_reqs"] == 0


# ---- the registry --------------------------------------------------------------------------------

def test_an_engine_added_at_run_time_is_discovered_and_gets_traffic():
    with Emu("--instances", "tp1,tp2", scale="0.2") as emu, \
            Serve(emu.instances[0]["url"], args=["--set", "sched.buckets=tp1+tp2:40960"]) as gw:
        second = emu.instances[1]["url"]
        status, doc = post(gw.port, "/workers", {"url": second}, headers=ADMIN)  # no tp given
        assert status == 200 and doc["success"], doc
        assert doc["worker_id"] == 1 and doc["worker"]["tp"] == 2  # from /get_server_info
        fleet = engines(gw)
        assert [(e["id"], e["tp"], e["kind"], e["state"]) for e in fleet["engines"]] == \
            [(0, 1, "sglang", "active"), (1, 2, "sglang", "active")]
        assert fleet["engines"][1]["version"].startswith("libra-emu")
        assert [e["rank_offset"] for e in fleet["engines"]] == [0, 1] and fleet["world_size"] == 4
        assert [e["ranks"] for e in fleet["engines"]] == [1, 2]  # its TP: SGLang's group ranks
        assert get(gw.port, "/list_workers")[1] == {"urls": [emu.instances[0]["url"], second]}
        # it gets traffic: two turns at once go to the two engines (least loaded)
        turns = [Background(request, gw.port, "POST", "/generate",
                            {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 300},
                             "libra": {"trajectory": k}}, timeout=60) for k in range(2)]
        for t in turns:
            assert t.result()[0] == 200
        assert [e["requests"] for e in engines(gw)["engines"]] == [1, 1]
        # what registration refuses, with the reason
        status, doc = post(gw.port, "/add_worker?url=%s&tp=4" % second, headers=ADMIN)
        assert status == 409 and "registered already" in doc["error"]["message"]
        # the same engine under another spelling of its host is the same engine
        respelt = second.replace("127.0.0.1", "localhost") + "/"
        status, doc = post(gw.port, "/workers", {"url": respelt}, headers=ADMIN)
        assert status == 409 and "registered already, as engine 1 (%s: both reach 127.0.0.1:" % \
            second in doc["error"]["message"], doc
        status, doc = post(gw.port, "/add_worker?url=http://127.0.0.1:9", headers=ADMIN)
        assert status == 502 and "cannot be reached" in doc["error"]["message"], doc
        # a URL no call could reach is the caller's mistake (400), not the engine's (502)
        for bad in ("http://127.0.0.1:99999", "http://127.0.0.1:0", "http://u@127.0.0.1:9"):
            status, doc = post(gw.port, "/workers", {"url": bad}, headers=ADMIN)
            assert status == 400 and doc["error"]["message"].startswith("url: "), (bad, doc)
        assert post(gw.port, "/workers", {"url": second, "priority": 5},
                    headers=ADMIN)[0] == 400  # a setting the gateway would not carry out
        # removed by id, as slime does: gone from the listing, its id never given again
        status, doc = request(gw.port, "DELETE", "/workers/1", headers=ADMIN)
        assert status == 200 and doc["state"] == "removed", doc
        assert [e["id"] for e in engines(gw)["engines"]] == [0]
        status, doc = post(gw.port, "/add_worker?url=%s" % second, headers=ADMIN)
        assert status == 200 and doc["worker_id"] == 2


def test_the_gateway_itself_is_refused_as_an_engine_under_any_spelling():
    """Registered, the gateway would be its own engine: a /v1/loads fanned out to it came back
    to it until every connection was held, and a turn routed to it went round 300 times."""
    with Emu("--instances", "tp1") as emu:
        with Serve(emu.instances[0]["url"], args=ONE_BUCKET) as gw:
            port = gw.port
            # a connection to the wildcard address reaches the loopback one
            # and one to an IPv4-mapped IPv6 address reaches the IPv4 listener
            for url in ("http://127.0.0.1:%d" % port, "http://localhost:%d/" % port,
                        "http://0.0.0.0:%d" % port, "http://[::ffff:127.0.0.1]:%d" % port):
                status, doc = post(gw.port, "/add_worker?url=" + quote(url, safe=":/"),
                                   headers=ADMIN)
                assert status == 400, doc
                assert doc["error"]["message"] == \
                    "url: %s is this gateway (it listens on 127.0.0.1:%d), not an engine" % (
                        url.rstrip("/"), port), doc
            status, doc = post(gw.port, "/workers", {"url": gw.url, "tp": 1}, headers=ADMIN)
            assert status == 400 and "is this gateway" in doc["error"]["message"], doc
            assert [e["id"] for e in engines(gw)["engines"]] == [0]
            assert get(gw.port, "/v1/loads", timeout=10)[0] == 200
        # listening on every address, any address of the machine at its port is the gateway
        with Serve(emu.instances[0]["url"], args=["--listen", "0.0.0.0:0", *ONE_BUCKET]) as gw:
            status, doc = post(gw.port, "/add_worker?url=http://127.0.0.1:%d" % gw.port,
                               headers=ADMIN)
            assert status == 400 and "(it listens on 0.0.0.0:%d)" % gw.port in \
                doc["error"]["message"], doc
        # at start-up, an --engine at --listen's address
        url = emu.instances[0]["url"]
        listen = url.replace("http://", "")
        p = subprocess.run([LIBRA, "serve", "--engine", url.replace("127.0.0.1", "localhost"),
                            "--listen", listen, *ONE_BUCKET], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert "--engine %s: this gateway's own address (--listen %s)" % (
            url.replace("127.0.0.1", "localhost"), listen) in p.stderr, p.stderr


def test_engines_that_are_not_what_the_gateway_drives_are_refused_with_the_reason():
    vllm = Scripted({"/version": (200, {"version": "0.16.0"}), "/health": (200, {})})
    neither = Scripted({"/health": (200, {})})
    sglang_tp3 = sglang_like(tp=3)
    with Emu("--instances", "tp1") as emu, Serve(emu.instances[0]["url"], args=ONE_BUCKET) as gw:
        status, doc = post(gw.port, "/workers", {"url": vllm.url}, headers=ADMIN)
        assert status == 400 and "TP unknown" in doc["error"]["message"], doc
        status, doc = post(gw.port, "/workers", {"url": vllm.url, "tp": 2}, headers=ADMIN)
        assert status == 400 and "no bucket" in doc["error"]["message"], doc
        status, doc = post(gw.port, "/workers", {"url": neither.url, "tp": 1}, headers=ADMIN)
        assert status == 502 and "neither" in doc["error"]["message"], doc
        status, doc = post(gw.port, "/workers", {"url": sglang_tp3.url}, headers=ADMIN)
        assert status == 400 and "TP3" in doc["error"]["message"], doc
        status, doc = post(gw.port, "/workers", {"url": vllm.url, "tp": 1}, headers=ADMIN)
        assert status == 200 and doc["worker"]["kind"] == "vllm", doc
        assert doc["worker"]["version"] == "0.16.0"
        assert [e["id"] for e in engines(gw)["engines"]] == [0, 1]
    for s in (vllm, neither, sglang_tp3):
        s.shutdown()


def test_a_drained_engine_gets_no_new_trajectory_and_is_removed_when_idle():
    with Emu("--instances", "tp1x2", scale="0.2") as emu, \
            Serve(*[i["url"] for i in emu.instances], args=ONE_BUCKET) as gw:
        long = [Background(turn, gw.port, PROMPT, 500, {"trajectory": "long%d" % k})
                for k in range(2)]
        wait_for(lambda: running(emu.port(0)) == 1 and running(emu.port(1)) == 1,
                 what="one long turn on each engine")
        status, doc = post(gw.port, "/libra/v1/engines/1/drain", headers=ADMIN)
        assert status == 200 and doc["state"] == "draining", doc
        assert [e["state"] for e in engines(gw)["engines"]] == ["active", "draining"]
        for k in range(3):  # new trajectories avoid it
            status, doc = turn(gw.port, PROMPT, 5, {"trajectory": "new%d" % k})
            assert status == 200
        assert [e["requests"] for e in engines(gw)["engines"]] == [4, 1]
        for b in long:  # its turn in flight finishes there
            assert b.result()[1]["meta_info"]["completion_tokens"] == 500
        wait_for(lambda: [e["id"] for e in engines(gw)["engines"]] == [0], what="the removal")
        assert get(gw.port, "/list_workers")[1]["urls"] == [emu.instances[0]["url"]]
        status, doc = post(gw.port, "/libra/v1/engines/1/drain", headers=ADMIN)
        assert status == 404


def test_a_lent_engine_gets_no_new_trajectory_until_reclaimed():
    with Emu("--instances", "tp1x2") as emu, \
            Serve(*[i["url"] for i in emu.instances], args=ONE_BUCKET) as gw:
        status, doc = post(gw.port, "/libra/v1/engines/0/lend", headers=ADMIN)
        assert status == 200 and doc["state"] == "lent", doc
        for k in range(3):
            assert turn(gw.port, PROMPT, 5, {"trajectory": k})[0] == 200
        assert [e["requests"] for e in engines(gw)["engines"]] == [0, 3]
        status, doc = post(gw.port, "/libra/v1/engines/0/reclaim", headers=ADMIN)
        assert status == 200 and doc["state"] == "active"
        assert turn(gw.port, PROMPT, 5, {"trajectory": "after"})[0] == 200
        assert [e["requests"] for e in engines(gw)["engines"]] == [1, 3]
        assert post(gw.port, "/libra/v1/engines/0/borrow", headers=ADMIN)[0] == 404


def test_a_dead_engine_is_skipped_by_routing_and_control_calls():
    with Emu("--instances", "tp1x2", "--fail", "instance=1,after_s=20", scale="0.1") as emu, \
            Serve(*[i["url"] for i in emu.instances], args=[*ONE_BUCKET, "--poll-s", "0.1"]) as gw:
        fleet = engines(gw)
        assert [(e["ranks"], e["rank_offset"]) for e in fleet["engines"]] == [(1, 0), (1, 1)]
        assert fleet["world_size"] == 3
        wait_for(lambda: engines(gw)["engines"][1]["state"] == "dead", what="engine 1 dead")
        # it can no longer join a weight-update group: no ranks, none counted for it
        fleet = engines(gw)
        assert [(e["ranks"], e["rank_offset"]) for e in fleet["engines"]] == [(1, 0), (0, 1)]
        assert fleet["world_size"] == 2
        for k in range(3):
            assert turn(gw.port, PROMPT, 5, {"trajectory": k})[0] == 200
        assert [e["requests"] for e in engines(gw)["engines"]] == [3, 0]
        status, doc = post(gw.port, "/flush_cache", headers=ADMIN)
        assert status == 200 and [e["id"] for e in doc["engines"]] == [0], doc
        assert get(gw.port, "/metrics")[1].count("libra_engine_up{") == 2
        status, doc = post(gw.port, "/remove_worker?url=" + emu.instances[1]["url"],
                           headers=ADMIN)
        assert status == 200 and doc["state"] == "removed"


# ---- partial failures -------------------------------------------------------------------------

def test_a_partial_update_failure_is_reported_per_engine():
    refusing = sglang_like()
    with Emu("--instances", "tp1") as emu, \
            Serve(emu.instances[0]["url"], refusing.url, args=[*ONE_BUCKET, "--poll-s", "0.2"]) as gw:
        status, doc = post(gw.port, "/update_weights_from_disk",
                           {"model_path": "m", "weight_version": "v9"}, headers=ADMIN)
        assert status == 502 and doc["success"] is False, doc
        assert [(e["id"], e["status"]) for e in doc["engines"]] == [(0, 200), (1, 400)]
        assert doc["engines"][1]["body"] == {"success": False, "message": "refused"}
        wait_for(lambda: [e["weight_version"] for e in engines(gw)["engines"]] == ["v9", "old"],
                 what="the versions table")
        status, doc = post(gw.port, "/update_weights_from_disk", {}, headers=ADMIN)
        assert status == 400 and doc["success"] is False  # every engine refused it: its 4xx
        # each engine takes its own rank offset: not fanned out
        status, doc = post(gw.port, "/init_weights_update_group",
                           {"master_address": "127.0.0.1", "master_port": 1, "rank_offset": 1,
                            "world_size": 3}, headers=ADMIN)
        assert status == 400 and "/libra/v1/engines" in doc["error"]["message"]
    refusing.shutdown()


# ---- security ------------------------------------------------------------------------------------

ADMIN_CALLS = [
    ("POST", "/add_worker?url=http://127.0.0.1:9&tp=1", None),
    ("POST", "/remove_worker?url=URL", None),
    ("POST", "/workers", {"url": "http://127.0.0.1:9", "tp": 1}),
    ("DELETE", "/workers/0", None),
    ("POST", "/libra/v1/engines/0/drain", None),
    ("POST", "/libra/v1/engines/0/lend", None),
    ("POST", "/libra/v1/admin/mode", {"mode": "shadow"}),
    ("POST", "/pause_generation", {}),
    ("POST", "/continue_generation", {}),
    ("POST", "/abort_request", {"abort_all": True}),
    ("POST", "/flush_cache", None),
    ("GET", "/flush_cache", None),
    ("POST", "/update_weights_from_disk", {"model_path": "m", "weight_version": "x"}),
    ("POST", "/release_memory_occupation", {}),
    ("POST", "/resume_memory_occupation", {}),
    ("POST", "/pause", None),
    ("POST", "/resume", None),
    ("POST", "/sleep", None),
    ("POST", "/wake_up", None),
    ("POST", "/update_weights", {"update_info": {}}),
]


def test_admin_calls_without_the_right_token_are_refused_and_change_nothing():
    with Emu("--instances", "tp1", "--dev-mode") as emu, \
            Serve(emu.instances[0]["url"], args=ONE_BUCKET) as gw, \
            Serve(emu.instances[0]["url"], args=ONE_BUCKET, token=None) as open_gw:
        before = engines(gw)
        url = emu.instances[0]["url"]
        for method, path, body in ADMIN_CALLS:
            path = path.replace("URL", url)
            for port, auth in ((gw.port, None), (gw.port, "Bearer wrong-" + TOKEN),
                               (gw.port, TOKEN), (open_gw.port, "Bearer " + TOKEN)):
                headers = {"Authorization": auth} if auth else {}
                status, doc = request(port, method, path, body, headers=headers)
                assert status == 401, (method, path, auth, doc)
                assert doc["error"]["type"] == "authentication_error"
        after = engines(gw)
        assert after["engines"] == before["engines"]
        assert get(gw.port, "/libra/v1/admin/mode")[0] == 401
        assert get(gw.port, "/libra/v1/status")[1]["holding"] is False
        assert get(emu.port(), "/get_weight_version")[1]["weight_version"] == "default"
        assert get(emu.port(), "/is_paused")[1]["is_paused"] is False
        # the data plane and reads need no token
        assert turn(gw.port, PROMPT, 3, {"trajectory": 1})[0] == 200
        for path in ("/workers", "/list_workers", "/libra/v1/engines", "/v1/loads",
                     "/get_server_info", "/metrics", "/health"):
            assert get(gw.port, path)[0] == 200, path


def test_listening_beyond_loopback_needs_a_token():
    with Emu("--instances", "tp1") as emu:
        url = emu.instances[0]["url"]
        env = {"PATH": "/usr/bin:/bin"}
        p = subprocess.run([LIBRA, "serve", "--engine", url, "--listen", "0.0.0.0:0",
                            *ONE_BUCKET], capture_output=True, text=True, timeout=30, env=env)
        assert p.returncode == 2 and "admin token" in p.stderr and p.stdout == "", p.stderr
        with Serve(url, args=["--listen", "0.0.0.0:0", *ONE_BUCKET]) as gw:  # with a token
            assert get(gw.port, "/health")[0] == 200
