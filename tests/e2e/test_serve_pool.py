"""End-to-end tests of the elastic pool live (docs/serve.md "The elastic pool"): `libra emu`
engines, `libra serve --pool-replica`, and `libra load --trainer` or a scripted trainer, real
processes on loopback. No assertion is about time: deadlines are set short only to make
expiries happen, and every wait polls for a state."""

import contextlib
import json
import os
import signal
import subprocess
import threading
import time

from emu_util import (ADMIN, LIBRA, TOKEN, Emu, ScriptedVllm, Serve, answer,
                      assert_weights_never_go_back, generate, get, post)

SCALE = "0.005"
BUCKETS = ["--set", "sched.buckets=tp1:40960"]
# `libra load --trainer`'s experiment: one whose training layout has replicas to lend (the
# default Qwen3-14B's cannot hold a replica's whole state on its GPUs)
LENDS = ["--model", "qwen3-4b"]
HELD = {"fetching_state", "zero_sync", "activating", "active"}  # the trainer holds the GPUs


def pool(gw):
    status, doc = get(gw.port, "/libra/v1/pool")
    assert status == 200, doc
    return doc


def until(fn, what, limit_s=30):
    """Polls fn until it returns something true; returns it."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("never: " + what)


def two_roles(doc):
    """Replicas whose GPUs the trainer holds while their engine serves."""
    return [r["replica"] for r in doc["replicas"] if r["join"] in HELD and r["engine"] == "serving"]


def serve(emu_urls, n_core, *extra, tp=""):
    core, replicas = emu_urls[:n_core], emu_urls[n_core:]
    args = [*BUCKETS, *extra]
    for u in replicas:
        args += ["--pool-replica", u + tp]
    return Serve(*core, args=args)


def request_of(doc, replica, kind):
    for r in doc["requests"]:
        if r["replica"] == replica and r["kind"] == kind:
            return r
    return None


def ready(gw, replica, kind):
    """Waits until replica's request of kind is pending and ready; returns it."""
    return until(lambda: (lambda r: r if r and r["ready"] else None)(
        request_of(pool(gw), replica, kind)), "the %s of replica %d is ready" % (kind, replica))


def retake(gw, replica, version=0):
    """Reclaims replica and, once ready, confirms it retaken at version, as a trainer would."""
    post(gw.port, "/libra/v1/pool/reclaim", {"replica": replica}, headers=ADMIN)
    assert confirm(gw, "retaken", ready(gw, replica, "reclaim"), version=version)[0] == 200


@contextlib.contextmanager
def killed_when_done(gw):
    """Yields gw, then kills it with SIGKILL however the block ends: a crash to restart from."""
    try:
        yield gw
    finally:
        gw.proc.send_signal(signal.SIGKILL)
        gw.stop()


def confirm(gw, event, req, **extra):
    body = {"event": event, "request": req["request"], "replica": req["replica"],
            "generation": req["generation"], **extra}
    return post(gw.port, "/libra/v1/pool/confirm", body, headers=ADMIN)


def step(gw, n, version, phase, **extra):
    return post(gw.port, "/libra/v1/pool/step",
                {"step": n, "version": version, "phase": phase, **extra}, headers=ADMIN)


# ---- under load ---------------------------------------------------------------------------------

