"""End-to-end tests of `libra serve` (docs/serve.md "Outputs", "Failures"): a turn the gateway
moves off a failed engine is logged again; every error answer counts in libra_errors_total;
one OpenAI error type per status. Real processes on loopback."""

import http.client
import json
import re
import socket
import tempfile
import time

from emu_util import (ADMIN, Background, Emu, ScriptedVllm, Serve, answer, get, post, raw_request,
                      stream, wait_for)

ONE_BUCKET = ["--set", "sched.buckets=tp1:40000"]


def closed(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def metric(port, name):
    """{labels: value} of one metric family in /metrics."""
    text = get(port, "/metrics")[1]
    found = re.findall(r"^%s(\{[^}]*\})? (\d+)$" % re.escape(name), text, re.M)
    return {labels: int(v) for labels, v in found}


def errors(port):
    return {k[len('{cause="'):-2]: v for k, v in metric(port, "libra_errors_total").items()}


def test_a_turn_moved_off_a_failed_engine_is_logged_again():
    log = tempfile.NamedTemporaryFile(suffix=".jsonl")
    with Emu("--instances", "tp1x2", "--fail", "instance=0,after_s=10", scale="0.2") as emu, \
            Serve(*[i["url"] for i in emu.instances],
                  args=[*ONE_BUCKET, "--poll-s", "60", "--decisions", log.name]) as gw:
        wait_for(lambda: closed(emu.port(0)), what="engine 0 to fail")
        body = {"input_ids": [1, 2, 3, 4], "sampling_params": {"max_new_tokens": 20},
                "libra": {"trajectory": "f1", "resume": True}}
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
        conn.request("POST", "/generate", body=json.dumps(body))
        resp = conn.getresponse()
        resp.read()
        conn.close()
        assert resp.status == 200 and resp.getheader("X-Libra-Instance") == "1"
        assert metric(gw.port, "libra_turns_resubmitted_total") == {"": 1}
        decided = sum(metric(gw.port, "libra_decisions_total").values())
    lines = [json.loads(line) for line in open(log.name)]
    assert [(d["instance"], d.get("again", False)) for d in lines] == [(0, False), (1, True)]
    assert all(d["trajectory"] == "libra:f1" and d["turn"] == 0 for d in lines)
    assert decided == len(lines)


def slow(seconds):
    def reply(h, path, body):
        time.sleep(seconds)
        answer(h, b'{"text": "late"}')
    return reply


def test_requests_past_the_cap_count_as_errors():
    def reply(h, path, body):
        if b'"stream"' not in body:
            return slow(3)(h, path, body)
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        ev = b'data: {"meta_info": {"completion_tokens": 1}}\n\n'
        h.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
        h.wfile.flush()
        time.sleep(3)
    engine = ScriptedVllm(reply)
    with Serve(engine.url + ",tp=1", args=[*ONE_BUCKET, "--request-cap-s", "1"]) as gw:
        status, doc = post(gw.port, "/generate", {"input_ids": [1, 2]})
        assert status == 504 and doc["error"]["type"] == "timeout"
        body = {"input_ids": [1, 2], "stream": True}
        status, _, whole = stream(gw.port, "/generate", body)
        assert status == 200 and not whole
        wait_for(lambda: errors(gw.port).get("cap") == 2, what="two capped requests")
    engine.shutdown()


def test_requests_the_http_layer_refuses_count_as_errors():
    engine = ScriptedVllm(lambda h, path, body: answer(h, b"{}"))
    args = [*ONE_BUCKET, "--max-body-bytes", "100", "--max-connections", "2"]
    with Serve(engine.url + ",tp=1", args=args) as gw:
        assert post(gw.port, "/generate", {"input_ids": list(range(100))})[0] == 413
        assert raw_request(gw.port, b"GARBAGE\r\n\r\n")[0] == 400
        assert get(gw.port, "/no/such/path")[0] == 404
        held = [socket.create_connection(("127.0.0.1", gw.port)) for _ in range(2)]
        time.sleep(0.2)
        assert raw_request(gw.port, b"GET /healthz HTTP/1.1\r\n\r\n")[0] == 503
        for s in held:
            s.close()
        wait_for(lambda: get(gw.port, "/healthz")[0] == 200, what="the connections to close")
        assert errors(gw.port)["refused"] == 4
    engine.shutdown()


def test_every_error_answer_counts_once():
    """The causes add up to the error answers given: the gateway's own and the HTTP layer's."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, b'{"text": "x"}'))
    with Serve(engine.url + ",tp=1", args=ONE_BUCKET) as gw:
        answers = [post(gw.port, "/generate", raw="{")[0],                      # bad_request
                   post(gw.port, "/pause_generation", {})[0],                   # no token
                   get(gw.port, "/nothing")[0],                                 # refused
                   post(gw.port, "/libra/v1/trajectories/none/events",
                        {"events": []}, headers=ADMIN)[0]]
        assert all(s >= 400 for s in answers), answers
        got = errors(gw.port)
        assert sum(got.values()) == len(answers), got
        assert (got["bad_request"], got["refused"], got["other"]) == (1, 1, 2), got
    engine.shutdown()


def test_one_error_type_per_status():
    def reply(h, path, body):
        time.sleep(1.5)
        answer(h, b'{"text": "x", "meta_info": {"completion_tokens": 1}}')
    engine = ScriptedVllm(reply)
    with Serve(engine.url + ",tp=1", args=ONE_BUCKET) as gw:
        first = Background(post, gw.port, "/generate",
                           {"input_ids": [1, 2], "libra": {"trajectory": "busy"}})
        wait_for(lambda: get(gw.port, "/libra/v1/status")[1]["engines"][0]["in_flight"] == 1,
                 what="a turn in flight")
        finish = {"events": [{"kind": "finish"}]}
        status, doc = post(gw.port, "/generate",
                           {"input_ids": [1, 2, 3], "libra": {"trajectory": "busy", **finish}})
        assert status == 409 and doc["error"]["type"] == "conflict_error", doc
        status, doc = post(gw.port, "/libra/v1/trajectories/busy/events", finish, headers=ADMIN)
        assert status == 409 and doc["error"]["type"] == "conflict_error", doc
        assert first.result()[0] == 200
        assert post(gw.port, "/remove_worker?url=" + engine.url, headers=ADMIN)[0] == 200
        status, doc = post(gw.port, "/generate", {"input_ids": [1, 2]})
        assert status == 503 and doc["error"]["type"] == "server_error", doc
        assert errors(gw.port)["no_engine"] == 1
    engine.shutdown()
