"""The gateway's durable state and graceful stop (docs/serve.md "Durable state").

A restart resumes a live trajectory where it stopped; an unknown schema version is refused;
commits that fail are answered 503 and retried; SIGTERM lets a turn finish within the grace and
cuts it after. The crash test: under load — multi-turn
trajectories with tool returns, finishes, weight updates that make steps — the gateway is killed
with SIGKILL at random moments and restarted on the same state dir each time. Afterwards every
event the gateway acknowledged is in the journal, the journal is whole (no hole in its
sequence, each step's count matches the trajectories before it, no trajectory twice), and the
trees equal those of a fresh gateway fed the journal's trajectories and steps in order through
HTTP — which catches a learnt trajectory or step lost or doubled by a restart, and live learning
that differs from what the journal says was learnt."""

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
import http.client
import socket

import pytest

from emu_util import (ADMIN, LIBRA, TOKEN as ADMIN_TOKEN, Background, Emu, ScriptedVllm, Serve,
                      answer, generate, get, post, request, tokens_lasting)

SCALE = "0.001"
BUCKETS = ["--set", "sched.buckets=tp1:2000,tp2:40960", "--set", "sched.rebuild_interval=2"]
TOOLS = ["bash", "search", "python"]


class Gone(Exception):
    """The gateway did not answer: it was killed, or is not up yet."""


class Gateway:
    """`libra serve` on a state dir, killed and restarted by the test; .port is the current
    one (0 while it is down)."""

    def __init__(self, urls, state_dir, log):
        self.urls, self.state_dir, self.log = urls, state_dir, log
        self.port, self.proc, self.restored = 0, None, []
        self.lock = threading.Lock()
        self.start()

    def start(self):
        cmd = [LIBRA, "serve", "--listen", "127.0.0.1:0", "--state-dir", self.state_dir,
               "--poll-s", "0.1", *BUCKETS]
        for u in self.urls:
            cmd += ["--engine", u]
        with open(self.log, "a") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        line = self.proc.stdout.readline()
        assert line, open(self.log).read()
        with self.lock:
            self.port = json.loads(line)["port"]

    def kill(self):
        with self.lock:
            self.port = 0
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=30)
        self.proc.stdout.close()
        return rc


def call(gw, method, path, body=None, timeout=30):
    """(status, JSON) from the gateway; Gone when it is down or went down meanwhile."""
    port = gw.port
    if not port:
        raise Gone()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request(method, path, body=json.dumps(body) if body is not None else None)
        resp = conn.getresponse()
        text = resp.read()
        conn.close()
    except (OSError, http.client.HTTPException):
        raise Gone()
    return resp.status, json.loads(text) if text else None


def until_up(fn):
    """fn() again while the gateway is down or answers 503; returns its (status, doc)."""
    while True:
        try:
            status, doc = fn()
            if status != 503:
                return status, doc
        except Gone:
            pass
        time.sleep(0.02)


class Client:
    """One rollout worker: trajectories one after another, every acknowledgement recorded."""

    def __init__(self, gw, k, acked, stop):
        self.gw, self.k, self.acked, self.stop = gw, k, acked, stop
        self.rng = random.Random(k)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.error = None

    def run(self):
        try:
            n = 0
            while not self.stop.is_set():
                self.trajectory("w%d-%d" % (self.k, n), (self.k * 7 + n) % 5)
                n += 1
        except Exception as e:  # the test reports it
            self.error = e

    def turn(self, tid, prompt, ids, gen):
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": gen},
                "libra": {"trajectory": tid, "prompt": prompt}}
        status, doc = until_up(lambda: call(self.gw, "POST", "/generate", body))
        assert status == 200, (status, doc)  # a failed engine would be a failure of the test

    def event(self, tid, ev, what):
        """Sends one event; records it when acknowledged. Returns the status (None: gone)."""
        try:
            status, _ = call(self.gw, "POST", "/libra/v1/trajectories/%s/events" % tid, ev)
        except Gone:
            return None
        if status == 200:
            self.acked.append((tid, what))
        return status

    def trajectory(self, tid, prompt):
        ids = [self.k] * 64
        turns = self.rng.randint(2, 5)
        for t in range(turns):
            gen = self.rng.randint(20, 600)
            self.turn(tid, prompt, ids, gen)
            ids = ids + [7] * gen
            if t + 1 < turns and not self.stop.is_set():
                payload = 1000 * self.k + len(self.acked) % 1000 + 100000 * t
                ev = {"kind": "tool_return", "tool": self.rng.choice(TOOLS),
                      "status": self.rng.choice(["success", "failure"]),
                      "payload_tokens": payload}
                self.event(tid, ev, ("return", ev["tool"], payload))
                ids = ids + [9] * 50
        finish = {"kind": "finish", "status": "completed"}
        # an unacknowledged finish is sent again: 404 says the first one ended it
        while self.event(tid, finish, ("finish",)) not in (200, 404):
            time.sleep(0.02)


