"""Writes the example inputs of docs/calibrate.md into this directory.

No measured benchmark files are at hand, so these are made by the cost model itself: `libra
cost` under a preset "a800-80g" whose constants are known (decode_t_fix_s 5 ms, decode_t_seq_s
60 us, train_mfu 0.5) times the runs and steps, and each figure is then moved by a fixed error
of up to 0.5 %. The files have the shapes the real tools write: vLLM's `vllm bench serve
--save-result --save-detailed` result (one per concurrency), SGLang's `bench_serving
--output-file F --output-details` JSON Lines (one line per run), verl's console metrics
lines, and a Megatron-LM log (its arguments block and iteration lines). Run as `LIBRA_BIN=build/dev/libra python3 tests/data/calibrate/make.py`.
"""

import json
import os
import subprocess

LIBRA = os.environ.get("LIBRA_BIN", "build/dev/libra")
HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "qwen2.5-7b"
TRUTH = {"decode_t_fix_s": 5e-3, "decode_t_seq_s": 60e-6, "train_mfu": 0.5}


def libra(*args):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, check=True).stdout


def truth_preset(path):
    base = next(h for h in json.loads(libra("presets", "--json"))["hardware"]
                if h["name"] == "a800-80g")
    del base["origin"]
    base.update(TRUTH)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"schema": "libra.presets/1", "hardware": [base]}, f)


def iteration_s(preset, context, batch):
    doc = json.loads(libra("cost", "--presets", preset, "--model", MODEL, "--context-tokens",
                           str(context), "--json"))
    return next(d["iteration_s"] for d in doc["rollout"]["tp"][0]["decode"]
                if d["batch"] == batch)


def run(preset, batch, prompt, output, err, detailed_itls=True):
    """`batch` requests decoding together: prompt tokens in, output out, at the model's pace."""
    tau = iteration_s(preset, prompt + output // 2, batch) * (1.0 + err)
    decode = (output - 1) * tau
    return {"duration": decode, "completed": batch, "failed": 0,
            "total_input_tokens": prompt * batch, "total_output_tokens": output * batch,
            "input_lens": [prompt] * batch, "output_lens": [output] * batch,
            "ttfts": [0.05] * batch,
            "itls": [[tau] * (output - 1) if detailed_itls else [] for _ in range(batch)],
            "errors": [""] * batch}


def vllm(preset, batch, err):
    r = run(preset, batch, 16, 1000, err, detailed_itls=batch <= 8)
    r.update({"date": "20250601-120000", "backend": "vllm", "label": None,
              "model_id": "Qwen/Qwen2.5-7B-Instruct", "num_prompts": batch,
              "request_rate": "inf", "burstiness": 1.0, "max_concurrency": batch,
              "latencies": [0.05 + (1000 - 1) * r["itls"][0][0] if r["itls"][0] else
                            0.05 + r["duration"]] * batch,
              "start_times": [0.0] * batch})
    return r


def verl_line(preset, step, response, sequences, err):
    doc = json.loads(libra("cost", "--presets", preset, "--model", MODEL, "--gpus", "32",
                           "--tp", "1", "--dp", "32", "--zero", "3", "--micro-batch-tokens",
                           "16384", "--no-old-logprob", "--seq-tokens", str(200 + response),
                           "--batch", str(sequences), "--json"))
    update = doc["training"]["step"]["step_s"] * (1.0 + err)
    total, tokens = update + 95.0, (200 + response) * sequences
    return (f"(TaskRunner pid=2381) step:{step} - actor/pg_loss:np.float64(-0.0123) - "
            f"response_length/mean:np.float64({response}.0) - prompt_length/mean:200.0 - "
            f"timing_s/gen:61.2 - timing_s/update_actor:{update:.4f} - timing_s/step:{total:.4f} - "
            f"perf/total_num_tokens:{tokens} - perf/time_per_step:{total:.4f} - "
            f"perf/throughput:{tokens / (total * 32):.4f}")


MEGATRON_ARGS = {"seq_length": 4096, "world_size": 32, "tensor_model_parallel_size": 2,
                 "pipeline_model_parallel_size": 1, "context_parallel_size": 1,
                 "micro_batch_size": 1, "global_batch_size": 256,
                 "use_distributed_optimizer": True, "recompute_granularity": "full",
                 "num_layers": 28, "hidden_size": 3584, "lr": "3e-05"}


def megatron_log(preset):
    """A Megatron-LM run of Qwen2.5-7B on 32 GPUs (TP 2, DP 16, distributed optimizer, full
    recompute): its arguments block, then an iteration line per 10 iterations; the first
    interval holds the start-up (slower), as Megatron's first lines do."""
    lines = ["using world size: 32, data-parallel size: 16, context-parallel size: 1, "
             "tensor-model-parallel size: 2, pipeline-model-parallel size: 1",
             "------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(MEGATRON_ARGS.items())]
    lines.append("-------------------- end of arguments ---------------------")
    consumed = 0
    for i, (batch, err) in enumerate(((256, 0.35), (256, 0.003), (512, -0.004), (128, 0.002),
                                      (384, -0.001)), 1):
        doc = json.loads(libra("cost", "--presets", preset, "--model", MODEL, "--gpus", "32",
                               "--tp", "2", "--dp", "16", "--zero", "1", "--micro-batch-tokens",
                               "4096", "--no-old-logprob", "--seq-tokens", "4096", "--batch",
                               str(batch), "--json"))
        ms = doc["training"]["step"]["step_s"] * (1.0 + err) * 1000.0
        consumed += 10 * batch
        lines.append(f" [2025-06-01 12:{i:02d}:00] iteration {10 * i:8d}/{500:8d} | consumed "
                     f"samples: {consumed:12d} | elapsed time per iteration (ms): {ms:.1f} | "
                     f"learning rate: 3.000000E-05 | global batch size: {batch:5d} | lm loss: "
                     f"2.104388E+00 | loss scale: 1.0 | grad norm: 1.042 | number of skipped "
                     f"iterations:   0 | number of nan iterations:   0 |")
    return "\n".join(lines) + "\n"


def main():
    preset = os.path.join(HERE, "truth.tmp.json")
    truth_preset(preset)
    try:
        for batch, err in ((1, 0.004), (8, -0.003), (32, 0.002)):
            with open(os.path.join(HERE, f"vllm-c{batch}.json"), "w", encoding="utf-8") as f:
                json.dump(vllm(preset, batch, err), f)
        with open(os.path.join(HERE, "sglang.jsonl"), "w", encoding="utf-8") as f:
            for batch, err in ((64, -0.004), (128, 0.001)):
                r = run(preset, batch, 1000, 32, err)
                r.update({"backend": "sglang", "dataset_name": "random", "request_rate": "inf",
                          "max_concurrency": batch})
                f.write(json.dumps(r) + "\n")
        lines = ["(TaskRunner pid=2381) step:0 - val-core/openai/gsm8k/reward/mean@1:"
                 "np.float64(0.412)"]
        for step, (response, sequences, err) in enumerate(
                ((1000, 1024, 0.004), (2200, 1024, -0.005), (3400, 512, 0.002),
                 (5800, 512, -0.003), (600, 2048, 0.0)), 1):
            lines.append(verl_line(preset, step, response, sequences, err))
        with open(os.path.join(HERE, "verl.log"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(HERE, "megatron.log"), "w", encoding="utf-8") as f:
            f.write(megatron_log(preset))
    finally:
        os.remove(preset)


if __name__ == "__main__":
    main()
