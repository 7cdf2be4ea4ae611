"""`libra calibrate` edge cases (docs/calibrate.md): the preset's `calibration` row past its 511
bytes, a trainer's log that opens with `{`, the MFU fit's refusal, `assumed`, request_rate's
type, model_id, kept constants' model, serving TP, --name's form, an absurd point and a
capture's model. Runs on tests/data/calibrate. Needs LIBRA_BIN and LIBRA_SOURCE_DIR."""

import json
import os
import shutil
import subprocess

LIBRA = os.environ["LIBRA_BIN"]
DATA = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "tests", "data", "calibrate")
MODEL = ("--model", "qwen2.5-7b")
VLLM = ("vllm-c1.json", "vllm-c8.json", "vllm-c32.json")


def libra(*args, cwd=DATA):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def ok(*args, cwd=DATA):
    proc = libra(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def hardware(path):
    return json.load(open(path))["hardware"][0]


def test_a_row_past_511_bytes_is_refused_not_cut(tmp_path):
    names = []
    for i in (1, 8, 32):
        names.append("x" + "\u00e9" * 80 + "%d.json" % i)
        shutil.copy(os.path.join(DATA, "vllm-c%d.json" % i), tmp_path / names[-1])
    proc = libra("calibrate", *names, *MODEL, "-o", "out.json", cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "511 bytes" in proc.stderr and "shorter" in proc.stderr, proc.stderr
    assert not (tmp_path / "out.json").exists()


def test_a_log_opening_with_a_python_dict_is_a_log(tmp_path):
    log = tmp_path / "v.log"
    head = "{'actor_rollout_ref': {'actor': {'ppo_mini_batch_size': 256}}}\n"
    log.write_text(head + open(os.path.join(DATA, "verl.log")).read())
    out = ok("calibrate", str(log), *MODEL)
    assert "5 training points" in out, out
    bad = tmp_path / "dict.txt"
    bad.write_text(head)
    proc = libra("calibrate", str(bad), *MODEL)
    assert proc.returncode == 2 and "not a vLLM or SGLang" in proc.stderr, proc.stderr


def test_a_cut_short_result_is_still_a_json_error(tmp_path):
    for indent in (None, 4):
        cut = tmp_path / "cut.json"
        doc = json.load(open(os.path.join(DATA, "vllm-c8.json")))
        cut.write_text(json.dumps(doc, indent=indent)[:300])
        proc = libra("calibrate", str(cut), *MODEL)
        assert proc.returncode == 2 and "invalid JSON" in proc.stderr, proc.stderr
        assert str(cut) + ":" in proc.stderr, proc.stderr


def test_the_mfu_refusal_does_not_depend_on_the_start(tmp_path):
    preset = tmp_path / "p.json"
    ok("calibrate", "verl.log", *MODEL, "-o", str(preset))
    doc = json.load(open(preset))
    doc["hardware"][0]["train_mfu"] = 0.9
    preset.write_text(json.dumps(doc))
    errs = []
    for extra in ((), ("--presets", str(preset))):
        proc = libra("calibrate", "megatron.log,zero=3,recompute=0", *MODEL, *extra)
        assert proc.returncode == 1, proc.stderr
        errs.append(proc.stderr)
    assert errs[0] == errs[1] and "train_mfu past 1" in errs[0], errs


def test_fitted_constants_leave_assumed(tmp_path):
    preset, out = tmp_path / "p.json", tmp_path / "q.json"
    ok("calibrate", "verl.log", *MODEL, "-o", str(preset))
    doc = json.load(open(preset))
    doc["hardware"][0]["assumed"] = ["decode_t_fix_s", "train_mfu", "allreduce_latency_s"]
    preset.write_text(json.dumps(doc))
    ok("calibrate", *VLLM, *MODEL, "--presets", str(preset), "-o", str(out))
    assert hardware(out)["assumed"] == ["train_mfu", "allreduce_latency_s"]


def test_a_request_rate_of_another_type_is_refused(tmp_path):
    for value in (True, [], None):
        doc = json.load(open(os.path.join(DATA, "vllm-c8.json")))
        doc["request_rate"] = value
        bad = tmp_path / "rate.json"
        bad.write_text(json.dumps(doc))
        proc = libra("calibrate", str(bad), "vllm-c1.json", *MODEL)
        assert proc.returncode == 2, (value, proc.stderr)
        assert str(bad) + ":1:" in proc.stderr and "request_rate" in proc.stderr, proc.stderr


def test_model_id_is_printed_with_the_point():
    out = ok("calibrate", *VLLM, *MODEL)
    assert "Qwen/Qwen2.5-7B-Instruct" in out, out
    doc = json.loads(ok("calibrate", *VLLM, *MODEL, "--json"))
    assert [p["model_id"] for p in doc["decode_points"]] == ["Qwen/Qwen2.5-7B-Instruct"] * 3


def test_a_kept_constant_keeps_its_model(tmp_path):
    first, second = str(tmp_path / "p.json"), str(tmp_path / "x.json")
    ok("calibrate", *VLLM, "sglang.jsonl", "verl.log", "megatron.log", *MODEL, "-o", first)
    ok("calibrate", "verl.log", "--model", "qwen3-4b", "--presets", first, "-o", second)
    row = hardware(second)["calibration"]
    assert row.startswith("libra calibrate, qwen3-4b: decode_t_fix_s from 5 decode points"), row
    assert "(rms error 0.30 %) on model qwen2.5-7b; decode_t_seq_s from 5" in row, row
    assert "(rms error 0.30 %) on model qwen2.5-7b; train_mfu from 5" in row, row
    third = str(tmp_path / "y.json")  # again: the mark is carried, not doubled
    ok("calibrate", "verl.log", *MODEL, "--presets", second, "-o", third)
    assert hardware(third)["calibration"].count("on model qwen2.5-7b") == 2


def test_serving_tp_follows_the_rollout_rule():
    """An engine splits the attention heads and replicates the KV heads past their count (the
    rollout model's rule, as vLLM serves Qwen3-30B-A3B's 4 KV heads on TP8), unlike a trainer,
    which splits both."""
    proc = libra("calibrate", "vllm-c1.json,tp=8", "vllm-c8.json,tp=8", "--model",
                 "qwen3-30b-a3b")
    assert proc.returncode in (0, 1) and "tp 8" not in proc.stderr, proc.stderr
    proc = libra("calibrate", "vllm-c1.json,tp=3", "vllm-c8.json,tp=3", *MODEL)
    assert proc.returncode == 2 and "tp 3 does not divide qwen2.5-7b's 28 heads" in proc.stderr


def test_a_name_in_upper_case_is_refused_for_its_form(tmp_path):
    proc = libra("calibrate", "vllm-c1.json", *MODEL, "--name", "A800-80G",
                 "-o", str(tmp_path / "p.json"))
    assert proc.returncode == 2 and "must be lower-case" in proc.stderr, proc.stderr


def test_an_absurd_iteration_is_named(tmp_path):
    doc = json.load(open(os.path.join(DATA, "vllm-c8.json")))
    doc["output_lens"] = [2000000000] * len(doc["output_lens"])
    doc["latencies"] = [1.0] * len(doc["output_lens"])
    bad = tmp_path / "absurd.json"
    bad.write_text(json.dumps(doc))
    proc = libra("calibrate", "vllm-c1.json", str(bad), *MODEL)
    assert proc.returncode == 2, proc.stderr
    assert str(bad) + ":1:" in proc.stderr and "per iteration" in proc.stderr, proc.stderr


def test_a_capture_of_another_model_is_refused():
    proc = libra("calibrate", "capture.jsonl", *MODEL)
    assert proc.returncode == 2, proc.stderr
    assert "qwen3-4b" in proc.stderr and "--model" in proc.stderr, proc.stderr
    assert "qwen3-4b" in ok("calibrate", "capture.jsonl", "--model", "qwen3-4b")
