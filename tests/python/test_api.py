"""The Python binding (python/libra, docs/python.md) against the command-line tool: plan and sim
documents equal to `--json` output for the same config, the router replaying the calls of
verl's server manager and deciding as `libra route eval` does, traces read and written through
libra's reader and writer, and errors carrying the C error's message and place.

Needs LIBRA_BIN (cli.py), LIBRA_SOURCE_DIR, LIBRA_LIBRARY (liblibra.so of the same build) and
python/ on PYTHONPATH (set by tests/CMakeLists.txt).
"""

import ctypes
import json
import os
import threading
from pathlib import Path

import pytest

import libra
from cli import run as cli
QUICK_SIM = {"rl": {"steps": 4}, "sim": {"modes": ["async", "libra"], "tune_steps": 2,
                                         "warmup_steps": 1}}
# r2e-gym lengths spread over these buckets: cmlfq promotes, demotes and vetoes moves
BUCKETS = "tp1:1000,tp2:3000,tp4:30000"


def write_config(tmp_path, cfg):
    path = tmp_path / "experiment.json"
    path.write_text(json.dumps(cfg, indent=2))
    return path


# ---- plan and sim ------------------------------------------------------------------------------

def test_version_is_the_tools():
    assert cli("--version").stdout.startswith(f"libra {libra.version()}\n")


@pytest.mark.parametrize("cfg", [{}, {"cluster": {"gpus": 16}, "plan": {"verify_candidates": 2}}])
def test_plan_equals_the_clis_json(tmp_path, cfg):
    path = write_config(tmp_path, cfg)
    expected = json.loads(cli("plan", str(path), "--json").stdout)
    assert libra.plan(path) == expected
    assert libra.plan(cfg) == expected
    assert libra.plan(json.dumps(cfg)) == expected
    if not cfg:
        assert libra.plan() == expected


def test_plan_bytes_equal_the_clis_stdout(tmp_path):
    """The C function returns exactly what the command prints."""
    path = write_config(tmp_path, {"cluster": {"gpus": 16}})
    out = ctypes.c_void_p()
    err = libra._lib.CError()
    rc = libra.lib.libra_plan(path.read_bytes(), None, ctypes.byref(out), ctypes.byref(err))
    text = ctypes.string_at(out.value).decode()
    libra.lib.libra_free(out)
    assert rc == 0 and text == cli("plan", str(path), "--json").stdout


def test_an_infeasible_plan_is_a_result():
    doc = libra.plan({"cluster": {"gpus": 8}})
    assert doc["feasible"] is False and "min_train_gpus" in doc["why"]
    assert doc == json.loads(cli("plan", "--json", "--gpus", "8", ok=(1,)).stdout)


def test_sim_equals_the_clis_json(tmp_path):
    path = write_config(tmp_path, QUICK_SIM)
    doc = libra.sim(QUICK_SIM)
    assert doc["schema"] == "libra.sim/1" and set(doc["modes"]) == {"async", "libra"}
    assert doc == json.loads(cli("sim", str(path), "--json").stdout)


def test_sim_replays_a_trace_named_in_the_config(tmp_path):
    trace = tmp_path / "t.jsonl"
    cli("trace", "gen", "r2e-gym", "--steps", "4", "--batch", "16", "-o", str(trace))
    cfg = dict(QUICK_SIM, workload={"trace": str(trace)})
    assert libra.sim(cfg) == json.loads(cli("sim", str(write_config(tmp_path, cfg)),
                                            "--json").stdout)


def test_threads_plan_at_once():
    cfg = {"cluster": {"gpus": 16}, "plan": {"verify_candidates": 2}}
    results = [None] * 4
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, libra.plan(cfg)))
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == results[0] for r in results) and results[0]["feasible"]


# ---- errors ------------------------------------------------------------------------------------

def test_unknown_key_names_its_place(tmp_path):
    path = write_config(tmp_path, {"cluster": {"gpuz": 16}})
    with pytest.raises(libra.Error) as e:
        libra.plan(path)
    err = e.value
    assert (err.code, err.code_name) == (-1, "EINVAL")
    assert (err.file, err.line, err.col) == (str(path), 3, 5)
    assert "cluster.gpuz: unknown key (did you mean 'gpus'?)" in err.message
    # the same message the command prints
    assert f"libra: {err}\n" == cli("plan", str(path), ok=(2,)).stderr
    with pytest.raises(libra.Error) as e:
        libra.sim({"cluster": {"gpuz": 16}})
    assert e.value.file == "config" and e.value.line == 1


