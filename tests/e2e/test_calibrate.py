"""`libra calibrate` end to end (docs/calibrate.md): fits constants from benchmark files the cost
model itself generated, writes a preset every command takes, and refuses what it cannot fit.

The measurements are made by `libra cost` under a "truth" preset with known constants (a copy
of a800-80g with decode_t_fix_s 5 ms, decode_t_seq_s 60 us and train_mfu 0.5): its decode
table becomes vLLM and SGLang serving results (every request of a run at the table's context,
so the run's mean iteration is the table's), its training step becomes verl console lines and
Megatron-LM iteration lines, each with a fixed deterministic error of up to 0.5 %. Calibrating the built-in a800-80g on them must
recover the truth within the noise, and `libra cost` with the written preset must then give the
truth's figures, not the built-in ones. Needs LIBRA_BIN.
"""

import json
import os
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
MODEL = "qwen2.5-7b"
TRUTH = {"decode_t_fix_s": 5e-3, "decode_t_seq_s": 60e-6, "train_mfu": 0.5}
CONTEXT = 1024  # tokens of context of every decoding request, as `libra cost --context-tokens`
PROMPT = 16  # a short prompt, so that the runs' prefill is a small part of an iteration
OUTPUT = 2 * (CONTEXT - PROMPT)  # mean context PROMPT + OUTPUT/2 = CONTEXT
NOISE = {1: 0.004, 8: -0.003, 32: 0.002, 64: -0.004, 128: 0.001}  # relative error per batch


def libra(*args, env=None):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120, env=env)


