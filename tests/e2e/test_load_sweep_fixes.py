"""`libra load` on what a sweep of its edges found (docs/load.md): resubmitted and timed-out
turns in the -o trace, trace turns of 0 tokens, a context that shrinks, -o on standard output
and a trace's records that fill no whole group."""

import json
import os
import subprocess

import pytest

from emu_util import LIBRA, Emu
from test_load import FakeSglang, replying, sglang_answer

HEADER = {"libra_trace": 1, "workload": "r2e-gym", "model": "qwen3-14b", "group_size": 1}


def libra(*args, timeout=120, **kw):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=timeout, **kw)


def urls(emu):
    return ",".join(i["url"] for i in emu.instances)


def write_trace(path, turn_lists, header=HEADER):
    lines = [json.dumps(header)]
    for i, turns in enumerate(turn_lists):
        lines.append(json.dumps({"step": 0, "prompt_id": i + 1, "epoch": 0, "sample": 0,
                                 "version_start": 0, "finish": "completed", "reward": 1.0,
                                 "turns": turns}))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def read_records(path):
    return [json.loads(line) for line in open(path).read().splitlines()[1:]]


def half_then_abort(q):
    """Half the turn's cap, aborted (the whole of a cap of 1), nearly all of it cached."""
    mx = q["sampling_params"]["max_new_tokens"]
    reason = {"type": "length", "length": mx} if mx == 1 else {"type": "abort"}
    return sglang_answer(q, ids=[7] * max(mx // 2, 1), finish_reason=reason,
                         cached_tokens=len(q["input_ids"]) - 1)


def test_a_resubmitted_turn_is_its_first_prompt_and_all_it_generated(tmp_path):
    engine = FakeSglang(replying(half_then_abort))
    out = str(tmp_path / "fa.jsonl")
    p = libra("load", "--engines", engine.url, "--time-scale", "0.001", "--steps", "1",
              "--batch", "4", "-o", out)
    assert p.returncode == 0, p.stderr
    v = libra("trace", "validate", out)
    assert v.returncode == 0, v.stderr
    sent = {}  # rid: [(prompt sent, tokens received)] in order
    for _, path, body in engine.seen:
        if path == "/generate":
            sent.setdefault(body["rid"], []).append(len(body["input_ids"]))
    for i, rec in enumerate(read_records(out)):
        for k, turn in enumerate(rec["turns"]):
            first = sent["t%d-%d" % (i, k)][0]
            assert turn["prompt_tokens"] == first, (i, k)
            assert turn["cached_tokens"] == first - 1, (i, k)


def test_a_timed_out_trajectory_is_written_with_the_turns_it_played(tmp_path):
    out = tmp_path / "tz.jsonl"
    with Emu("--instances", "tp1x4", scale="0.01") as emu:
        p = libra("load", "--engines", urls(emu), "--time-scale", "0.01", "--steps", "1",
                  "--batch", "4", "--set", "rl.trajectory_timeout_s=60", "-o", str(out))
        assert p.returncode in (0, 1), p.stderr
        recs = read_records(out)
        assert any(r["finish"] == "aborted" for r in recs)
        for r in recs:
            assert all(t["prompt_tokens"] > 0 for t in r["turns"]), r
        again = libra("load", "--engines", urls(emu), "--time-scale", "0.01", "--steps", "1",
                      "--batch", "4", "--trace", str(out))
        assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("turn", [{"prompt_tokens": 100, "generated_tokens": 0},
                                  {"prompt_tokens": 0, "generated_tokens": 5}])
def test_a_turn_of_no_tokens_is_played_with_one_as_sim_does(tmp_path, turn):
    trace = write_trace(tmp_path / "z.jsonl", [[turn]])
    with Emu("--instances", "tp1x4", scale="0.01") as emu:
        p = libra("load", "--engines", urls(emu), "--time-scale", "0.01", "--steps", "1",
                  "--batch", "1", "--samples", "1", "--trace", trace, "--json")
    assert p.returncode == 0, p.stderr
    step = json.loads(p.stdout)["steps"][0]
    assert step["prompt_tokens"] == max(turn["prompt_tokens"], 1)
    assert step["generated_tokens"] == max(turn["generated_tokens"], 1)


def test_a_context_that_shrinks_is_the_records_size(tmp_path):
    call = {"tool": "bash", "status": "success", "payload_tokens": 10}
    trace = write_trace(tmp_path / "s.jsonl",
                        [[{"prompt_tokens": 1000, "generated_tokens": 50, "calls": [call]},
                          {"prompt_tokens": 200, "generated_tokens": 5}]])
    engine = FakeSglang(replying(sglang_answer))
    p = libra("load", "--engines", engine.url, "--time-scale", "0.001", "--steps", "1",
              "--batch", "1", "--samples", "1", "--trace", trace)
    assert p.returncode == 0, p.stderr
    ids = [body["input_ids"] for _, path, body in engine.seen if path == "/generate"]
    assert [len(x) for x in ids] == [1000, 200]
    assert ids[1] == ids[0][:200]  # the context's first tokens: a prefix the cache holds


def test_o_on_standard_output_is_refused(tmp_path):
    p = libra("load", "--engines", "http://127.0.0.1:9", "-o", "-")
    assert p.returncode == 2 and "-o" in p.stderr and "usage" not in p.stderr, p.stderr
    out = tmp_path / "both.txt"
    with open(out, "w") as f:
        p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9", "-o", str(out)],
                           stdout=f, stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 2 and "-o" in p.stderr, p.stderr


def test_records_that_fill_no_whole_group_are_noted_as_sim_ignores_them(tmp_path):
    src = tmp_path / "three.jsonl"
    doc = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "docs", "trace-format.md")
    with open(doc, encoding="utf-8") as f:  # its example: 3 records, groups of 2
        src.write_text(f.read().split("group size 2):\n\n```\n", 1)[1].split("```", 1)[0])
    with Emu("--instances", "tp1x4", scale="0.01") as emu:
        p = libra("load", "--engines", urls(emu), "--time-scale", "0.01", "--trace", str(src),
                  "--samples", "2", "--batch", "2", "--steps", "2",
                  "-o", str(tmp_path / "out.jsonl"))
    assert p.returncode == 0, p.stderr
    assert ("libra: load: note: the trace's last 1 trajectory fills no group of 2 "
            "(rl.samples): it is never played") in p.stderr, p.stderr
    assert {r["prompt_id"] for r in read_records(tmp_path / "out.jsonl")} == {7}


