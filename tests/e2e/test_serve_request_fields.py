"""End-to-end tests of what `libra serve` reads of a request's fields (docs/serve.md,
docs/routing.md): tool names of any length, prompt keys that depend on what a client means
rather than how its JSON library spelt it, and the events call naming a misspelt member."""

import http.client
import json
import time

import pytest

from emu_util import Emu, Serve, get, post

BUCKETS = ["--set", "sched.buckets=tp1:40960"]
LONG_TOOL = "mcp__github__create_pull_request_review"  # 39 bytes


def prompt_key(text):
    """libra.prompt_key (tests/python/test_api.py holds it to this): FNV-1a 64 of the text's
    UTF-8 bytes, in 0..2**63-1. Spelt out here: the e2e tests need only the binary."""
    h = 0xcbf29ce484222325
    for byte in text.encode() if isinstance(text, str) else text:
        h = ((h ^ byte) * 0x100000001b3) & (2**64 - 1)
    return h & (2**63 - 1)


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    capture = tmp_path_factory.mktemp("capture") / "capture.jsonl"
    with Emu("--instances", "tp1", scale="0.005") as emu, \
            Serve(*[i["url"] for i in emu.instances],
                  args=[*BUCKETS, "--capture", str(capture)]) as gw:
        gw.capture = capture
        yield gw


def captured(gw, tid):
    """The captured trajectory tid (a trace line, written when it finishes)."""
    for _ in range(500):
        if gw.capture.exists():
            for line in gw.capture.read_text().splitlines():
                doc = json.loads(line)
                if doc.get("extra", {}).get("id") == tid:
                    return doc
        time.sleep(0.01)
    raise AssertionError("not captured: " + tid)


def finish(gw, name):
    status, doc = post(gw.port, "/libra/v1/trajectories/%s/events" % name, {"kind": "finish"})
    assert status == 200, doc