def ok(*args, env=None):
    proc = libra(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def decode_table(*presets, env=None):
    """batch -> seconds per TP1 decode iteration of MODEL on a800-80g at CONTEXT."""
    extra = [a for p in presets for a in ("--presets", p)]
    doc = json.loads(ok("cost", *extra, "--model", MODEL, "--context-tokens", str(CONTEXT),
                        "--json", env=env))
    return {d["batch"]: d["iteration_s"] for d in doc["rollout"]["tp"][0]["decode"]}


TRAIN_LAYOUT = ("--gpus", "32", "--tp", "1", "--dp", "32", "--zero", "3",
                "--micro-batch-tokens", "16384", "--no-old-logprob")


def train_step(seq_tokens, sequences, *presets):
    """Seconds of one training step of MODEL on 32 a800-80g in verl's default layout."""
    extra = [a for p in presets for a in ("--presets", p)]
    doc = json.loads(ok("cost", *extra, "--model", MODEL, *TRAIN_LAYOUT, "--seq-tokens",
                        str(seq_tokens), "--batch", str(sequences), "--json"))
    return doc["training"]["step"]["step_s"]


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    base = next(h for h in json.loads(ok("presets", "--json"))["hardware"]
                if h["name"] == "a800-80g")
    del base["origin"]
    base.update(TRUTH)
    path = tmp_path_factory.mktemp("truth") / "truth.json"
    path.write_text(json.dumps({"schema": "libra.presets/1", "hardware": [base]}))
    return str(path)


def serving_run(tau, batch, backend):
    """A run of `batch` identical requests decoding together for OUTPUT tokens, tau each."""
    return {"backend": backend, "max_concurrency": batch, "duration": (OUTPUT - 1) * tau,
            "completed": batch, "input_lens": [PROMPT] * batch,
            "output_lens": [OUTPUT] * batch, "ttfts": [0.05] * batch,
            "itls": [[tau] * (OUTPUT - 1)] * batch, "errors": [""] * batch}


@pytest.fixture(scope="module")
def benchmarks(truth, tmp_path_factory):
    """vLLM results at batch 1 (old format) and 8 (with latencies), SGLang lines at 32-128."""
    iters = decode_table(truth)
    tau = {b: iters[b] * (1.0 + e) for b, e in NOISE.items()}
    out = tmp_path_factory.mktemp("bench")
    old = dict(serving_run(tau[1], 1, "vllm"), model_id="Qwen/Qwen2.5-7B-Instruct")
    (out / "vllm-c1.json").write_text(json.dumps(old))
    new = dict(serving_run(tau[8], 8, "vllm"), model_id="Qwen/Qwen2.5-7B-Instruct")
    new["latencies"] = [0.05 + (OUTPUT - 1) * tau[8]] * 8
    new["itls"] = [[] for _ in range(8)]  # latencies win; the ITLs are not needed then
    (out / "vllm-c8.json").write_text(json.dumps(new))
    lines = [json.dumps(serving_run(tau[b], b, "sglang")) for b in (32, 64, 128)]
    (out / "sglang.jsonl").write_text("\n".join(lines) + "\n")
    return [str(out / f) for f in ("vllm-c1.json", "vllm-c8.json", "sglang.jsonl")]


def constants(doc):
    return {c["name"]: c for c in doc["constants"]}


def recovered_mfu(doc):
    """train_mfu of a calibration, fitted, and the truth's within the noise."""
    mfu = constants(doc)["train_mfu"]
    assert mfu["fitted"] and abs(mfu["value"] - TRUTH["train_mfu"]) <= max(3 * mfu["sd"], 0.005)
    return mfu


def test_decode_constants_are_recovered_and_move_cost(benchmarks, tmp_path):
    preset = str(tmp_path / "a800.json")
    doc = json.loads(ok("calibrate", *benchmarks, "--model", MODEL, "-o", preset, "--json"))
    assert doc["schema"] == "libra.calibrate/1"
    assert doc["preset"] == {"name": "a800-80g", "file": preset}
    c = constants(doc)
    for name in ("decode_t_fix_s", "decode_t_seq_s"):
        assert c[name]["fitted"] and c[name]["points"] == 5
        assert abs(c[name]["value"] - TRUTH[name]) <= 3 * c[name]["sd"], c[name]
        assert abs(c[name]["value"] / TRUTH[name] - 1) < 0.05, c[name]
    assert not c["train_mfu"]["fitted"] and c["train_mfu"]["value"] == c["train_mfu"]["before"]
    assert doc["fits"]["decode"]["rms_error"] < 0.005 and doc["fits"]["train"] is None
    assert [(p["input"], p["line"]) for p in doc["decode_points"]] == [
        (benchmarks[0], 1), (benchmarks[1], 1), (benchmarks[2], 1), (benchmarks[2], 2),
        (benchmarks[2], 3)]
    for p, b in zip(doc["decode_points"], (1, 8, 32, 64, 128)):
        assert abs(p["decode_seqs"] - b) < 1e-9 and abs(p["ctx_tokens"] - CONTEXT) < 1e-9

    # the preset moves libra cost from the built-in constants to the fitted ones
    before, after = decode_table(), decode_table(preset)
    built_in = c["decode_t_fix_s"]["before"], c["decode_t_seq_s"]["before"]
    for b in (1, 8, 32, 64, 128):
        moved = (TRUTH["decode_t_fix_s"] - built_in[0]) + b * (TRUTH["decode_t_seq_s"] -
                                                              built_in[1])
        assert abs((after[b] - before[b]) / moved - 1) < 0.05, (b, after[b], before[b])
    assert decode_table(env=dict(os.environ, LIBRA_PRESETS=preset)) == after
    text = ok("cost", "--presets", preset, "--model", MODEL)
    assert "t_fix 5.0" in text and "(calibrated)" in text
    assert "calibrated: libra calibrate, qwen2.5-7b: decode constants from 5 decode points" in text


def test_preset_file_is_a_preset_every_command_takes(benchmarks, tmp_path):
    preset = tmp_path / "a800.json"
    text = ok("calibrate", *benchmarks, "--model", MODEL, "-o", str(preset))
    assert f"wrote {preset}: hardware preset a800-80g" in text
    doc = json.loads(preset.read_text())
    assert doc["schema"] == "libra.presets/1" and len(doc["hardware"]) == 1
    hw = doc["hardware"][0]
    assert hw["name"] == "a800-80g" and hw["train_mfu"] == 0.0  # no training point: built in
    listed = json.loads(ok("presets", "--presets", str(preset), "--json"))["hardware"]
    entry = next(h for h in listed if h["name"] == "a800-80g")
    assert entry["origin"] == str(preset) and entry["decode_t_fix_s"] == hw["decode_t_fix_s"]
    # the simulator and the planner run on it, and differently from the built-in constants
    sim = ("sim", "--steps", "3", "--model", MODEL, "--set", "sim.colocated_tp=4", "--set",
           "sim.async_train_gpus=16", "--set", "sim.async_tp=4", "--set",
           "plan.verify_candidates=0", "--json")
    assert ok(*sim, "--presets", str(preset)) != ok(*sim)
    plan = ("plan", "--model", MODEL, "--set", "plan.verify_candidates=0", "--json")
    assert ok(*plan, "--presets", str(preset)) != ok(*plan)


def test_name_writes_a_new_preset(benchmarks, tmp_path):
    preset = str(tmp_path / "mine.json")
    ok("calibrate", *benchmarks, "--model", MODEL, "-o", preset, "--name", "my-a800")
    assert decode_table(preset) == decode_table()  # a800-80g itself is untouched
    doc = json.loads(ok("cost", "--presets", preset, "--hardware", "my-a800", "--model", MODEL,
                        "--json"))
    assert doc["hardware"] == "my-a800" and doc["calibration"].startswith("libra calibrate")
    proc = libra("calibrate", *benchmarks, "--model", MODEL, "-o", preset, "--name", "Bad Name")
    assert proc.returncode == 2 and "--name: 'Bad Name' must be lower-case" in proc.stderr


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def verl_log(path, truth):
    """verl console lines of five training steps, measured under the truth preset."""
    lines = ["(TaskRunner pid=7) step:0 - val-core/gsm8k/reward/mean@1:np.float64(0.41)"]
    steps = ((1200, 1024, 0.005), (2400, 1024, -0.005), (3600, 512, 0.003),
             (6000, 512, -0.002), (800, 2048, 0.0))
    for step, (seq, n, err) in enumerate(steps, 1):
        update = train_step(seq, n, truth) * (1 + err)
        total = update + 80.0
        tokens = seq * n
        lines.append(
            f"(TaskRunner pid=7) step:{step} - actor/pg_loss:np.float64(-0.01) - "
            f"prompt_length/mean:200.0 - response_length/mean:np.float64({seq - 200}.0) - "
            f"timing_s/update_actor:{update!r} - timing_s/step:{total!r} - "
            f"perf/total_num_tokens:{tokens} - perf/time_per_step:{total!r} - "
            f"perf/throughput:{tokens / (total * 32)!r}")
    return write_lines(path, lines)


def test_train_mfu_is_recovered(truth, tmp_path):
    log = verl_log(tmp_path / "verl.log", truth)
    preset = str(tmp_path / "a800.json")
    doc = json.loads(ok("calibrate", log, "--model", MODEL, "-o", preset, "--json"))
    assert recovered_mfu(doc)["points"] == 5
    assert not constants(doc)["decode_t_fix_s"]["fitted"]
    assert doc["skipped_lines"] == 1
    assert [p["step"] for p in doc["train_points"]] == [1, 2, 3, 4, 5]
    assert all(p["dp"] == 32 and p["zero_stage"] == 3 for p in doc["train_points"])
    # libra cost's step under the preset is the truth's, and not the built-in one
    built_in, fitted, true = (train_step(3000, 1024, *p) for p in ((), (preset,), (truth,)))
    assert abs(fitted / true - 1) < 0.01 and abs(built_in / true - 1) > 0.2


MEGATRON_LAYOUT = ("--gpus", "32", "--tp", "4", "--dp", "8", "--zero", "1",
                   "--micro-batch-tokens", "8192", "--no-recompute", "--no-old-logprob",
                   "--seq-tokens", "4096")


def megatron_log(path, truth, layers=28, model=MODEL, layout=MEGATRON_LAYOUT, **more):
    """A Megatron-LM log: its arguments block (by default TP 4 over 32 GPUs, the distributed
    optimizer, selective recompute: costed as none, micro-batches of 2 sequences of 4096
    tokens; more replaces or adds arguments) and six iteration lines measured under the truth
    preset in `libra cost`'s layout, the first one slow (the start-up)."""
    args = {"seq_length": 4096, "world_size": 32, "tensor_model_parallel_size": 4,
            "pipeline_model_parallel_size": 1, "micro_batch_size": 2, "num_layers": layers,
            "hidden_size": 3584, "use_distributed_optimizer": True,
            "recompute_granularity": "selective", **more}
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(args.items())]
    lines.append("-------------------- end of arguments ---------------------")
    for i, (batch, err) in enumerate(((128, 0.4), (128, 0.003), (256, -0.004), (64, 0.002),
                                      (512, -0.001), (192, 0.0)), 1):
        doc = json.loads(ok("cost", "--presets", truth, "--model", model, *layout,
                            "--batch", str(batch), "--json"))
        ms = doc["training"]["step"]["step_s"] * (1 + err) * 1000
        lines.append(f" [2025-08-01 07:{i:02d}:00] iteration {i:8d}/{100:8d} | consumed samples: "
                     f"{i * batch:12d} | elapsed time per iteration (ms): {ms:.1f} | learning "
                     f"rate: 1.0E-05 | global batch size: {batch:5d} | lm loss: 2.0E+00 |")
    return write_lines(path, lines)


