"""Fault tests of the elastic pool live (docs/serve.md "The elastic pool"): `kill -9` of the
gateway and of the trainer (`libra load --trainer`) at random points, fixed seeds; afterwards no
replica is in two roles and no acknowledged change is lost. Real processes on loopback; no
assertion is about time."""

import json
import os
import random
import signal
import subprocess
import threading
import time

from emu_util import ADMIN, LIBRA, TOKEN, Emu, post
from test_serve_pool import BUCKETS, LENDS, SCALE, pool, serve, stable, two_roles, until


class Driver:
    """Every change goes through call(), one at a time under a lock, and the answer of the last
    one accepted is kept: killed while holding the lock, the gateway has answered every change
    it made (a change is answered once committed), so a restart must give back exactly that."""

    def __init__(self, gw):
        self.gw, self.lock, self.last = gw, threading.Lock(), None

    def call(self, path, body):
        with self.lock:
            status, doc = post(self.gw.port, "/libra/v1/pool/" + path, body, headers=ADMIN,
                               timeout=10)
            if status == 200:
                self.last = doc
            return status


def scripted_trainer(d, rng, stop):
    """A trainer by hand: steps, and at each boundary the ready requests confirmed."""
    n, version = 0, 0
    while not stop.is_set():
        try:
            d.call("step", {"step": n, "version": version, "phase": "begin"})
            time.sleep(rng.uniform(0, 0.05))
            d.call("step", {"step": n, "version": version, "phase": "end"})
            n, version = n + 1, version + 1
            for r in pool(d.gw)["requests"]:
                if r["ready"]:
                    body = {"event": "released" if r["kind"] == "lend" else "retaken",
                            "request": r["request"], "replica": r["replica"],
                            "generation": r["generation"]}
                    if r["kind"] == "reclaim":
                        body["version"] = version
                    d.call("confirm", body)
        except OSError:
            return


def operator(d, rng, stop):
    while not stop.is_set():
        try:
            call = "lend" if rng.random() < 0.5 else "reclaim"
            d.call(call, {"replica": rng.randrange(2)})
        except OSError:
            return
        time.sleep(0.02)


def test_kill_9_of_the_gateway_at_random_points_loses_no_acknowledged_change(tmp_path):
    """Ten runs (seeds 1-10): a scripted trainer and an operator drive the pool; the gateway is
    killed at a random moment and restarted on its state dir: the pool after the restart is
    the one the last acknowledged change answered (none lost, none made up), and once the
    engines are settled no replica is in two roles."""
    with Emu("--instances", "tp1x3", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        for seed in range(1, 11):
            rng = random.Random(seed)
            args = ["--state-dir", str(tmp_path / ("s%d" % seed)), "--pool-timeout-s", "600"]
            gw = serve(urls, 1, *args)
            d, stop = Driver(gw), threading.Event()
            threads = [threading.Thread(target=operator, args=(d, random.Random(seed), stop)),
                       threading.Thread(target=scripted_trainer,
                                        args=(d, random.Random(-seed), stop))]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.3, 1.5))
            with d.lock:
                gw.proc.send_signal(signal.SIGKILL)
                gw.proc.wait()
            stop.set()
            for t in threads:
                t.join(30)
            gw.stop()
            assert d.last is not None
            with serve(urls, 1, *args) as again:
                assert stable(pool(again)) == stable(d.last), seed
                until(lambda: all(not r["engine_call"] and r["engine"] != "unknown"
                                  for r in pool(again)["replicas"]), "the engines settle")
                assert two_roles(pool(again)) == []


def test_kill_9_of_the_trainer_at_random_points_leaves_no_replica_in_two_roles():
    """Ten runs (seeds 1-10) of `libra load --trainer` killed at a random moment while an
    operator asks for lends and reclaims; a last trainer then runs a short job to its end: it
    carries on the gateway's step numbers (ending the step a killed one left open), every batch
    is whole, no replica was ever held by the trainer while its engine served, and the last
    step is closed."""
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 2, "--pool-timeout-s", "2") as gw:
            stop, overlaps = threading.Event(), []

            def operator(rng):
                while not stop.is_set():
                    doc = pool(gw)
                    overlaps.extend(two_roles(doc))
                    h = rng.randrange(2)
                    post(gw.port, "/libra/v1/pool/" + rng.choice(["lend", "reclaim"]),
                         {"replica": h}, headers=ADMIN)
                    time.sleep(0.05)

            th = threading.Thread(target=operator, args=(random.Random(7),), daemon=True)
            th.start()
            cmd = [LIBRA, "load", "--engines", gw.url, "--trainer", "--time-scale", SCALE,
                   "--batch", "8", "--set", "rl.sync_interval=1", *LENDS, *BUCKETS]
            env = {**os.environ, "LIBRA_ADMIN_TOKEN": TOKEN}
            for seed in range(1, 11):
                p = subprocess.Popen([*cmd, "--steps", "50"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=env)
                time.sleep(random.Random(seed).uniform(0.5, 2.0))
                p.send_signal(signal.SIGKILL)
                p.wait()
            before = pool(gw)["step"]
            p = subprocess.run([*cmd, "--steps", "3", "--json"], capture_output=True, text=True,
                               timeout=240, env=env)
            stop.set()
            th.join(30)
            assert p.returncode == 0, p.stderr
            doc = json.loads(p.stdout)
            assert [s["trajectories"] for s in doc["steps"]] == [8, 8, 8]
            after = pool(gw)["step"]
            assert not after["open"] and after["step"] == before["step"] + 2, (before, after)
            assert overlaps == []
            assert two_roles(pool(gw)) == []
