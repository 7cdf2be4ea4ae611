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


def test_a_constant_set_by_hand_is_named_as_the_preset_file_s(tmp_path):
    """Only a preset with a `calibration` row was fitted; a constant a file sets by hand is
    the file's (as `libra presets` names it), and the others stay the built-in ones."""
    path = tmp_path / "hand.json"
    path.write_text(json.dumps({"hardware": [{
        "name": "mine", "bf16_flops_per_s": 1e15, "hbm_bytes": 2**36,
        "hbm_bw_bytes_per_s": 3e12, "nvlink_bw_bytes_per_s": 9e11,
        "allreduce_bus_bw_bytes_per_s": 3e11, "allreduce_latency_s": 3e-5,
        "inter_node_bw_bytes_per_s": 2.5e10, "gpus_per_node": 8,
        "decode_t_fix_s": 0.005, "train_mfu": 0.4}]}))
    r = run("--presets", str(path), "--hardware", "mine", "--model", "qwen2.5-7b", "--gpus", "8")
    assert r.returncode == 0, r.stderr
    assert f"t_fix 5.00 ms (preset file {path})" in r.stdout, r.stdout
    assert "us (assumed), eta_kv" in r.stdout and "calibrated" not in r.stdout, r.stdout
    assert f"(model MFU 0.40, preset file {path})" in r.stdout, r.stdout


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
                         (("--dp", "100"), "needs 100 GPUs"),
                         (("--seq-tokens", "40000"), "do not fit"),
                         (("--zero", "4"), "--zero"),
                         (("--ep", "2"), "is dense"),
                         (("--model", "qwen3-30b-a3b", "--dp", "6", "--ep", "16"), "must divide the 24"),
                         (("--model", "qwen3-30b-a3b", "--ep", "3"), "must divide")):
        r = run(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stdout == ""
        assert r.stderr.startswith("libra: cost: ") and needle in r.stderr, r.stderr
    # a layout the model cannot take names the flags that would change it
    for args, change in ((("--tp", "3"), "change --tp or --model"),
                         (("--model", "qwen3-30b-a3b", "--dp", "6", "--ep", "16"),
                          "change --dp, --ep or --model")):
        r = run(*args)
        assert r.returncode == 2 and r.stderr.endswith(f"; {change}\n"), r.stderr


def test_decode_parts_add_up_and_linear_layers_grow_with_tokens():
    """--json splits each decode row by kernel class and gives one layer's linear operators by
    token count: the figures a GPU measurement (bench/device_probe.py) is compared with."""
    doc = cost_json("--hardware", "h200", "--model", "qwen3-8b", "--gpus", "8")
    for row in doc["rollout"]["tp"]:
        for d in row["decode"]:
            assert abs(sum(d["parts"].values()) - d["iteration_s"]) <= 1e-12 * d["iteration_s"]
            assert d["parts"]["fixed_s"] == doc["rollout"]["constants"]["t_fix_s"]
            assert (d["parts"]["allreduce_s"] > 0) == (row["tp"] > 1)
        linear = row["linear_layer"]
        assert [r["tokens"] for r in linear] == [1, 8, 32, 64, 128, 256, 512, 2048, 8192]
        seconds = [r["seconds"] for r in linear]
        assert seconds == sorted(seconds) and seconds[0] > 0
        # one token streams the layer's weights: 36 such layers are most of the batch-1 linear time
        assert abs(36 * seconds[0] - row["decode"][0]["parts"]["linear_s"]) < 1e-9


def test_device_probe_compare_of_the_model_itself_is_all_ones(tmp_path):
    """A probe document whose measurements are the model's own figures compares at 1.00 in every
    cell: the comparison reads each figure from the row it belongs to."""
    import re
    import sys
    sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
    import device_probe as dp
    hw = json.loads(subprocess.run([LIBRA, "presets", "--json"], capture_output=True, text=True,
                                   check=True).stdout)
    h200 = next(h for h in hw["hardware"] if h["name"] == "h200")
    doc = {"schema": "libra.device_probe/1", "date": "model", "linear": [], "attention": [],
           "device": {"name": "the model", "total_memory_bytes": h200["hbm_bytes"],
                      "torch": "-", "cuda": "-", "nvidia_smi": {}},
           "hbm": {"copy_bytes_per_s": h200["hbm_bw_bytes_per_s"],
                   "read_bytes_per_s": h200["hbm_bw_bytes_per_s"]},
           "gemm": {"flops_per_s": h200["bf16_flops_per_s"]}}
    for m in dp.model_shapes(os.path.join(SOURCE_DIR, "data", "presets"), ["qwen3-8b"]):
        cost = cost_json("--hardware", "h200", "--model", m["name"])
        for row in cost["rollout"]["tp"]:
            layer = sum(2 * n * k for _, n, k in dp.shard_shapes(m, row["tp"]))
            doc["linear"].append({"model": m["name"], "tp": row["tp"], "layer_weight_bytes": layer,
                                  "linear": row["linear_layer"]})
        tp1 = cost["rollout"]["tp"][0]
        mfu = cost["rollout"]["constants"]["mfu_attn"]
        doc["attention"].append({"model": m["name"], "decode": [
            {"batch": d["batch"], "seconds": d["parts"]["attn_s"] / m["layers"],
             "backend": "model"} for d in tp1["decode"] if d["batch"] in dp.DECODE_BATCHES],
            "prefill": [{"tokens": 2048, "flops": 1e12, "backend": "model",
                         "seconds": 1e12 / (h200["bf16_flops_per_s"] * mfu)}]})
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "bench", "device_probe.py"),
                        "compare", str(path), "--libra", LIBRA], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    cells = re.findall(r"\((\d+\.\d\d)\)", r.stdout)  # the linear table: 4 TPs x 9 token counts
    assert len(cells) == 36 and set(cells) == {"1.00"}, r.stdout
    rows = [l for l in r.stdout.splitlines() if l.startswith("| qwen3-8b | decode")
            or l.startswith("| qwen3-8b | prefill") or l.startswith("| memory, CUDA")]
    assert len(rows) == 1 + len(dp.DECODE_BATCHES) + 1
    assert all(re.search(r"\| 1\.00(00)? \|", l) for l in rows), rows
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "bench", "device_probe.py"),
                        "compare", str(bad), "--libra", LIBRA], capture_output=True, text=True)
    assert r.returncode != 0 and "not a libra.device_probe/1 document" in r.stderr


