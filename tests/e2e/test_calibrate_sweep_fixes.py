"""`libra calibrate` regressions (docs/calibrate.md): what the preset's `calibration` row says of
held and kept constants, an MFU fit no MFU can give, SGLang's NaN, inputs of no known kind and
--name. Runs on tests/data/calibrate. Needs LIBRA_BIN and LIBRA_SOURCE_DIR."""

import json
import os
import re
import subprocess

LIBRA = os.environ["LIBRA_BIN"]
DATA = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "tests", "data", "calibrate")
MODEL = ("--model", "qwen2.5-7b")


def libra(*args, presets=None):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    if presets:
        env["LIBRA_PRESETS"] = presets
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=DATA)


def ok(*args, presets=None):
    proc = libra(*args, presets=presets)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def row(path):
    return json.load(open(path))["hardware"][0]["calibration"]


def test_a_held_constant_is_not_called_fitted(tmp_path):
    preset = str(tmp_path / "h.json")
    ok("calibrate", "vllm-c1.json", "vllm-c8.json", "vllm-c32.json", "megatron.log", *MODEL,
       "--hold", "train_mfu", "-o", preset)
    assert "train_mfu from" not in row(preset) and "train_mfu held at 0.3500" in row(preset)
    out = ok("cost", *MODEL, presets=preset)
    assert "model MFU 0.35, assumed" in out, out
    ok("calibrate", "vllm-c1.json", "vllm-c8.json", *MODEL, "--hold", "decode_t_seq_s",
       "-o", preset)
    assert row(preset).startswith("libra calibrate, qwen2.5-7b: decode_t_fix_s from 2 decode")
    assert "decode_t_seq_s held at 30.00 us, built in" in row(preset)
    out = ok("cost", *MODEL, presets=preset)
    assert "t_seq 30 us (assumed)" in out and "t_fix 5.1" in out, out


def test_a_kept_constant_keeps_its_source(tmp_path):
    first, second = str(tmp_path / "t.json"), str(tmp_path / "t2.json")
    ok("calibrate", "verl.log", *MODEL, "-o", first)
    part = row(first).split(": ", 1)[1]
    assert part.startswith("train_mfu from 5 training steps of verl.log")
    ok("calibrate", "vllm-c1.json", "vllm-c32.json", *MODEL, "-o", second, presets=first)
    assert row(second).endswith("; " + part), row(second)
    third = str(tmp_path / "t3.json")  # held now: its source is still the first run's
    ok("calibrate", "vllm-c1.json", "vllm-c32.json", "verl.log", *MODEL, "--hold", "train_mfu",
       "-o", third, presets=second)
    assert re.search(r"train_mfu held at 0\.50\d\d, from 5 training steps of verl\.log",
                     row(third)), row(third)


def test_a_value_set_by_hand_is_named_so(tmp_path):
    base = next(h for h in json.loads(ok("presets", "--json"))["hardware"]
                if h["name"] == "a800-80g")
    del base["origin"]
    base["train_mfu"] = 0.4
    hand = tmp_path / "hand.json"
    hand.write_text(json.dumps({"schema": "libra.presets/1", "hardware": [base]}))
    preset = str(tmp_path / "out.json")
    ok("calibrate", "vllm-c1.json", "vllm-c32.json", *MODEL, "-o", preset, presets=str(hand))
    assert row(preset).endswith("; train_mfu set in preset file %s" % hand), row(preset)


def test_steps_shorter_than_any_mfu_gives(tmp_path):
    text = open(os.path.join(DATA, "verl.log")).read()
    fast = tmp_path / "fast.log"
    fast.write_text(re.sub(r"timing_s/update_actor:[0-9.]*", "timing_s/update_actor:0.5", text))
    proc = libra("calibrate", str(fast), *MODEL)
    assert proc.returncode == 1 and "train_mfu = -" not in proc.stderr, proc.stderr
    assert "shorter than the model gives at any MFU" in proc.stderr, proc.stderr


def test_sglang_nan_reads_as_no_value(tmp_path):
    text = open(os.path.join(DATA, "sglang.jsonl")).read()
    nan = tmp_path / "sgnan.jsonl"
    nan.write_text(text.replace('"max_concurrency": 64', '"max_concurrency": NaN')
                   .replace('"backend": "sglang"', '"backend": NaN', 1))
    null = tmp_path / "sgnull.jsonl"
    null.write_text(text.replace('"max_concurrency": 64', '"max_concurrency": null')
                    .replace('"backend": "sglang"', '"backend": null', 1))
    def points(path):
        doc = json.loads(ok("calibrate", str(path), *MODEL, "--json"))
        return [{k: v for k, v in p.items() if k != "input"} for p in doc["decode_points"]]
    assert points(nan) == points(null)
    bad = tmp_path / "bad.jsonl"  # where a number is needed, NaN is refused
    bad.write_text(text.replace('"duration": ', '"duration": NaN, "x": ', 1))
    proc = libra("calibrate", str(bad), *MODEL)
    assert proc.returncode == 2 and "duration: expected seconds" in proc.stderr, proc.stderr
    empty = tmp_path / "empty.jsonl"  # an empty array is not null
    empty.write_text(text.replace('"max_concurrency": 64', '"max_concurrency": []'))
    proc = libra("calibrate", str(empty), *MODEL)
    assert proc.returncode == 2 and "max_concurrency: expected" in proc.stderr, proc.stderr


def test_json_of_no_known_kind_is_refused_as_such(tmp_path):
    plan = str(tmp_path / "p.json")
    ok("plan", "--json", "-o", plan)
    proc = libra("calibrate", plan, *MODEL)
    assert proc.returncode == 2, proc.stderr
    assert "not a vLLM or SGLang serving benchmark result" in proc.stderr, proc.stderr
    doc = json.load(open(os.path.join(DATA, "vllm-c1.json")))
    del doc["duration"]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(doc, indent=2))
    proc = libra("calibrate", str(partial), *MODEL)
    assert proc.returncode == 2 and "duration: missing" in proc.stderr, proc.stderr


def test_name_of_another_hardware_preset_is_refused(tmp_path):
    preset = str(tmp_path / "nm.json")
    proc = libra("calibrate", "vllm-c1.json", "vllm-c32.json", *MODEL, "--name", "h100-sxm",
                 "-o", preset)
    assert proc.returncode == 2 and "--name: 'h100-sxm'" in proc.stderr, proc.stderr
    assert "usage:" not in proc.stderr and not os.path.exists(preset)
    ok("calibrate", "vllm-c1.json", "vllm-c32.json", *MODEL, "--name", "a800-80g", "-o", preset)
