"""Edge cases of the gateway, the emulator and their HTTP server (docs/serve.md, docs/emu.md):
the pool's long poll with `after` at or past `changes` waits, a reclaim of an engine that is
not lent is refused, a bad `meta.layout` row is named with its value, a chat message that is
not an object is named so, a header value holding a control byte is refused as such.

Needs LIBRA_BIN."""

import subprocess
import tempfile
import threading
import time

from emu_util import ADMIN, LIBRA, Emu, Serve, get, post, raw_request
from test_serve_state import BUCKETS as STATE_BUCKETS, SCALE as STATE_SCALE, edit, left_state_dir

SCALE = "0.005"
BUCKETS = ["--set", "sched.buckets=tp1:40960"]


def pool_serve(urls):
    return Serve(urls[0], args=[*BUCKETS, "--pool-replica", urls[1]])


def test_a_long_poll_past_the_count_waits_for_the_count_to_pass_it():
    """docs/serve.md: with `after`, the pool is answered once `changes` is past N: an `after`
    above the count waits (until wait_s, or until the count passes it), as one equal to it
    does."""
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        with pool_serve(urls) as gw:
            n = get(gw.port, "/libra/v1/pool")[1]["changes"]
            for after in (n, n + 1, n + 5):
                t0 = time.monotonic()
                status, doc = get(gw.port, "/libra/v1/pool?after=%d&wait_s=1" % after)
                took = time.monotonic() - t0
                assert status == 200 and doc["changes"] == n, doc
                assert took >= 0.9, (after, took)  # held until wait_s: nothing changed
            # held until the count passes after, not answered by the first change
            out = {}
            th = threading.Thread(target=lambda: out.update(doc=get(
                gw.port, "/libra/v1/pool?after=%d&wait_s=60" % (n + 1))[1]))
            th.start()
            time.sleep(0.3)
            assert th.is_alive()
            # a reclaim (one change), then its engine letting go (another)
            assert post(gw.port, "/libra/v1/pool/reclaim", {"replica": 0},
                        headers=ADMIN)[0] == 200
            th.join(30)
            assert not th.is_alive() and out["doc"]["changes"] > n + 1, out
            # below the count: at once
            status, doc = get(gw.port, "/libra/v1/pool?after=%d&wait_s=60" % n)
            assert status == 200 and doc["changes"] > n


def test_reclaiming_an_engine_that_is_not_lent_is_refused():
    """`reclaim` takes back a lent engine; of one that is not lent (active, or reclaimed
    already) it is a 409 naming the engine's state, as `lend` of a draining engine is."""
    with Emu(scale=SCALE) as emu, Serve(emu.instances[0]["url"], args=BUCKETS) as gw:
        engine = get(gw.port, "/libra/v1/engines")[1]["engines"][0]["id"]
        path = "/libra/v1/engines/%d/" % engine
        status, doc = post(gw.port, path + "reclaim", headers=ADMIN)
        assert status == 409 and doc["error"]["message"] == \
            "engine %d is active: it is not lent, so it cannot be reclaimed" % engine, doc
        status, doc = post(gw.port, path + "lend", headers=ADMIN)
        assert status == 200 and doc["state"] == "lent", doc
        status, doc = post(gw.port, path + "reclaim", headers=ADMIN)
        assert status == 200 and doc["state"] == "active", doc
        status, doc = post(gw.port, path + "reclaim", headers=ADMIN)  # twice
        assert status == 409 and "is active: it is not lent" in doc["error"]["message"], doc
        assert get(gw.port, "/libra/v1/engines")[1]["engines"][0]["state"] == "active"


def test_a_bad_layout_row_is_named_with_its_value():
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=STATE_SCALE) as emu:
        url = emu.instances[0]["url"]
        state_dir, db = left_state_dir(tmp, url)
        edit(db, "UPDATE meta SET value = ? WHERE key = 'layout'", "tp1:zz")
        p = subprocess.run([LIBRA, "serve", "--engine", url, *STATE_BUCKETS, "--state-dir",
                            state_dir], capture_output=True, text=True, timeout=15)
    assert p.returncode == 2 and p.stdout == "", p
    assert "state dir '%s': meta.layout 'tp1:zz': " % state_dir in p.stderr, p.stderr
    assert "expected max_tokens" in p.stderr, p.stderr


def test_a_chat_message_that_is_not_an_object_is_named_so():
    with Emu(scale=SCALE) as emu:
        for msgs, says in (([1], "messages[0]: expected an object"),
                           ([{"role": "user", "content": "hi"}, "x"],
                            "messages[1]: expected an object"),
                           ([{"content": "hi"}], "messages[0].role: expected a string")):
            status, doc = post(emu.port(), "/v1/chat/completions",
                               {"messages": msgs, "max_tokens": 1})
            assert status == 400 and doc["error"]["message"] == says, (msgs, doc)


def test_a_header_value_with_a_control_byte_is_refused_as_such():
    """The name and its colon are there: the refusal says the value holds a control byte and
    names the header, not that the line is not `Name: value`."""
    with Emu(scale=SCALE) as emu:
        req = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Session-ID: \xff\xfe\x01z\r\n\r\n"
        status, doc = raw_request(emu.port(), req)
        msg = doc["error"]["message"]
        assert status == 400 and "X-Session-ID" in msg and "control byte" in msg, doc
        assert "expected Name: value" not in msg, doc
        for bad in (b"GET /health HTTP/1.1\r\nNo colon here\r\n\r\n",
                    b"GET /health HTTP/1.1\r\nX-A : b\r\n\r\n"):
            status, doc = raw_request(emu.port(), bad)
            assert status == 400 and doc["error"]["message"] == \
                "malformed header field: expected Name: value", (bad, doc)