def test_bad_json_and_wrong_types_raise_with_a_place():
    with pytest.raises(libra.Error) as e:
        libra.plan('{"rl": {"steps": 1,}}')
    assert e.value.code_name == "EINVAL" and (e.value.line, e.value.col) == (1, 20)
    with pytest.raises(libra.Error) as e:
        libra.plan('{\n  "rl": {"steps": "many"}\n}')
    assert (e.value.line, e.value.col) == (2, 10)
    assert e.value.message == "rl.steps: must be an integer"
    assert str(e.value) == "config:2:10: rl.steps: must be an integer"
    with pytest.raises(libra.Error, match="unknown workload preset 'nope'"):
        libra.sim({"workload": {"name": "nope"}})
    with pytest.raises(libra.Error) as e:
        libra.sim({"workload": {"trace": "/nonexistent/t.jsonl"}})
    assert e.value.code_name == "EIO" and "/nonexistent/t.jsonl" in str(e.value)


def test_python_values_that_are_not_json_raise_before_the_library():
    with pytest.raises(ValueError):
        libra.plan({"rl": {"steps": float("nan")}})
    with pytest.raises(TypeError):
        libra.plan(42)
    with pytest.raises(ValueError):
        libra.plan("{}\0")


# ---- the router --------------------------------------------------------------------------------

def router(**sched):
    r = libra.Router({"sched": dict({"buckets": BUCKETS}, **sched)})
    assert r.buckets == BUCKETS
    return r


def test_router_serves_a_verl_agent_loop():
    """The calls verl's server manager would make for two trajectories of one prompt on a
    fleet of 2 x TP1, 1 x TP2 and 1 x TP4 engines."""
    r = router()
    assert [r.add_instance(i, tp) for i, tp in enumerate([1, 1, 2, 4])] == [0, 0, 1, 2]
    for traj in ("req-a", "req-b"):
        r.start(traj, "the prompt's text")
    a = r.route("req-a", context_tokens=900, now_s=0.0)
    b = r.route("req-b", context_tokens=900, now_s=0.0)
    assert (a.reason, a.place, a.from_bucket, a.prev_instance) == ("first", "bucket", -1, -1)
    assert {a.instance, b.instance} == {0, 1}  # the second goes to the idle TP1
    with pytest.raises(libra.Error, match="a turn is in flight"):
        r.route("req-a", 1000)
    r.turn_done("req-a", 500)
    r.tool_return("req-a", "bash", "success", 120)
    r.tool_return("req-a", "pytest", "failure", 2400)
    a2 = r.route("req-a", context_tokens=3920, now_s=1.0)
    assert a2.from_bucket == 0 and a2.prev_instance == a.instance
    r.turn_done("req-a", 64)
    r.finish("req-a")
    # a failed turn is placed again, with no new returns
    r.turn_done("req-b", None)
    again = r.route("req-b", context_tokens=900, now_s=2.0)
    assert again.instance == b.instance and again.place == "sticky"
    r.turn_done("req-b", 30000)
    r.finish("req-b", "truncated")
    r.step(now_s=10.0)
    with pytest.raises(libra.Error) as e:
        r.route("req-a")
    assert e.value.code_name == "ENOENT" and "req-a" in e.value.message


def test_router_misuse_raises():
    r = router()
    r.start("t", 1)
    with pytest.raises(libra.Error) as e:
        r.route("t")
    assert e.value.code_name == "ENOENT" and e.value.message == "no instance is registered"
    with pytest.raises(libra.Error, match="TP8, which no bucket of tp1:1000"):
        r.add_instance(7, 8)
    r.add_instance(7, 1)
    with pytest.raises(libra.Error, match="registered already"):
        r.add_instance(7, 2)
    with pytest.raises(libra.Error, match="started already"):
        r.start("t", 1)
    with pytest.raises(libra.Error, match="no turn was routed yet"):
        r.tool_return("t", "bash")
    with pytest.raises(libra.Error, match="no turn is in flight"):
        r.turn_done("t", 10)
    r.route("t")
    r.turn_done("t", 10)
    with pytest.raises(libra.Error, match="status: expected success, failure, timeout or other"):
        r.tool_return("t", "bash", "fine")
    with pytest.raises(libra.Error, match="status: expected completed, truncated"):
        r.finish("t", "done")
    r.finish("t")
    with pytest.raises(libra.Error, match="not started, or finished"):
        r.finish("t")
    with pytest.raises(libra.Error) as e:
        libra.Router({"workload": {"name": "search-r1"}, "model": {"name": "qwen3-4b"}})
    assert "sched.buckets" in str(e.value)
    r.close()
    with pytest.raises(ValueError):
        r.start("u", 1)


