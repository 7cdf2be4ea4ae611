"""End-to-end tests of `libra load --trainer`'s answers to refused pool calls (docs/load.md "The
trainer's side of the elastic pool"): `libra emu` engines behind `libra serve --pool-replica`,
real processes on loopback."""

import http.client
import json
import os
import subprocess

import pytest

from emu_util import LIBRA, TOKEN, Emu, FakeEngine, QuietHandler, Serve

SCALE = "0.01"
BUCKETS = ["--set", "sched.buckets=tp1:40960"]
LENDS = ["--model", "qwen3-4b"]  # a training layout with replicas to lend


def trainer(url, token, *args):
    env = {k: v for k, v in os.environ.items() if k != "LIBRA_ADMIN_TOKEN"}
    if token is not None:
        env["LIBRA_ADMIN_TOKEN"] = token
    return subprocess.run([LIBRA, "load", "--engines", url, "--trainer", *LENDS, "--steps", "3",
                           "--batch", "8", "--time-scale", SCALE, *BUCKETS, *args],
                          capture_output=True, text=True, timeout=240, env=env)


@pytest.mark.parametrize("token", ["wrongtoken0123456789", None])
def test_a_trainer_whose_pool_calls_are_not_authorised_stops(token):
    """A wrong admin token (or none) gets every pool call refused with 401: the trainer never
    played its side, so the run stops at the first refusal, exit 1, with the gateway's reason."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        e0, e1 = (i["url"] for i in emu.instances)
        with Serve(e0, args=[*BUCKETS, "--pool-replica", e1]) as gw:
            p = trainer(gw.url, token)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "--trainer: the gateway refused POST " in p.stderr, p.stderr
    assert "(401): admin calls need Authorization: Bearer TOKEN" in p.stderr, p.stderr
    assert p.stderr.count("refused") == 1, p.stderr  # stopped at the first
    assert "pool: 0 released, 0 retaken, 1 refused, 0 step reports" in p.stdout, p.stdout


class _Proxy(QuietHandler):
    """Forwards every call to the gateway, but answers the first step report 409 itself (a
    step out of order); records the status each pool POST got."""

    def _forward(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n) if n else None
        srv = self.server
        if self.path == "/libra/v1/pool/step" and not srv.refused_one:
            srv.refused_one = True
            status, ctype = 409, "application/json"
            data = b'{"error": {"message": "step out of order (the test\'s)"}}'
        else:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() in ("authorization", "content-type")}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            status, ctype, data = resp.status, resp.getheader("Content-Type", ""), resp.read()
            conn.close()
        if self.command == "POST" and self.path.startswith("/libra/v1/pool/"):
            srv.pool_posts.append((self.path, status))
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except ConnectionError:  # a long poll the trainer left when it ended
            pass

    do_GET = do_POST = _forward


def test_a_refused_step_report_is_counted_refused_not_as_a_step_report():
    """A step report refused 409 (out of order) is counted and the run goes on, exit 0; the
    report's step_reports counts only the reports the gateway took."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        e0, e1 = (i["url"] for i in emu.instances)
        with Serve(e0, args=[*BUCKETS, "--pool-replica", e1]) as gw:
            proxy = FakeEngine(_Proxy)
            proxy.port, proxy.refused_one, proxy.pool_posts = gw.port, False, []
            p = trainer(proxy.url, TOKEN, "--json")
            proxy.shutdown()
    assert p.returncode == 0, p.stderr
    pool = json.loads(p.stdout)["pool"]
    steps = [s for path, s in proxy.pool_posts if path == "/libra/v1/pool/step"]
    assert steps.count(409) >= 1, proxy.pool_posts
    assert pool["step_reports"] == steps.count(200), (pool, proxy.pool_posts)
    assert pool["refused"] == sum(s != 200 for _, s in proxy.pool_posts), pool
