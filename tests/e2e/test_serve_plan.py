"""End-to-end tests of plans and buckets in `libra serve` (docs/serve.md "Plans and buckets"):
GET /libra/v1/plan on the trajectories the gateway saw finish, POST /libra/v1/buckets, and
`libra serve --plan FILE`; real processes on loopback, `libra emu` as the engines."""

import json
import os
import re
import subprocess
import tempfile

from emu_util import LIBRA, Background, Emu, Serve, get, post

SCALE = "0.005"
FLEET = "tp1x2,tp2,tp4"
# a cluster whose plan has every TP size the emulated fleet has (2 x TP1, TP2, TP4 on the
# r2e-gym preset's sample), a batch small enough to fill in a test
EXPERIMENT = ["--gpus", "16", "--batch", "8", "--samples", "4", "--set", "plan.min_tp_sizes=3"]
BUCKETS = ["--set", "sched.buckets=tp1:2000,tp2:6000,tp4:40960"]
TOKEN = "s3cret-token-of-the-plan-test-0123"
ADMIN = {"Authorization": "Bearer " + TOKEN}


def urls(emu):
    return [i["url"] for i in emu.instances]


def turn(port, traj, ids, gen, returned):
    """One turn of trajectory traj: its prompt ids, at most gen tokens to generate (the
    gateway cuts libra's object, so the emulator's script cannot reach it), whether a tool
    returned before it. Returns the next turn's prompt."""
    libra = {"trajectory": traj}
    if returned:
        libra["events"] = [{"kind": "tool_return", "tool": "bash", "status": "success",
                            "payload_tokens": 20, "exec_s": 0.5}]
    status, out = post(port, "/generate", {"input_ids": ids,
                                           "sampling_params": {"max_new_tokens": gen},
                                           "libra": libra})
    assert status == 200, out
    return ids + out["output_ids"] + list(range(20))


def drive(port, n, first=0, turns=3):
    """n trajectories of `turns` turns each, ended by a finish event."""
    for i in range(first, first + n):
        ids = list(range(1, 40 + i))
        for k in range(turns):
            ids = turn(port, "p%d" % i, ids, 40 + 30 * i + 10 * k, k > 0)
        status, doc = post(port, "/libra/v1/trajectories/p%d/events" % i,
                           {"kind": "finish", "status": "completed", "reward": 1.0})
        assert status == 200, doc


def engine_buckets(port):
    return [e["bucket"] for e in get(port, "/libra/v1/status")[1]["engines"]]


# ---- GET /libra/v1/plan ------------------------------------------------------------------------

