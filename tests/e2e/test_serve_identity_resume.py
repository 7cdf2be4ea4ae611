"""`libra serve`: the merged answer of an abort-and-resume turn says what the engine would have
said without the abort (docs/serve.md "Failures"); an identity member of a type "Identity" does
not allow is refused, not taken as written; every flag `libra serve --help` lists is in its
usage line and in docs/cli.md's synopsis. Each test guards a defect a tester found."""

import json
import os
import re
import subprocess
import time

import test_serve_control as control
from emu_util import ADMIN, LIBRA, Background, Emu, Serve, post

BUCKETS = ["--set", "sched.buckets=tp1:40000"]


def scripted(segments):
    """An SGLang-like engine answering each /generate with the next of segments:
    (finish_reason, tokens)."""
    sent = []

    def reply(path, body):
        sent.append(json.loads(body))
        why, n = segments[len(sent) - 1]
        meta = {"finish_reason": why, "completion_tokens": n, "weight_version": "old"}
        return 200, {"text": "x" * n, "output_ids": [5] * n, "meta_info": meta}

    info = {"tp_size": 1, "weight_version": "old", "version": "0.5.4", "model_path": "m"}
    return control.Scripted({"/get_server_info": (200, info), "/health": (200, {}),
                             "/get_weight_version": (200, {"weight_version": "old"})}, reply)


def test_a_resumed_turn_cut_by_length_names_the_clients_cap():
    """Asked 100 tokens, aborted after 38, resumed for 62: the engine ends the second segment
    with length 62, the cap it was sent; the merged answer is the turn's, capped at 100."""
    engine = scripted([({"type": "abort", "message": "Aborted"}, 38),
                       ({"type": "length", "length": 62}, 62)])
    with Serve(engine.url, args=BUCKETS) as gw:
        body = {"input_ids": [1, 2, 3, 4], "sampling_params": {"max_new_tokens": 100},
                "libra": {"trajectory": "r", "resume": True}}
        status, doc = post(gw.port, "/generate", body)
        assert status == 200, doc
    meta = doc["meta_info"]
    assert meta["completion_tokens"] == 100 == len(doc["output_ids"])
    assert meta["finish_reason"] == {"type": "length", "length": 100}, meta
    assert [s["completion_tokens"] for s in meta["libra_segments"]] == [38, 62]
    engine.shutdown()


def test_a_resumed_turn_that_stopped_keeps_its_stop():
    engine = scripted([({"type": "abort"}, 3), ({"type": "stop", "matched": 2}, 4)])
    with Serve(engine.url, args=BUCKETS) as gw:
        body = {"input_ids": [1], "sampling_params": {"max_new_tokens": 100},
                "libra": {"trajectory": "r", "resume": True}}
        status, doc = post(gw.port, "/generate", body)
        assert status == 200, doc
    assert doc["meta_info"]["finish_reason"] == {"type": "stop", "matched": 2}
    engine.shutdown()


def test_an_emulated_turn_paused_in_abort_mode_is_answered_as_one():
    """The tester's run: an emulated engine in real time, paused in abort mode mid-turn."""
    with Emu("--instances", "tp1", scale="1") as emu, \
            Serve(emu.instances[0]["url"], args=BUCKETS) as gw:
        body = {"input_ids": [1, 2, 3, 4], "sampling_params": {"max_new_tokens": 100},
                "libra": {"trajectory": "r", "resume": True}}
        turn = Background(post, gw.port, "/generate", body, timeout=120)
        time.sleep(0.8)
        assert post(gw.port, "/pause_generation", {"mode": "abort"}, headers=ADMIN)[0] == 200
        assert post(gw.port, "/continue_generation", {}, headers=ADMIN)[0] == 200
        status, doc = turn.result(timeout=120)
        assert status == 200, doc
    meta = doc["meta_info"]
    assert len(meta["libra_segments"]) == 2, meta
    assert meta["completion_tokens"] == 100 == len(doc["output_ids"])
    assert meta["finish_reason"] == {"type": "length", "length": 100}, meta


def test_an_identity_of_another_type_is_refused_naming_the_member():
    """docs/serve.md "Identity": trajectory_id is a string or an object, program_id a string;
    5, true, [1,2] or 7.5 were taken as written ("trajectory_id:5")."""
    engine = scripted([({"type": "stop"}, 1)] * 8)
    with Serve(engine.url, args=BUCKETS) as gw:
        base = {"input_ids": [1], "sampling_params": {"max_new_tokens": 1}}
        for key, types in (("trajectory_id", "a string or an object"),
                           ("program_id", "a string")):
            for value in (5, True, [1, 2], 7.5):
                status, doc = post(gw.port, "/generate", {**base, key: value})
                assert status == 400, (key, value, doc)
                assert doc["error"]["message"] == "%s: expected %s" % (key, types), doc
        for extra in ({"trajectory_id": "t"}, {"trajectory_id": {"a": 1}},
                      {"program_id": "p"}, {"program_id": None}):
            status, doc = post(gw.port, "/generate", {**base, **extra})
            assert status == 200, (extra, doc)
    engine.shutdown()


def own_flags(help_text):
    """The flags a command's --help lists as its own (before the common flags)."""
    own = help_text.split("\n\n", 2)[2].split("\ncommon flags:", 1)[0]
    return set(re.findall(r"^  (--[a-z][a-z-]*)", own, re.M))


def test_every_serve_flag_is_in_its_usage_line_and_the_docs_synopsis():
    help_text = subprocess.run([LIBRA, "serve", "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    usage = help_text.split("\n\n", 1)[0]
    flags = own_flags(help_text)
    assert "--request-read-s" in flags
    with open(os.path.join(os.environ["LIBRA_SOURCE_DIR"], "docs", "cli.md"),
              encoding="utf-8") as f:
        section = f.read().split("### `libra serve`", 1)[1]
    synopsis = re.search(r"^```\n(libra .*?)^```", section, re.M | re.S).group(1)
    for flag in sorted(flags):
        assert re.search(re.escape(flag) + r"\b(?!-)", usage), flag
        assert re.search(re.escape(flag) + r"\b(?!-)", synopsis), flag