def test_group_size_is_not_read():
    """The training step deals rl.batch_trajectories single sequences: GRPO groups play no part,
    so a --samples that could not change the answers is refused rather than ignored, and the
    batch need not be a multiple of a group size cost does not use (docs/cli.md `libra cost`)."""
    for args, flag in ((("--samples", "8"), "--samples"),
                       (("--set", "rl.samples=2"), "--set rl.samples")):
        r = run(*args)
        assert r.returncode == 2 and r.stdout == "", (args, r.stderr)
        assert r.stderr.startswith(f"libra: {flag}: rl.samples is not used by libra cost (it is "
                                   "read by libra plan, "), r.stderr
    # the default group size, given explicitly, asks nothing of it
    assert run("--json", "--samples", "4").stdout == run("--json").stdout
    # 30 is no multiple of the default 4 nor of Search-R1's 5 per prompt; the step has 30
    for args in ((), ("--workload", "search-r1")):
        doc = cost_json("--batch", "30", *args)
        assert doc["training"]["sequences"] == 30
        assert "30 sequences of 8192 tokens" in run("--batch", "30", *args).stdout


def test_a_file_batch_of_partial_groups_is_taken_by_cost_and_refused_by_check(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"rl": {"batch_trajectories": 30, "samples": 4}}))
    assert cost_json(str(path))["training"]["sequences"] == 30
    r = subprocess.run([LIBRA, "config", "check", str(path)], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "30 is not a multiple of rl.samples (4)" in r.stderr


def test_a_micro_batch_budget_past_what_a_log_may_give_is_refused():
    """2^31 tokens, the most libra calibrate reads from a trainer's log; 2^63 - 1 was taken and
    echoed as 9223372036854775808 (through a double), with activations of 1.4e15 GB."""
    assert run("--micro-batch-tokens", str(2 ** 31)).returncode == 0
    r = run("--micro-batch-tokens", str(2 ** 63 - 1))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == ("libra: cost: --micro-batch-tokens: expected an integer in [1, "
                        f"2147483648], not '{2 ** 63 - 1}'\n"), r.stderr
