"""End-to-end tests of `libra emu` (docs/emu.md): real processes on loopback, ports chosen by the
OS. The emulator runs 100x faster than real time (--time-scale 0.01): a TP1 Qwen3-14B decode
step of about 21 ms takes about 0.2 ms, so LONG tokens take about 4 s of wall time and are still
running a moment after they start.
"""

import json
import socket
import time

import pytest

from emu_util import (BAD_BYTES_REQUESTS, Background, Emu, generate, get, post, raw_request,
                      running, stream)

PROMPT = list(range(100, 140))  # 40 tokens: two whole blocks of 16 and a partial one
LONG = 20000


def test_ready_lines_name_every_instance_and_its_tp():
    with Emu("--instances", "tp1x2,tp2,tp4") as emu:
        assert [i["tp"] for i in emu.instances] == [1, 1, 2, 4]
        assert len({i["port"] for i in emu.instances}) == 4
        for inst in emu.instances:
            assert inst["url"] == "http://127.0.0.1:%d" % inst["port"]
            assert get(inst["port"], "/health")[0] == 200
            status, info = get(inst["port"], "/get_server_info")
            assert status == 200 and info["tp_size"] == inst["tp"]
            assert info["model_path"] == "qwen3-14b" and info["weight_version"] == "default"


def test_errors_that_quote_bytes_not_utf8_are_json_and_the_engine_lives_on():
    with Emu() as emu:
        for data in BAD_BYTES_REQUESTS + [b"DELETE /health%c3 HTTP/1.1\r\n\r\n"]:
            status, doc = raw_request(emu.port(), data)
            assert 400 <= status < 500 and doc["error"]["message"], doc
            assert get(emu.port(), "/health")[0] == 200


def test_sglang_generate_answers_as_sglang_does():
    with Emu() as emu:
        status, out = generate(emu.port(), PROMPT, 5, cap=8, return_logprob=True, rid="r1")
        assert status == 200
        meta = out["meta_info"]
        assert meta["id"] == "r1" and meta["prompt_tokens"] == 40
        assert meta["completion_tokens"] == 5 == len(out["output_ids"])
        assert meta["finish_reason"]["type"] == "stop"  # the script ended before the cap
        assert [lp[1] for lp in meta["output_token_logprobs"]] == out["output_ids"]
        assert all(-3 <= lp[0] <= 0 for lp in meta["output_token_logprobs"])
        assert len(out["text"]) == 4 * 5
        _, capped = generate(emu.port(), PROMPT, 50, cap=8, rid="r1")
        assert capped["meta_info"]["finish_reason"] == {"type": "length", "length": 8}
        assert capped["output_ids"][:5] == out["output_ids"]  # deterministic per request
        _, plain = post(emu.port(), "/generate", {"text": "hello world"})
        assert plain["meta_info"]["completion_tokens"] == 128  # SGLang's default cap