def journal(db_path):
    conn = sqlite3.connect(db_path)
    rows = conn.execute("SELECT seq, kind, body FROM journal ORDER BY seq").fetchall()
    live = conn.execute("SELECT count(*) FROM trajectories").fetchone()[0]
    conn.close()
    return [(seq, kind, json.loads(body)) for seq, kind, body in rows], live


def check_journal(rows, acked):
    """The journal is whole, and holds every acknowledged event once."""
    assert [seq for seq, _, _ in rows] == list(range(1, len(rows) + 1))  # no hole
    since, seen = 0, {}
    for _, kind, doc in rows:
        if kind == "step":
            assert doc["learnt"] == since, doc  # a lost or doubled trajectory shows here
            since = 0
        else:
            assert doc["id"] not in seen, doc["id"]  # nobody learnt twice
            seen[doc["id"]] = doc
            since += 1
    for tid, what in acked:
        doc = seen.get("libra:" + tid)
        assert doc is not None, (tid, what)
        if what[0] == "return":
            returns = [(r[0], r[1]) for turn in doc["turns"] for r in turn[2]]
            assert (what[1], what[2]) in returns, (tid, what, doc)
    return sum(1 for _, kind, _ in rows if kind == "step")


def feed(port, rows):
    """Feeds the journal's trajectories and steps, in order, to a fresh gateway."""
    step = 0
    for _, kind, doc in rows:
        if kind == "step":
            step += 1
            status, _ = post(port, "/update_weights_from_disk",
                             {"model_path": "m", "weight_version": "fresh-%d" % step},
                             headers=ADMIN)
            assert status == 200
            deadline = time.monotonic() + 10
            while get(port, "/libra/v1/status")[1]["step"] < step:
                assert time.monotonic() < deadline, "the fresh gateway took no step"
                time.sleep(0.005)
            continue
        tid = "replay-%s" % doc["id"]
        turns = doc["turns"]
        for k, (gen, context, returns) in enumerate(turns):
            explicit = [r for r in returns if r[4] == "explicit"]
            body = {"input_ids": [1] * context, "sampling_params": {"max_new_tokens": gen},
                    "libra": {"trajectory": tid, "prompt": doc["prompt"]}}
            status, out = post(port, "/generate", body)
            assert status == 200 and out["meta_info"]["completion_tokens"] == gen, out
            events = [{"kind": "tool_return", "tool": r[0], "status": r[3],
                       "payload_tokens": r[1]} for r in explicit]
            # a return of status_from "none" was the prompt's growth: the next context says it
            if events:
                status, _ = post(port, "/libra/v1/trajectories/%s/events" % tid,
                                 {"events": events})
                assert status == 200
        status, _ = post(port, "/libra/v1/trajectories/%s/events" % tid,
                         {"kind": "finish", "status": doc["finish"]})
        assert status == 200


def state(port):
    return get(port, "/libra/v1/state?trees=1&limit=0")[1]


