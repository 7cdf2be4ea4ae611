#!/usr/bin/env python3
"""Instructions the gateway spends per routed turn: `libra serve` under callgrind.

Wall-clock figures of the proxy (bench/serve_proxy.py) move with the shared machine's load;
instruction counts do not. This starts `libra emu --instances tp1x2 --time-scale 0.001`
(Qwen3-14B on A800) and `libra serve` over the two instances (`--set
sched.buckets=tp1:40960`, `--poll-s 1000`: no engine polls during the run) under `valgrind
--tool=callgrind`, sends R sequential SGLang `/generate` requests over one keep-alive
connection — each a new trajectory (`"libra": {"trajectory": "t<i>"}`) of 124 token ids
(~1 KB) that generates 16 tokens (~400 B answer), the bench's "small" request — then stops the
gateway with SIGTERM and reads callgrind's total. A second run with no request gives the
start-up and shutdown cost; the figure is the difference over R:

  serve_small_instructions_per_request   instructions of the whole gateway process per
                                         request (routing, parsing, proxying, curl, libevent)

Usage: python3 bench/serve_instructions.py [--requests R] [--libra PATH] [--smoke]
(R = 300 by default; --smoke: 10, for ctest). Standard library only.
"""

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def gateway_instructions(libra, urls, requests, out):
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, libra, "serve",
           "--listen", "127.0.0.1:0", "--poll-s", "1000", "--set", "sched.buckets=tp1:40960"]
    for u in urls:
        cmd += ["--engine", u]
    gw = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = gw.stdout.readline()
    if not line:
        sys.exit("libra serve did not start: " + gw.stderr.read())
    port = json.loads(line)["port"]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for i in range(requests):
        body = json.dumps({"input_ids": list(range(100, 224)),
                           "sampling_params": {"max_new_tokens": 16},
                           "libra": {"trajectory": "t%d" % i}})
        conn.request("POST", "/generate", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            sys.exit("request %d answered %d" % (i, resp.status))
    conn.close()
    gw.send_signal(signal.SIGTERM)
    gw.wait(timeout=120)
    err = gw.stderr.read()
    total = re.search(r"Collected : (\d+)", err)
    if gw.returncode != 0 or not total:
        sys.exit("libra serve under callgrind failed:\n" + err[-2000:])
    return int(total.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--libra", default=os.path.join(HERE, "..", "build", "release", "libra"))
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    requests = 10 if args.smoke else args.requests
    emu = subprocess.Popen([args.libra, "emu", "--instances", "tp1x2", "--time-scale", "0.001"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        urls = [json.loads(emu.stdout.readline())["url"] for _ in range(2)]
        with tempfile.TemporaryDirectory() as tmp:
            base = gateway_instructions(args.libra, urls, 0, os.path.join(tmp, "base.out"))
            full = gateway_instructions(args.libra, urls, requests, os.path.join(tmp, "full.out"))
    finally:
        emu.send_signal(signal.SIGTERM)
        emu.wait(timeout=30)
    per = (full - base) / requests
    print(json.dumps({"name": "serve_small_instructions_per_request", "unit": "instructions",
                      "value": round(per), "n": requests,
                      "input": "libra serve over libra emu tp1x2 (qwen3-14b, a800-80g): "
                               "sequential /generate, 124 token ids in, 16 tokens out, one "
                               "keep-alive connection, each a new trajectory",
                      "instructions": round(per)}))


if __name__ == "__main__":
    main()
