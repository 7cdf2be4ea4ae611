"""Restarts on a state dir and kept output files, as docs/serve.md says: an --engine flag
under another spelling of a stored engine's URL is that engine; a stored engine that answers
with another TP stops the start, and a suspect that comes back with another TP is not active
under the stored one; a database the gateway cannot write, or a --listen port it cannot bind,
stops the start before anything is saved; a kept capture or decisions file is checked whole;
a bad row is named by its fault."""

import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import tempfile

import pytest

from emu_util import LIBRA, ADMIN, Emu, Serve, get, wait_for

SCALE = "0.001"
BUCKETS = ["--set", "sched.buckets=tp1:2000,tp2:40960"]


def left_state_dir(tmp, *urls):
    """A state dir a gateway in front of urls made and was stopped on, and its database."""
    state_dir = os.path.join(tmp, "state")
    with Serve(*urls, args=[*BUCKETS, "--state-dir", state_dir]):
        pass
    return state_dir, os.path.join(state_dir, "libra-state.sqlite3")


def rows(db, sql):
    conn = sqlite3.connect(db)
    got = conn.execute(sql).fetchall()
    conn.close()
    return got


def edit(db, sql):
    conn = sqlite3.connect(db)
    conn.execute(sql)
    conn.commit()
    conn.close()


def serve(*args, timeout=15, pre=()):
    return subprocess.run([*pre, LIBRA, "serve", *BUCKETS, *args], capture_output=True,
                          text=True, timeout=timeout)


def engines(port):
    return get(port, "/libra/v1/engines", headers=ADMIN)[1]


def test_an_engine_flag_under_another_spelling_of_a_stored_engine_is_that_engine():
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        url = emu.instances[0]["url"]
        state_dir, db = left_state_dir(tmp, url)
        other = url.replace("127.0.0.1", "localhost")
        with Serve(other, args=[*BUCKETS, "--state-dir", state_dir]) as gw:
            doc = engines(gw.port)
        assert [(e["id"], e["url"]) for e in doc["engines"]] == [(0, url)], doc
        assert doc["world_size"] == 2, doc
        assert rows(db, "SELECT id, url FROM engines") == [(0, url)]


def test_a_stored_engine_that_answers_with_another_tp_stops_the_start():
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        url = emu.instances[0]["url"]
        state_dir, db = left_state_dir(tmp, url)
        edit(db, "UPDATE engines SET body = replace(body, '\"tp\":1', '\"tp\":2')")
        p = serve("--state-dir", state_dir, "--poll-s", "0.5")
    assert p.returncode == 2 and p.stdout == "", p
    assert ("state dir '%s': engine 0 (%s) says it is TP1, not TP2 as the state dir lists it"
            % (state_dir, url)) in p.stderr, p.stderr
    assert "--engine %s,tp=1" % url in p.stderr, p.stderr


def test_a_suspect_that_comes_back_with_another_tp_is_not_active_under_the_stored_one():
    with tempfile.TemporaryDirectory() as tmp:
        with Emu(scale=SCALE) as emu:
            url, port = emu.instances[0]["url"], emu.port()
            state_dir, _ = left_state_dir(tmp, url)
        gw = Serve(args=[*BUCKETS, "--state-dir", state_dir, "--poll-s", "0.1"])
        try:
            assert engines(gw.port)["engines"][0]["state"] == "suspect"
            with Emu("--base-port", str(port), "--instances", "tp2", scale=SCALE):
                wait_for(lambda: engines(gw.port)["engines"][0]["state"] != "suspect",
                         what="the engine's next health check")
                doc = engines(gw.port)
        finally:
            rc, err = gw.stop()
        assert doc["engines"][0]["state"] == "dead" and rc == 0, (doc, rc, err)
        assert "engine 0 (%s) of the state dir says it is TP2, not TP1" % url in err, err