def test_train_mfu_is_recovered_from_a_megatron_log(truth, tmp_path):
    log = megatron_log(tmp_path / "megatron.log", truth)
    doc = json.loads(ok("calibrate", log, "--model", MODEL, "--json"))
    assert recovered_mfu(doc)["points"] == 5
    assert doc["skipped_lines"] == 1  # the start-up's line
    assert [p["step"] for p in doc["train_points"]] == [2, 3, 4, 5, 6]
    assert all((p["tp"], p["dp"], p["zero_stage"]) == (4, 8, 1) for p in doc["train_points"])
    # a log of another model is refused, naming both
    other = megatron_log(tmp_path / "other.log", truth, layers=32)
    proc = libra("calibrate", other, "--model", MODEL)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "the log's model has 32 layers of hidden size 3584, --model qwen2.5-7b 28" in (
        proc.stderr)


def test_a_megatron_log_with_expert_parallelism(truth, tmp_path):
    """Qwen3-30B-A3B over EP 8 (TP 1, DP 32): the experts' all-to-all and sharding are in each
    point's model, and the fit recovers the truth's MFU through them."""
    moe = "qwen3-30b-a3b"
    layout = ("--gpus", "32", "--tp", "1", "--dp", "32", "--ep", "8", "--zero", "1",
              "--micro-batch-tokens", "4096", "--no-recompute", "--no-old-logprob",
              "--seq-tokens", "4096")
    log = megatron_log(tmp_path / "moe.log", truth, model=moe, layout=layout, num_layers=48,
                       hidden_size=2048, tensor_model_parallel_size=1, micro_batch_size=1,
                       expert_model_parallel_size=8)
    doc = json.loads(ok("calibrate", log, "--model", moe, "--json"))
    recovered_mfu(doc)
    assert all((p["ep"], p["dp"]) == (8, 32) for p in doc["train_points"])
    assert " ep8 " in ok("calibrate", log, "--model", moe)
    # costed without EP (ep=1 overrides the log), the same times contradict the model
    flat = libra("calibrate", log + ",ep=1", "--model", moe)
    assert flat.returncode == 1 and "the points contradict the cost model" in flat.stderr
    for arg, message in ((log + ",ep=3", "ep 3 must divide the 32 GPUs of a pipeline stage"),
                         (megatron_log(tmp_path / "dense.log", truth) + ",ep=2",
                          "ep 2: qwen2.5-7b is dense")):
        model = MODEL if "dense" in arg else moe
        proc = libra("calibrate", arg, "--model", model)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_one_batch_size_is_refused(benchmarks, tmp_path):
    preset = tmp_path / "a800.json"
    proc = libra("calibrate", benchmarks[1], "--model", MODEL, "-o", str(preset))
    assert proc.returncode == 1 and proc.stdout == ""
    assert "decode_t_seq_s is not determined by the points: the one decode point runs 8.00" in (
        proc.stderr)
    assert "--hold decode_t_seq_s" in proc.stderr
    assert not preset.exists() and not (tmp_path / "a800.json.tmp").exists()
    # held at its value, the fixed cost alone is fitted, exactly (one point, one constant)
    doc = json.loads(ok("calibrate", benchmarks[1], "--model", MODEL, "--hold",
                        "decode_t_seq_s", "--json"))
    c = constants(doc)
    assert c["decode_t_fix_s"]["fitted"] and c["decode_t_fix_s"]["sd"] is None
    assert c["decode_t_seq_s"]["held"] and c["decode_t_seq_s"]["value"] == c["decode_t_seq_s"][
        "before"]
    assert doc["fits"]["decode"]["max_error"] < 1e-12


