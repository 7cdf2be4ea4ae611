"""What `libra serve` reads of a request, and what it refuses rather than ignores (docs/serve.md
"What it reads, and what it forwards", "Events", "Worker calls"): a member it reads given twice,
libra's `sample` and `emu` (the script reaches an emulated engine behind the gateway), query
parameters of the worker routes, a body sent to an engine action, a finish's status. Each test
guards a defect: the input was accepted and did something else than it said."""

import json

import test_serve_control as control
from emu_util import ADMIN, Emu, ScriptedVllm, Serve, answer, get, post, request

BUCKETS = ["--set", "sched.buckets=tp1:40960"]
COMPLETION = json.dumps({"choices": [{"text": "ok", "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


def vllm():
    """A scripted vLLM that records what it is sent and answers one token."""
    return ScriptedVllm(lambda h, path, body: answer(h, COMPLETION))


def message(doc):
    return doc["error"]["message"]


def test_a_member_the_gateway_reads_given_twice_is_refused():
    """A member the gateway reads given twice is refused with 400 naming it: the scanner read
    the first where the engine's JSON library reads the last, so the gateway tracked DUP1 while
    the engine got DUP2's script, or took a turn as not streamed that the engine streamed."""
    engine = vllm()
    with Serve(engine.url + ",tp=1") as gw:
        head = '{"prompt": [1], "max_tokens": 4, '
        for rest, member in (
                ('"libra": {"trajectory": "DUP1"}, "libra": {"trajectory": "DUP2"}}', "libra"),
                ('"stream": false, "stream": true}', "stream"),
                ('"trajectory_id": "a", "trajectory_id": "b"}', "trajectory_id"),
                ('"program_id": "a", "program_id": "b"}', "program_id"),
                ('"max_tokens": 9}', "max_tokens"),
                ('"prompt": [2]}', "prompt")):
            status, doc = post(gw.port, "/v1/completions", raw=head + rest)
            assert (status, message(doc)) == (400, member + ": given twice"), doc
        body = ('{"input_ids": [1], "sampling_params": {"max_new_tokens": 2, '
                '"max_new_tokens": 50}}')
        status, doc = post(gw.port, "/generate", raw=body)
        assert (status, message(doc)) == (400, "sampling_params.max_new_tokens: given twice")
        assert engine.bodies == []  # none reached the engine
        # a member the gateway does not read passes as sent: the engine judges it
        body = '{"prompt": [1], "max_tokens": 4, "seed": 1, "seed": 2}'
        assert post(gw.port, "/v1/completions", raw=body)[0] == 200
        assert engine.bodies[-1][1] == body.encode()
    engine.shutdown()


def test_libras_emu_script_reaches_an_emulated_engine_behind_the_gateway():
    """`libra.emu` is the script of an emulated engine (docs/emu.md): the gateway cut libra's
    object whole, so the engine behind it generated its cap (64) instead of the 7 tokens
    scripted. A libra object with `emu` now goes on whole; one without is cut as before."""
    with Emu("--instances", "tp1") as emu, \
            Serve(emu.instances[0]["url"], args=BUCKETS) as gw:
        body = {"input_ids": list(range(1, 17)), "sampling_params": {"max_new_tokens": 64},
                "libra": {"trajectory": "E1", "sample": 0, "emu": {"gen_tokens": 7}}}
        status, doc = post(gw.port, "/generate", body)
        assert status == 200 and doc["meta_info"]["completion_tokens"] == 7, doc
        # the emulator's own check of the script answers through the gateway
        body["libra"]["emu"] = {"gen_tokens": 0}
        status, doc = post(gw.port, "/generate", body)
        assert status == 400 and "libra.emu.gen_tokens" in message(doc), doc
    engine = vllm()
    with Serve(engine.url + ",tp=1") as gw:
        for libra, sent in (({"trajectory": "c1"}, None),
                            ({"trajectory": "c2", "emu": None}, None),
                            ({"trajectory": "c3", "emu": {"gen_tokens": 3}},
                             {"trajectory": "c3", "emu": {"gen_tokens": 3}})):
            body = {"prompt": [1, 2], "max_tokens": 4, "libra": libra}
            assert post(gw.port, "/v1/completions", body)[0] == 200
            assert json.loads(engine.bodies[-1][1]).get("libra") == sent
    engine.shutdown()


def test_libras_sample_and_emu_are_type_checked():
    """`sample` is a string or an integer and `emu` an object (docs/emu.md), as the emulator
    checks them: the gateway let any value through, and a wrong one reached no engine that
    would say so (the object was cut)."""
    engine = vllm()
    with Serve(engine.url + ",tp=1") as gw:
        for libra, msg in (({"sample": [1]}, "libra.sample: expected a string or an integer"),
                           ({"sample": 1.5}, "libra.sample: expected a string or an integer"),
                           ({"emu": 7}, "libra.emu: expected an object"),
                           ({"emu": [1]}, "libra.emu: expected an object")):
            body = {"prompt": [1], "max_tokens": 4, "libra": {"trajectory": "s", **libra}}
            status, doc = post(gw.port, "/v1/completions", body)
            assert (status, message(doc)) == (400, msg), doc
        assert engine.bodies == []
        for sample in ("g3-1", 2, None):
            body = {"prompt": [1], "max_tokens": 4, "libra": {"trajectory": "s", "sample": sample}}
            assert post(gw.port, "/v1/completions", body)[0] == 200
    engine.shutdown()


def test_a_resumed_turn_carries_the_rest_of_its_emu_script():
    """A turn that opted in to abort-and-resume and carries an emu script is sent again with
    the script lowered by the tokens generated before the abort, as its cap is: the engine
    would otherwise generate up to the whole script again."""
    sent = []

    def reply(path, body):
        sent.append(json.loads(body))
        done = len(sent) > 1
        meta = {"finish_reason": {"type": "stop" if done else "abort"},
                "completion_tokens": 7 if done else 3, "weight_version": "old"}
        return 200, {"text": "x", "output_ids": [5] * (7 if done else 3), "meta_info": meta}

    info = {"tp_size": 1, "weight_version": "old", "version": "0.5.4", "model_path": "m"}
    engine = control.Scripted({"/get_server_info": (200, info), "/health": (200, {}),
                               "/get_weight_version": (200, {"weight_version": "old"})}, reply)
    with Serve(engine.url, args=BUCKETS) as gw:
        body = {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 20},
                "libra": {"trajectory": "r", "resume": True, "emu": {"gen_tokens": 10}}}
        status, doc = post(gw.port, "/generate", body)
        assert status == 200 and doc["meta_info"]["completion_tokens"] == 10, doc
    first, again = sent
    assert first["libra"]["emu"] == {"gen_tokens": 10}
    assert again["input_ids"] == [1, 2, 5, 5, 5]
    assert again["sampling_params"] == {"max_new_tokens": 17}
    assert again["libra"] == {"trajectory": "r", "resume": True, "emu": {"gen_tokens": 7}}
    engine.shutdown()


def test_worker_routes_refuse_query_parameters_they_do_not_read():
    """POST /workers, DELETE /workers/{id} and GET /workers[/{id}] read no query parameter: one
    sent (SGLang's api_key, a force flag) was ignored, as /list_workers refuses it."""
    engine = vllm()
    with Serve(engine.url + ",tp=1") as gw:
        for method, path, body in (
                ("POST", "/workers?api_key=secret&priority=5", {"url": engine.url, "tp": 1}),
                ("DELETE", "/workers/0?force=1", None),
                ("GET", "/workers?x=1", None),
                ("GET", "/workers/0?x=1", None)):
            status, doc = request(gw.port, method, path, body, headers=ADMIN)
            assert status == 400 and "takes no query parameter" in message(doc), (path, doc)
        status, doc = get(gw.port, "/workers")
        assert status == 200 and [w["id"] for w in doc["workers"]] == [0], doc
    engine.shutdown()


def test_engine_actions_refuse_a_body():
    """POST /libra/v1/engines/{id}/drain|lend|reclaim take no body: one sent was ignored and
    the engine lent. It is refused with 400 after the admin check, and nothing changes."""
    engine = vllm()
    with Serve(engine.url + ",tp=1") as gw:
        for action in ("drain", "lend", "reclaim"):
            path = "/libra/v1/engines/0/" + action
            assert post(gw.port, path, {"x": 1})[0] == 401  # no token: the admin check first
            status, doc = post(gw.port, path, {"x": 1}, headers=ADMIN)
            assert status == 400 and message(doc).startswith("body: "), doc
        assert get(gw.port, "/libra/v1/engines")[1]["engines"][0]["state"] == "active"
        status, doc = post(gw.port, "/libra/v1/engines/0/lend", raw="", headers=ADMIN)
        assert status == 200 and doc["state"] == "lent", doc
    engine.shutdown()


def test_a_finishs_status_null_counts_as_absent(tmp_path):
    """A finish's status left out is `completed` (docs/serve.md "Events"); `null` counts as
    absent, as it does for a tool return's members, where it was refused."""
    capture = tmp_path / "capture.jsonl"
    engine = vllm()
    with Serve(engine.url + ",tp=1", args=("--capture", str(capture))) as gw:
        for tid, finish in (("f1", {"kind": "finish", "status": None}),
                            ("f2", {"kind": "finish"}),
                            ("f3", {"kind": "finish", "status": "truncated"})):
            body = {"prompt": [1], "max_tokens": 4, "libra": {"trajectory": tid}}
            assert post(gw.port, "/v1/completions", body)[0] == 200
            path = "/libra/v1/trajectories/%s/events" % tid
            assert post(gw.port, path, {"events": [finish]}) == (
                200, {"trajectory": tid, "events": 1})
        status, doc = post(gw.port, "/libra/v1/trajectories/x/events",
                           {"kind": "finish", "status": 3})
        assert status == 400 and message(doc).startswith("event.status: expected completed")
    records = [json.loads(line) for line in capture.read_text().splitlines()[1:]]
    assert [r["finish"] for r in records] == ["completed", "completed", "truncated"]
    engine.shutdown()