def test_a_state_database_the_gateway_cannot_write_is_refused_at_start():
    """Run as another user (root writes any file), on a database that user cannot write."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run the gateway as a user who cannot write")
    tmp = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(tmp, 0o755)
        with Emu(scale=SCALE) as emu:
            url = emu.instances[0]["url"]
            state_dir, db = left_state_dir(tmp, url)
            os.chmod(state_dir, 0o777)  # the lock and SQLite's files can be made there
            os.chmod(os.path.join(state_dir, "libra-state.lock"), 0o666)
            os.chmod(db, 0o444)
            p = serve("--state-dir", state_dir, pre=["setpriv", "--reuid=nobody",
                                                     "--regid=nogroup", "--clear-groups"])
        assert p.returncode == 3 and p.stdout == "", p
        assert "state dir '%s': libra-state.sqlite3 is read-only" % state_dir in p.stderr, p
    finally:
        shutil.rmtree(tmp)


def test_a_start_that_cannot_listen_changes_no_saved_state():
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x2", scale=SCALE) as emu, socket.socket() as held:
        first, second = (i["url"] for i in emu.instances)
        state_dir, db = left_state_dir(tmp, first)
        before = rows(db, "SELECT * FROM engines UNION ALL SELECT key, value, 0 FROM meta")
        held.bind(("127.0.0.1", 0))
        held.listen()
        p = serve("--state-dir", state_dir, "--engine", second, "--listen",
                  "127.0.0.1:%d" % held.getsockname()[1])
        assert p.returncode == 3 and "cannot listen" in p.stderr, p
        assert rows(db, "SELECT * FROM engines UNION ALL SELECT key, value, 0 FROM meta") \
            == before


CAPTURE_LINE = json.dumps({"libra_trace": 1, "workload": "r2e-gym", "model": "qwen3-14b"})


@pytest.mark.parametrize("flag,head", [("--capture", CAPTURE_LINE),
                                       ("--decisions", '{"trajectory": "libra:a"}')])
def test_a_kept_file_with_a_line_of_something_else_is_refused_where_it_is(tmp_path, flag,
                                                                          head):
    path = tmp_path / "kept"
    content = head + "\nnot json\n" + head.replace("libra:a", "libra:b") + "\n"
    path.write_text(content)
    with Emu(scale=SCALE) as emu:
        p = serve("--engine", emu.instances[0]["url"], flag, str(path))
    assert p.returncode == 2 and p.stdout == "", p
    assert re.search(r"libra: serve: %s: %s:2:\d+: " % (flag, re.escape(str(path))), p.stderr), \
        p.stderr
    assert path.read_text() == content


@pytest.mark.parametrize("sql,says", [
    ("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'",
     "meta.schema_version: 'abc' is not a schema version"),
    ("UPDATE engines SET id = -5 WHERE id = 1", "engines: id -5 is outside 0 to 2^62"),
    ("UPDATE engines SET body = json_set(body, '$.reported', 7) WHERE id = 0",
     "engines.0.reported: expected a version of at most 63 bytes"),
])
def test_a_bad_row_is_named_by_its_fault(sql, says):
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x2", scale=SCALE) as emu:
        state_dir, db = left_state_dir(tmp, *(i["url"] for i in emu.instances))
        edit(db, sql)
        p = serve("--state-dir", state_dir)
    assert p.returncode == 2 and p.stdout == "", p
    assert says in p.stderr, p.stderr


def test_an_engine_row_from_before_reported_is_read():
    """An engines row written before its "reported" member (docs/serve.md "The state
    format") is read as one without a number the gateway gave."""
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        state_dir, db = left_state_dir(tmp, emu.instances[0]["url"])
        edit(db, "UPDATE engines SET body = json_remove(body, '$.reported')")
        with Serve(args=[*BUCKETS, "--state-dir", state_dir]) as gw:
            assert [(e["id"], e["weight_version"], e["step"]) for e in engines(gw.port)
                    ["engines"]] == [(0, "default", 0)]