@pytest.mark.parametrize("kills", [20])
def test_kill_9_under_load_loses_no_acknowledged_event_and_replays_to_the_same_trees(kills):
    rng = random.Random(16)
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x2,tp2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        gw = Gateway(urls, os.path.join(tmp, "state"), os.path.join(tmp, "serve.log"))
        acked, stop = [], threading.Event()
        clients = [Client(gw, k, acked, stop) for k in range(4)]
        for c in clients:
            c.thread.start()
        version = 0
        started = time.monotonic()
        for kill in range(kills):
            deadline = time.monotonic() + rng.uniform(0.4, 1.2)
            while time.monotonic() < deadline:  # weight updates straight to the engines
                version += 1
                for u in urls:
                    port = int(u.rsplit(":", 1)[1])
                    assert post(port, "/update_weights_from_disk",
                                {"model_path": "m", "weight_version": "v%d" % version})[0] == 200
                time.sleep(rng.uniform(0.1, 0.4))
            gw.kill()
            gw.start()
        time.sleep(1.5)  # live learning after the last restart, steps included
        for u in urls:
            post(int(u.rsplit(":", 1)[1]), "/update_weights_from_disk",
                 {"model_path": "m", "weight_version": "last"})
        stop.set()
        for c in clients:
            c.thread.join(60)
            assert c.error is None, c.error
        # the last update's step: every finished trajectory is learnt, or waits in both gateways
        time.sleep(0.5)
        load_s = time.monotonic() - started
        final = state(gw.port)
        assert gw.stop() == 0  # graceful: commits and exits 0
        log = open(os.path.join(tmp, "serve.log")).read()
        rows, live = journal(os.path.join(tmp, "state", "libra-state.sqlite3"))

    assert live == 0  # every trajectory ended
    steps = check_journal(rows, acked)
    learns = len(rows) - steps
    assert learns > 100 and steps > kills, (learns, steps)
    assert sum(1 for a in acked if a[1][0] == "return") > 100
    restored = [int(m) for m in re.findall(r"restored (\d+) live trajectories", log)]
    # the first start's line (a new state dir: nothing restored), then each restart's
    assert len(restored) == kills + 1 and restored[0] == 0 and max(restored) > 0, restored
    assert final["step"] == steps and final["store"]["next_seq"] == len(rows) + 1

    with Emu("--instances", "tp1x2,tp2", scale=SCALE) as emu, \
            Serve(*[i["url"] for i in emu.instances], args=BUCKETS) as fresh:
        t0 = time.monotonic()
        feed(fresh.port, rows)
        feed_s = time.monotonic() - t0
        replay = state(fresh.port)
    assert replay["step"] == final["step"]
    assert replay["trees"]["steps"] == final["trees"]["steps"] == steps  # every tick, once
    assert replay["trees"]["learnt"] == final["trees"]["learnt"]
    assert replay["trees"]["learn_pending"] == final["trees"]["learn_pending"]
    assert replay["trees"]["json"] == final["trees"]["json"]
    assert replay["trees"]["digest"] == final["trees"]["digest"]
    print("load %.1f s with %d kills; %d trajectories, %d steps journalled; fed again in %.1f s"
          % (load_s, kills, learns, steps, feed_s))


# ---- restarts, schema, failures, graceful stop ----------------------------------------------

