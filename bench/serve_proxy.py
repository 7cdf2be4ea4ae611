#!/usr/bin/env python3
"""What the gateway costs: `libra serve` beside nginx `proxy_pass`, in one run, same engines.

Starts `libra emu --instances tp1x4` (Qwen3-14B on A800, --time-scale 0.0015), then `libra
serve` with the four instances as --engine (`--set sched.buckets=tp1:40960`: one bucket) and,
when the Debian `nginx` package is installed, an nginx with one worker whose upstream is the
same four ports (config below). The same requests then go three ways — direct (round-robin
over the instances), through nginx, through libra — in three workloads, in this order:

  small   added latency at 1 KB: R rounds (2000, after 50 warm-up) of sequential requests over
          keep-alive connections, each round sending its request once on every path in a
          shuffled order (seeded). Bodies ~1 KB (124 token ids), answers 16 tokens (~400 B).
  bigseq  added latency at 200 KB in / 1 MiB out, unloaded: the same with the big workload's
          requests, 30 rounds (after 1 warm-up), the engines' prefix caches emptied before
          every request (untimed), so that no path is served a prompt another path cached.
  big     cost under load: N requests opened at once per path (2000), one path after the
          other, each a POST /generate of P token ids (28,000: a ~200 KB body) with
          `"return_logprob": true` that generates G tokens (24,160: a ~1 MiB answer). Four
          TP1 instances run about four such sequences each (their KV holds no more), the rest
          wait in their queues: a wave of ~16 answers every ~1.5 s, so requests are held from
          seconds to ~2.5 minutes and about N are live in the proxy at once. Prefix caches are
          emptied before each path. The time scale is set by the emulator's own CPU: it needs
          ~40 ms per request (mostly writing the 1 MiB answer) on one thread, and when the
          engine model runs ahead of that it answers nothing until it has caught up (at
          0.0005, the first answer left after ~85 s and all 2000 within seconds); at 0.0015 it
          keeps up after the first 20 to 30 s (parsing the bodies), so answers leave in waves.

Added latency, from client-side latencies (first byte sent to last byte read): p50 = the
median over rounds of (the proxy's request's latency − the direct request's in the same
round), so that slow spells of a shared machine, longer than a round, cancel; p99 = p99 of the
proxy's latencies − p99 of the direct ones (a tail of differences would carry both requests'
noise, such as the engines' timers, which libevent rounds up to whole milliseconds).
The big workload prints no latency: there a request's latency is its wait in an engine queue
and in the emulator's CPU queue (seconds, different from path to path), and neither probes
sent beside it (they queue in the same full engines) nor the request's latency less the
engine's own e2e_latency (the emulator's CPU queue is outside that) isolate what a proxy adds
to within a second. bigseq gives the big requests' added latency without the load.

Every request carries `"libra": {"trajectory": "<workload>-<i>"}`, so each is a new
routed trajectory in libra; libra cuts that member before forwarding, nginx and the direct
path send it to the emulator, which ignores it (the same bytes otherwise; the emulator's CPU
per request is printed for each path to show the engines did the same work).

Figures (bench/README.md's format; `instructions` is null: the figures span processes; <w> is
small, bigseq or big, <proxy> nginx or libra):

  proxy_<w>_cpu_us_<proxy>       CPU time of the proxy's processes per request (µs): on-CPU
                                 time summed over threads from /proc/PID/task/*/schedstat (ns;
                                 the kernel's own accounting, user and system alike — the
                                 clock-tick counts of /proc/PID/stat are too coarse for the
                                 small workload), before and after the workload. nginx:
                                 master + worker. libra's includes its engine polls (4 every
                                 2 s)
  proxy_<w>_cpu_ratio            libra's CPU per request over nginx's
  proxy_<w>_added_p50_us_<proxy> added latency (µs), p50; p99 too for small
  proxy_<w>_p50_us_direct        the direct path's p50 latency (the baseline); p99 for small
  proxy_<w>_engine_cpu_us        the emulator's CPU per request (small, bigseq: all paths;
  proxy_big_engine_cpu_us_<path>   big: each path's, to show they did the same work)
  proxy_big_rss_per_live_kib_<proxy>  growth of the proxy's peak resident memory (VmRSS
                                 sampled every 20 ms; nginx: master + worker) over its value
                                 before the workload, per request (KiB); `input` says how many
                                 requests were open at the peak
  proxy_big_rss_kept_kib_<proxy> resident memory left after the workload over the value
                                 before it, per request (libra keeps each trajectory until it
                                 is idle for --idle-s; an allocator may keep freed memory)
  proxy_big_wall_s_<path>        first connection to last answer

nginx config (written to a temp dir; `-p` that dir, `-e` its error log, `-g 'daemon off;'`):
one worker (libra serve is one event loop), access log off, `proxy_http_version 1.1` with
`Connection ""` and `keepalive 512` upstream connections, `client_max_body_size 64m`,
`client_body_buffer_size 1m` (bodies stay in memory: nginx, like libra, reads a body whole
before forwarding it), `proxy_buffering on` (--nginx-buffering off to compare) with 16 × 64
KiB buffers and `proxy_max_temp_file_size 0` (an answer is never spooled to disk),
read, send and body timeouts of 3600 s (the requests are long-held; nginx's 60 s defaults
would cut a client that reads late), `keepalive_requests` unbounded (the latency workloads'
connections live for the whole run). As root its worker runs as nobody (the `user`
directive); otherwise as the caller.

Sizes: the issue asked for 50,000 token ids in a ~200 KB body; that holds only for ids below
1000. Ids spread over the vocabulary (< 150,000) take 7.3 bytes each in `json.dumps`, so 28,000
ids make the ~200 KB. G = 24,160 generated tokens with log-probabilities (43 bytes per token
in the emulator's SGLang answer) make ~1 MiB; both sizes are measured and named in `input`.

Without nginx the nginx path is skipped with a note on stderr (ctest runs --smoke, 8 tiny
requests per workload, on machines without it; scripts/apt-packages-bench.txt lists the
package). Nothing is asserted.

Usage: bench/serve_proxy.py [--libra PATH] [--nginx PATH] [--requests N] [--prompt-tokens P]
[--gen-tokens G] [--time-scale T] [--rounds R] [--big-rounds R] [--nginx-buffering on|off]
[--smoke]
"""