def test_vllm_endpoints_answer_as_vllm_does():
    with Emu() as emu:
        p = emu.port()
        status, out = post(p, "/v1/completions",
                           {"model": "qwen3-14b", "prompt": PROMPT, "max_tokens": 6,
                            "return_token_ids": True, "logprobs": 1})
        assert status == 200 and out["object"] == "text_completion"
        choice = out["choices"][0]
        assert choice["finish_reason"] == "length" and len(choice["token_ids"]) == 6
        assert choice["prompt_token_ids"] == PROMPT
        assert len(choice["logprobs"]["token_logprobs"]) == 6
        assert out["usage"] == {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46,
                                "prompt_tokens_details": {"cached_tokens": 0}}
        _, chat = post(p, "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        assert chat["object"] == "chat.completion"
        assert chat["choices"][0]["message"]["role"] == "assistant"
        _, gen = post(p, "/inference/v1/generate",
                      {"token_ids": PROMPT, "sampling_params": {"max_tokens": 4}})
        assert len(gen["choices"][0]["token_ids"]) == 4
        status, err = post(p, "/v1/completions", {"model": "other", "prompt": "x"})
        assert status == 404 and err["error"]["type"] == "not_found_error"
        _, models = get(p, "/v1/models")
        assert models["data"][0]["id"] == "qwen3-14b"


def test_streams_end_with_done():
    with Emu() as emu:
        status, text = post(emu.port(), "/generate",
                            {"input_ids": PROMPT, "stream": True,
                             "sampling_params": {"max_new_tokens": 300}})
        events = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
        assert status == 200 and events[-1] == "[DONE]"
        import json
        chunks = [json.loads(e) for e in events[:-1]]
        assert len(chunks[-1]["output_ids"]) == 300  # SGLang: every chunk is cumulative
        assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"
        status, text = post(emu.port(), "/v1/completions",
                            {"prompt": "abc", "max_tokens": 300, "stream": True})
        events = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
        deltas = [json.loads(e)["choices"][0]["text"] for e in events[:-1]]
        assert events[-1] == "[DONE]" and len("".join(deltas)) == 4 * 300  # vLLM: deltas


def test_prefix_cache_by_token_content():
    with Emu() as emu:
        p = emu.port()
        _, first = generate(p, PROMPT, 30)
        # The next turn of the same trajectory: the whole context plus a tool's output.
        turn2 = PROMPT + first["output_ids"] + list(range(500, 520))
        _, second = generate(p, turn2, 10)
        assert second["meta_info"]["cached_tokens"] == (40 + 30) // 16 * 16
        # A GRPO sibling shares only the prompt.
        _, sibling = generate(p, PROMPT, 10, rid="sibling")
        assert sibling["meta_info"]["cached_tokens"] == 40 // 16 * 16
        # After a flush nothing is cached.
        assert post(p, "/flush_cache")[0] == 200
        _, again = generate(p, turn2, 10)
        assert again["meta_info"]["cached_tokens"] == 0


def _cached(out):
    """cached_tokens of an answer of either engine."""
    if "meta_info" in out:
        return out["meta_info"]["cached_tokens"]
    return out["usage"]["prompt_tokens_details"]["cached_tokens"]


def _prompt_tokens(out):
    return out["meta_info"]["prompt_tokens"] if "meta_info" in out else \
        out["usage"]["prompt_tokens"]


def _turn_hit(context):
    """What a next turn hits of a previous context of that many tokens: its whole blocks of 16
    ids, as far as the KV goes (the last generated token's was never written)."""
    return min(context // 16 * 16, context - 1)


def _answer_text(out):
    if "text" in out:
        return out["text"]
    choice = out["choices"][0]
    return choice["message"]["content"] if "message" in choice else choice["text"]


@pytest.mark.parametrize("path,member", [("/v1/completions", "prompt"), ("/generate", "text")])
def test_an_append_only_text_client_hits_its_whole_previous_turn(path, member):
    """The answer's text, four letters a token, tokenizes back to the answer's ids: a prompt of
    whole tokens plus the answer plus more hits the whole previous turn (docs/emu.md)."""
    p1 = "the quick brown fox jumps over the lazy dog.\n" * 8 + "abcd"  # 364 bytes
    p1 += "0123" * ((384 - len(p1)) // 4)
    assert len(p1) == 384
    cap = {"max_tokens": 64} if member == "prompt" else {"sampling_params": {"max_new_tokens": 64}}
    with Emu() as emu:
        p = emu.port()
        status, first = post(p, path, {member: p1, **cap})
        assert status == 200 and _prompt_tokens(first) == 96, first
        answer = _answer_text(first)
        assert len(answer) == 4 * 64
        status, second = post(p, path, {member: p1 + answer + "q" * 100, **cap})
        assert status == 200 and _prompt_tokens(second) == 96 + 64 + 25, second
        assert _cached(second) == _turn_hit(96 + 64) == 159, second


def test_an_append_only_chat_client_hits_its_whole_previous_turn():
    """Each message's role and content are whole tokens and the prompt ends with the answer's
    role, so the next turn's prompt holds the previous context token for token."""
    with Emu() as emu:
        p = emu.port()
        turn = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "fix the failing test, then run the suite"}]
        for _ in range(3):
            status, out = post(p, "/v1/chat/completions", {"messages": turn, "max_tokens": 40})
            assert status == 200, out
            context = out["usage"]["prompt_tokens"] + 40
            turn = turn + [{"role": "assistant", "content": _answer_text(out)},
                           {"role": "user", "content": "q" * 99}]
            status, nxt = post(p, "/v1/chat/completions", {"messages": turn, "max_tokens": 1})
            assert status == 200 and nxt["usage"]["prompt_tokens"] > context, nxt
            assert _cached(nxt) == _turn_hit(context), (context, nxt)


def test_a_null_max_completion_tokens_leaves_max_tokens():
    """null in the place of an optional member is ignored: max_tokens still caps the turn."""
    msgs = [{"role": "user", "content": "hi"}]
    with Emu() as emu:
        for extra in ({}, {"max_completion_tokens": None}):
            status, out = post(emu.port(), "/v1/chat/completions",
                               {"messages": msgs, "max_tokens": 3, **extra,
                                "libra": {"emu": {"gen_tokens": 5}}})
            assert status == 200, out
            assert out["usage"]["completion_tokens"] == 3, (extra, out)
            assert out["choices"][0]["finish_reason"] == "length"
        status, out = post(emu.port(), "/v1/chat/completions",
                           {"messages": msgs, "max_tokens": 3, "max_completion_tokens": 4})
        assert status == 200 and out["usage"]["completion_tokens"] == 4, out  # vLLM's order


CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
COMPLETION = {"prompt": [1, 2, 3], "max_tokens": 2}


@pytest.mark.parametrize("base,extra,member", [
    (COMPLETION, {"logprobs": "yes"}, "logprobs"),
    (COMPLETION, {"logprobs": True}, "logprobs"),
    (COMPLETION, {"logprobs": 1.5}, "logprobs"),
    (COMPLETION, {"logprobs": -1}, "logprobs"),
    (CHAT, {"logprobs": "yes"}, "logprobs"),
    (CHAT, {"logprobs": 1}, "logprobs"),
    (CHAT, {"logprobs": True, "top_logprobs": "3"}, "top_logprobs"),
    (CHAT, {"logprobs": True, "top_logprobs": -2}, "top_logprobs"),
    (CHAT, {"top_logprobs": 2}, "top_logprobs"),
    (CHAT, {"logprobs": False, "top_logprobs": -1}, "top_logprobs"),
])
def test_logprobs_of_another_type_or_range_are_refused_naming_the_member(base, extra, member):
    """As vLLM's request classes type them: completions' logprobs an integer >= 0, chat's a
    boolean with top_logprobs an integer >= -1 that, unless 0, wants logprobs true."""
    path = "/v1/chat/completions" if "messages" in base else "/v1/completions"
    with Emu() as emu:
        status, out = post(emu.port(), path, {**base, **extra})
        assert status == 400 and out["error"]["message"].startswith(member + ":"), out


@pytest.mark.parametrize("base,extra,returned", [
    (COMPLETION, {"logprobs": None}, False),
    (COMPLETION, {"logprobs": 0}, True),
    (COMPLETION, {"logprobs": 5}, True),
    (CHAT, {"logprobs": None, "top_logprobs": None}, None),
    (CHAT, {"logprobs": False, "top_logprobs": 0}, None),
    (CHAT, {"logprobs": True, "top_logprobs": -1}, None),
    (CHAT, {"logprobs": True, "top_logprobs": 3}, None),
])
def test_wellformed_logprobs_are_taken(base, extra, returned):
    path = "/v1/chat/completions" if "messages" in base else "/v1/completions"
    with Emu() as emu:
        status, out = post(emu.port(), path, {**base, **extra})
        assert status == 200, out
        if returned is not None:
            assert (out["choices"][0]["logprobs"] is not None) == returned, out


@pytest.mark.parametrize("path,body", [
    ("/generate", {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 8}}),
    ("/generate", {"text": "hello world", "sampling_params": {"max_new_tokens": 8}}),
    ("/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "return_token_ids": True}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                              "max_tokens": 8}),
    ("/inference/v1/generate", {"token_ids": PROMPT, "sampling_params": {"max_tokens": 8}}),
])
def test_equal_requests_without_an_id_are_different_samples(path, body):
    """Output ids are keyed by the request id the emulator answers with: two requests without
    one get two ids and so two samples, as a real engine samples twice."""
    def ids(out):
        if "output_ids" in out:
            return out["output_ids"]
        choice = out["choices"][0]
        return choice.get("token_ids") or choice["message"]["content"]

    with Emu() as emu:
        p = emu.port()
        outs = [post(p, path, body) for _ in range(2)]
        assert all(status == 200 for status, _ in outs), outs
        assert ids(outs[0][1]) != ids(outs[1][1]), outs
        rid = {"rid": "r-7"} if path == "/generate" else {"request_id": "r-7"}
        same = [post(p, path, {**body, **rid})[1] for _ in range(2)]
        assert ids(same[0]) == ids(same[1]), same  # the client's own id: the same sample


@pytest.mark.parametrize("path,body,member", [
    ("/generate", {"text": ""}, "text"),
    ("/generate", {"input_ids": []}, "input_ids"),
    ("/v1/completions", {"prompt": ""}, "prompt"),
    ("/v1/completions", {"prompt": []}, "prompt"),
    ("/inference/v1/generate", {"token_ids": []}, "token_ids"),
])
def test_an_empty_prompt_is_refused_naming_the_member(path, body, member):
    """A prompt of no tokens is refused, text or ids alike (vLLM: the prompt cannot be empty;
    the emulated model has no BOS token to make one of empty text)."""
    with Emu() as emu:
        status, out = post(emu.port(), path, body)
        assert status == 400 and out["error"]["message"].startswith(member + ":"), out


def test_abort_returns_partial_tokens():
    with Emu() as emu:
        p = emu.port()
        bg = Background(generate, p, PROMPT, LONG, rid="traj-7-turn-1")
        time.sleep(0.5)
        assert post(p, "/abort_request", {"rid": "traj-7"}) == (200, None)  # prefix match
        status, out = bg.result()
        meta = out["meta_info"]
        assert status == 200 and meta["finish_reason"]["type"] == "abort"
        assert 0 < meta["completion_tokens"] < LONG
        assert len(out["output_ids"]) == meta["completion_tokens"]


def test_pause_abort_holds_new_requests_until_continue():
    with Emu() as emu:
        p = emu.port()
        bg = Background(generate, p, PROMPT, LONG)
        time.sleep(0.3)
        assert post(p, "/pause_generation", {"mode": "abort"})[1]["status"] == "ok"
        assert bg.result()[1]["meta_info"]["finish_reason"]["type"] == "abort"
        waiting = Background(generate, p, PROMPT, 10)
        time.sleep(0.3)
        assert waiting.thread.is_alive() and running(p) == (0, 1)
        post(p, "/continue_generation", {})
        assert waiting.result()[1]["meta_info"]["completion_tokens"] == 10


def test_pause_retract_recomputes_and_finishes_the_request():
    with Emu() as emu:
        p = emu.port()
        bg = Background(generate, p, PROMPT, 3000)
        time.sleep(0.2)
        post(p, "/pause_generation", {"mode": "retract"})
        time.sleep(0.2)
        assert bg.thread.is_alive() and running(p) == (0, 1)
        post(p, "/continue_generation")
        status, out = bg.result()
        assert status == 200 and out["meta_info"]["completion_tokens"] == 3000
        assert out["meta_info"]["finish_reason"]["type"] == "length"  # gen == its cap


def test_pause_in_place_freezes_and_keeps_the_batch():
    with Emu() as emu:
        p = emu.port()
        bg = Background(generate, p, PROMPT, 3000)
        time.sleep(0.2)
        post(p, "/pause_generation", {"mode": "in_place"})
        time.sleep(0.8)  # longer than the request would take
        assert bg.thread.is_alive() and running(p) == (1, 0)
        post(p, "/continue_generation")
        assert bg.result()[1]["meta_info"]["completion_tokens"] == 3000


def test_weight_update_waits_for_the_drain_then_sets_the_version():
    with Emu() as emu:
        p = emu.port()
        bg = Background(generate, p, PROMPT, 2000)
        time.sleep(0.1)
        status, out = post(p, "/update_weights_from_disk",
                           {"model_path": "/ckpt/step-5", "weight_version": "5"})
        assert status == 200 and out["success"] is True
        first = bg.result()[1]["meta_info"]
        assert first["completion_tokens"] == 2000 and first["weight_version"] == "default"
        assert generate(p, PROMPT, 2)[1]["meta_info"]["weight_version"] == "5"
        # abort_all_requests cuts what runs; unknown members are ignored (AReaL's typo).
        bg = Background(generate, p, PROMPT, LONG)
        time.sleep(0.2)
        status, out = post(p, "/update_weights_from_disk",
                           {"model_path": "x", "weight_version": "6",
                            "abort_all_requests": True, "abort_all_request": True})
        assert status == 200
        assert bg.result()[1]["meta_info"]["finish_reason"]["type"] == "abort"
        assert post(p, "/update_weights_from_disk", {})[0] == 400  # model_path is required


def test_distributed_update_and_memory_release():
    with Emu() as emu:
        p = emu.port()
        status, out = post(p, "/init_weights_update_group",
                           {"master_address": "127.0.0.1", "master_port": 29500,
                            "rank_offset": 1, "world_size": 2})
        assert status == 200 and out["success"]
        status, out = post(p, "/update_weights_from_distributed",
                           {"names": ["w"], "dtypes": ["bfloat16"], "shapes": [[1]],
                            "weight_version": "9"})
        assert status == 200 and get(p, "/get_weight_version")[1] == {"weight_version": "9"}
        bg = Background(generate, p, PROMPT, LONG)
        time.sleep(0.2)
        assert post(p, "/release_memory_occupation", {})[0] == 400  # not idle
        post(p, "/abort_request", {"abort_all": True})
        bg.result()
        assert post(p, "/release_memory_occupation", {}) == (200, None)
        held = Background(generate, p, PROMPT, 5)
        time.sleep(0.2)
        assert held.thread.is_alive()
        assert get(p, "/health")[0] == 200  # released is not dead
        assert post(p, "/resume_memory_occupation", {}) == (200, None)
        assert held.result()[1]["meta_info"]["completion_tokens"] == 5


GROUP = {"master_address": "127.0.0.1", "master_port": 29500, "rank_offset": 1, "world_size": 2}
BROADCAST = {"names": ["w"], "dtypes": ["bfloat16"], "shapes": [[1]], "weight_version": "9"}


def test_a_broadcast_needs_its_group_set_up_first():
    """SGLang receives the broadcast on the process group init_weights_update_group made under
    group_name (default "weight_update_group"); without it the update fails with 400 and
    success false, and nothing changes. A set-up needs a name."""
    with Emu() as emu:
        p = emu.port()
        status, out = post(p, "/update_weights_from_distributed", BROADCAST)
        assert status == 400 and out["success"] is False
        assert "'weight_update_group'" in out["message"], out
        assert post(p, "/init_weights_update_group", dict(GROUP, group_name=""))[0] == 400
        assert post(p, "/init_weights_update_group", dict(GROUP, group_name="g"))[0] == 200
        status, out = post(p, "/update_weights_from_distributed", BROADCAST)
        assert status == 400 and "'weight_update_group'" in out["message"]
        assert get(p, "/get_weight_version")[1] == {"weight_version": "default"}
        status, out = post(p, "/update_weights_from_distributed", dict(BROADCAST, group_name="g"))
        assert status == 200 and out["success"] is True
        assert get(p, "/get_weight_version")[1] == {"weight_version": "9"}


def test_vllm_development_endpoints_need_dev_mode():
    with Emu() as emu:
        assert post(emu.port(), "/pause")[0] == 404
        assert post(emu.port(), "/sleep")[0] == 404
    with Emu("--dev-mode") as emu:
        p = emu.port()
        bg = Background(post, p, "/v1/completions",
                        {"prompt": PROMPT, "max_tokens": 2000})
        time.sleep(0.1)
        status, out = post(p, "/pause?mode=wait")  # answers once the request drained
        assert status == 200 and out == {"status": "paused"}
        assert bg.result()[1]["choices"][0]["finish_reason"] == "length"
        assert get(p, "/is_paused")[1] == {"is_paused": True}
        assert post(p, "/resume")[1] == {"status": "resumed"}
        bg = Background(post, p, "/v1/completions", {"prompt": PROMPT, "max_tokens": LONG})
        time.sleep(0.2)
        post(p, "/pause?mode=abort")
        assert bg.result()[1]["choices"][0]["finish_reason"] == "abort"
        post(p, "/resume")
        assert post(p, "/sleep?level=1")[0] == 200
        assert get(p, "/is_sleeping")[1] == {"is_sleeping": True}
        assert post(p, "/wake_up")[0] == 200
        assert post(p, "/update_weights", {"update_info": {}})[1] == {"message": "Weights updated"}
        assert post(p, "/pause?mode=sideways")[0] == 400
        for query, member in (("level=3", "level"), ("level=1&mode=wait", "mode")):
            status, body = post(p, f"/sleep?{query}")  # emu.md: the message opens with it
            assert status == 400 and body["error"]["message"].startswith(f"{member}: "), body


@pytest.mark.parametrize("value,clears", [
    ("true", True), ("True", True), ("1", True), ("yes", True), ("TRUE", True), ("On", True),
    ("t", True), ("y", True), ("false", False), ("0", False), ("no", False), ("OFF", False),
    ("f", False), ("N", False), ("maybe", None), ("", None), ("2", None), ("tru", None),
    ("yes ", None), ("truee", None),
])
def test_pause_clear_cache_is_a_strict_boolean(value, clears):
    """clear_cache parses as vLLM's FastAPI bool (pydantic's words, any case); any other value
    is a 400 naming it, and the engine is left as it was (not paused, cache kept)."""
    with Emu("--dev-mode") as emu:
        p = emu.port()
        assert generate(p, PROMPT, 3)[0] == 200
        status, out = post(p, "/pause?mode=abort&clear_cache=" + value.replace(" ", "%20"))
        if clears is None:
            assert status == 400, out
            assert out["error"]["message"] == "clear_cache: expected true or false", out
            assert get(p, "/is_paused")[1] == {"is_paused": False}
        else:
            assert status == 200 and post(p, "/resume")[0] == 200, out
        _, again = generate(p, PROMPT, 3, rid="again")
        assert again["meta_info"]["cached_tokens"] == (0 if clears else 32), again


MALFORMED = [
    b'{"input_ids": [1, 2', b'{"input_ids": "abc"}', b'{"input_ids": []}',
    b'{"input_ids": [1.5]}', b'{"input_ids": [-1]}', b'{"input_ids": [99999999999]}',
    b'{"input_ids": [1], "text": "x"}', b'{}', b'[]', b'null', b'"str"', b'12',
    b'{"input_ids": [1], "sampling_params": 3}',
    b'{"input_ids": [1], "sampling_params": {"max_new_tokens": -4}}',
    b'{"input_ids": [1], "sampling_params": {"max_new_tokens": 1e400}}',
    b'{"input_ids": [1], "sampling_params": {"max_new_tokens": 99999999999999999999}}',
    b'{"input_ids": [1], "rid": {}}', b'{"input_ids": [1], "stream": "yes"}',
    b'{"input_ids": [1], "libra": []}', b'{"input_ids": [1], "libra": {"emu": {"gen_tokens": 0}}}',
    b'{"input_ids": [1], "libra": {"events": 5}}', b'\x00\x01\x02\xff\xfe',
    b'{"input_ids": [1], "input_ids": [2]}', b'{"text": "' + b'\xff' * 10 + b'"}',
    b'{"input_ids": [1], "sampling_params": {"max_new_tokens": 999999999}}',
    b'\xef\xbb\xbf{"input_ids": [1]}', b'{"input_ids": [[1, 2], [3]]}', b'{' * 5000,
    b'{"input_ids": [1]} trailing', b'{"text": null, "input_ids": null}',
]


def test_malformed_requests_get_4xx_and_the_server_keeps_serving():
    assert len(MALFORMED) == 30
    with Emu() as emu:
        p = emu.port()
        for body in MALFORMED:
            status, out = post(p, "/generate", raw=body)
            assert 400 <= status < 500, (body, status, out)
            assert "message" in out["error"], body
        assert post(p, "/v1/completions", raw=b'{"prompt": 5}')[0] == 400
        assert post(p, "/pause_generation", raw=b'not json')[0] == 400
        assert get(p, "/is_paused?x=%zz")[0] == 400  # a malformed query
        assert generate(p, PROMPT, 3)[0] == 200


@pytest.mark.parametrize("path,body,field", [
    ("/v1/completions", {"prompt": ["ab", "cd"], "max_tokens": 3}, "prompt"),
    ("/v1/completions", {"prompt": [[1], [2]], "max_tokens": 3}, "prompt"),
    ("/generate", {"text": ["ab", "cd"]}, "text"),
    ("/generate", {"input_ids": [[1], [2]]}, "input_ids"),
])
def test_a_batch_of_prompts_is_refused_as_a_batch(path, body, field):
    """A list of prompts gets a 400 that names the field and says batches are not emulated,
    not one about its first element as a token id."""
    with Emu() as emu:
        status, out = post(emu.port(), path, body)
        msg = out["error"]["message"]
        assert status == 400 and msg.startswith(field + ": a batch of prompts"), msg


SAMPLES = [
    ("/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 3}, "n"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
     "n"),
]


@pytest.mark.parametrize("path,body,member", SAMPLES + [
    ("/generate", {"input_ids": [1, 2, 3], "sampling_params": {}}, "sampling_params.n"),
    ("/inference/v1/generate", {"token_ids": [1, 2, 3], "sampling_params": {}},
     "sampling_params.n"),
])
@pytest.mark.parametrize("n,says", [
    (2, "more than one sample"), (3, "more than one sample"), (0, "expected an integer"),
    ("2", "expected an integer"), (1.0, "expected an integer"), (True, "expected an integer"),
])
def test_more_than_one_sample_is_refused_as_batches_are(path, body, member, n, says):
    """n other than 1 changes the answer's shape (n choices) as a batch does: refused with a 400
    naming the member, not answered with one sample."""
    body = json.loads(json.dumps(body))
    (body["sampling_params"] if "sampling_params" in body else body)["n"] = n
    with Emu() as emu:
        status, out = post(emu.port(), path, body)
        msg = out["error"]["message"]
        assert status == 400 and msg.startswith(member + ": ") and says in msg, msg


@pytest.mark.parametrize("path,body,member", SAMPLES)
@pytest.mark.parametrize("n", [None, 1])
def test_one_sample_is_taken(path, body, member, n):
    with Emu() as emu:
        status, out = post(emu.port(), path, {**body, member: n})
        assert status == 200 and len(out["choices"]) == 1, out


@pytest.mark.parametrize("path,body", [s[:2] for s in SAMPLES])
@pytest.mark.parametrize("options,member", [
    (5, "stream_options"), ("x", "stream_options"), ([], "stream_options"),
    ({"include_usage": "yes"}, "stream_options.include_usage"),
    ({"continuous_usage_stats": 1}, "stream_options.continuous_usage_stats"),
    ({"continuous_usage_stats": True}, "stream_options.continuous_usage_stats"),
])
def test_stream_options_of_another_type_are_refused_naming_the_member(path, body, member,
                                                                       options):
    with Emu() as emu:
        status, out = post(emu.port(), path, {**body, "stream": True,
                                              "stream_options": options})
        msg = out["error"]["message"]
        assert status == 400 and msg.startswith(member + ": "), msg


@pytest.mark.parametrize("path,body", [s[:2] for s in SAMPLES])
@pytest.mark.parametrize("options,usage", [
    (None, False), ({}, False), ({"include_usage": False}, False),
    ({"include_usage": True}, True), ({"include_usage": True, "continuous_usage_stats": False},
                                      True),
])
def test_include_usage_ends_a_stream_with_a_usage_chunk(path, body, options, usage):
    """As vLLM and OpenAI: with include_usage true, one last chunk before [DONE] has no choices
    and the usage; the chunks before it have none."""
    with Emu() as emu:
        status, events, whole = stream(emu.port(), path, {**body, "max_tokens": 3, "stream": True,
                                                          "stream_options": options})
        assert status == 200 and whole and events[-1] == "[DONE]", events
        chunks = [json.loads(e) for e in events[:-1]]
        assert all("usage" not in c for c in chunks[:-1]), chunks
        assert ("usage" in chunks[-1]) == usage, chunks
        if usage:
            assert chunks[-1]["choices"] == [] and chunks[-2]["choices"][0]["finish_reason"]
            assert chunks[-1]["usage"]["completion_tokens"] == 3, chunks[-1]
            assert chunks[-1]["object"] == chunks[0]["object"]


def test_body_limit_is_64_mib():
    with Emu() as emu:
        p = emu.port()
        head = b'{"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 2}, "pad": "'
        tail = b'"}'
        limit = 64 << 20
        body = head + b"x" * (limit - len(head) - len(tail)) + tail
        assert len(body) == limit
        assert post(p, "/generate", raw=body)[0] == 200
        # One byte more is refused from its Content-Length, before the body is read.
        conn = socket.create_connection(("127.0.0.1", p))
        conn.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                     % (limit + 1))
        assert conn.recv(4096).startswith(b"HTTP/1.1 413")
        conn.close()
        assert get(p, "/health")[0] == 200