def send(gw, body, path="/generate"):
    """POSTs body written as it is (a str: spelling kept) and returns (status, JSON answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=60)
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode("utf-8", "replace")
    conn.close()
    return resp.status, json.loads(text) if text else None


def trajectory(gw, name):
    for t in get(gw.port, "/libra/v1/state")[1]["trajectories"]:
        if t["id"] == "libra:" + name:
            return t
    raise AssertionError("no trajectory " + name)


def prompt_of(gw, name, ids_text, path="/generate", prompt_member="input_ids"):
    body = ('{"%s": %s, "sampling_params": {"max_new_tokens": 2}, "max_tokens": 2, '
            '"libra": {"trajectory": "%s", "emu": {"gen_tokens": 2}}}'
            % (prompt_member, ids_text, name))
    status, doc = send(gw, body, path)
    assert status == 200, doc
    return trajectory(gw, name)["prompt"]


# ---- tool names (docs/routing.md: truncated to 31 bytes, control bytes become _) ---------------

def tool_event(tool):
    return {"kind": "tool_return", "tool": tool, "status": "success"}


def turn(gw, name, events=None, spelt=None):
    """A /generate turn of trajectory name, with events (or a body spelt as given)."""
    body = {"input_ids": [9, 9, 9, 9], "sampling_params": {"max_new_tokens": 2},
            "libra": {"trajectory": name, "emu": {"gen_tokens": 2}}}
    if events is not None:
        body["libra"]["events"] = events
    status, doc = send(gw, spelt or json.dumps(body))
    assert status == 200, doc


def test_a_long_tool_name_in_a_request_is_truncated_not_refused(gw):
    turn(gw, "TN")
    turn(gw, "TN", [tool_event(LONG_TOOL)])  # was 400: at most 31 bytes
    finish(gw, "TN")
    assert captured(gw, "libra:TN")["turns"][0]["calls"][0]["tool"] == LONG_TOOL[:31]


def test_a_long_tool_name_in_the_events_call_is_truncated_not_refused(gw):
    turn(gw, "TE")
    status, doc = post(gw.port, "/libra/v1/trajectories/TE/events",
                       {"events": [tool_event(LONG_TOOL), {"kind": "finish"}]})
    assert status == 200, doc
    assert captured(gw, "libra:TE")["turns"][0]["calls"][0]["tool"] == LONG_TOOL[:31]


def test_a_long_tool_name_in_chat_tool_calls_is_truncated_alike(gw):
    msgs = [{"role": "user", "content": "fix the bug"}]
    headers = {"X-Session-ID": "TC"}
    body = {"model": "qwen3-14b", "messages": msgs, "max_tokens": 2,
            "libra": {"emu": {"gen_tokens": 2}}}
    status, doc = post(gw.port, "/v1/chat/completions", body, headers=headers)
    assert status == 200, doc
    msgs += [{"role": "assistant", "content": "",
              "tool_calls": [{"id": "c1", "type": "function",
                              "function": {"name": LONG_TOOL, "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "done"}]
    assert post(gw.port, "/v1/chat/completions", body, headers=headers)[0] == 200
    finish(gw, "TC")
    assert captured(gw, "session:TC")["turns"][0]["calls"][0]["tool"] == LONG_TOOL[:31]


def test_a_tool_name_with_a_nul_has_it_cleaned_like_other_control_bytes(gw):
    turn(gw, "TZ")
    turn(gw, "TZ", spelt='{"input_ids": [9, 9, 9, 7], "sampling_params": {"max_new_tokens": 2}, '
         '"libra": {"trajectory": "TZ", "events": [{"kind": '
         '"tool_return", "tool": "a\\u0000b\\u0001c:d", "status": "success"}]}}')
    finish(gw, "TZ")
    assert captured(gw, "libra:TZ")["turns"][0]["calls"][0]["tool"] == "a_b_c_d"


def test_a_tool_name_that_is_not_a_string_is_refused_by_what_it_should_be(gw):
    body = {"input_ids": [9], "sampling_params": {"max_new_tokens": 2},
            "libra": {"trajectory": "TX", "events": [{"kind": "tool_return", "tool": 5}]}}
    status, doc = post(gw.port, "/generate", body)
    assert status == 400
    message = doc["error"]["message"]
    assert "libra.events.0.tool: expected a string" in message and "31" not in message, message


# ---- prompt keys (docs/serve.md: the first --prompt-tokens ids, however spelt) ------------------

def test_the_prompt_key_is_the_first_64_ids_only(gw):
    ids = list(range(100, 164))
    a = prompt_of(gw, "P64", json.dumps(ids))
    b = prompt_of(gw, "P65", json.dumps(ids + [7, 8, 9]))
    c = prompt_of(gw, "P64b", json.dumps(ids[:63] + [7]))
    assert a == b != c


def test_the_prompt_key_does_not_depend_on_whitespace_or_number_spelling(gw):
    a = prompt_of(gw, "S1", "[100,101,102]")
    assert prompt_of(gw, "S2", "[100 ,101,102]") == a
    assert prompt_of(gw, "S3", "[ 100 , 101 ,\n102 ]") == a
    assert prompt_of(gw, "S4", "[100,101,-0]") == prompt_of(gw, "S5", "[100,101,0]")
    assert prompt_of(gw, "S6", "[100,102,101]") != a
    assert prompt_of(gw, "S7", "[1001,2]") != prompt_of(gw, "S8", "[100,12]")


def test_the_prompt_key_of_token_ids_is_libras_key_of_their_decimal_list(gw):
    ids = list(range(200, 300))
    key = prompt_of(gw, "K1", json.dumps(ids))
    assert key == prompt_key(",".join(map(str, ids[:64])))


def test_a_text_prompt_key_does_not_depend_on_its_escapes(gw):
    a = prompt_of(gw, "T1", '"hello world"', "/v1/completions", "prompt")
    assert prompt_of(gw, "T2", '"hell\\u006f world"', "/v1/completions", "prompt") == a
    assert a == prompt_key("hello world")


def test_a_text_prompt_key_is_its_first_256_bytes(gw):
    text = "x" * 256
    a = prompt_of(gw, "T3", json.dumps(text), "/v1/completions", "prompt")
    assert prompt_of(gw, "T4", json.dumps(text + "yz"), "/v1/completions", "prompt") == a
    assert a == prompt_key(text)


def test_chat_messages_key_does_not_depend_on_whitespace_or_escapes(gw):
    a = prompt_of(gw, "C1", '[{"role":"user","content":"fix it"}]', "/v1/chat/completions",
                  "messages")
    b = prompt_of(gw, "C2", '[ {"role": "user", "content": "fix \\u0069t"} ]',
                  "/v1/chat/completions", "messages")
    c = prompt_of(gw, "C3", '[{"role":"user","content":"fix that"}]', "/v1/chat/completions",
                  "messages")
    assert a == b != c


def test_a_string_libra_prompt_is_libras_prompt_key_of_its_text(gw):
    body = ('{"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2}, '
            '"libra": {"trajectory": "L1", "prompt": "task-\\u0031\\u0037", '
            '"emu": {"gen_tokens": 2}}}')
    status, doc = send(gw, body)
    assert status == 200, doc
    assert trajectory(gw, "L1")["prompt"] == prompt_key("task-17")


# ---- the events call names a misspelt member ----------------------------------------------

def test_the_events_call_names_a_misspelt_top_level_member(gw):
    body = {"input_ids": [9, 9, 9, 6], "sampling_params": {"max_new_tokens": 2},
            "libra": {"trajectory": "EV"}}
    assert post(gw.port, "/generate", body)[0] == 200
    status, doc = post(gw.port, "/libra/v1/trajectories/EV/events", {"evnts": []})
    assert status == 400
    message = doc["error"]["message"]
    assert "unknown member 'evnts'" in message, message
    # an event's own misspelt member is still named
    status, doc = post(gw.port, "/libra/v1/trajectories/EV/events",
                       {"kind": "tool_return", "tol": "x"})
    assert status == 400 and "unknown member 'tol'" in doc["error"]["message"], doc
    # an event without its kind is still told what kind takes
    status, doc = post(gw.port, "/libra/v1/trajectories/EV/events", {"tool": "x"})
    assert status == 400 and "kind: expected tool_return or finish" in doc["error"]["message"]