def test_lends_and_reclaims_under_load_lose_no_trajectory_and_never_go_back_in_weights(tmp_path):
    """An operator asks for a reclaim of every replica serving rollout and a lend of every one
    training, over and over, while `libra load --trainer` runs a job through the gateway: the
    trainer confirms at its step boundaries, every batch is whole, the pool counts lends and
    reclaims, no trajectory's turn goes to older weights than its last, and no replica is
    ever held by the trainer while its engine serves."""
    decisions = tmp_path / "decisions.jsonl"
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 2, "--decisions", str(decisions)) as gw:
            stop, seen, overlaps = threading.Event(), [], []

            def operator():
                while not stop.is_set():
                    doc = pool(gw)
                    overlaps.extend(two_roles(doc))
                    for rep in doc["replicas"]:
                        h, busy = rep["replica"], any(r["replica"] == rep["replica"]
                                                      for r in doc["requests"])
                        if busy:
                            continue
                        if rep["join"] == "none" and rep["engine"] == "serving":
                            seen.append(post(gw.port, "/libra/v1/pool/reclaim",
                                             {"replica": h, "reason": "test"}, headers=ADMIN)[0])
                        elif rep["join"] == "active":
                            seen.append(post(gw.port, "/libra/v1/pool/lend", {"replica": h},
                                             headers=ADMIN)[0])
                    time.sleep(0.1)

            th = threading.Thread(target=operator, daemon=True)
            th.start()
            p = subprocess.run([LIBRA, "load", "--engines", gw.url, "--trainer", "--json",
                                "--time-scale", SCALE, "--steps", "6", "--batch", "8", "--set",
                                "rl.sync_interval=1", *LENDS, *BUCKETS], capture_output=True, text=True,
                               timeout=240, env={**os.environ, "LIBRA_ADMIN_TOKEN": TOKEN})
            stop.set()
            th.join()
            assert p.returncode == 0, p.stderr
            doc = json.loads(p.stdout)
            assert [s["trajectories"] for s in doc["steps"]] == [8] * 6
            assert doc["pool"]["released"] >= 1 and doc["pool"]["retaken"] >= 1, doc["pool"]
            # the trainer's layout has hybrids; a step trains with those the gateway had active
            assert doc["trainer"]["hybrid_replicas"] >= 1, doc["trainer"]
            assert all(0 <= s["active_hybrids"] <= 2 for s in doc["steps"]), doc["steps"]
            assert all(s["train_s"] > 0 for s in doc["steps"][:-1])
            assert doc["pool"]["step_reports"] == 10  # 5 steps trained: begin and end each
            counts = pool(gw)["counts"]
            assert counts["lends"] >= 1 and counts["reclaims"] >= 2, counts
            assert overlaps == []
            assert all(s in (200, 409) for s in seen) and 200 in seen
            final = until(lambda: (lambda d: d if not any(r["engine_call"] for r in d["replicas"])
                                   else None)(pool(gw)), "the engines settle")
            assert final["step"] == {"open": False, "step": 4, "version": 4}, final["step"]
            serving = [r["engine_id"] for r in final["replicas"] if r["engine"] == "serving"]

            def caught_up():  # a replica back in rollout loaded the weights it missed
                engines = {e["id"]: e for e in get(gw.port, "/libra/v1/engines")[1]["engines"]}
                return all(engines[i]["weight_version"] == engines[0]["weight_version"]
                           for i in serving)

            until(caught_up, "the replicas serving have the fleet's weights")
    assert_weights_never_go_back(decisions)


def test_steering_under_load_reclaims_then_lends(tmp_path):
    """Two jobs of `libra load --trainer` run one after the other through a gateway that steers
    by the signal. The first is training-bound (a 32B trainer on H20s beside emulated 4B
    engines, Search-R1's short turns): the gateway reclaims replicas by itself and the trainer
    retakes them. The second, a trainer that carries on from the first's last step, is
    rollout-bound (a 4B trainer, DAPO-Math's long generations): the gateway lends the replicas
    back and the trainer releases them. Every batch is whole, no trajectory's turn goes to older
    weights than its last, and no replica is ever held by the trainer while its engine
    serves."""
    decisions = tmp_path / "decisions.jsonl"
    bound = {
        "training": ["--workload", "search-r1", "--batch", "150", "--steps", "12", "--model",
                     "qwen3-32b", "--hardware", "h20"],
        "rollout": ["--workload", "dapo-math", "--batch", "32", "--steps", "5", "--model",
                    "qwen3-4b"],
    }
    with Emu("--instances", "tp1x8", "--model", "qwen3-4b", scale="0.01") as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 6, "--pool-steer", "--decisions", str(decisions), "--workload",
                   "search-r1", "--batch", "150", tp=",tp=1") as gw:
            stop, overlaps = threading.Event(), []

            def watch():
                while not stop.is_set():
                    overlaps.extend(two_roles(pool(gw)))
                    time.sleep(0.05)

            th = threading.Thread(target=watch, daemon=True)
            th.start()
            done = {}
            for name, job in bound.items():
                p = subprocess.run([LIBRA, "load", "--engines", gw.url, "--trainer", "--json",
                                    "--time-scale", "0.01", "--set", "rl.sync_interval=1", *job,
                                    *BUCKETS], capture_output=True, text=True, timeout=240,
                                   env={**os.environ, "LIBRA_ADMIN_TOKEN": TOKEN})
                assert p.returncode == 0, p.stderr
                done[name] = json.loads(p.stdout)
                batch = int(job[job.index("--batch") + 1])
                steps = int(job[job.index("--steps") + 1])
                assert [s["trajectories"] for s in done[name]["steps"]] == [batch] * steps
            stop.set()
            th.join()
            assert done["training"]["pool"]["retaken"] >= 1, done["training"]["pool"]
            assert done["rollout"]["pool"]["released"] >= 1, done["rollout"]["pool"]
            final = pool(gw)
            assert final["counts"]["reclaims"] >= 1 and final["counts"]["lends"] >= 1, final
            assert final["signal"]["step"] >= 11, final["signal"]  # the second job's
            assert overlaps == []
    assert_weights_never_go_back(decisions)


