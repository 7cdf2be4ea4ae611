"""Contracts of the Python binding and the C API (docs/python.md): errors that survive pickle and
copy, instance ids and token counts out of the documented range refused, a config text with a
UTF-8 byte order mark read as the commands read it, NaN in a config or a trace record named by
its field, a plan's routing buckets taken by the router, and the replay order that gives route
eval's decisions.

Needs LIBRA_BIN (cli.py), LIBRA_LIBRARY (liblibra.so of the same build) and python/ on
PYTHONPATH (set by tests/CMakeLists.txt).
"""

import copy
import ctypes
import json
import multiprocessing
import pathlib
import pickle
import re

import pytest

import libra
from cli import run as cli

BUCKETS = "tp1:1000,tp2:3000"
BOM = b"\xef\xbb\xbf"


def router():
    r = libra.Router({"sched": {"buckets": BUCKETS}})
    r.add_instance(1, 1)
    r.add_instance(2, 2)
    return r


# ---- errors ------------------------------------------------------------------------------------

def an_error():
    try:
        libra.sim({"rl": {"stepz": 3}})
    except libra.Error as e:
        return e
    raise AssertionError("no error")


def fields(e):
    return (type(e), e.code, e.code_name, e.message, e.file, e.line, e.col, str(e), e.args)


def test_errors_round_trip_through_pickle_and_copy():
    e = an_error()
    assert (e.file, e.line, e.col) == ("config", 1, 9)
    for again in (pickle.loads(pickle.dumps(e)), copy.copy(e), copy.deepcopy(e)):
        assert fields(again) == fields(e)
    bare = libra.Error(-2, "trajectory 't': not started, or finished")
    assert fields(pickle.loads(pickle.dumps(bare))) == fields(bare)


def raise_error(_):
    raise libra.Error(-1, "rl.steps: must be an integer", "x.json", 2, 10)


def test_an_error_raised_in_a_pool_worker_comes_back():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        with pytest.raises(libra.Error) as e:
            pool.map_async(raise_error, [0]).get(timeout=60)
    assert (e.value.code_name, e.value.file, e.value.line, e.value.col) == ("EINVAL", "x.json",
                                                                             2, 10)
    assert str(e.value) == "x.json:2:10: rl.steps: must be an integer"


# ---- instance ids and token counts -------------------------------------------------------------

def c_call(fn, r, *args):
    err = libra._lib.CError()
    rc = fn(r._handle, *args, ctypes.byref(err))
    return rc, err.msg.decode()


def test_negative_instance_ids_are_refused():
    r = libra.Router({"sched": {"buckets": BUCKETS}})
    for bad in (-1, -(2**63)):
        with pytest.raises(ValueError, match="instance"):
            r.add_instance(bad, 1)
        bucket = ctypes.c_int(7)
        rc, msg = c_call(libra.lib.libra_router_add_instance, r, bad, 1, ctypes.byref(bucket))
        assert rc == -1 and f"instance {bad}" in msg and bucket.value == 7
    assert r.add_instance(0, 1) == 0
    r.start("t", 1)
    assert r.route("t", 10).instance == 0  # only instance 0 was registered


def test_token_counts_below_minus_one_are_refused():
    r = router()
    r.start("t", 1)
    d = libra._lib.CDecision()
    for bad in (-2, -5, -(2**62), -(2**63)):
        rc, msg = c_call(libra.lib.libra_router_route, r, b"t", bad, 1.0, ctypes.byref(d))
        assert rc == -1 and "context_tokens" in msg and str(bad) in msg
    assert c_call(libra.lib.libra_router_route, r, b"t", -1, 1.0, ctypes.byref(d))[0] == 0
    for bad in (-2, -(2**62), -(2**63)):
        rc, msg = c_call(libra.lib.libra_router_turn_done, r, b"t", bad)
        assert rc == -1 and "generated_tokens" in msg and str(bad) in msg
    r.turn_done("t", 10)  # the refused calls left the turn in flight
    for bad in (-2, -(2**62), -(2**63)):
        rc, msg = c_call(libra.lib.libra_router_tool_return, r, b"t", b"bash", b"success", bad)
        assert rc == -1 and "payload_tokens" in msg and str(bad) in msg
    assert c_call(libra.lib.libra_router_tool_return, r, b"t", b"bash", None, -1)[0] == 0
    r.route("t", 20)
    assert c_call(libra.lib.libra_router_turn_done, r, b"t", -1)[0] == 0  # failed: still taken
    r.finish("t")