@pytest.mark.parametrize("config,args,where", [
    ('{"rl": {"sync_mode": "keep"}}', [], "CONFIG:1:9"),
    ("{}", ["--set", "rl.max_staleness=0", "--set", "rl.sync_interval=5"],
     "--set rl.sync_interval"),
])
def test_the_update_rules_name_where_the_value_was_set(tmp_path, config, args, where):
    """A weight-update rule load refuses is placed as libra sim places it: at the file's value
    or the flag that broke it (load once gave no place)."""
    path = tmp_path / "job.json"
    path.write_text(config + "\n")
    r = libra("load", str(path), "--engines", "http://127.0.0.1:9", *args)
    assert r.returncode == 2, r.stderr
    where = where.replace("CONFIG", str(path))
    assert r.stderr.startswith(f"libra: {where}: rl."), r.stderr


def test_keep_with_a_style_that_aborts_is_refused_for_that_first():
    """keep from a flag with slime names the style's reason, whatever the transport (the
    default disk_restart breaks an update rule too)."""
    r = libra("load", "--engines", "http://127.0.0.1:9", "--style", "slime", "--set",
              "rl.sync_mode=keep")
    assert r.returncode == 2, r.stderr
    assert "rl.sync_mode keep has no effect with --style slime" in r.stderr, r.stderr