def turn(port, tid, ids, gen):
    """One turn of trajectory tid; returns (status, the router's X-Libra-Decision)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": gen},
            "libra": {"trajectory": tid, "prompt": 1}}
    conn.request("POST", "/generate", body=json.dumps(body))
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.status, resp.getheader("X-Libra-Decision")


def tool_return(port, tid, tool, payload):
    return post(port, "/libra/v1/trajectories/%s/events" % tid,
                {"kind": "tool_return", "tool": tool, "status": "failure",
                 "payload_tokens": payload})[0]


def live_of(port, tid):
    doc = get(port, "/libra/v1/state")[1]
    return next((t for t in doc["trajectories"] if t["id"] == "libra:" + tid), None), doc


def test_a_restart_resumes_a_live_trajectory_and_keeps_the_engines():
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1,tp2", scale=SCALE) as emu:
        state_dir = ["--state-dir", os.path.join(tmp, "state")]
        with Serve(*[i["url"] for i in emu.instances], args=[*BUCKETS, *state_dir]) as gw:
            assert turn(gw.port, "b", [2] * 64, 50) == (200, "first")
            assert post(gw.port, "/libra/v1/trajectories/b/events",
                        {"kind": "finish", "status": "completed"})[0] == 200
            assert turn(gw.port, "a", [1] * 64, 100) == (200, "first")
            assert tool_return(gw.port, "a", "bash", 30) == 200
            assert turn(gw.port, "a", [1] * 194, 100)[0] == 200
            assert tool_return(gw.port, "a", "search", 7000) == 200  # announced, pending
            before, doc = live_of(gw.port, "a")
            assert doc["trees"]["learn_pending"] == 1  # b waits for the next step
        # SIGTERM: committed; the engines come from the state dir, no --engine needed
        with Serve(args=[*BUCKETS, *state_dir]) as gw:
            assert [e["tp"] for e in gw.info["engines"]] == [1, 2]
            after, doc = live_of(gw.port, "a")
            assert after == before == {"id": "libra:a", "prompt": 1, "turns": 2,
                                       "observations": 2, "pending": 1, "in_flight": False}
            assert doc["trees"]["learn_pending"] == 1
            assert doc["store"]["restored"] == {"learnt": 1, "steps": 0, "live": 1,
                                                "ms": doc["store"]["restored"]["ms"]}
            status, decision = turn(gw.port, "a", [1] * 7294, 100)
            assert status == 200 and decision != "first"  # routed from its path
            assert live_of(gw.port, "a")[0]["observations"] == 2  # the pending return, taken


def test_engines_added_lent_and_removed_at_run_time_keep_their_ids_across_a_restart():
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x3", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        state_dir = ["--state-dir", os.path.join(tmp, "state")]
        with Serve(urls[0], args=[*BUCKETS, *state_dir]) as gw:
            for u in urls[1:]:  # ids 1 and 2
                assert post(gw.port, "/add_worker?url=" + u, headers=ADMIN)[0] == 200
            assert post(gw.port, "/libra/v1/engines/2/lend", headers=ADMIN)[0] == 200
            assert post(gw.port, "/remove_worker?url=" + urls[0], headers=ADMIN)[0] == 200
        with Serve(args=[*BUCKETS, *state_dir]) as gw:  # no --engine: the state dir's
            engines = get(gw.port, "/libra/v1/engines")[1]["engines"]
            assert [(e["id"], e["url"], e["state"]) for e in engines] == \
                [(1, urls[1], "active"), (2, urls[2], "lent")]
            status, doc = post(gw.port, "/add_worker?url=" + urls[0], headers=ADMIN)
            assert status == 200 and doc["worker_id"] == 3  # ids are never reused
    # An engine only the state dir names that does not answer is listed as suspect, not fatal.
    with tempfile.TemporaryDirectory() as tmp:
        state_dir = ["--state-dir", os.path.join(tmp, "state")]
        with Emu("--instances", "tp1x2", scale=SCALE) as emu:
            urls = [i["url"] for i in emu.instances]
            with Serve(*urls, args=[*BUCKETS, *state_dir]):
                pass
        with Emu(scale=SCALE) as emu, \
                Serve(emu.instances[0]["url"], args=[*BUCKETS, *state_dir]) as gw:
            engines = get(gw.port, "/libra/v1/engines")[1]["engines"]
            assert [(e["id"], e["state"]) for e in engines] == \
                [(0, "suspect"), (1, "suspect"), (2, "active")]


def routed_to(port, tid, ids):
    """One turn of trajectory tid; returns the engine id it went to (X-Libra-Instance)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 20},
            "libra": {"trajectory": tid, "prompt": 1}}
    conn.request("POST", "/generate", body=json.dumps(body))
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 200
    return int(resp.getheader("X-Libra-Instance"))


def test_the_highest_engine_id_removed_is_not_given_again_after_a_restart():
    """Ids are never given again (docs/serve.md "Registration"), across a restart too: the state
    keeps the next id, not only the engines left. Given again, one id named two engines in the
    capture and decisions files, which are appended to across restarts."""
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x2,tp2", scale=SCALE) as emu:
        urls = [i["url"] for i in emu.instances]
        state_dir = ["--state-dir", os.path.join(tmp, "state")]
        with Serve(urls[2], urls[0], args=[*BUCKETS, *state_dir]) as gw:  # 0: TP2, 1: TP1
            assert routed_to(gw.port, "y", [1] * 64) == 1
            assert request(gw.port, "DELETE", "/workers/1", headers=ADMIN)[0] == 200
        with Serve(args=[*BUCKETS, *state_dir]) as gw:
            status, doc = post(gw.port, "/add_worker?url=" + urls[1], headers=ADMIN)
            assert status == 200 and doc["worker_id"] == 2, doc
            assert routed_to(gw.port, "z", [1] * 64) == 2  # a first turn: the TP1 bucket's