# ---- a byte order mark -------------------------------------------------------------------------

def test_a_config_with_a_byte_order_mark_reads_as_the_cli_reads_it(tmp_path):
    cfg = {"cluster": {"gpus": 16}}
    path = tmp_path / "bom.json"
    path.write_bytes(BOM + json.dumps(cfg).encode())
    expected = json.loads(cli("plan", str(path), "--json").stdout)
    assert libra.plan(path) == expected
    assert libra.plan(BOM + json.dumps(cfg).encode()) == expected
    assert libra.plan("\ufeff" + json.dumps(cfg)) == expected
    with libra.Router(BOM + b'{"sched": {"buckets": "tp1:1000"}}') as r:
        assert r.buckets == "tp1:1000"


def test_positions_after_a_byte_order_mark_are_the_clis(tmp_path):
    for text in (b'{"rl": {"stepz": 3}}', b'{\n "rl": {"stepz": 3}}'):
        path = tmp_path / "bad.json"
        path.write_bytes(BOM + text)
        stderr = cli("plan", str(path), "--json", ok=(2,)).stderr
        with pytest.raises(libra.Error) as e:
            libra.plan(path)
        assert stderr == f"libra: {e.value}\n"
        assert e.value.line == text.count(b"\n") + 1 and e.value.col == 9
    with pytest.raises(libra.Error, match="no JSON value"):
        libra.plan(BOM)  # only the mark: empty
    with pytest.raises(libra.Error, match="invalid token"):
        libra.plan(BOM + BOM + b"{}")  # one mark is skipped, not every one


# ---- NaN ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,name", [(float("nan"), "NaN"), (float("inf"), "inf"),
                                        (float("-inf"), "-inf")])
def test_nan_in_a_config_names_its_field(value, name):
    with pytest.raises(ValueError) as e:
        libra.plan({"rl": {"steps": value}})
    assert str(e.value) == f"config: rl.steps: {name} is not a JSON number"
    with pytest.raises(ValueError, match=r"^config: sim\.modes\[1\]: NaN is not a JSON number$"):
        libra.sim({"sim": {"modes": ["async", float("nan")]}})
    with pytest.raises(ValueError, match=r"^config: sched\.buckets\.x: NaN is not a JSON"):
        libra.Router({"sched": {"buckets": {"x": float("nan")}}})


def test_nan_in_a_trace_record_names_its_field(tmp_path):
    header = {"libra_trace": 1, "workload": "r2e-gym", "model": "qwen3-14b", "group_size": 2,
              "lossy": False, "generator": {"name": "r2e-gym", "seed": 1}}
    record = {"step": 1, "prompt_id": 9, "epoch": 0, "sample": 0, "version_start": 1,
              "finish": "truncated",
              "turns": [{"prompt_tokens": 655, "generated_tokens": 2048},
                        {"prompt_tokens": 2700, "generated_tokens": float("nan")}]}
    out = tmp_path / "o.jsonl"
    with pytest.raises(ValueError) as e:
        libra.trace.write(out, header, [record])
    assert str(e.value) == "record: turns[1].generated_tokens: NaN is not a JSON number"
    with pytest.raises(ValueError, match=r"^header: group_size: inf is not a JSON number$"):
        libra.trace.write(out, dict(header, group_size=float("inf")), [])
    assert not out.exists() and list(pathlib.Path(tmp_path).iterdir()) == []


def test_a_value_json_cannot_hold_is_named_by_its_field(tmp_path):
    """Like NaN: a value of a type JSON has no form for, or one that contains itself, is refused
    naming the argument and the field (they once raised json's bare TypeError and, for a cycle,
    RecursionError)."""
    with pytest.raises(TypeError) as e:
        libra.plan({"workload": {"trace": pathlib.Path("t.jsonl")}})
    assert str(e.value) == ("config: workload.trace: expected a dict, list, str, int, float, "
                            "bool or None, not PosixPath")
    cyclic = {"rl": {}}
    cyclic["rl"]["x"] = cyclic
    with pytest.raises(ValueError, match=r"^config: rl\.x: contains itself$"):
        libra.plan(cyclic)
    turns = []
    turns.append(turns)
    header = {"libra_trace": 1, "workload": "x"}
    with pytest.raises(ValueError, match=r"^record: turns\[0\]: contains itself$"):
        libra.trace.write(tmp_path / "o.jsonl", header, [{"turns": turns}])
    with pytest.raises(TypeError, match=r"^header: generator: expected .*, not set$"):
        libra.trace.write(tmp_path / "o.jsonl", dict(header, generator={1}), [])
    with pytest.raises(TypeError, match=r"^config: rl: key \(1, 2\): expected a str, int, "
                                        r"float, bool or None, not tuple$"):
        libra.plan({"rl": {(1, 2): 3}})
    with pytest.raises(ValueError, match=r"^config: rl: key nan: NaN is not a JSON number$"):
        libra.plan({"rl": {float("nan"): 3}})
    deep = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError, match=r"^config: nested deeper than \d+ levels"):
        libra.plan({"rl": {"x": deep}})


