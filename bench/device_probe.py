#!/usr/bin/env python3
"""Measures on a GPU what the cost model assumes about it, and compares the two.

  device_probe.py measure [--out FILE] [--models M,...] [--presets DIR]
      Needs PyTorch with CUDA. Writes one JSON document (schema libra.device_probe/1): the
      memory the device reports (CUDA runtime total, nvidia-smi total), HBM bandwidth (a copy
      and a read-only reduction), a square bf16 GEMM, and per model and TP size the time of one
      layer's linear operators (QKV, O, gate/up, down; the model's every layer with its own
      weights, replayed as one CUDA graph) at decode and prefill token counts, decode attention
      over a 4096-token context and causal prefill attention (torch's scaled_dot_product_attention).

  device_probe.py compare FILE --libra BIN [--markdown]
      Puts each measurement beside what `libra cost --json` models for the same device, model,
      TP and tokens. Needs no GPU.

The shapes are read from data/presets/models.json, so both sides speak of the same layers.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINEAR_TOKENS = [1, 8, 32, 64, 128, 256, 512, 2048, 8192]  # `libra cost --json` linear_layer
DECODE_BATCHES = [1, 8, 32, 64, 128]  # a subset of `libra cost`'s decode batches
DECODE_CONTEXT = 4096  # `libra cost`'s default --context-tokens
PREFILL_TOKENS = [2048, 8192]
TP_SIZES = [1, 2, 4, 8]


def model_shapes(presets_dir, names):
    with open(os.path.join(presets_dir, "models.json")) as f:
        models = {m["name"]: m for m in json.load(f)["models"]}
    out = []
    for n in names:
        m = models[n]
        if m.get("experts"):
            sys.exit(f"device_probe: {n} is a mixture of experts; only dense models are probed")
        out.append(m)
    return out


# ---- measure (on the GPU) ---------------------------------------------------------------------


def timed(torch, fn, min_s=0.05, max_reps=200):
    """Mean seconds of fn() after a warm-up, repeated until about min_s has passed."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = time.perf_counter() - t0
    reps = max(3, min(max_reps, math.ceil(min_s / max(once, 1e-7))))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def as_graph(torch, fn):
    """fn captured as one CUDA graph (no launch overhead in what is timed)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def shard_shapes(m, tp):
    """(N, K) of each linear operator of one layer on one GPU of a TP group (Megatron split)."""
    q, kv = m["heads"] * m["head_dim"], m["kv_heads"] * m["head_dim"]
    kv_per_gpu = max(kv // tp, m["head_dim"])  # fewer KV heads than GPUs: each keeps one
    return [("qkv", q // tp + 2 * kv_per_gpu, m["hidden"]), ("o", m["hidden"], q // tp),
            ("gate_up", 2 * m["ffn"] // tp, m["hidden"]), ("down", m["hidden"], m["ffn"] // tp)]


def probe_linear(torch, m, tp, log):
    layers = m["layers"]
    shapes = shard_shapes(m, tp)
    dev, bf16 = "cuda", torch.bfloat16
    weights = [[torch.empty(n, k, dtype=bf16, device=dev).normal_(0, 0.02) for _, n, k in shapes]
               for _ in range(layers)]
    layer_bytes = sum(2 * n * k for _, n, k in shapes)
    rows = []
    for t in LINEAR_TOKENS:
        xs = [torch.empty(t, k, dtype=bf16, device=dev).normal_() for _, _, k in shapes]
        ys = [torch.empty(t, n, dtype=bf16, device=dev) for _, n, _ in shapes]

        def forward():
            for w in weights:
                for i in range(4):
                    torch.mm(xs[i], w[i].t(), out=ys[i])

        per_layer = timed(torch, as_graph(torch, forward)) / layers
        flops = 2.0 * t * layer_bytes / 2
        rows.append({"tokens": t, "seconds": per_layer, "weight_bytes_per_s": layer_bytes / per_layer,
                     "flops_per_s": flops / per_layer})
        log(f"  {m['name']} tp{tp} linear {t:5d} tokens: {per_layer * 1e6:9.1f} us/layer "
            f"{layer_bytes / per_layer / 1e12:5.2f} TB/s {flops / per_layer / 1e12:6.1f} TFLOP/s")
        del xs, ys
    del weights
    torch.cuda.empty_cache()
    return {"model": m["name"], "tp": tp, "layer_weight_bytes": layer_bytes, "linear": rows}


def attention_runner(torch, q, kvs, causal):
    """A function running scaled_dot_product_attention over each (k, v) of kvs on the first
    fused kernel that takes these shapes (grouped KV heads included), and that kernel's name;
    (None, None) when none does (the slow reference kernel would not measure the device)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    f = torch.nn.functional.scaled_dot_product_attention
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.CUDNN_ATTENTION):
        def run(backend=backend):
            with sdpa_kernel([backend]):
                for k, v in kvs:
                    f(q, k, v, is_causal=causal, enable_gqa=True)
        try:
            run()
            torch.cuda.synchronize()
            return run, backend.name.lower()
        except RuntimeError:
            continue
    return None, None