def test_a_head_over_its_limit_is_a_400_whatever_the_body_limit():
    """A head over 64 KiB is refused as a head (400), not as a body (413), when
    --max-body-bytes is small: the bytes read were checked against a bound of the two limits
    before the head was parsed."""
    with Emu("--max-body-bytes", "1000") as emu:
        p = emu.port()
        big = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n"
        status, out = raw_request(p, big)
        assert status == 400 and "headers over the limit" in out["error"]["message"], out
        body = b"x" * 5000  # a body over the limit still gets the body's 413
        status, out = raw_request(p, b"POST /generate HTTP/1.1\r\nHost: x\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                                  % (len(body), body))
        assert status == 413 and "body over the limit" in out["error"]["message"], out
        assert get(p, "/health")[0] == 200


def _exchange(port, raw, want):
    """Sends raw on a fresh connection and reads until want answers' status lines came (or the
    server closed); returns everything read."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.sendall(raw)
    got = b""
    while got.count(b"HTTP/1.") < want:
        chunk = conn.recv(65536)
        if not chunk:
            break
        got += chunk
    conn.close()
    return got


def test_framing_pipelining_chunked_continue_and_http10():
    with Emu() as emu:
        p = emu.port()
        health = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        # Three pipelined requests are answered in order on the one connection.
        got = _exchange(p, health * 3, 3)
        assert got.count(b"HTTP/1.1 200 OK") == 3, got
        # A chunked body, cut into chunks with an extension and a trailer, arrives whole.
        body = b'{"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 2}}'
        chunked = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7])
                           for i in range(0, len(body), 7)) + b"0\r\nX-T: 1\r\n\r\n"
        got = _exchange(p, b"POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                        b"\r\n\r\n" + chunked + health, 2)
        assert got.startswith(b"HTTP/1.1 200") and b'"output_ids"' in got, got
        assert got.count(b"HTTP/1.1 200 OK") == 2, got
        # Expect: 100-continue is answered once the head is read, before the body is sent.
        conn = socket.create_connection(("127.0.0.1", p), timeout=10)
        conn.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        assert conn.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"
        conn.sendall(body)
        assert conn.recv(65536).startswith(b"HTTP/1.1 200")
        conn.close()
        # HTTP/1.0: closed after the answer unless kept alive.
        got = _exchange(p, b"GET /health HTTP/1.0\r\n\r\n" + health, 2)
        assert got.count(b"HTTP/1.1 200") == 1 and b"Connection: close" in got, got
        got = _exchange(p, b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" * 2, 2)
        assert got.count(b"Connection: keep-alive") == 2, got
        # What cannot be framed is answered 400 with a JSON error and the connection closed:
        # a malformed request line, both framings at once, a bad Content-Length, a folded
        # header, a malformed chunk size.
        for bad in (b"GET\r\n\r\n",
                    b"POST /generate HTTP/1.1\r\nContent-Length: 3\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                    b"POST /generate HTTP/1.1\r\nContent-Length: 3x\r\n\r\nabc",
                    b"GET /health HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n",
                    b"POST /generate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
            got = _exchange(p, bad + health, 2)
            assert got.startswith(b"HTTP/1.1 400") and b'"error"' in got, (bad, got)
            assert got.count(b"HTTP/1.") == 1 and b"Connection: close" in got, (bad, got)
        # A method the server does not take.
        assert _exchange(p, b"PATCH /health HTTP/1.1\r\n\r\n", 1).startswith(b"HTTP/1.1 405")
        assert get(p, "/health")[0] == 200


def test_failed_instance_closes_its_port_and_cuts_its_requests():
    with Emu("--instances", "tp1x2", "--fail", "instance=1,after_s=20") as emu:
        dead, alive = emu.port(1), emu.port(0)
        bg = Background(_try_generate, dead)
        assert bg.result() == "cut"
        time.sleep(0.1)
        try:
            socket.create_connection(("127.0.0.1", dead), timeout=2).close()
            refused = False
        except OSError:
            refused = True
        assert refused
        assert generate(alive, PROMPT, 5)[0] == 200


def _try_generate(port):
    try:
        generate(port, PROMPT, LONG)
        return "answered"
    except (ConnectionError, OSError, Exception):  # http.client raises RemoteDisconnected
        return "cut"


def test_stalled_instance_answers_after_the_stall():
    with Emu("--stall", "instance=0,after_s=0,for_s=100") as emu:  # 1 s of wall time
        t0 = time.monotonic()
        assert get(emu.port(), "/health", timeout=10)[0] == 200
        assert time.monotonic() - t0 > 0.5
        assert generate(emu.port(), PROMPT, 5)[0] == 200


def test_client_that_leaves_frees_its_request():
    with Emu() as emu:
        p = emu.port()
        conn = socket.create_connection(("127.0.0.1", p))
        body = b'{"input_ids": [1, 2, 3], "libra": {"emu": {"gen_tokens": 20000}}, ' \
               b'"sampling_params": {"max_new_tokens": 20000}}'
        conn.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
        time.sleep(0.2)
        assert running(p) == (1, 0)
        conn.close()
        time.sleep(0.2)
        assert running(p) == (0, 0)


def test_bad_flags_are_refused():
    import subprocess
    from emu_util import LIBRA
    for args in (["--instances", "tp3"], ["--instances", "tp2x0"], ["--time-scale", "0"],
                 ["--fail", "instance=0"], ["--stall", "instance=0,after_s=1"],
                 ["--stall", "instance=0,after_s=1,for_s=0"],
                 ["--fail", "instance=5,after_s=1"], ["--instances", "tp8", "--model", "nope"],
                 ["--base-port", "65535", "--instances", "tp1x2"]):  # instance 1 on 65536
        p = subprocess.run([LIBRA, "emu", *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith("libra: "), p.stderr


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_an_ipv6_host_gives_bracketed_urls(host):
    if not ipv6_loopback():
        pytest.skip("no IPv6 loopback")
    with Emu("--host", host) as emu:
        url = emu.instances[0]["url"]
        assert url == "http://[::1]:%d" % emu.port(), url


def test_request_cap_answers_504_and_frees_the_request():
    with Emu("--request-cap-s", "0.5") as emu:
        p = emu.port()
        t0 = time.monotonic()
        status, out = generate(p, PROMPT, LONG)
        assert status == 504 and out["error"]["type"] == "timeout"
        assert time.monotonic() - t0 > 0.4  # held until the cap, not refused at once
        assert running(p) == (0, 0)
        assert generate(p, PROMPT, 5)[0] == 200


@pytest.mark.parametrize("path,body", [
    ("/generate", {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": LONG}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                              "max_tokens": LONG}),
])
def test_a_stream_cut_by_the_cap_ends_with_an_error_event_and_no_last_chunk(path, body):
    """The status is sent when the cap passes: the answer can only say it is cut, in its events
    (openai-python raises APIError on an error event) and in its framing (clients raise on a
    chunked body without its last chunk), so that no client takes it for a whole one."""
    with Emu("--request-cap-s", "0.5") as emu:
        p = emu.port()
        status, events, whole = stream(p, path, {**body, "stream": True})
        assert status == 200 and not whole
        assert len(events) > 1 and "[DONE]" not in events, events[-3:]
        error = json.loads(events[-1])["error"]
        assert error["code"] == 504 and error["type"] == "timeout", error
        assert "cap of 0.5 s" in error["message"]
        assert running(p) == (0, 0)
        assert generate(p, PROMPT, 3)[0] == 200


@pytest.mark.parametrize("path,body,member", [
    ("/abort_request", {"abort_all": "yes"}, "abort_all"),
    ("/abort_request", {"rid": 5}, "rid"),
    ("/pause_generation", {"mode": 5}, "mode"),
    ("/update_weights_from_disk", {"model_path": "/x", "weight_version": 5}, "weight_version"),
    ("/update_weights_from_disk", {"model_path": "/x", "flush_cache": "no"}, "flush_cache"),
    ("/update_weights_from_disk", {"model_path": "/x", "abort_all_requests": "yes"},
     "abort_all_requests"),
    ("/update_weights_from_disk", {"model_path": 5}, "model_path"),
    ("/update_weights_from_distributed",
     {"names": [], "dtypes": [], "shapes": [], "weight_version": 9}, "weight_version"),
    ("/init_weights_update_group", {"master_address": "h", "master_port": -1,
                                    "rank_offset": 0, "world_size": 2}, "master_port"),
    ("/init_weights_update_group", {"master_address": "h", "master_port": 29500,
                                    "rank_offset": 0, "world_size": 0}, "world_size"),
    ("/release_memory_occupation", {"tags": "bogus"}, "tags"),
    ("/release_memory_occupation", {"tags": ["kv_cache", "bogus"]}, "tags"),
    ("/resume_memory_occupation", {"tags": 5}, "tags"),
])
def test_control_calls_refuse_a_member_of_the_wrong_type_and_do_nothing(path, body, member):
    """As SGLang's request classes (io_struct.py) refuse them, rather than fall back to a
    default and answer success."""
    with Emu() as emu:
        p = emu.port()
        status, out = post(p, path, body)
        assert status == 400 and out["error"]["message"].startswith(member + ":"), out
        assert get(p, "/get_weight_version")[1] == {"weight_version": "default"}
        assert generate(p, PROMPT, 3)[0] == 200  # neither paused nor released


def test_wellformed_control_members_are_taken():
    with Emu() as emu:
        p = emu.port()
        assert post(p, "/release_memory_occupation", {"tags": ["kv_cache", "weights"]})[0] == 200
        assert post(p, "/resume_memory_occupation", {"tags": None})[0] == 200
        assert post(p, "/abort_request", {"rid": "x", "abort_all": False}) == (200, None)
        assert post(p, "/pause_generation", {"mode": "in_place"})[0] == 200
        assert post(p, "/continue_generation", {})[0] == 200
        assert post(p, "/update_weights_from_disk", {"model_path": "/x", "weight_version": "3",
                                                     "flush_cache": False})[0] == 200
        assert get(p, "/get_weight_version")[1] == {"weight_version": "3"}


def test_chat_messages_of_text_parts_and_tool_calls_without_content_are_taken():
    """As vLLM takes them: text parts joined with newlines make the prompt the string would
    (the prefix cache serves the one's prompt to the other), an assistant message that only
    calls tools has no content."""
    text = ["fix the failing test in module one", "and then run the whole suite again"]
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                  "function": {"name": "bash", "arguments": "{}"}}]}
    tool = {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]}
    with Emu() as emu:
        p = emu.port()
        joined = [{"role": "user", "content": "\n".join(text)}]
        parts = [{"role": "user", "content": [{"type": "text", "text": t} for t in text]}]
        status, first = post(p, "/v1/chat/completions", {"messages": joined, "max_tokens": 2})
        assert status == 200, first
        status, second = post(p, "/v1/chat/completions", {"messages": parts, "max_tokens": 2})
        assert status == 200, second
        prompt = first["usage"]["prompt_tokens"]
        assert second["usage"]["prompt_tokens"] == prompt >= 16
        assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == prompt // 16 * 16
        status, out = post(p, "/v1/chat/completions",
                           {"messages": parts + [call, tool], "max_tokens": 2})
        assert status == 200 and out["choices"][0]["finish_reason"] == "length", out
        image = {"type": "image_url", "image_url": {"url": "data:,"}}
        status, out = post(p, "/v1/chat/completions",
                           {"messages": [{"role": "user", "content": [image]}]})
        assert status == 400 and "messages[0].content[0]" in out["error"]["message"], out


@pytest.mark.parametrize("path,body,field", [
    ("/generate", {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 0}},
     "sampling_params.max_new_tokens"),
    ("/v1/completions", {"prompt": PROMPT, "max_tokens": 0}, "max_tokens"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "max_completion_tokens": 0}, "max_completion_tokens"),
])
def test_a_budget_of_no_tokens_is_refused_by_its_range(path, body, field):
    """One message, naming the field, whose range excludes 0 (vLLM refuses max_tokens 0; the
    emulator does not emulate SGLang's prompt-only requests)."""
    with Emu() as emu:
        status, out = post(emu.port(), path, body)
        assert status == 400
        assert out["error"]["message"] == field + ": expected an integer in [1, 2147483647]", out


@pytest.mark.parametrize("member", ["trajectory", "prompt", "sample"])
@pytest.mark.parametrize("value", [[1], 1.5, {"a": 1}, True])
def test_libras_names_are_strings_or_integers(member, value):
    with Emu() as emu:
        p = emu.port()
        status, out = generate(p, PROMPT, 2, libra={member: value})
        assert status == 400, out
        assert out["error"]["message"] == "libra.%s: expected a string or an integer" % member
        assert generate(p, PROMPT, 2, libra={member: "t-1", "emu": {"gen_tokens": 2}})[0] == 200


def test_more_header_fields_than_the_limit_are_refused_saying_so():
    with Emu() as emu:
        p = emu.port()
        fields = b"".join(b"X-%d: y\r\n" % i for i in range(99))
        head = b"GET /get_weight_version HTTP/1.1\r\n" + fields
        status, _ = raw_request(p, head + b"X-Last: y\r\n\r\n")
        assert status == 200  # 100 fields
        status, out = raw_request(p, head +
                                  b"X-99: y\r\nX-Last: y\r\n\r\n")
        assert status == 400 and out["error"]["message"] == "more than 100 header fields", out


def test_connection_limit_answers_503():
    with Emu("--max-connections", "2") as emu:
        p = emu.port()
        held = [socket.create_connection(("127.0.0.1", p)) for _ in range(2)]
        for conn in held:  # two connections the server knows of (each sent a request)
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        status, out = get(p, "/health")
        assert status == 503 and "too many connections" in out["error"]["message"]
        for conn in held:
            conn.close()
        time.sleep(0.1)
        assert get(p, "/health")[0] == 200


def test_slow_loris_is_cut_and_others_are_served():
    with Emu("--request-read-s", "1") as emu:
        p = emu.port()
        slow = socket.create_connection(("127.0.0.1", p))
        idle = socket.create_connection(("127.0.0.1", p))  # sends nothing at all
        request_line = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40
        sent = 0
        for byte in request_line:  # a byte every 0.1 s: a timeout per read would never fire
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                break
            sent += 1
            assert get(p, "/health")[0] == 200  # the others are served meanwhile
            time.sleep(0.1)
        # cut while still trickling (the line takes ~4.5 s to send), not at its first bytes
        assert 3 <= sent < len(request_line), sent
        idle.settimeout(5)
        assert idle.recv(4096) == b""  # a connection that never sends is cut too
        slow.close()
        idle.close()
        # A client that keeps its connection and sends each request whole is never cut.
        conn = socket.create_connection(("127.0.0.1", p))
        for _ in range(3):
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
            time.sleep(0.5)
        conn.close()
