#!/usr/bin/env python3
"""The emulator under load: N concurrent long-held generation requests with large bodies.

Starts `libra emu` (4 TP1 Qwen3-14B instances on A800 at --time-scale 0.01), opens N
connections at once (round-robin over the instances), each POSTing one SGLang /generate whose
prompt is P token ids (30 K by default: a ~200 KB body) and which generates G tokens, and waits
for every answer. Prints one JSON line per figure, in bench/README.md's format (`instructions`
is null: the figures span two processes):

  emu_cpu_us_per_request  CPU time of the emulator process (user + system, /proc) per request
  emu_events_per_s        engine-model events (libra_emu_engine_events_total, summed over
                          instances) per second of the emulator's CPU time
  emu_rss_per_live_kib    growth of the emulator's peak resident memory over its idle one,
                          per request (KiB; the peak is sampled every 20 ms)
  emu_wall_s              wall seconds from the first connection to the last answer
  emu_health_p50_ms,      latency of GET /health on instance 0, asked every 0.25 s on a fresh
  emu_health_max_ms       connection while the requests run: how long a small request (a
                          gateway's health check) waits behind the burst

Nothing is asserted. Usage: bench/emu_load.py [--libra PATH] [--requests N]
[--prompt-tokens P] [--gen-tokens G] [--smoke]
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request

from procutil import figure, proc_rss_kib


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


async def one(port, body):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n")
                  if h.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    writer.close()
    return head.split(b" ")[1] == b"200"


async def health(port, out):
    while True:
        t0 = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
        writer.close()
        out.append(time.monotonic() - t0)
        await asyncio.sleep(0.25)


async def load(ports, bodies, sample, health_s):
    probe = asyncio.create_task(health(ports[0], health_s))
    tasks = [asyncio.create_task(one(ports[i % len(ports)], b)) for i, b in enumerate(bodies)]
    done = asyncio.gather(*tasks)
    while not done.done():
        sample()
        await asyncio.sleep(0.02)
    probe.cancel()
    return await done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libra", default="build/release/libra")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--prompt-tokens", type=int, default=30000)
    ap.add_argument("--gen-tokens", type=int, default=2000)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.requests, a.prompt_tokens, a.gen_tokens = 8, 100, 10
    emu = subprocess.Popen([a.libra, "emu", "--instances", "tp1x4", "--time-scale", "0.01"],
                           stdout=subprocess.PIPE, text=True)
    ports = [json.loads(emu.stdout.readline())["port"] for _ in range(4)]
    bodies = []
    for i in range(a.requests):
        ids = [(i * 7919 + k) % 150000 for k in range(a.prompt_tokens)]
        bodies.append(json.dumps({"input_ids": ids, "rid": "r%d" % i,
                                  "sampling_params": {"max_new_tokens": a.gen_tokens}}).encode())
    rss0, cpu0 = proc_rss_kib(emu.pid), proc_cpu_s(emu.pid)
    peak = {"rss": rss0}

    def sample():  # the emulator's peak resident memory while requests are live
        peak["rss"] = max(peak["rss"], proc_rss_kib(emu.pid))

    t0 = time.monotonic()
    health_s = []
    ok = asyncio.run(load(ports, bodies, sample, health_s))
    wall = time.monotonic() - t0
    cpu = proc_cpu_s(emu.pid) - cpu0
    events = sum(metric(p, "libra_emu_engine_events_total") for p in ports)
    emu.terminate()
    emu.wait(timeout=30)
    if not all(ok):
        sys.exit("emu_load: %d of %d requests failed" % (ok.count(False), len(ok)))
    inp = ("libra emu --instances tp1x4 --time-scale 0.01 (qwen3-14b, a800-80g); %d concurrent "
           "SGLang /generate of %d prompt tokens (%d-byte bodies) generating %d tokens"
           % (a.requests, a.prompt_tokens, len(bodies[0]), a.gen_tokens))
    figure("emu_cpu_us_per_request", "us/op", cpu * 1e6 / a.requests, a.requests, inp)
    figure("emu_events_per_s", "op/s", events / cpu if cpu > 0 else 0, int(events), inp)
    figure("emu_rss_per_live_kib", "KiB/op", (peak["rss"] - rss0) / a.requests, a.requests, inp)
    figure("emu_wall_s", "s", wall, a.requests, inp)
    health_s.sort()
    if health_s:
        figure("emu_health_p50_ms", "ms", health_s[len(health_s) // 2] * 1e3, len(health_s), inp)
        figure("emu_health_max_ms", "ms", health_s[-1] * 1e3, len(health_s), inp)


if __name__ == "__main__":
    main()