def test_prompt_keys_are_the_gateways():
    def fnv1a(data):
        h = 0xcbf29ce484222325
        for byte in data:
            h = ((h ^ byte) * 0x100000001b3) & (2**64 - 1)
        return h & (2**63 - 1)
    assert libra.prompt_key("task-17") == fnv1a(b"task-17")
    assert libra.prompt_key(b"\xff\xfe") == fnv1a(b"\xff\xfe")


def read_trace(path):
    with libra.trace.read(path) as r:
        return list(r)


def test_router_decides_as_route_eval(tmp_path):
    """Replays a trace through libra.Router in route eval's order (each step's trajectories
    routed turn by turn, then finished, then learnt) and compares every decision scored with
    `libra route eval --decisions`: the policy's bucket and its reason."""
    trace = tmp_path / "t.jsonl"
    cli("trace", "gen", "r2e-gym", "--steps", "6", "--batch", "64", "--samples", "4",
        "-o", str(trace))
    cfg = {"sched": {"policy": "cmlfq", "buckets": BUCKETS}}
    decisions = tmp_path / "decisions.jsonl"
    cli("route", "eval", str(trace), "--policy", "cmlfq", "--train-steps", "2", "--decisions",
        str(decisions), "--config", str(write_config(tmp_path, cfg)))
    expected = [json.loads(line) for line in decisions.read_text().splitlines()]
    expected = [(d["trajectory"], d["turn"], d["bucket"], d["reason"]) for d in expected]

    r = libra.Router(cfg)
    for i, tp in enumerate([1, 2, 4]):  # route eval's registry: one idle instance per bucket
        r.add_instance(i, tp)
    records = read_trace(trace)
    order = sorted(range(len(records)), key=lambda i: (records[i]["step"], i))
    got = []
    steps = sorted({rec["step"] for rec in records})
    index = 0
    for s, step in enumerate(steps):
        ids = [i for i in order if records[i]["step"] == step]
        for i in ids:
            rec, name = records[i], f"traj-{i}"
            r.start(name, rec["prompt_id"])
            for k, turn in enumerate(rec["turns"]):
                d = r.route(name, turn["prompt_tokens"], now_s=float(index))
                if s >= 2:
                    got.append((i, k, d.policy_bucket, d.reason))
                r.turn_done(name, turn["generated_tokens"])
                for call in turn.get("calls", []):
                    r.tool_return(name, call["tool"], call["status"], call["payload_tokens"])
            index += 1
        for i in ids:
            r.finish(f"traj-{i}", records[i]["finish"])
        r.step(now_s=float(step))
    assert len(got) == len(expected) > 1000
    assert got == expected
    reasons = {d[3] for d in got}
    assert {"first", "promote", "demote", "stay", "disagree"} <= reasons


# ---- traces ------------------------------------------------------------------------------------

def test_trace_round_trips_byte_for_byte(tmp_path):
    src = tmp_path / "in.jsonl"
    cli("trace", "gen", "search-r1", "--steps", "2", "-o", str(src))
    with libra.trace.read(src) as r:
        header, records = r.header, list(r)
    assert header["workload"] == "search-r1" and len(records) > 10
    out = tmp_path / "out.jsonl"
    assert libra.trace.write(out, header, records) == len(records)
    assert out.read_bytes() == src.read_bytes()
    assert cli("trace", "validate", str(out)).returncode == 0


def test_trace_errors_name_the_line(tmp_path):
    src = tmp_path / "bad.jsonl"
    lines = Path(os.environ["LIBRA_SOURCE_DIR"], "docs", "trace-format.md").read_text()
    example = [line for line in lines.splitlines() if line.startswith('{"')][:4]
    bad = example[2].replace('"generated_tokens":1630', '"generated_tokens":-5')
    src.write_text("\n".join([example[0], example[1], bad, example[3]]) + "\n")
    r = libra.trace.read(src)
    assert next(r)["sample"] == 0
    with pytest.raises(libra.Error) as e:
        next(r)
    assert (e.value.file, e.value.line) == (str(src), 3)
    assert "turns.0.generated_tokens" in e.value.message
    assert next(r)["step"] == 1  # reading goes on after a bad line
    r.close()
    out = tmp_path / "out.jsonl"
    header = json.loads(example[0])
    with pytest.raises(libra.Error) as e:
        libra.trace.write(out, header, [json.loads(example[1]), json.loads(bad)])
    assert (e.value.file, e.value.line) == (str(out), 3)
    assert not out.exists() and not list(tmp_path.glob("out.jsonl.tmp*"))
    with pytest.raises(libra.Error) as e:
        libra.trace.read(tmp_path / "missing.jsonl")
    assert e.value.code_name == "EIO"
