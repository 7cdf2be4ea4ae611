"""End-to-end tests of `libra cost`: the JSON contract, the memory capacity and its source, the
MoE label, the calibration tables that docs/calibration.md embeds, and clear errors for layouts
that cannot run."""

import json
import os
import subprocess

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]


def run(*args):
    return subprocess.run([LIBRA, "cost", *args], capture_output=True, text=True, timeout=120)


def cost_json(*args):
    r = run("--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_json_envelope_and_answers():
    doc = cost_json("--hardware", "a800-80g", "--model", "qwen3-14b", "--gpus", "48")
    assert doc["schema"] == "libra.cost/2"
    for key in ("libra_version", "seed", "config_digest"):
        assert key in doc
    assert doc["model"] == "qwen3-14b" and not doc["moe"]
    tps = [row["tp"] for row in doc["rollout"]["tp"]]
    assert tps == [1, 2, 4, 8]
    for row in doc["rollout"]["tp"]:
        times = [d["iteration_s"] for d in row["decode"]]
        assert times == sorted(times), "a bigger batch never decodes faster"
    capacity = [row["kv_capacity_tokens"] for row in doc["rollout"]["tp"]]
    assert capacity == sorted(capacity)
    train = doc["training"]
    assert train["config"]["tp"] * train["config"]["dp"] <= 48
    assert train["step"]["step_s"] > train["step"]["compute_s"] > 0
    assert isinstance(train["memory"]["fits"], bool)


def test_memory_capacity_and_source_are_printed():
    """The capacity is the device's own figure (the CUDA total on an H20), not 96e9 bytes."""
    r = run("--hardware", "h20", "--model", "qwen2.5-7b", "--gpus", "8")
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("memory per GPU:"))
    assert "102010716160 bytes (95.00 GiB)" in line
    assert "source: CUDA total 97285 MiB" in line
    doc = cost_json("--hardware", "h20", "--model", "qwen2.5-7b", "--gpus", "8")
    assert doc["hbm"]["bytes"] == 97285 * 2**20
    assert doc["hbm"]["source"].startswith("CUDA total 97285 MiB")
    presets = json.loads(subprocess.run([LIBRA, "presets", "--json"], capture_output=True,
                                        text=True, check=True).stdout)
    h20 = next(h for h in presets["hardware"] if h["name"] == "h20")
    assert h20["hbm_bytes"] == doc["hbm"]["bytes"] and h20["hbm_source"] == doc["hbm"]["source"]


def test_a_preset_without_a_source_says_so(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"hardware": [{
        "name": "mine", "bf16_flops_per_s": 1e15, "hbm_bytes": 2**36,
        "hbm_bw_bytes_per_s": 3e12, "nvlink_bw_bytes_per_s": 9e11,
        "allreduce_bus_bw_bytes_per_s": 3e11, "allreduce_latency_s": 3e-5,
        "inter_node_bw_bytes_per_s": 2.5e10, "gpus_per_node": 8}]}))
    r = run("--presets", str(path), "--hardware", "mine", "--model", "qwen2.5-7b", "--gpus", "8")
    assert r.returncode == 0, r.stderr
    assert "memory per GPU: 68719476736 bytes (64.00 GiB), source: not given" in r.stdout


def test_same_input_same_bytes():
    assert run("--json").stdout == run("--json").stdout


def test_moe_is_labelled():
    doc = cost_json("--model", "qwen3-30b-a3b")
    assert doc["moe"] and "moe_training_dense_approximation" not in doc
    r = run("--model", "qwen3-30b-a3b")
    assert r.returncode == 0 and "MoE" in r.stdout


def test_expert_parallelism_splits_the_experts_and_adds_all_to_alls():
    # Qwen3-30B-A3B on 16 GPUs, TP 1, DP 16: EP 8 holds 1/8 of the experts per rank and
    # exchanges tokens on NVLink; EP 16 spans two nodes, so its all-to-alls cross the NICs.
    base = ("--model", "qwen3-30b-a3b", "--gpus", "16", "--tp", "1", "--zero", "1",
            "--micro-batch-tokens", "8192")
    one, eight, sixteen = (cost_json(*base, "--ep", ep)["training"] for ep in ("1", "8", "16"))
    assert one["config"]["ep"] == 1 and one["step"]["ep_comm_s"] == 0
    assert eight["memory"]["weights_bytes"] < one["memory"]["weights_bytes"] / 5
    assert 0 < eight["step"]["ep_comm_s"] < sixteen["step"]["ep_comm_s"]
    assert eight["step"]["compute_s"] == one["step"]["compute_s"]
    assert "EP 8" in run(*base, "--ep", "8").stdout


def test_calibration_matches_the_document():
    r = run("calibration")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(SOURCE_DIR, "docs", "calibration.md"), encoding="utf-8") as f:
        doc = f.read()
    section = doc.split("<!-- BEGIN cost calibration -->\n")[1].split("<!-- END cost")[0]
    assert r.stdout == section


def test_calibration_takes_only_an_output_file(tmp_path):
    """The tables depend on no config, preset or layout: a flag that could not change them is
    refused, whichever side of `calibration` it stands, rather than ignored."""
    for args in (["calibration", "--json"], ["calibration", "--gpus", "8"],
                 ["--tp", "2", "calibration"], ["calibration", "--presets", "none.json"],
                 ["calibration", "--set", "rl.samples=8"]):
        r = run(*args)
        assert r.returncode == 2, args
        assert r.stdout == ""
        assert r.stderr.startswith("libra: cost: unknown or malformed flag '--"), r.stderr
    out = tmp_path / "calibration.md"
    r = run("-o", str(out), "calibration")
    assert r.returncode == 0, r.stderr
    assert out.read_text(encoding="utf-8") == run("calibration").stdout


def test_layouts_that_cannot_run_are_usage_errors():
    for args, needle in ((("--tp", "3"), "tp must divide"),
                         (("--dp", "100"), "needs 400 GPUs"),
                         (("--seq-tokens", "40000"), "do not fit"),
                         (("--zero", "4"), "--zero"),
                         (("--ep", "2"), "is dense"),
                         (("--model", "qwen3-30b-a3b", "--dp", "6", "--ep", "16"), "must divide the 24"),
                         (("--model", "qwen3-30b-a3b", "--ep", "3"), "must divide")):
        r = run(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stdout == ""
        assert r.stderr.startswith("libra: cost: ") and needle in r.stderr, r.stderr