import argparse
import asyncio
import glob
import grp
import json
import os
import pwd
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from procutil import figure, proc_rss_kib


# ---- the processes' own accounting ----------------------------------------------------------

def proc_cpu_s(pid):
    """On-CPU seconds of every live thread of pid (schedstat), else utime + stime."""
    total, seen = 0, False
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
                seen = True
        except (OSError, ValueError, IndexError):
            pass
    if seen and total > 0:
        return total / 1e9
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tcp_mem_mib():
    """Memory of every TCP socket on the machine (/proc/net/sockstat, pages)."""
    try:
        with open("/proc/net/sockstat") as f:
            for line in f:
                if line.startswith("TCP:"):
                    w = line.split()
                    return int(w[w.index("mem") + 1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        pass
    return 0.0


class Procs:
    """A proxy's processes (nginx: master and worker)."""

    def __init__(self, pids):
        self.pids = pids

    def cpu_s(self):
        return sum(proc_cpu_s(p) for p in self.pids)

    def rss_kib(self):
        return sum(proc_rss_kib(p) for p in self.pids)


# ---- the servers ----------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    sys.exit(f"serve_proxy: {what} did not listen on {port}")


NGINX_CONF = """\
worker_processes 1;
worker_rlimit_nofile {nofile};
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
{user}
events {{
    worker_connections 8192;
}}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 64m;
    client_body_buffer_size 1m;
    keepalive_requests 100000000;
    keepalive_timeout 3600s;
    client_body_timeout 3600s;
    upstream engines {{
{servers}
        keepalive 512;
        keepalive_requests 100000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://engines;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
            send_timeout 3600s;
            proxy_buffering {buffering};
            proxy_buffer_size 64k;
            proxy_buffers 16 64k;
            proxy_busy_buffers_size 128k;
            proxy_max_temp_file_size 0;
        }}
    }}
}}
"""


def find_nginx(path):
    for p in ([path] if path else [shutil.which("nginx"), "/usr/sbin/nginx"]):
        if p and os.access(p, os.X_OK):
            return p
    return None


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN: scan every process's parent
        kids = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(stat.split("/")[2]))
            except (OSError, ValueError, IndexError):
                pass
        return kids


def start_nginx(binary, ports, tmp, buffering):
    """nginx on a free loopback port: (process, port, Procs of master and worker)."""
    user = ""
    if os.geteuid() == 0:  # as root nginx switches its worker to a user: nobody, explicitly
        nobody = pwd.getpwnam("nobody")
        user = "user nobody %s;" % grp.getgrgid(nobody.pw_gid).gr_name
        os.chmod(tmp, 0o755)  # ... which must reach the temp paths under tmp
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = min(nofile if nofile != resource.RLIM_INFINITY else 65536, 65536)
    log = os.path.join(tmp, "error.log")
    for _ in range(3):  # the port is picked free, then bound by nginx: retry a lost race
        port = free_port()
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(
                tmp=tmp, user=user, port=port, nofile=nofile, buffering=buffering,
                servers="\n".join("        server 127.0.0.1:%d;" % p for p in ports)))
        proc = subprocess.Popen([binary, "-p", tmp, "-c", conf, "-e", log, "-g", "daemon off;"],
                                stderr=subprocess.DEVNULL)
        if wait_port(port, proc, "nginx"):
            break
    else:
        try:
            with open(log) as f:
                said = f.read()
        except OSError:
            said = "(no error log)"
        sys.exit("serve_proxy: nginx did not start:\n" + said)
    workers = []
    for _ in range(100):
        workers = children(proc.pid)
        if workers:
            break
        time.sleep(0.05)
    return proc, port, Procs([proc.pid] + workers)


