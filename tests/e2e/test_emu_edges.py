"""Edges of `libra emu`'s request handling: weight versions kept whole, the reasons and places
its 400 answers give (docs/emu.md "The endpoints")."""

import re

import pytest

from cli_run import run
from emu_util import Emu, generate, get, post

PROMPT = [1, 2, 3, 4]


def update(port, version):
    body = {"model_path": "/m", "weight_version": version}
    return post(port, "/update_weights_from_disk", body)


@pytest.mark.parametrize("versions", [
    # 64 bytes: a cut at 63 would end inside the last 'é'
    ["ab" + "é" * 31],
    # equal for their first 70 bytes: each stays its own
    ["/ckpt/" + "x" * 64 + "/step-1", "/ckpt/" + "x" * 64 + "/step-2"],
    # a long checkpoint path
    ["/checkpoints/" + "d" * 5000],
])
def test_a_long_weight_version_is_kept_whole(versions):
    with Emu("--instances", "tp1") as emu:
        p = emu.port()
        for v in versions:
            status, out = update(p, v)
            assert status == 200 and out["success"], out
            assert get(p, "/get_weight_version") == (200, {"weight_version": v})
            status, out = generate(p, PROMPT, 2)
            assert status == 200 and out["meta_info"]["weight_version"] == v, out
            assert get(p, "/get_server_info")[1]["weight_version"] == v
            assert get(p, "/get_model_info")[1]["weight_version"] == v


@pytest.mark.parametrize("path,body,msg", [
    ("/generate", {"input_ids": [1, 2, "x"]}, "input_ids[2]: expected an integer"),
    ("/generate", {"input_ids": [1, [2]]}, "input_ids[1]: expected an integer"),
    ("/v1/completions", {"prompt": [1, 2.5]}, "prompt[1]: expected an integer"),
    ("/inference/v1/generate", {"token_ids": [7, None]}, "token_ids[1]: expected an integer"),
])
def test_an_element_that_is_no_integer_is_named(path, body, msg):
    """A prompt of ids with one that is not an integer is one prompt with a bad element, not a
    batch of prompts."""
    with Emu() as emu:
        status, out = post(emu.port(), path, body)
        assert status == 400 and out["error"]["message"].startswith(msg), out


@pytest.mark.parametrize("body", [
    {"input_ids": [1], "text": "abcd"},
    {"sampling_params": {"max_new_tokens": 2}},
])
def test_input_ids_and_text_message_starts_with_the_members(body):
    with Emu() as emu:
        status, out = post(emu.port(), "/generate", body)
        msg = out["error"]["message"]
        assert status == 400 and msg.startswith("input_ids, text: "), msg
        assert "exactly one" in msg, msg


@pytest.mark.parametrize("path", ["/generate", "/v1/completions", "/pause_generation"])
@pytest.mark.parametrize("raw", [
    b"hello", b'{"a": hello}', b'{"input_ids": [1, 2,]}', b'{"a": 1,\n "b" 2}',
    b'{"a": "x\\q"}', b'{"a": 123456789012345678901234567890}', b"[1, 2", b'{"a": "abc',
])
def test_a_parse_error_is_placed_as_the_file_readers_place_it(path, raw, tmp_path):
    """Line and column 1-based, where `libra config check` places the same text's error."""
    config = tmp_path / "c.json"
    config.write_bytes(raw)
    err = run("config", "check", str(config)).stderr
    line, col = re.match(r"libra: .*?:(\d+):(\d+): ", err).groups()
    with Emu() as emu:
        status, out = post(emu.port(), path, raw=raw)
        msg = out["error"]["message"]
        assert status == 400, msg
        assert msg.startswith(f"body: invalid JSON at line {line} column {col}: "), msg


def test_an_empty_generation_body_is_refused_without_a_place():
    with Emu() as emu:
        status, out = post(emu.port(), "/generate", raw=b"")
        msg = out["error"]["message"]
        assert status == 400 and msg == "body: expected a JSON object, got an empty body", msg
        status, out = post(emu.port(), "/generate", raw=b"[1]")
        assert status == 400 and out["error"]["message"] == "body: expected a JSON object"