# ---- a plan's buckets and route eval's order (docs/python.md) ----------------------------------

def test_a_plans_routing_buckets_feed_the_router():
    """docs/python.md: a plan's rollout.buckets_text carries instance counts, which sched.buckets
    refuses where no command builds a fleet of them; its routing_buckets, the same layout
    without them, is what the router takes."""
    rollout = libra.plan({"cluster": {"gpus": 64}})["rollout"]
    text, bare = rollout["buckets_text"], rollout["routing_buckets"]
    assert "x" in text and bare == re.sub(r"x\d+", "", text)
    with pytest.raises(libra.Error, match="instance counts have no effect"):
        libra.Router({"sched": {"buckets": text}})
    with libra.Router({"sched": {"buckets": bare}}) as r:
        assert r.buckets == bare


def replay(records, cfg, finish_at_once):
    """libra.Router's decisions over records, steps 2 on, in route eval's order: each step's
    trajectories routed turn by turn, each finished right after its last turn
    (finish_at_once) or all of them after the step's last turn, then the step ends."""
    r = libra.Router(cfg)
    for i, tp in enumerate([1, 2, 4]):  # route eval's registry: one idle instance per bucket
        r.add_instance(i, tp)
    got = []
    for s, step in enumerate(sorted({rec["step"] for rec in records})):
        ids = [i for i, rec in enumerate(records) if rec["step"] == step]
        for i in ids:
            rec = records[i]
            r.start(f"traj-{i}", rec["prompt_id"])
            for k, turn in enumerate(rec["turns"]):
                d = r.route(f"traj-{i}", turn["prompt_tokens"], now_s=float(step))
                if s >= 2:
                    got.append((i, k, d.policy_bucket, d.reason))
                r.turn_done(f"traj-{i}", turn["generated_tokens"])
                for call in turn.get("calls", []):
                    r.tool_return(f"traj-{i}", call["tool"], call["status"],
                                  call["payload_tokens"])
            if finish_at_once:
                r.finish(f"traj-{i}", rec["finish"])
        if not finish_at_once:
            for i in ids:
                r.finish(f"traj-{i}", records[i]["finish"])
        r.step(now_s=float(step))
    return got


def test_la_mlfq_matches_route_eval_when_each_trajectory_finishes_at_once(tmp_path):
    """docs/python.md: la_mlfq remembers a prompt's bucket at finish, so a replay matches
    `route eval --decisions` only when each trajectory finishes right after its last turn;
    cmlfq learns at step and matches either way."""
    trace = tmp_path / "t.jsonl"
    cli("trace", "gen", "r2e-gym", "--steps", "6", "--batch", "64", "--samples", "4",
        "-o", str(trace))
    records = [json.loads(line) for line in trace.read_text().splitlines()[1:]]
    for policy in ("la_mlfq", "cmlfq"):
        cfg = {"sched": {"policy": policy, "buckets": "tp1:1000,tp2:3000,tp4:30000"}}
        (tmp_path / "c.json").write_text(json.dumps(cfg))
        decisions = tmp_path / "d.jsonl"
        cli("route", "eval", str(trace), "--policy", policy, "--train-steps", "2",
            "--decisions", str(decisions), "--config", str(tmp_path / "c.json"))
        expected = [json.loads(line) for line in decisions.read_text().splitlines()]
        expected = [(d["trajectory"], d["turn"], d["bucket"], d["reason"]) for d in expected]
        assert len(expected) > 1000
        assert replay(records, cfg, finish_at_once=True) == expected
        at_step_end = replay(records, cfg, finish_at_once=False)
        assert (at_step_end == expected) == (policy == "cmlfq")