def probe_attention(torch, m, log):
    """Decode attention over DECODE_CONTEXT tokens and causal prefill, one layer at TP 1."""
    dev, bf16, d = "cuda", torch.bfloat16, m["head_dim"]
    hq, hkv = m["heads"], m["kv_heads"]

    def rand(*shape):
        return torch.empty(*shape, dtype=bf16, device=dev).normal_()

    decode = []
    for b in DECODE_BATCHES:
        kv_bytes = 2 * b * hkv * DECODE_CONTEXT * d * 2
        copies = max(1, min(m["layers"], math.ceil(512e6 / kv_bytes)))  # past the 60 MB L2
        q = rand(b, hq, 1, d)
        kvs = [(rand(b, hkv, DECODE_CONTEXT, d), rand(b, hkv, DECODE_CONTEXT, d))
               for _ in range(copies)]
        run, backend = attention_runner(torch, q, kvs, False)
        if run is None:
            log(f"  {m['name']} decode attention batch {b}: no fused SDPA kernel ran")
        else:
            per_layer = timed(torch, run) / copies
            decode.append({"batch": b, "context_tokens": DECODE_CONTEXT, "seconds": per_layer,
                           "kv_bytes": kv_bytes, "backend": backend})
            log(f"  {m['name']} decode attention batch {b:3d}: {per_layer * 1e6:8.1f} us/layer "
                f"{kv_bytes / per_layer / 1e12:5.2f} TB/s of KV ({backend})")
        del q, kvs
    prefill = []
    for t in PREFILL_TOKENS:
        q, kvs = rand(1, hq, t, d), [(rand(1, hkv, t, d), rand(1, hkv, t, d))]
        run, backend = attention_runner(torch, q, kvs, True)
        if run is None:
            log(f"  {m['name']} prefill attention {t}: no fused SDPA kernel ran")
        else:
            s = timed(torch, run)
            flops = 4.0 * hq * d * t * (t + 1) / 2  # the model's pairs: causal, diagonal included
            prefill.append({"tokens": t, "seconds": s, "flops": flops, "backend": backend})
            log(f"  {m['name']} prefill attention {t:5d} tokens: {s * 1e6:9.1f} us/layer "
                f"{flops / s / 1e12:6.1f} TFLOP/s ({backend})")
        del q, kvs
    torch.cuda.empty_cache()
    return {"model": m["name"], "decode": decode, "prefill": prefill}


def smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=30).stdout.strip().splitlines()[0]
        name, mib, driver = [x.strip() for x in out.split(",")]
        return {"name": name, "memory_total_mib": int(mib), "driver": driver}
    except (OSError, IndexError, ValueError, subprocess.SubprocessError) as e:
        return {"error": str(e)}