BAD = [
    ('{"duration": 1, "input_lens": [1], "output_lens": [3], "ttfts": [0.1], "itls": [[0.1, -2]]}',
     2, "bad.json:1:87: itls.0.1: expected a time in seconds"),
    ('{"duration": 1, "input_lens": [1], "output_lens": [3], "ttfts": [0.1]}', 2,
     "bad.json:1:1: itls: missing: the run has no per-request records (vLLM: --save-result "
     "--save-detailed; SGLang: --output-details)"),
    ('{"duration": 1,\n', 2, "bad.json:1:16: invalid JSON"),
    ("step:1 - timing_s/update_actor:5 - prompt_length/mean:1\n", 2,
     "bad.json:1:1: perf/total_num_tokens: missing"),
    ('{"libra_trace":1,"workload":"search-r1"}\n', 2,
     "bad.json: no turn carries a timing: only `libra serve --capture` records them"),
    ('{"libra_trace":1,"workload":"search-r1"}\n{"step":0}\n', 2, "bad.json:2:1: prompt_id: missing"),
    ("hello\n", 2,
     "not a vLLM or SGLang serving benchmark result, a verl or Megatron-LM log or a libra trace"),
    (" iteration 5/ 9 | elapsed time per iteration (ms): 1.0 | global batch size: 8 |\n", 2,
     "bad.json:1:1: an iteration line before a whole arguments block"),
]


