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
                                         request (routing, parsing, proxying, libevent)

With --syscalls the gateway runs without valgrind and `strace -f -c` is attached to it after
5 warm-up requests, for the R measured ones (the kernel's share of the proxy's CPU, which
callgrind does not see; without strace, or where it may not attach, the run exits with status
77):

  serve_small_syscalls_per_request       system calls of the gateway per request, with
                                         `calls`: the count per system call, per request

With --big the requests are serve_proxy.py's big ones instead — 28,000 prompt token ids
(~200 KB body), 24,160 tokens generated with "return_logprob" (~1 MiB answer) — and the figure
is serve_big_instructions_per_request (R = 20 by default).

Usage: python3 bench/serve_instructions.py [--big] [--syscalls] [--requests R] [--libra PATH]
[--smoke] [--profile FILE] (FILE keeps the measured run's callgrind output for callgrind_annotate)
(R = 300 by default; --smoke: 10, or 2 with --big, for ctest). Standard library only.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


SMALL = {"prompt_tokens": 124, "gen_tokens": 16, "logprob": False,
         "input": "124 token ids in, 16 tokens out"}
BIG = {"prompt_tokens": 28000, "gen_tokens": 24160, "logprob": True,
       "input": "28,000 token ids in (~200 KB), 24,160 tokens out with logprobs (~1 MiB)"}


def body(w, i):
    ids = [(i * 7919 + k * 104729) % 150000 for k in range(w["prompt_tokens"])]
    return json.dumps({"input_ids": ids, "sampling_params": {"max_new_tokens": w["gen_tokens"]},
                       "return_logprob": w["logprob"], "libra": {"trajectory": "t%d" % i}})


def start_gateway(prefix, libra, urls):
    """libra serve over urls, run under the command prefix; returns it and its port."""
    cmd = prefix + [libra, "serve", "--listen", "127.0.0.1:0", "--poll-s", "1000", "--set",
                    "sched.buckets=tp1:40960"]
    for u in urls:
        cmd += ["--engine", u]
    gw = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = gw.stdout.readline()
    if not line:
        sys.exit("libra serve did not start: " + gw.stderr.read())
    return gw, json.loads(line)["port"]


def send(conn, w, first, requests):
    for i in range(first, first + requests):
        conn.request("POST", "/generate", body=body(w, i),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            sys.exit("request %d answered %d" % (i, resp.status))


def gateway_instructions(libra, urls, w, requests, out):
    gw, port = start_gateway(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out],
                             libra, urls)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    send(conn, w, 0, requests)
    conn.close()
    gw.send_signal(signal.SIGTERM)
    gw.wait(timeout=120)
    err = gw.stderr.read()
    total = re.search(r"Collected : (\d+)", err)
    if gw.returncode != 0 or not total:
        sys.exit("libra serve under callgrind failed:\n" + err[-2000:])
    return int(total.group(1))


def skip(why, gw):
    """Ends a --syscalls run that cannot count here: exit status 77 (ctest's SKIP_RETURN_CODE)."""
    gw.send_signal(signal.SIGTERM)
    gw.wait(timeout=60)
    print("serve_instructions: skipped: " + why, file=sys.stderr)
    sys.exit(77)


def gateway_syscalls(libra, urls, w, requests, out):
    """System calls per request by name, counted by strace attached after a warm-up."""
    gw, port = start_gateway([], libra, urls)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    send(conn, w, 0, 5)
    if not shutil.which("strace"):
        skip("strace is not installed (apt-get install strace)", gw)
    st = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(gw.pid)],
                          stderr=subprocess.PIPE, text=True)
    said = st.stderr.readline()  # "strace: Process N attached": counting from here
    if "attached" not in said:
        skip("strace cannot attach here: " + said.strip(), gw)
    send(conn, w, 5, requests)
    st.send_signal(signal.SIGINT)
    st.wait(timeout=60)
    conn.close()
    gw.send_signal(signal.SIGTERM)
    gw.wait(timeout=60)
    calls = {}
    with open(out) as f:  # "% time  seconds  usecs/call  calls  [errors]  syscall"
        for row in f:
            cols = row.split()
            if len(cols) >= 5 and cols[0][0].isdigit() and cols[-1] != "total":
                calls[cols[-1]] = round(int(cols[3]) / requests, 2)
    if not calls:
        sys.exit("strace counted nothing (is ptrace allowed here?)")
    return calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int)
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--syscalls", action="store_true",
                    help="count system calls with strace instead of instructions")
    ap.add_argument("--profile", help="keep the measured run's callgrind file here")
    ap.add_argument("--libra", default=os.path.join(HERE, "..", "build", "release", "libra"))
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.syscalls and args.profile:
        ap.error("--profile keeps a callgrind file; --syscalls runs no callgrind")
    w = BIG if args.big else SMALL
    default = (2 if args.smoke else 20) if args.big else (10 if args.smoke else 300)
    requests = args.requests or default
    emu = subprocess.Popen([args.libra, "emu", "--instances", "tp1x2", "--time-scale", "0.001"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        urls = [json.loads(emu.stdout.readline())["url"] for _ in range(2)]
        with tempfile.TemporaryDirectory() as tmp:
            if args.syscalls:
                calls = gateway_syscalls(args.libra, urls, w, requests,
                                         os.path.join(tmp, "strace.txt"))
                print(json.dumps({"name": "serve_%s_syscalls_per_request" % which(args),
                                  "unit": "syscalls", "value": round(sum(calls.values()), 2),
                                  "n": requests, "input": describe(w), "instructions": None,
                                  "calls": calls}))
                return
            base = gateway_instructions(args.libra, urls, w, 0, os.path.join(tmp, "base.out"))
            full = gateway_instructions(args.libra, urls, w, requests,
                                        args.profile or os.path.join(tmp, "full.out"))
    finally:
        emu.send_signal(signal.SIGTERM)
        emu.wait(timeout=30)
    per = (full - base) / requests
    print(json.dumps({"name": "serve_%s_instructions_per_request" % which(args),
                      "unit": "instructions", "value": round(per), "n": requests,
                      "input": describe(w), "instructions": round(per)}))


def which(args):
    return "big" if args.big else "small"


def describe(w):
    return ("libra serve over libra emu tp1x2 (qwen3-14b, a800-80g): sequential /generate, %s, "
            "one keep-alive connection, each a new trajectory" % w["input"])


if __name__ == "__main__":
    main()