def post(port, path, body=b""):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


# ---- the requests ---------------------------------------------------------------------------

def make_body(workload, i, prompt_tokens, gen_tokens, logprob):
    ids = [(i * 7919 + k * 104729) % 150000 for k in range(prompt_tokens)]
    return json.dumps({"input_ids": ids, "rid": "%s%d" % (workload, i),
                       "sampling_params": {"max_new_tokens": gen_tokens},
                       "return_logprob": logprob,
                       "libra": {"trajectory": "%s-%d" % (workload, i)}}).encode()


def request_bytes(body):
    return (b"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def parse_head(head):
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ")[1])
    length, close = 0, False
    for h in lines[1:]:
        k, _, v = h.partition(b":")
        k = k.strip().lower()
        if k == b"content-length":
            length = int(v)
        elif k == b"connection" and v.strip().lower() == b"close":
            close = True
    return status, length, close


class Conn:
    """A keep-alive connection for sequential requests (the interleaved workloads)."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.buf = bytearray()

    def _more(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf += chunk  # a bytearray grows in place: no copy per chunk

    def request(self, data):
        """Sends a request; returns (status, latency in seconds, answer bytes)."""
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port))
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.buf = bytearray()
        t0 = time.perf_counter()
        self.sock.sendall(data)
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self._more()
        status, length, close = parse_head(bytes(self.buf[:end]))
        while len(self.buf) < end + 4 + length:
            self._more()
        t1 = time.perf_counter()
        del self.buf[:end + 4 + length]
        if close:
            self.close()
        return status, t1 - t0, length

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None


async def one_big(port, data):
    """(status, answer bytes, time read); status "cut after N bytes" when the connection
    closed early."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status, length, _ = parse_head(head[:-4])
        answer = await reader.readexactly(length)
        return status, len(answer), time.monotonic()
    except (asyncio.IncompleteReadError, ConnectionError) as e:
        got = len(e.partial) if isinstance(e, asyncio.IncompleteReadError) else 0
        return "cut after %d bytes (%s)" % (got, type(e).__name__), got, time.monotonic()
    finally:
        writer.close()


async def run_big(ports, datas, sample):
    tasks = [asyncio.create_task(one_big(ports[i % len(ports)], d)) for i, d in enumerate(datas)]
    done = asyncio.gather(*tasks)
    live = lambda: sum(1 for t in tasks if not t.done())  # noqa: E731
    while not done.done():
        sample(live)
        await asyncio.sleep(0.02)
    return await done


# ---- figures --------------------------------------------------------------------------------


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def note(msg):
    print("serve_proxy: " + msg, file=sys.stderr, flush=True)


# ---- the workloads --------------------------------------------------------------------------

FLUSH = b"POST /flush_cache HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"


def interleaved(a, w, paths, emu, emu_ports, rounds, warmup, prompt_tokens, gen_tokens, logprob,
                flush, inp_base, p99=True):
    """Sequential requests, each round one per path in a shuffled order: added latency and CPU
    per request. flush: empty the engines' prefix caches before every request (untimed)."""
    bodies = [make_body(w, i, prompt_tokens, gen_tokens, logprob)
              for i in range(warmup + rounds)]
    conns = {name: [Conn(p) for p in ports] for name, (ports, _) in paths.items()}
    flushers = [Conn(p) for p in emu_ports] if flush else []
    lat = {name: [] for name in paths}
    rng = random.Random(1)
    names = list(paths)
    cpu0, answer_bytes = None, 0
    for r in range(warmup + rounds):
        if r == warmup:
            cpu0 = {n: paths[n][1].cpu_s() for n in names if paths[n][1]}
            emu0 = emu.cpu_s()
        data = request_bytes(bodies[r])
        rng.shuffle(names)
        for name in names:
            for c in flushers:
                c.request(FLUSH)
            cs = conns[name]
            status, dt, answer_bytes = cs[r % len(cs)].request(data)
            if status != 200:
                sys.exit(f"serve_proxy: {w} request {r} via {name}: status {status}")
            if r >= warmup:
                lat[name].append(dt)
    cpu1 = {n: paths[n][1].cpu_s() for n in cpu0}
    emu_cpu = emu.cpu_s() - emu0
    if a.latencies:
        try:
            with open(a.latencies) as f:
                dump = json.load(f)
        except (OSError, ValueError):
            dump = {}
        dump[w] = lat
        with open(a.latencies, "w") as f:
            json.dump(dump, f)
    for c in flushers + [c for cs in conns.values() for c in cs]:
        c.close()
    n = rounds
    inp = (inp_base + "; %s: %d rounds (after %d warm-up) of one sequential request per path in "
           "a shuffled order over keep-alive connections, %d prompt tokens (%d-byte body) "
           "generating %d tokens%s (%d-byte answer)%s"
           % (w, n, warmup, prompt_tokens, len(bodies[0]), gen_tokens,
              " with return_logprob" if logprob else "", answer_bytes,
              "; prefix caches emptied before each request" if flush else ""))
    qs = (0.5, 0.99) if p99 else (0.5,)
    for q in qs:
        figure("proxy_%s_p%d_us_direct" % (w, q * 100), "us", quantile(lat["direct"], q) * 1e6,
               n, inp)
    for name in cpu0:
        figure("proxy_%s_cpu_us_%s" % (w, name), "us/op", (cpu1[name] - cpu0[name]) * 1e6 / n, n,
               inp)
    if "nginx" in cpu0 and "libra" in cpu0:
        ratio = (cpu1["libra"] - cpu0["libra"]) / max(cpu1["nginx"] - cpu0["nginx"], 1e-9)
        figure("proxy_%s_cpu_ratio" % w, "x", ratio, n, inp)
    for name in cpu0:  # p50: of the rounds' differences; p99: of the distributions
        diff = [x - d for x, d in zip(lat[name], lat["direct"])]
        figure("proxy_%s_added_p50_us_%s" % (w, name), "us", quantile(diff, 0.5) * 1e6, n, inp)
        if p99:
            figure("proxy_%s_added_p99_us_%s" % (w, name), "us",
                   (quantile(lat[name], 0.99) - quantile(lat["direct"], 0.99)) * 1e6, n, inp)
    figure("proxy_%s_engine_cpu_us" % w, "us/op", emu_cpu * 1e6 / (n * len(paths)),
           n * len(paths), inp)


def big(a, paths, emu, emu_ports, inp_base):
    """N requests at once per path, one path after the other: CPU and memory per request."""
    datas = [request_bytes(make_body("big", i, a.prompt_tokens, a.gen_tokens, True))
             for i in range(a.requests)]
    body_bytes = len(datas[0]) - datas[0].index(b"\r\n\r\n") - 4
    res = {}
    for name, (ports, procs) in paths.items():
        for p in emu_ports:
            post(p, "/flush_cache")
        rss0 = procs.rss_kib() if procs else 0
        cpu0 = procs.cpu_s() if procs else 0
        emu0 = emu.cpu_s()
        peak = {"rss": rss0, "live": 0, "tcp": 0.0}

        def sample(live):
            peak["tcp"] = max(peak["tcp"], tcp_mem_mib())
            if procs:
                rss = procs.rss_kib()
                if rss > peak["rss"]:
                    peak["rss"], peak["live"] = rss, live()

        t0 = time.monotonic()
        out = asyncio.run(run_big(ports, datas, sample))
        wall = time.monotonic() - t0
        time.sleep(0.2)  # the proxy's last frees
        bad = [s for s, _, _ in out if s != 200]
        if bad:
            sys.exit(f"serve_proxy: {len(bad)} of {len(out)} big requests via {name} failed "
                     f"(first status {bad[0]})")
        res[name] = {
            "cpu": (procs.cpu_s() - cpu0) if procs else None,
            "emu": emu.cpu_s() - emu0,
            "rss_live": (peak["rss"] - rss0) / a.requests if procs else None,
            "live": peak["live"],
            "rss_kept": (procs.rss_kib() - rss0) / a.requests if procs else None,
            "answer": sum(n for _, n, _ in out) / len(out),
            "wall": wall,
        }
        ends = [t - t0 for _, _, t in out]
        note("big via %s: %.1f s; answers read: 10%% by %.1f s, 50%% by %.1f s, 90%% by %.1f s; "
             "TCP socket memory at most %.0f MiB" % (name, wall, quantile(ends, 0.1),
                                                    quantile(ends, 0.5), quantile(ends, 0.9),
                                                    peak["tcp"]))
    n = a.requests
    inp = (inp_base + "; big: %d concurrent SGLang /generate of %d prompt tokens (%d-byte body) "
           "with return_logprob generating %d tokens (%.0f-byte answer on average), one path "
           "after the other" % (n, a.prompt_tokens, body_bytes, a.gen_tokens,
                                res["direct"]["answer"]))
    proxies = [p for p in paths if paths[p][1]]
    for name in proxies:
        figure("proxy_big_cpu_us_" + name, "us/op", res[name]["cpu"] * 1e6 / n, n, inp)
    if "nginx" in res and "libra" in res:
        figure("proxy_big_cpu_ratio", "x", res["libra"]["cpu"] / max(res["nginx"]["cpu"], 1e-9),
               n, inp)
    for name in proxies:
        figure("proxy_big_rss_per_live_kib_" + name, "KiB/op", res[name]["rss_live"], n,
               inp + "; %d live at the peak" % res[name]["live"])
        figure("proxy_big_rss_kept_kib_" + name, "KiB/op", res[name]["rss_kept"], n, inp)
    for name in paths:
        figure("proxy_big_engine_cpu_us_" + name, "us/op", res[name]["emu"] * 1e6 / n, n, inp)
    for name in paths:
        figure("proxy_big_wall_s_" + name, "s", res[name]["wall"], n, inp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libra", default="build/release/libra")
    ap.add_argument("--nginx", default=None, help="nginx binary (default: nginx on PATH, "
                    "/usr/sbin/nginx)")
    ap.add_argument("--nginx-buffering", choices=("on", "off"), default="on")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--prompt-tokens", type=int, default=28000)
    ap.add_argument("--gen-tokens", type=int, default=24160)
    ap.add_argument("--time-scale", type=float, default=0.0015)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--small-prompt-tokens", type=int, default=124)
    ap.add_argument("--small-gen-tokens", type=int, default=16)
    ap.add_argument("--big-rounds", type=int, default=30)
    ap.add_argument("--paths", default="direct,nginx,libra",
                    help="paths to measure (direct always runs: it is the baseline)")
    ap.add_argument("--latencies", help="also write every latency (s) to this JSON file")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.requests, a.prompt_tokens, a.gen_tokens, a.rounds, a.warmup = 8, 100, 10, 8, 2
        a.big_rounds = 2
    nginx = find_nginx(a.nginx)
    if not nginx:
        note("nginx is not installed: the nginx path is skipped (apt-get install nginx)")
    tmp = tempfile.mkdtemp(prefix="libra-serve-proxy-")
    procs = []
    try:
        emu = subprocess.Popen([a.libra, "emu", "--instances", "tp1x4", "--time-scale",
                                str(a.time_scale)], stdout=subprocess.PIPE, text=True)
        procs.append(emu)
        lines = [json.loads(emu.stdout.readline()) for _ in range(4)]
        emu_ports = [ln["port"] for ln in lines]
        cmd = [a.libra, "serve", "--listen", "127.0.0.1:0", "--set", "sched.buckets=tp1:40960"]
        for ln in lines:
            cmd += ["--engine", ln["url"]]
        serve = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        procs.append(serve)
        ready = serve.stdout.readline()
        if not ready:
            sys.exit("serve_proxy: libra serve did not start")
        paths = {"direct": (emu_ports, None),
                 "libra": ([json.loads(ready)["port"]], Procs([serve.pid]))}
        if nginx and "nginx" in a.paths.split(","):
            ng, ng_port, ng_procs = start_nginx(nginx, emu_ports, tmp, a.nginx_buffering)
            procs.append(ng)
            paths["nginx"] = ([ng_port], ng_procs)
        want = ["direct"] + a.paths.split(",")
        paths = {k: paths[k] for k in ("direct", "nginx", "libra") if k in paths and k in want}
        inp = ("libra emu --instances tp1x4 --time-scale %g (qwen3-14b, a800-80g); libra serve "
               "--set sched.buckets=tp1:40960 over the four; %s"
               % (a.time_scale, "nginx %s, one worker (bench/serve_proxy.py's config)"
                  % nginx_version(nginx) if nginx else "no nginx"))
        emu_procs = Procs([emu.pid])
        interleaved(a, "small", paths, emu_procs, emu_ports, a.rounds, a.warmup,
                    a.small_prompt_tokens, a.small_gen_tokens, False, False, inp)
        interleaved(a, "bigseq", paths, emu_procs, emu_ports, a.big_rounds, 1, a.prompt_tokens,
                    a.gen_tokens, True, True, inp, p99=False)
        big(a, paths, emu_procs, emu_ports, inp)
    except BaseException:
        try:  # what nginx said, if it was in it
            with open(os.path.join(tmp, "error.log")) as f:
                note("nginx's error log ends:\n" + "".join(f.readlines()[-20:]))
        except OSError:
            pass
        raise
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def nginx_version(binary):
    out = subprocess.run([binary, "-v"], capture_output=True, text=True)
    return (out.stderr or out.stdout).strip().split("/")[-1]


if __name__ == "__main__":
    main()