# ---- the protocol -------------------------------------------------------------------------------

def test_the_gateway_steers_by_the_signal_and_a_restart_replays_it(tmp_path):
    """With --pool-steer the gateway asks for reclaims and lends itself, at each step's end, by
    the simulator's rule (ehp_pool_signal, ehp_pool_moves) on what the step showed: a step that
    trained far longer than its rollout took borrows every replica rollout can spare; once the
    replicas train, a step that trained in no time while the rollout was busy gives them all
    back. The step's end is journalled with what the gateway measured, so a restart replays the
    signal and its requests, ids and all."""
    args = ("--pool-steer", "--state-dir", str(tmp_path / "state"))
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 2, *args, tp=",tp=1") as gw:
            doc = pool(gw)
            assert doc["steer"] and doc["signal"] is None and doc["core_replicas"] == 1, doc
            assert step(gw, 0, 0, "begin")[0] == 200
            assert generate(gw.port, [1] * 64, 40)[0] == 200  # rollout work in the step
            status, doc = step(gw, 0, 0, "end", train_s=1000.0)
            assert status == 200, doc
            assert doc["signal"]["target"] == 2 and doc["signal"]["capacity"] == 2, doc["signal"]
            assert [(r["kind"], r["replica"]) for r in doc["requests"]] == \
                [("reclaim", 0), ("reclaim", 1)]
            assert all(r["reason"].startswith("signal at step 0: T_train / T_rollout ") and
                       r["reason"].endswith(": 2 of 2 train (balance)")
                       for r in doc["requests"]), doc["requests"]
            before = stable(doc)
        with serve(urls, 2, *args, tp=",tp=1") as gw:
            doc = pool(gw)
            assert stable(doc) == before and doc["signal"]["target"] == 2, doc
            for h in (0, 1):
                assert confirm(gw, "retaken", ready(gw, h, "reclaim"), version=1)[0] == 200
            assert step(gw, 1, 1, "begin")[0] == 200
            assert [r["join"] for r in pool(gw)["replicas"]] == ["active", "active"]
            assert generate(gw.port, [2] * 64, 40)[0] == 200
            status, doc = step(gw, 1, 1, "end", train_s=1e-6)
            assert status == 200 and doc["signal"]["target"] == 0, doc
            assert [(r["kind"], r["replica"]) for r in doc["requests"]] == \
                [("lend", 0), ("lend", 1)]
            for h in (1, 0):
                assert confirm(gw, "released", ready(gw, h, "lend"))[0] == 200
            until(lambda: [r["engine"] for r in pool(gw)["replicas"]] == ["serving"] * 2,
                  "the engines serve")
            assert pool(gw)["counts"] == {"lends": 2, "reclaims": 2, "expired": 0, "failed": 0}
        # the journal's signals replay only under the steering they were made with
        p = subprocess.run([LIBRA, "serve", *BUCKETS, "--engine", urls[0], "--engine", urls[1],
                            "--pool-replica", urls[2] + ",tp=1", "--pool-replica",
                            urls[3] + ",tp=1", "--state-dir", str(tmp_path / "state")],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and "meta.pool_steer" in p.stderr, p.stderr
        # ... and their deadlines under the timeout they had: a failed join came back pending
        p = subprocess.run([LIBRA, "serve", *BUCKETS, *args, "--pool-timeout-s", "60",
                            "--engine", urls[0], "--engine", urls[1], "--pool-replica",
                            urls[2] + ",tp=1", "--pool-replica", urls[3] + ",tp=1"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "meta.pool_timeout: the state's pool gave a handshake " \
            "180 s" in p.stderr and "--pool-timeout-s (now 60)" in p.stderr, p.stderr
        p = subprocess.run([LIBRA, "serve", *BUCKETS, *args, "--set", "ehp.signal=reference",
                            "--engine", urls[0], "--engine", urls[1], "--pool-replica",
                            urls[2] + ",tp=1", "--pool-replica", urls[3] + ",tp=1"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and "meta.pool_steer" in p.stderr, p.stderr



def test_a_retaken_replica_of_several_gpus_trains_from_the_next_step():
    """A steered pool counts GPUs: a hybrid replica of a TP2 engine has two members, and the
    trainer's `retaken` says each of them holds its shard, so the join reaches activating at
    once and the next step's begin makes it active."""
    with Emu("--instances", "tp2x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with Serve(urls[0], args=["--set", "sched.buckets=tp2:40960", "--pool-steer",
                                  "--pool-replica", urls[1] + ",tp=2"]) as gw:
            retake(gw, 0)
            assert pool(gw)["replicas"][0]["join"] == "activating", pool(gw)
            assert step(gw, 0, 0, "begin")[0] == 200
            assert pool(gw)["replicas"][0]["join"] == "active", pool(gw)


def test_a_reclaim_is_ready_once_the_engine_let_go_and_a_lend_returns_it():
    """The handshake by hand: reclaim (the engine drains and releases its memory, then the
    request is ready), retaken at the core's version, active from the next step, lend,
    released at a step boundary (refused mid-step), the engine serves again."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1) as gw:
            doc = pool(gw)
            assert doc["schema"] == "libra.pool/1" and doc["requests"] == []
            assert [r["role"] for r in doc["replicas"]] == ["hybrid_rollout"]
            status, doc = post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0, "reason": "r"},
                               headers=ADMIN)
            assert status == 200 and doc["accepted"] == "reclaim", doc
            req = ready(gw, 0, "reclaim")
            assert req["reason"] == "r"
            assert pool(gw)["replicas"][0]["engine"] == "released"
            assert get(gw.port, "/libra/v1/engines")[1]["engines"][1]["state"] == "lent"
            assert step(gw, 0, 0, "begin")[0] == 200
            assert step(gw, 0, 0, "end")[0] == 200
            status, doc = confirm(gw, "retaken", req, version=1)
            assert status == 200, doc
            assert doc["replicas"][0]["join"] == "activating"
            assert confirm(gw, "retaken", req, version=1)[0] == 409  # confirmed already
            assert step(gw, 1, 1, "begin")[0] == 200
            assert pool(gw)["replicas"][0]["role"] == "hybrid_training"
            metrics = get(gw.port, "/metrics")[1]
            assert 'libra_pool_replicas{role="hybrid_training"} 1' in metrics
            assert 'libra_pool_requests_total{kind="reclaim"} 1' in metrics
            # a weight update from disk while the trainer has the GPUs leaves the engine out...
            status, doc = post(gw.port, "/update_weights_from_disk",
                               {"model_path": "m", "weight_version": "7"}, headers=ADMIN)
            assert status == 200 and len(doc["engines"]) == 1, doc
            replica_port = emu.instances[1]["port"]
            assert get(replica_port, "/get_weight_version")[1]["weight_version"] == "default"
            assert post(gw.port, "/libra/v1/pool/lend", {"replica": 0}, headers=ADMIN)[0] == 200
            lend = request_of(pool(gw), 0, "lend")
            status, doc = confirm(gw, "released", lend)
            assert status == 409 and "step boundary" in doc["error"]["message"], doc
            assert step(gw, 1, 1, "end")[0] == 200
            assert confirm(gw, "released", lend)[0] == 200
            until(lambda: pool(gw)["replicas"][0]["engine"] == "serving", "the engine serves")
            assert get(gw.port, "/libra/v1/engines")[1]["engines"][1]["state"] == "active"
            # ...and it loads that update when it wakes, before it takes a turn
            assert get(replica_port, "/get_weight_version")[1]["weight_version"] == "7"
            until(lambda: get(gw.port, "/libra/v1/engines")[1]["engines"][1]["weight_version"]
                  == "7", "the gateway knows its version")


def test_unconfirmed_requests_are_cancelled_and_the_engine_serves_again():
    """A reclaim not retaken in --pool-timeout-s fails (the pool's deadline) and the engine is
    woken; a lend not released in time expires and the replica keeps training; a confirmation
    of either after that is refused; a lend of a replica whose reclaim is pending cancels it."""
    with Emu("--instances", "tp1x3", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1, "--pool-timeout-s", "0.5") as gw:
            post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0}, headers=ADMIN)
            req = request_of(pool(gw), 0, "reclaim")
            until(lambda: pool(gw)["counts"]["failed"] == 1, "the reclaim fails")
            until(lambda: pool(gw)["replicas"][0]["engine"] == "serving", "the engine serves")
            assert confirm(gw, "retaken", req, version=0)[0] == 409
            assert pool(gw)["replicas"][0]["role"] == "hybrid_rollout"

            retake(gw, 1)
            assert step(gw, 0, 0, "begin")[0] == 200 and step(gw, 0, 0, "end")[0] == 200
            assert post(gw.port, "/libra/v1/pool/lend", {"replica": 1}, headers=ADMIN)[0] == 200
            lend = request_of(pool(gw), 1, "lend")
            until(lambda: pool(gw)["counts"]["expired"] == 1, "the lend expires")
            assert confirm(gw, "released", lend)[0] == 409
            doc = pool(gw)
            assert doc["replicas"][1]["role"] == "hybrid_training" and doc["requests"] == []

        with serve(urls, 1) as gw:
            reclaim = post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0},
                           headers=ADMIN)[1]["request"]
            status, doc = post(gw.port, "/libra/v1/pool/lend", {"replica": 0}, headers=ADMIN)
            assert status == 200 and doc["requests"] == [], doc
            # the answer names the reclaim it cancelled, and no request of its own
            assert doc["cancelled"] == reclaim and "request" not in doc, doc
            assert doc["replicas"][0]["join"] == "none"
            until(lambda: pool(gw)["replicas"][0]["engine"] == "serving", "the engine serves")
            # no id was taken for it: the next request is the one after the reclaim
            status, doc = post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0}, headers=ADMIN)
            assert status == 200 and doc["request"] == reclaim + 1, doc


def test_a_vllm_replica_sleeps_and_wakes_up():
    """A vLLM engine is put to sleep in abort mode (which aborts what it runs) when reclaimed,
    and woken when lent back."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, b""))
    with Emu("--instances", "tp1", scale=SCALE) as emu:
        with Serve(emu.instances[0]["url"],
                   args=[*BUCKETS, "--pool-replica", engine.url + ",tp=1"]) as gw:
            until(lambda: pool(gw)["replicas"][0]["engine"] == "serving", "the engine serves")
            post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0}, headers=ADMIN)
            req = ready(gw, 0, "reclaim")
            assert "/sleep?level=1&mode=abort" in [path for path, _ in engine.bodies]
            assert confirm(gw, "retaken", req, version=0)[0] == 200
            assert step(gw, 0, 0, "begin")[0] == 200 and step(gw, 0, 0, "end")[0] == 200
            assert post(gw.port, "/libra/v1/pool/lend", {"replica": 0}, headers=ADMIN)[0] == 200
            assert confirm(gw, "released", request_of(pool(gw), 0, "lend"))[0] == 200
            until(lambda: pool(gw)["replicas"][0]["engine"] == "serving", "the engine serves")
            assert engine.bodies[-1][0] == "/wake_up"
    engine.shutdown()


def test_bad_calls_are_refused_and_change_nothing(tmp_path):
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with Serve(urls[0], args=BUCKETS) as plain:
            status, doc = get(plain.port, "/libra/v1/pool")
            assert status == 404 and "--pool-replica" in doc["error"]["message"]
        with serve(urls, 1) as gw:
            until(lambda: pool(gw)["replicas"][0]["engine"] == "serving", "the engine serves")
            before = pool(gw)["changes"]
            assert post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0})[0] == 401
            cases = [
                ("reclaim", {"replica": 5}, 400, "replica: expected an integer from 0 to 0"),
                ("reclaim", {}, 400, "replica: missing"),
                ("lend", {"reason": "r"}, 400, "replica: missing"),
                ("confirm", {"event": "released", "request": 9}, 400, "replica: missing"),
                ("reclaim", {"replica": -1}, 400, "replica: expected an integer"),
                ("reclaim", {"replica": 0, "request": 3}, 400,
                 "reclaim takes replica, reason only, not 'request'"),
                # a member of no call, or the journal's own, is named, not the journal's list
                ("reclaim", {"replica": 0, "x": 1}, 400, "takes replica, reason only, not 'x'"),
                ("step", {"step": 0, "version": 0, "phase": "begin", "op": "x"}, 400,
                 "step takes step, version, phase, train_s only, not 'op'"),
                ("reclaim", {"replica": 0, "reason": "a\nb"}, 400, "control character"),
                ("lend", {"replica": 0}, 409, "is not training"),
                ("step", {"step": 0, "phase": "middle", "version": 0}, 400, "begin or end"),
                ("step", {"step": 0, "phase": "end", "version": 0}, 409, "cannot end"),
                ("confirm", {"request": 1, "replica": 0}, 400, "event is required"),
                ("confirm", {"event": "released", "request": 9, "replica": 0}, 409,
                 "no lend request 9"),
                ("confirm", {"event": "retaken", "request": 9, "replica": 0}, 400,
                 "version: missing"),
                ("other", {}, 404, "no such pool call"),
            ]
            for call, body, want, text in cases:
                status, doc = post(gw.port, "/libra/v1/pool/" + call, body, headers=ADMIN)
                assert status == want and text in doc["error"]["message"], (call, body, doc)
            status, doc = post(gw.port, "/libra/v1/pool/lend", raw="{\"replica\": 0,",
                               headers=ADMIN)
            assert status == 400 and doc["error"]["message"].startswith("body:")
            engine = pool(gw)["replicas"][0]["engine_id"]
            for action in ("lend", "reclaim"):  # only the handshake moves a replica's engine
                status, doc = post(gw.port, "/libra/v1/engines/%d/%s" % (engine, action),
                                   headers=ADMIN)
                assert status == 409 and "/libra/v1/pool" in doc["error"]["message"], doc
            assert pool(gw)["changes"] == before
        with serve(urls, 1, "--pool-steer", tp=",tp=1") as gw:
            for body, text in [({"phase": "begin", "train_s": 1.0}, "only at a step's end"),
                               ({"phase": "end", "train_s": 0}, "train_s: expected"),
                               ({"phase": "end", "rollout_s": 1.0}, "takes step, version"),
                               ({"phase": "end", "pressure": 0.5}, "takes step, version")]:
                status, doc = post(gw.port, "/libra/v1/pool/step",
                                   {"step": 0, "version": 0, **body}, headers=ADMIN)
                assert status == 400 and text in doc["error"]["message"], (body, doc)
            # a step without rollout work has nothing to weigh its training against
            assert step(gw, 0, 0, "begin")[0] == 200
            status, doc = step(gw, 0, 7, "end")  # the version was taken and dropped
            assert status == 409 and doc["error"]["message"] == \
                "version: step 0 began at version 0, not 7", doc
            status, doc = step(gw, 0, 0, "end", train_s=5.0)
            assert status == 200 and doc["signal"] is None and doc["requests"] == [], doc
    for args, text in [(["--pool-timeout-s", "5"], "needs --pool-replica"),
                       (["--pool-steer"], "needs --pool-replica"),
                       (["--pool-replica", "http://127.0.0.1:10", "--pool-steer"],
                        "the same tp=N"),
                       (["--pool-replica", "http://127.0.0.1:10,tp=1",
                         "--pool-core-replicas", "2"], "needs --pool-steer"),
                       (["--pool-replica", "http://127.0.0.1:10,tp=1", "--set",
                         "ehp.signal=reference"], "ehp.signal: needs --pool-steer"),
                       (["--pool-replica", "ftp://x"], "--pool-replica ftp://x")]:
        p = subprocess.run([LIBRA, "serve", "--engine", "http://127.0.0.1:9", *args],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and text in p.stderr, p.stderr
    p = subprocess.run([LIBRA, "load", "--engines", "http://127.0.0.1:9,http://127.0.0.1:10",
                        "--trainer"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "one gateway" in p.stderr, p.stderr
    # a config file's signal rule serves its simulator runs too: taken, as config check takes
    # it (serve refused the file, and with it every plan --export gateway line of it)
    config = tmp_path / "signal.json"
    config.write_text('{"ehp": {"signal": "reference"}}')
    p = subprocess.run([LIBRA, "serve", str(config), "--engine", "http://127.0.0.1:9,tp=1"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 3 and "ehp.signal" not in p.stderr, p.stderr  # engine unreachable


def test_a_long_poll_answers_when_the_pool_changes():
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1) as gw:
            n = pool(gw)["changes"]
            out = {}
            th = threading.Thread(target=lambda: out.update(doc=get(
                gw.port, "/libra/v1/pool?after=%d&wait_s=60" % n)[1]))
            th.start()
            time.sleep(0.2)
            post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0}, headers=ADMIN)
            th.join(30)
            assert not th.is_alive() and out["doc"]["changes"] > n
            for bad in ("x", "-1", "9223372036854775808"):  # past int64: not read as its max
                status, doc = get(gw.port, "/libra/v1/pool?after=" + bad)
                assert status == 400 and doc["error"]["message"] == \
                    "after: expected a count >= 0", (bad, doc)
            until(lambda: pool(gw)["replicas"][0]["engine"] == "released", "the engine let go")
            n = pool(gw)["changes"]
            th = threading.Thread(target=lambda: out.update(doc=get(
                gw.port, "/libra/v1/pool?after=%d&wait_s=60" % n)[1]))
            th.start()
            time.sleep(0.2)
            gw.proc.send_signal(signal.SIGTERM)  # the stop answers the poll, without its grace
            th.join(10)
            assert not th.is_alive() and out["doc"]["changes"] == n
            gw.proc.wait(timeout=20)  # the answer may leave before the stop ends: no second signal


# ---- durability and faults ----------------------------------------------------------------------

STABLE = ("replica", "role", "join", "generation", "leaving")


def stable(doc):
    """What a restart must give back: the replicas' roles, joins and generations, the requests
    pending, the step; not the engines' calls nor the deadlines' remaining seconds."""
    return ([{k: r[k] for k in STABLE} for r in doc["replicas"]],
            [{k: r[k] for k in ("request", "kind", "replica", "generation")}
             for r in doc["requests"]], doc["step"], doc["version"])


def test_a_restart_keeps_the_update_a_sleeping_replica_missed(tmp_path):
    """A weight update from disk while the trainer holds a replica's GPUs leaves its engine
    out; the gateway keeps the update in its state dir, so after a kill -9 and a restart the
    engine, woken when the replica is lent back, still loads it before it takes a turn."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        args = ["--state-dir", str(tmp_path / "state")]
        with killed_when_done(serve(urls, 1, *args)) as gw:
            retake(gw, 0)
            assert step(gw, 0, 0, "begin")[0] == 200
            status, doc = post(gw.port, "/update_weights_from_disk",
                               {"model_path": "m", "weight_version": "7"}, headers=ADMIN)
            assert status == 200 and len(doc["engines"]) == 1, doc
            # a durable answer: its commit holds everything changed before it
            assert post(gw.port, "/libra/v1/pool/lend", {"replica": 0}, headers=ADMIN)[0] == 200
        replica_port = emu.instances[1]["port"]
        assert get(replica_port, "/get_weight_version")[1]["weight_version"] == "default"
        with serve(urls, 1, *args) as again:
            assert step(again, 0, 0, "end")[0] == 200
            assert confirm(again, "released", ready(again, 0, "lend"))[0] == 200
            until(lambda: pool(again)["replicas"][0]["engine"] == "serving", "the engine serves")
            assert get(replica_port, "/get_weight_version")[1]["weight_version"] == "7"


def test_a_restart_after_a_replica_that_missed_an_update_was_drained(tmp_path):
    """The state names the engines that missed the update by id: a replica's engine drained
    (removed) after it missed one leaves a state a restart reads."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        args = ["--state-dir", str(tmp_path / "state")]
        with killed_when_done(serve(urls, 1, *args)) as gw:
            retake(gw, 0)
            status, doc = post(gw.port, "/update_weights_from_disk",
                               {"model_path": "m", "weight_version": "7"}, headers=ADMIN)
            assert status == 200, doc
            assert step(gw, 0, 0, "begin")[0] == 200  # a commit with the engine that missed it
            engine = pool(gw)["replicas"][0]["engine_id"]
            status, doc = post(gw.port, "/libra/v1/engines/%d/drain" % engine, headers=ADMIN)
            assert status == 200, doc  # durable: committed with the engines it leaves
        with serve(urls, 1, *args) as again:
            assert pool(again)["replicas"][0]["join"] == "active"


def test_a_restart_mid_handshake_resumes_it(tmp_path):
    with Emu("--instances", "tp1x3", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        args = ["--state-dir", str(tmp_path / "state")]
        with killed_when_done(serve(urls, 1, *args)) as gw:
            retake(gw, 0)
            assert step(gw, 0, 0, "begin")[0] == 200
            _, last = post(gw.port, "/libra/v1/pool/reclaim", {"replica": 1}, headers=ADMIN)
        with serve(urls, 1, *args) as again:
            doc = pool(again)
            assert stable(doc) == stable(last)
            req = ready(again, 1, "reclaim")
            assert confirm(again, "retaken", req, version=0)[0] == 200
            assert two_roles(pool(again)) == []
        p = subprocess.run([LIBRA, "serve", "--engine", urls[0], "--pool-replica", urls[2],
                            *args, *BUCKETS], capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and "meta.pool" in p.stderr, p.stderr


def test_changes_go_on_past_a_restart(tmp_path):
    """`changes` never goes back: after a kill -9 and after a graceful stop, the restarted
    gateway's count is past every count shown before, so a long poll from before the restart
    is answered at once, and not held until the count happens to pass it again."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        args = ["--state-dir", str(tmp_path / "state")]
        with killed_when_done(serve(urls, 1, *args)) as gw:
            first = post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0},
                         headers=ADMIN)[1]["request"]
            post(gw.port, "/libra/v1/pool/lend", {"replica": 0}, headers=ADMIN)  # cancels it
            post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0}, headers=ADMIN)
            ready(gw, 0, "reclaim")  # the engine let go: a change the journal does not hold
            seen = pool(gw)["changes"]
        with serve(urls, 1, *args) as again:
            status, doc = get(again.port, "/libra/v1/pool?after=%d&wait_s=60" % seen)
            assert status == 200 and doc["changes"] > seen, (seen, doc)
            assert request_of(doc, 0, "reclaim")["request"] == first + 1, doc  # replayed
            seen = until(lambda: (lambda d: d["changes"] if d["replicas"][0]["engine"]
                                  == "released" else None)(pool(again)), "the engine let go")
            again.proc.send_signal(signal.SIGTERM)
            assert again.proc.wait(timeout=30) == 0
        with serve(urls, 1, *args) as third:
            assert pool(third)["changes"] > seen


def test_a_graceful_restart_resumes_the_pool_clock_where_it_stopped(tmp_path):
    """A request's deadline counts the time the gateway ran after the last change: the clock
    resumed at the last journal record, so a restart gave a pending reclaim back the time
    since it was made (here: its deadline after the restart was later than before the stop)."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        args = ["--state-dir", str(tmp_path / "state"), "--pool-timeout-s", "600"]
        with serve(urls, 1, *args) as gw:
            post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0}, headers=ADMIN)
            made = request_of(pool(gw), 0, "reclaim")["deadline_in_s"]
            before = until(lambda: (lambda r: r if r["deadline_in_s"] < made - 1 else None)(
                request_of(pool(gw), 0, "reclaim")), "a second of the deadline gone")
            gw.proc.send_signal(signal.SIGTERM)
            assert gw.proc.wait(timeout=30) == 0
        with serve(urls, 1, *args) as again:
            after = request_of(pool(again), 0, "reclaim")
            assert after["request"] == before["request"], after
            assert after["deadline_in_s"] <= before["deadline_in_s"], (before, after)