def test_every_start_on_a_state_dir_says_what_it_replayed():
    """docs/serve.md "Restart and graceful stop": a start on a state dir says what it replayed,
    0 of each too, so that the operator sees which state dir it took."""
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        state = os.path.join(tmp, "state")
        for _ in range(2):  # a new state dir, then one with nothing to replay
            gw = Serve(emu.instances[0]["url"], args=[*BUCKETS, "--state-dir", state])
            rc, err = gw.stop()
            assert rc == 0 and (f"libra: serve: state: {state}: replayed 0 learnt trajectories "
                                "and 0 steps, restored 0 live trajectories, in ") in err, err


def test_an_engine_draining_at_a_crash_is_gone_after_the_restart():
    with tempfile.TemporaryDirectory() as tmp, \
            Emu("--instances", "tp1x2", scale="0.05") as emu:
        urls = [i["url"] for i in emu.instances]
        state_dir = os.path.join(tmp, "state")
        cmd = [LIBRA, "serve", "--listen", "127.0.0.1:0", "--state-dir", state_dir, *BUCKETS]
        for u in urls:
            cmd += ["--engine", u]
        with open(os.path.join(tmp, "log"), "w") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                                    env={**os.environ, "LIBRA_ADMIN_TOKEN": ADMIN_TOKEN})
        port = json.loads(proc.stdout.readline())["port"]
        def long_turn():
            try:
                generate(port, [1] * 64, 4000, timeout=120, libra={"trajectory": "long"})
            except OSError:  # the gateway is killed under it
                pass

        busy = Background(long_turn)
        deadline = time.monotonic() + 10
        while True:  # the engine the long turn runs on
            engines = get(port, "/libra/v1/engines")[1]["engines"]
            held = [e for e in engines if e["in_flight"]]
            if held:
                break
            assert time.monotonic() < deadline
            time.sleep(0.02)
        status, doc = post(port, "/remove_worker?url=" + held[0]["url"], headers=ADMIN)
        assert status == 200 and doc["state"] == "draining"  # answered once on disk
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        busy.thread.join(10)
        with Serve(args=[*BUCKETS, "--state-dir", state_dir]) as gw:
            engines = get(gw.port, "/libra/v1/engines")[1]["engines"]
            assert [e["id"] for e in engines] == [1 - held[0]["id"]]  # idle now: removed


