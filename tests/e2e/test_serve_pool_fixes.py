"""End-to-end tests of fixes to the elastic pool live (docs/serve.md "The elastic pool"): an
engine of a pool replica removed and added back takes its replica's role, a step version that
would leave the pool stuck, the long poll's default wait, and what refusals say."""

import subprocess
import threading

import pytest

from emu_util import ADMIN, LIBRA, Emu, get, post
from test_serve_pool import (BUCKETS, pool, ready, retake, serve, step, until)

SCALE = "0.01"
VERSION_MAX = 4611686018427387903


def engine_of(gw, url):
    for e in get(gw.port, "/libra/v1/engines")[1]["engines"]:
        if e["url"] == url:
            return e
    return None


@pytest.mark.parametrize("how", ["remove_worker", "drain", "localhost"])
def test_a_replica_engine_added_back_while_training_stays_lent(how):
    """The trainer holds replica 0's GPUs; its engine removed (or drained) and added back (also
    under another spelling of its URL) is the replica's again: lent, not serving."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1, "--model", "qwen3-4b") as gw:
            retake(gw, 0)
            assert step(gw, 0, 0, "begin")[0] == 200
            engine = engine_of(gw, urls[1])["id"]
            if how == "drain":
                status, doc = post(gw.port, "/libra/v1/engines/%d/drain" % engine,
                                   headers=ADMIN)
            else:
                status, doc = post(gw.port, "/remove_worker?url=" + urls[1], headers=ADMIN)
            assert status == 200, doc
            again = urls[1].replace("127.0.0.1", "localhost") if how == "localhost" else urls[1]
            status, doc = post(gw.port, "/add_worker?url=" + again, headers=ADMIN)
            assert status == 200, doc
            added = doc["worker_id"]
            listed = get(gw.port, "/libra/v1/engines")[1]["engines"]
            states = {e["id"]: e["state"] for e in listed}
            assert states[added] == "lent", states
            status, doc = post(gw.port, "/libra/v1/engines/%d/reclaim" % added, headers=ADMIN)
            assert status == 409 and "pool" in doc["error"]["message"], doc
            rep = until(lambda: (lambda r: r if r["engine"] == "released" else None)(
                pool(gw)["replicas"][0]), "the replica's engine is released")
            assert rep["engine_id"] == added and rep["role"] == "hybrid_training", rep


def test_a_replica_engine_removed_mid_reclaim_serves_when_added_back():
    """An engine removed while its reclaim is pending, the reclaim timing out: added back, the
    replica serves rollout again, so its engine is woken."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1, "--pool-timeout-s", "1") as gw:
            post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0}, headers=ADMIN)
            ready(gw, 0, "reclaim")
            assert post(gw.port, "/remove_worker?url=" + urls[1], headers=ADMIN)[0] == 200
            until(lambda: pool(gw)["counts"]["failed"] == 1, "the reclaim fails")
            assert post(gw.port, "/add_worker?url=" + urls[1], headers=ADMIN)[0] == 200
            until(lambda: pool(gw)["replicas"][0]["engine"] == "serving", "the engine serves")
            assert engine_of(gw, urls[1])["state"] == "active"


def test_a_step_at_the_last_version_is_refused():
    """A step's end makes the next version: one beginning at the last version a call can name
    is refused, so no call leaves the pool at a version no later call can name."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1) as gw:
            status, doc = step(gw, 0, VERSION_MAX, "begin")
            assert status == 400 and "version" in doc["error"]["message"], doc
            assert str(VERSION_MAX - 1) in doc["error"]["message"], doc
            assert step(gw, 0, VERSION_MAX - 1, "begin")[0] == 200
            assert step(gw, 0, VERSION_MAX - 1, "end")[0] == 200
            assert pool(gw)["version"] == VERSION_MAX
            assert step(gw, 1, VERSION_MAX, "begin")[0] == 400


def test_after_alone_is_a_long_poll():
    """`after` without `wait_s` waits (for the documented default) while `changes` is not past
    it: a change answers it."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1) as gw:
            seen = pool(gw)["changes"]
            out = {}
            th = threading.Thread(target=lambda: out.update(
                doc=get(gw.port, "/libra/v1/pool?after=%d" % seen)[1]))
            th.start()
            th.join(1.0)
            assert th.is_alive(), "answered at once: %s" % out
            post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0}, headers=ADMIN)
            th.join(30)
            assert out["doc"]["changes"] > seen


def test_a_restart_refused_over_the_signal_rule_names_it(tmp_path):
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        args = ["--state-dir", str(tmp_path / "sdr"), "--pool-steer"]
        with serve(urls, 1, *args, "--set", "ehp.signal=reference", tp=",tp=1"):
            pass
        p = subprocess.run([LIBRA, "serve", "--engine", urls[0], "--pool-replica",
                            urls[1] + ",tp=1", *args, *BUCKETS],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "meta.pool_steer" in p.stderr, p.stderr
        assert "ehp.signal" in p.stderr, p.stderr


def test_messages_say_the_real_range_and_route():
    with Emu("--instances", "tp1x3", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1) as gw:
            for h in (-1, 2, 64):
                status, doc = post(gw.port, "/libra/v1/pool/reclaim", {"replica": h},
                                   headers=ADMIN)
                assert status == 400, doc
                assert "expected an integer from 0 to 1" in doc["error"]["message"], doc
            for path in ("/libra/v1/pool/foo", "/libra/v1/pool/"):
                assert post(gw.port, path, {}, headers=ADMIN)[0] == 404, path
                assert get(gw.port, path)[0] == 405, path  # as docs/serve.md says
            retake(gw, 0)
            req = {"request": pool(gw)["counts"]["reclaims"], "replica": 0, "generation": 1}
            status, doc = post(gw.port, "/libra/v1/pool/confirm",
                               {"event": "retaken", "version": 0, **req}, headers=ADMIN)
            assert status == 409, doc
            assert "confirmed" in doc["error"]["message"], doc
            assert "do not act on it" not in doc["error"]["message"], doc