def test_plan_waits_for_a_batch_then_plans_the_traffic_seen():
    with tempfile.TemporaryDirectory() as tmp, Emu("--instances", FLEET, scale=SCALE) as emu:
        capture = os.path.join(tmp, "capture.jsonl")
        with Serve(*urls(emu), args=[*EXPERIMENT, *BUCKETS, "--capture", capture],
                   env={"LIBRA_ADMIN_TOKEN": TOKEN}) as gw:
            drive(gw.port, 7)
            # a query parameter the route does not read is refused, not ignored
            status, doc = get(gw.port, "/libra/v1/plan?batch=8")
            assert status == 400, doc
            assert "/libra/v1/plan takes no query parameter 'batch'" in doc["error"]["message"]
            status, doc = get(gw.port, "/libra/v1/pool?after=0&wait=1")
            assert status == 400 and "it reads after,wait_s" in doc["error"]["message"], doc
            status, doc = get(gw.port, "/libra/v1/plan")
            assert status == 409, doc
            message = doc["error"]["message"]
            assert doc["error"]["type"] == "insufficient_traffic"
            assert "7 trajectories" in message and "rl.batch_trajectories = 8" in message
            status, doc = post(gw.port, "/libra/v1/buckets", {"from_plan": True}, headers=ADMIN)
            assert status == 409 and "no plan yet" in doc["error"]["message"], doc

            drive(gw.port, 3, first=7)
            calls = [Background(get, gw.port, "/libra/v1/plan") for _ in range(2)]
            (s1, doc), (s2, other) = [c.result() for c in calls]
            assert s1 == s2 == 200, (doc, other)
            assert doc == other  # one solve answering both, or two on the same window
            assert doc["schema"] == "libra.plan/1" and doc["feasible"]
            assert doc["sample"]["trajectories"] == 8  # one whole batch of the 10
            assert doc["sample"]["source"].startswith("libra serve: 8 finished")
            assert "none" in doc["verification"]

            fleet = doc["fleet"]
            planned = doc["rollout"]["instances"]
            engines = {"tp1": 2, "tp2": 1, "tp4": 1}
            for row in fleet["instances"]:
                key = "tp%d" % row["tp"]
                assert row["plan"] == planned[key] and row["engines"] == engines.get(key, 0)
                assert row["change"] == row["plan"] - row["engines"]
            differ = [k for k in ("tp1", "tp2", "tp4", "tp8")
                      if planned[k] != engines.get(k, 0)]
            named = [d.split(":")[0].lower() for d in fleet["differences"]]
            assert [n for n in named if n != "buckets"] == differ
            assert fleet["buckets"]["gateway"] == "tp1:2000,tp2:6000,tp4:40960"
            assert fleet["buckets"]["plan"] == doc["rollout"]["buckets_text"]
            assert ("buckets" in named) == (not fleet["buckets"]["same"])
            assert fleet["matches"] == (not fleet["differences"])
            assert fleet["step_s"] == doc["objective"]["step_s"]

            status, out = post(gw.port, "/libra/v1/buckets", {"from_plan": True}, headers=ADMIN)
            assert status == 200, out
            assert out["from"] == "GET /libra/v1/plan" and out["previous"] == fleet["buckets"][
                "gateway"]
            assert out["buckets"] == re.sub(r"x[0-9]+", "", doc["rollout"]["buckets_text"])
            drive(gw.port, 2, first=10)  # traffic still routed
        # the same lengths through `libra plan --trace` on the capture: the same plan
        p = subprocess.run([LIBRA, "plan", *EXPERIMENT, *BUCKETS, "--trace", capture,
                            "--verify", "0", "--json"], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 0, p.stderr
        offline = json.loads(p.stdout)
        for key in ("objective", "rollout", "train", "placement"):
            assert offline[key] == doc[key], key


# ---- POST /libra/v1/buckets ---------------------------------------------------------------------

def test_buckets_change_only_with_the_token_and_only_to_a_layout_serving_every_engine():
    with Emu("--instances", FLEET, scale=SCALE) as emu, \
            Serve(*urls(emu), args=[*EXPERIMENT, *BUCKETS],
                  env={"LIBRA_ADMIN_TOKEN": TOKEN}) as gw:
        assert engine_buckets(gw.port) == [0, 0, 1, 2]
        ids = turn(gw.port, "live", list(range(1, 50)), 100, False)  # a trajectory under way
        body = {"buckets": "tp1+tp2:5000,tp4:40960"}
        for auth in (None, "Bearer wrong", "Bearer " + TOKEN + "x"):
            status, doc = post(gw.port, "/libra/v1/buckets", body,
                               headers={"Authorization": auth} if auth else {})
            assert status == 401, (auth, doc)
        assert engine_buckets(gw.port) == [0, 0, 1, 2]  # nothing changed

        status, doc = post(gw.port, "/libra/v1/buckets", {"buckets": "tp1:4000,tp4:30000"},
                           headers=ADMIN)
        assert status == 400, doc
        assert "is TP2, which no bucket of tp1:4000,tp4:30000 serves" in doc["error"]["message"]
        assert engine_buckets(gw.port) == [0, 0, 1, 2]

        status, doc = post(gw.port, "/libra/v1/buckets", body, headers=ADMIN)
        assert status == 200, doc
        assert doc["buckets"] == "tp1+tp2:5000,tp4:40960"
        assert doc["previous"] == "tp1:2000,tp2:6000,tp4:40960" and doc["from"] == "request"
        assert [e["bucket"] for e in doc["engines"]] == [0, 0, 0, 1]
        assert engine_buckets(gw.port) == [0, 0, 0, 1]

        turn(gw.port, "live", ids, 100, True)  # the live trajectory keeps going
        drive(gw.port, 4)
        metrics = get(gw.port, "/metrics")[1]
        decided = [l for l in metrics.splitlines() if l.startswith("libra_decisions_total")]
        assert decided[0].startswith('libra_decisions_total{bucket="0"}') and len(decided) == 2


def test_bad_bucket_bodies_are_refused_naming_the_field():
    with Emu("--instances", "tp1", scale=SCALE) as emu, \
            Serve(*urls(emu), args=["--set", "sched.buckets=tp1:40960"],
                  env={"LIBRA_ADMIN_TOKEN": TOKEN}) as gw:
        for raw, where in [('{"buckets": ', "body:"), ("[1]", "body: expected a JSON object"),
                           ('{"bucket": "tp1:4000"}', "bucket: unknown member"),
                           ('{"buckets": 4000}', "buckets: expected the text form"),
                           ('{"buckets": "tp1:4000,tp3:9000"}', "buckets: column 12"),
                           ('{"buckets": "tp1x2:4000"}', "buckets: instance counts"),
                           ('{"from_plan": 1}', "from_plan: expected true"),
                           ('{"from_plan": true, "buckets": "tp1:9"}', "not both"),
                           ("{}", "give one")]:
            status, doc = post(gw.port, "/libra/v1/buckets", raw=raw, headers=ADMIN)
            assert status == 400, (raw, doc)
            assert where in doc["error"]["message"], (raw, doc)
        assert engine_buckets(gw.port) == [0]


# ---- libra serve --plan FILE --------------------------------------------------------------------

def write_plan(tmp):
    path = os.path.join(tmp, "plan.json")
    p = subprocess.run([LIBRA, "plan", *EXPERIMENT, "--verify", "0", "--json", "-o", path],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    with open(path, encoding="utf-8") as f:
        return path, json.load(f)


def test_a_plan_file_gives_the_layout_and_mismatched_engines_are_named():
    with tempfile.TemporaryDirectory() as tmp, Emu("--instances", FLEET, scale=SCALE) as emu:
        path, plan = write_plan(tmp)
        assert plan["rollout"]["instances"] == {"tp1": 2, "tp2": 1, "tp4": 1, "tp8": 0}
        layout = plan["rollout"]["routing_buckets"]  # without counts
        assert layout == re.sub(r"x[0-9]+", "", plan["rollout"]["buckets_text"])
        # --plan over sched.buckets; the engines are the plan's instances: no warning
        gw = Serve(*urls(emu), args=[*EXPERIMENT, *BUCKETS, "--plan", path],
                   env={"LIBRA_ADMIN_TOKEN": TOKEN})
        assert [e["bucket"] for e in gw.info["engines"]] == [0, 0, 1, 2]
        status, doc = post(gw.port, "/libra/v1/buckets", {"from_plan": True}, headers=ADMIN)
        assert status == 200, doc
        assert doc["previous"] == doc["buckets"] == layout and doc["from"] == "--plan"
        drive(gw.port, 2)
        rc, err = gw.stop()
        assert rc == 0 and "warning" not in err, err
        # one TP1 engine short of the plan: started, and the difference named
        gw = Serve(*urls(emu)[1:], args=[*EXPERIMENT, "--plan", path])
        drive(gw.port, 1)
        rc, err = gw.stop()
        assert rc == 0, err
        assert "warning: the engines are not --plan's instances: " \
               "TP1: 2 in the plan, 1 registered (add 1)" in err, err
        # a pool replica's engine is training's, lent: not one of the plan's rollout instances
        gw = Serve(*urls(emu)[1:], args=[*EXPERIMENT, "--plan", path,
                                         "--pool-replica", urls(emu)[0]])
        rc, err = gw.stop()
        assert rc == 0, err
        assert "warning: the engines are not --plan's instances: " \
               "TP1: 2 in the plan, 1 registered (add 1)" in err, err


def test_a_bad_plan_file_is_refused_with_its_location():
    with tempfile.TemporaryDirectory() as tmp:
        path, plan = write_plan(tmp)
        plan["rollout"]["instances"]["tp3"] = 1
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            json.dump(plan, f, indent=1, sort_keys=True)
        line = next(i for i, l in enumerate(open(bad, encoding="utf-8"), 1) if '"tp3"' in l)
        cases = [(bad, "bad.json:%d:" % line, "rollout.instances.tp3: expected a TP size"),
                 (os.path.join(tmp, "cut.json"), "cut.json:", "end of file")]
        with open(cases[1][0], "w", encoding="utf-8") as f:
            f.write(open(path, encoding="utf-8").read()[:200])
        # members that contradict one another (they were taken, and the warning used one)
        for name, edit, why in (
                ("gpus.json", lambda r: r.update(gpus=99),
                 "rollout.gpus: 99, but rollout.instances hold 8 GPUs"),
                ("counts.json", lambda r: r["instances"].update(tp1=7),
                 "rollout.buckets: TP1 has 2 instances, but rollout.instances has 7")):
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            edit(doc["rollout"])
            if name == "counts.json":
                doc["rollout"]["gpus"] += 5
            cases.append((os.path.join(tmp, name), name + ":", why))
            with open(cases[-1][0], "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1, sort_keys=True)
        for file, where, why in cases:
            p = subprocess.run([LIBRA, "serve", "--engine", "http://127.0.0.1:9,tp=1", "--plan",
                                file], capture_output=True, text=True, timeout=30)
            assert p.returncode == 2, p.stderr
            assert where in p.stderr and why in p.stderr, p.stderr