def test_an_unknown_schema_version_is_refused_with_exit_2():
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        state_dir = os.path.join(tmp, "state")
        with Serve(emu.instances[0]["url"], args=[*BUCKETS, "--state-dir", state_dir]):
            pass
        conn = sqlite3.connect(os.path.join(state_dir, "libra-state.sqlite3"))
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        conn.commit()
        conn.close()
        p = subprocess.run([LIBRA, "serve", "--engine", emu.instances[0]["url"], *BUCKETS,
                            "--state-dir", state_dir], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert "schema version 99, this libra reads version 1" in p.stderr, p.stderr


def test_a_state_dir_that_cannot_be_used_is_an_io_error_with_exit_3(tmp_path):
    """In use by another gateway, a file, or under one: the disk's fault, not the flags'."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    cmd = [LIBRA, "serve", "--engine", "http://127.0.0.1:9,tp=1", *BUCKETS, "--state-dir"]
    for path, says in ((afile, "cannot open"), (afile / "sub", "cannot create it")):
        p = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=30)
        assert p.returncode == 3 and says in p.stderr, p
    with Emu(scale=SCALE) as emu:
        state_dir = str(tmp_path / "state")
        with Serve(emu.instances[0]["url"], args=[*BUCKETS, "--state-dir", state_dir]):
            p = subprocess.run([LIBRA, "serve", "--engine", emu.instances[0]["url"], *BUCKETS,
                                "--state-dir", state_dir], capture_output=True, text=True,
                               timeout=30)
        assert p.returncode == 3 and "in use by another libra serve" in p.stderr, p


def left_state_dir(tmp, url):
    """The database of a state dir that a gateway in front of url made and was stopped on."""
    state_dir = os.path.join(tmp, "state")
    with Serve(url, args=[*BUCKETS, "--state-dir", state_dir]):
        pass
    return state_dir, os.path.join(state_dir, "libra-state.sqlite3")


def edit(db, sql, *args):
    conn = sqlite3.connect(db)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


STEP_ROW = '{"step":1,"learnt":0,"deadline_s":null}'


# Integers a restart counts on from: the step (one more at each new weight version), the vLLM
# updates numbered, an engine id (the next registration takes the one after), the journal's
# sequence. Out of range, each was taken as INT64_MAX (or as it wrapped) and overflowed later.
@pytest.mark.parametrize("sql,args,says", [
    ("UPDATE meta SET value = ? WHERE key = 'step'", ("99999999999999999999999",),
     "meta.step: expected a step number from 0 to 2^62"),
    ("UPDATE meta SET value = ? WHERE key = 'step'", (str(2 ** 62 + 1),), "meta.step: "),
    ("UPDATE meta SET value = ? WHERE key = 'updates'", ("99999999999999999999999",),
     "meta.updates: expected a count from 0 to 2^62"),
    ("UPDATE versions SET step = ?", (2 ** 63 - 1,), "versions: a version of at most"),
    ("UPDATE engines SET id = ?", (2 ** 63 - 1,),
     "engines: id 9223372036854775807 is outside 0 to 2^62"),
    ("INSERT INTO journal VALUES (?, 'step', ?)", (2 ** 63 - 1, STEP_ROW),
     "journal: 1 rows with seq from 9223372036854775807 to 9223372036854775807: seq counts "
     "from 1 without holes"),
    ("INSERT INTO journal VALUES (?, 'step', ?)", (2, STEP_ROW), "seq from 2 to 2"),
])
def test_an_integer_out_of_the_range_a_restart_counts_in_is_a_bad_row(sql, args, says):
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        url = emu.instances[0]["url"]
        state_dir, db = left_state_dir(tmp, url)
        edit(db, sql, *args)
        p = subprocess.run([LIBRA, "serve", "--engine", url, *BUCKETS, "--state-dir", state_dir],
                           capture_output=True, text=True, timeout=15)
    assert p.returncode == 2 and p.stdout == "", p
    assert says in p.stderr, p.stderr


def test_a_live_trajectory_on_an_engine_id_past_255_is_restored():
    """Engine ids are never given again, so a gateway that registered engines 256 times lists
    ids past 255; a trajectory whose last turn ran on one must restore, not stop the start."""
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        url = emu.instances[0]["url"]
        state_dir = os.path.join(tmp, "state")
        with Serve(url, args=[*BUCKETS, "--state-dir", state_dir]) as gw:
            assert turn(gw.port, "far", [1] * 64, 10)[0] == 200
        db = os.path.join(state_dir, "libra-state.sqlite3")
        conn = sqlite3.connect(db)
        (body,) = conn.execute("SELECT body FROM trajectories").fetchone()
        conn.close()
        edit(db, "UPDATE trajectories SET body = ?", json.dumps({**json.loads(body),
                                                                 "instance": 300}))
        with Serve(url, args=[*BUCKETS, "--state-dir", state_dir]) as gw:
            assert live_of(gw.port, "far")[0]["turns"] == 1


def test_an_engine_of_the_state_dir_at_the_listen_address_is_refused():
    """The state dir's engine is where this gateway is told to listen: registered, every call
    the gateway sends on would come back into it."""
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        url = emu.instances[0]["url"]
        state_dir, _ = left_state_dir(tmp, url)
        listen = url.replace("http://", "").replace("127.0.0.1", "localhost")
        p = subprocess.run([LIBRA, "serve", *BUCKETS, "--state-dir", state_dir, "--listen",
                            listen], capture_output=True, text=True, timeout=15)
    assert p.returncode == 2 and p.stdout == "", p
    assert "state dir '%s': engine 0 (%s): this gateway's own address (--listen %s)" % (
        state_dir, url, listen) in p.stderr, p.stderr


def test_a_failing_commit_answers_503_until_commits_succeed_again():
    with tempfile.TemporaryDirectory() as tmp, Emu(scale=SCALE) as emu:
        state_dir = os.path.join(tmp, "state")
        db = os.path.join(state_dir, "libra-state.sqlite3")
        args = [*BUCKETS, "--state-dir", state_dir]
        with Serve(emu.instances[0]["url"], args=args) as gw:
            assert turn(gw.port, "a", [1] * 64, 10)[0] == 200
            conn = sqlite3.connect(db)
            conn.execute("DROP TABLE trajectories")  # as a full disk would, commits fail
            conn.commit()
            status, doc = post(gw.port, "/libra/v1/trajectories/a/events",
                               {"kind": "tool_return", "tool": "bash"})
            assert status == 503 and "not on disk" in doc["error"]["message"], doc
            assert tool_return(gw.port, "a", "refused", 1) == 503  # refused, not applied
            assert get(gw.port, "/libra/v1/state")[1]["store"]["failing"]
            conn.execute("CREATE TABLE trajectories(id TEXT PRIMARY KEY, body TEXT NOT NULL)")
            conn.commit()
            conn.close()
            deadline = time.monotonic() + 10
            while get(gw.port, "/libra/v1/state")[1]["store"]["failing"]:
                assert time.monotonic() < deadline, "commits never succeeded again"
                time.sleep(0.05)
            assert tool_return(gw.port, "a", "python", 2) == 200
        with Serve(args=args) as gw:  # the change answered 503 was retried: it is on disk
            assert live_of(gw.port, "a")[0]["observations"] == 2


def test_state_is_bounded_by_default_and_its_query_is_checked():
    with Emu(scale=SCALE) as emu, Serve(emu.instances[0]["url"], args=BUCKETS) as gw:
        for k in range(3):
            assert turn(gw.port, "t%d" % k, [k] * 64, 10)[0] == 200
        doc = get(gw.port, "/libra/v1/state?limit=2")[1]
        assert doc["store"] is None and doc["live_trajectories"] == 3
        assert len(doc["trajectories"]) == 2 and "json" not in doc["trees"]
        assert "json" in get(gw.port, "/libra/v1/state?trees=1")[1]["trees"]
        assert get(gw.port, "/libra/v1/state?trees=yes")[0] == 400
        assert get(gw.port, "/libra/v1/state?limit=-1")[0] == 400


def test_sigterm_lets_a_turn_finish_within_the_grace_and_cuts_it_after():
    prompt = list(range(64))
    tokens = tokens_lasting(1.5, prompt)
    with Emu(scale="1") as emu:
        url = emu.instances[0]["url"]
        with Serve(url, args=[*BUCKETS, "--grace-s", "10"]) as gw:
            slow = Background(generate, gw.port, prompt, tokens, libra={"trajectory": "s"})
            time.sleep(0.5)
            gw.proc.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            with pytest.raises(OSError):  # no new connection
                get(gw.port, "/healthz", timeout=2)
            status, out = slow.result()
            assert status == 200 and out["meta_info"]["completion_tokens"] == tokens
            assert gw.proc.wait(timeout=10) == 0
        with Serve(url, args=[*BUCKETS, "--grace-s", "0.3"]) as gw:
            slow = Background(lambda: generate_or_gone(gw.port, prompt, tokens))
            time.sleep(0.5)
            gw.proc.send_signal(signal.SIGTERM)
            assert gw.proc.wait(timeout=10) == 0
            assert slow.result() == "gone"  # cut when the grace ran out, not let finish


def test_sigterm_waits_for_an_answer_to_reach_a_slow_client():
    """An engine answers a turn, after 0.3 s, with 32 MiB: more than the sockets hold."""
    big = json.dumps({"text": "x" * (32 << 20), "meta_info": {"completion_tokens": 7}}).encode()
    engine = ScriptedVllm(lambda h, path, body: (time.sleep(0.3), answer(h, big)))
    url = engine.url + ",tp=1"
    with Serve(url, args=[*BUCKETS, "--grace-s", "10"]) as gw:
        s = socket.create_connection(("127.0.0.1", gw.port))
        body = json.dumps({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 7},
                           "libra": {"trajectory": "big"}}).encode()
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), body))
        time.sleep(0.1)
        gw.proc.send_signal(signal.SIGTERM)
        time.sleep(1.5)  # the answer is queued long before the client reads it
        got = b""
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += chunk
            if got.endswith(big):
                break
        s.close()
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(big), len(got)
        assert gw.proc.wait(timeout=10) == 0
    engine.shutdown()


def generate_or_gone(port, prompt, tokens):
    try:
        return generate(port, prompt, tokens, libra={"trajectory": "s"})
    except (OSError, http.client.HTTPException):
        return "gone"