def measure(args):
    import torch
    if not torch.cuda.is_available():
        sys.exit("device_probe: PyTorch sees no CUDA device")

    def log(msg):
        print(msg, flush=True)

    props = torch.cuda.get_device_properties(0)
    free, total = torch.cuda.mem_get_info()
    doc = {"schema": "libra.device_probe/1", "date": time.strftime("%Y-%m-%d"),
           "device": {"name": props.name, "total_memory_bytes": props.total_memory,
                      "mem_get_info_total_bytes": total, "multiprocessors":
                      props.multi_processor_count, "torch": torch.__version__,
                      "cuda": torch.version.cuda, "nvidia_smi": smi()}}
    log(f"{props.name}: {props.total_memory} bytes ({props.total_memory / 2**20:.0f} MiB), "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}")
    n = 1 << 31  # 4 GiB of bf16
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    b = torch.empty_like(a)
    copy_s = timed(torch, lambda: b.copy_(a), min_s=0.2)
    read_s = timed(torch, lambda: a.sum(dtype=torch.float32), min_s=0.2)
    del a, b
    x = torch.empty(8192, 8192, dtype=torch.bfloat16, device="cuda").normal_()
    y = torch.empty(8192, 8192, dtype=torch.bfloat16, device="cuda").normal_()
    gemm_s = timed(torch, lambda: torch.mm(x, y), min_s=0.3)
    del x, y
    torch.cuda.empty_cache()
    doc["hbm"] = {"bytes": 2 * n, "copy_s": copy_s, "copy_bytes_per_s": 4 * n / copy_s,
                  "read_s": read_s, "read_bytes_per_s": 2 * n / read_s}
    doc["gemm"] = {"m": 8192, "n": 8192, "k": 8192, "seconds": gemm_s,
                   "flops_per_s": 2 * 8192**3 / gemm_s}
    log(f"HBM copy {4 * n / copy_s / 1e12:.2f} TB/s (read + write), read {2 * n / read_s / 1e12:.2f}"
        f" TB/s; bf16 GEMM 8192^3 {2 * 8192**3 / gemm_s / 1e12:.0f} TFLOP/s")
    doc["linear"], doc["attention"] = [], []
    save(doc, args.out)
    for m in model_shapes(args.presets, args.models.split(",")):
        for tp in TP_SIZES:
            doc["linear"].append(probe_linear(torch, m, tp, log))
            save(doc, args.out)
        try:
            doc["attention"].append(probe_attention(torch, m, log))
        except (RuntimeError, ImportError) as e:  # an old torch: the linear rows still stand
            log(f"  {m['name']} attention not measured: {e}")
        save(doc, args.out)
    if not args.out:
        sys.stdout.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def save(doc, path):
    """Writes what is measured so far, so that a run cut short keeps its rows."""
    if path:
        with open(path + ".tmp", "w") as f:
            f.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.replace(path + ".tmp", path)


# ---- compare (anywhere) -----------------------------------------------------------------------