@pytest.mark.parametrize("text,code,message", BAD)
def test_bad_input_is_refused_without_output(text, code, message, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    preset = tmp_path / "out.json"
    proc = libra("calibrate", str(bad), "--model", MODEL, "-o", str(preset))
    assert proc.returncode == code and proc.stdout == ""
    assert message in proc.stderr.replace(str(tmp_path) + "/", ""), proc.stderr
    assert not preset.exists()


def test_usage_and_io_errors(benchmarks, tmp_path):
    cases = [
        (("calibrate",), 2, "no INPUT"),
        (("calibrate", benchmarks[0] + ",gpus=8"), 2,
         "option gpus applies to trainers' logs, not serving results"),
        (("calibrate", benchmarks[0] + ",tp=3"), 2, "tp 3 does not divide qwen2.5-7b's 28 heads"),
        (("calibrate", benchmarks[0] + ",tp=0"), 2, "tp: expected an integer in 1..1024"),
        (("calibrate", *benchmarks, "--hold", "t_fix"), 2, "--hold: unknown constant 't_fix'"),
        (("calibrate", *benchmarks, "--hold", ""), 2, "--hold: an empty value"),
        (("calibrate", *benchmarks, "--hold", "decode_t_seq_s,"), 2,
         "--hold: an empty value in 'decode_t_seq_s,'"),
        (("calibrate", *benchmarks, "--hold", "decode_t_seq_s,,train_mfu"), 2,
         "--hold: an empty value in 'decode_t_seq_s,,train_mfu'"),
        (("calibrate", *benchmarks, "--hold", ",decode_t_seq_s"), 2,
         "--hold: an empty value in ',decode_t_seq_s'"),
        (("calibrate", *benchmarks, "--hold", "decode_t_fix_s,decode_t_seq_s"), 2,
         "nothing to fit"),
        # a held constant no input fits would keep its value held or not
        (("calibrate", *benchmarks, "--hold", "train_mfu"), 2,
         "--hold train_mfu: no input has points that fit it"),
        (("calibrate", *benchmarks, "--hold", "decode_t_fix_s,decode_t_fix_s"), 2,
         "--hold: 'decode_t_fix_s' is named twice"),
        (("calibrate", str(tmp_path / "none.json")), 3, "cannot read"),
        (("calibrate", *benchmarks, "-o", str(tmp_path / "no" / "dir.json")), 3,
         "cannot write"),
        (("calibrate", *benchmarks, "-o", "-"), 2, "-o: the preset needs a file"),
    ]
    for args, code, message in cases:
        proc = libra(*args, "--model", MODEL)
        assert proc.returncode == code, (args, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
        assert proc.stdout == ""
    assert not (tmp_path / "no").exists()


def test_text_report(benchmarks):
    text = ok("calibrate", *benchmarks, "--model", MODEL)
    lines = text.splitlines()
    assert lines[0] == "libra calibrate: qwen2.5-7b on a800-80g; 5 decode points, 0 training points"
    assert any(line.startswith("decode_t_fix_s") and "fitted on 5 decode points" in line
               for line in lines)
    assert any(line.startswith("train_mfu") and "kept: no point of its kind" in line
               for line in lines)
    assert "fit error over the decode points: rms" in text
    assert "sglang.jsonl" in text and "wrote" not in text  # no -o: nothing written
    assert text == ok("calibrate", *benchmarks, "--model", MODEL)  # deterministic


@pytest.mark.parametrize("name", ["calibrate example", "calibrate capture example"])
def test_documented_example(name, tmp_path):
    """docs/calibrate.md's examples are these commands' output, byte for byte."""
    source = os.environ["LIBRA_SOURCE_DIR"]
    with open(os.path.join(source, "docs", "calibrate.md"), encoding="utf-8") as f:
        doc = f.read()
    block = doc.split("<!-- BEGIN %s -->\n```\n" % name)[1].split("```\n<!-- END")[0]
    lines = block.splitlines(keepends=True)
    assert lines[0] == "$ cd tests/data/calibrate\n" and lines[1].startswith("$ libra calibrate ")
    args = lines[1][len("$ libra "):].split()
    written = str(tmp_path / "my-a800.json")
    args = [written if a == "/tmp/my-a800.json" else a for a in args]
    proc = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120,
                          cwd=os.path.join(source, "tests", "data", "calibrate"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.replace(written, "/tmp/my-a800.json") == "".join(lines[2:])
    assert os.path.exists(written) == ("-o" in args)


def test_tables_keep_their_columns_under_long_paths(tmp_path):
    """The input column is as wide as the longest input's name: each row of the decode and
    training tables is as long as its header (a path past 24 bytes pushed its row out)."""
    data = os.path.join(os.environ.get("LIBRA_SOURCE_DIR", "."), "tests", "data", "calibrate")
    names = ("vllm-c1.json", "vllm-c8.json", "verl.log")
    deep = tmp_path / "a-directory-name-long-enough-to-matter"
    deep.mkdir()
    for name in names:
        (deep / name).write_bytes(open(os.path.join(data, name), "rb").read())
    out = ok("calibrate", *(str(deep / n) for n in names), "--model", "qwen2.5-7b")
    tables = [t.split("\n")[1:] for t in out.split("\n\n") if t.startswith(("decode points",
                                                                             "training points"))]
    assert len(tables) == 2, out
    for header, *rows in tables:
        rows = [r for r in rows if r.startswith(str(deep))]
        assert rows and all(len(r) == len(header) for r in rows), (header, rows)