def libra_cost(libra, hardware, model):
    out = subprocess.run([libra, "cost", "--hardware", hardware, "--model", model, "--json",
                          "--context-tokens", str(DECODE_CONTEXT)], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def compare(args):
    with open(args.file) as f:
        doc = json.load(f)
    if doc.get("schema") != "libra.device_probe/1":
        sys.exit(f"device_probe: {args.file}: not a libra.device_probe/1 document")
    hw = args.hardware
    cost = {}
    for row in doc["linear"] + doc["attention"]:
        if row["model"] not in cost:
            cost[row["model"]] = libra_cost(args.libra, hw, row["model"])
    presets = json.loads(subprocess.run([args.libra, "presets", "--json"], capture_output=True,
                                        text=True, check=True).stdout)
    preset = next(h for h in presets["hardware"] if h["name"] == hw)
    layers = {m["name"]: m["layers"] for m in presets["models"]}
    d = doc["device"]
    print(f"device: {d['name']}, torch {d['torch']}, CUDA {d['cuda']}, driver "
          f"{d['nvidia_smi'].get('driver', '?')}, measured {doc['date']}; modelled: `libra cost "
          f"--hardware {hw}`\n")
    print("| quantity | measured | preset | preset / measured |")
    print("|---|---:|---:|---:|")
    cap = d["total_memory_bytes"]
    print(f"| memory, CUDA total (bytes) | {cap:,} | {preset['hbm_bytes']:,} | "
          f"{preset['hbm_bytes'] / cap:.4f} |")
    smi_mib = d["nvidia_smi"].get("memory_total_mib")
    if smi_mib:
        print(f"| memory, nvidia-smi total (MiB) | {smi_mib:,} | | |")
    h = doc["hbm"]
    for key, what in (("copy_bytes_per_s", "HBM copy, read + write (TB/s)"),
                      ("read_bytes_per_s", "HBM read, reduction (TB/s)")):
        print(f"| {what} | {h[key] / 1e12:.2f} | {preset['hbm_bw_bytes_per_s'] / 1e12:.2f} | "
              f"{preset['hbm_bw_bytes_per_s'] / h[key]:.2f} |")
    g = doc["gemm"]["flops_per_s"]
    print(f"| bf16 GEMM 8192³ (TFLOP/s) | {g / 1e12:.0f} | {preset['bf16_flops_per_s'] / 1e12:.0f}"
          f" | {preset['bf16_flops_per_s'] / g:.2f} |")
    print("\nOne layer's linear operators on one GPU (µs); modelled: `linear_layer` of the TP's row")
    print("\n| model | TP | layer MB | " + " | ".join(f"{t} tok" for t in LINEAR_TOKENS) + " |")
    print("|---|---:|---:|" + "---:|" * len(LINEAR_TOKENS))
    ratios = []
    for row in doc["linear"]:
        tp_row = next(r for r in cost[row["model"]]["rollout"]["tp"] if r["tp"] == row["tp"])
        modelled = {r["tokens"]: r["seconds"] for r in tp_row["linear_layer"]}
        cells = []
        for r in row["linear"]:
            ratio = modelled[r["tokens"]] / r["seconds"]
            ratios.append(ratio)
            cells.append(f"{r['seconds'] * 1e6:.0f} / {modelled[r['tokens']] * 1e6:.0f} "
                         f"({ratio:.2f})")
        print(f"| {row['model']} | {row['tp']} | {row['layer_weight_bytes'] / 1e6:.0f} | "
              + " | ".join(cells) + " |")
    print("\nEach cell: measured / modelled (modelled ÷ measured).")
    print(f"Linear ratios: {len(ratios)} cells, median {sorted(ratios)[len(ratios) // 2]:.2f}, "
          f"range {min(ratios):.2f}–{max(ratios):.2f}.")
    print("\nAttention, one layer at TP 1 (µs): decode over "
          f"{DECODE_CONTEXT} tokens of context per sequence, causal prefill of one sequence")
    print("\n| model | work | measured | modelled | modelled / measured | kernel |")
    print("|---|---|---:|---:|---:|---|")
    for row in doc["attention"]:
        c = cost[row["model"]]
        tp1 = next(r for r in c["rollout"]["tp"] if r["tp"] == 1)
        by_batch = {r["batch"]: r["parts"]["attn_s"] / layers[row["model"]]
                    for r in tp1["decode"]}
        for r in row["decode"]:
            mod = by_batch[r["batch"]]
            print(f"| {row['model']} | decode, batch {r['batch']} | {r['seconds'] * 1e6:.0f} | "
                  f"{mod * 1e6:.0f} | {mod / r['seconds']:.2f} | {r['backend'].lower()} |")
        mfu_attn = c["rollout"]["constants"]["mfu_attn"]
        for r in row["prefill"]:  # compute-bound at these lengths: the model's compute term
            mod = r["flops"] / (preset["bf16_flops_per_s"] * mfu_attn)
            print(f"| {row['model']} | prefill, {r['tokens']} tokens | {r['seconds'] * 1e6:.0f} | "
                  f"{mod * 1e6:.0f} | {mod / r['seconds']:.2f} | {r['backend'].lower()} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out")
    m.add_argument("--models", default="qwen3-8b,qwen3-32b")
    m.add_argument("--presets", default=os.path.join(ROOT, "data", "presets"))
    c = sub.add_parser("compare")
    c.add_argument("file")
    c.add_argument("--libra", required=True)
    c.add_argument("--hardware", default="h200")
    args = ap.parse_args()
    measure(args) if args.cmd == "measure" else compare(args)


if __name__ == "__main__":
    main()
