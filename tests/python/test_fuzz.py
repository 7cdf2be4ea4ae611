"""Every entry point of the Python binding called with random arguments — wrong types, huge
and negative integers, None, bytes, very long strings, invalid UTF-8, NUL bytes, random JSON —
for a fixed number of iterations from a fixed seed. Raising is fine (libra.Error, or TypeError /
ValueError for what Python refuses before the library); crashing the interpreter is not, and
neither is the router disagreeing with itself afterwards.

Needs LIBRA_BIN and the binding (see test_api.py).
"""

import json
import random

import pytest

import libra
from cli import run as cli

ITERATIONS = 3000
ALLOWED = (libra.Error, TypeError, ValueError, OverflowError)
KEYS = ["cluster", "model", "workload", "rl", "plan", "sched", "sim", "gpus", "steps", "name",
        "policy", "buckets", "hardware", "trace", "seed", "batch_trajectories"]


def random_json(rng, depth=0):
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 7, 2**31, 2**63 - 1, -2**63, 10**30])
    if kind == 3:
        return rng.choice([0.5, -1e300, 1e-300, 3.0])
    if kind in (4, 5):
        return rng.choice(["", "x" * rng.randrange(1, 5000), "tp1:4000", "cmlfq", "r2e-gym",
                           "\u00e9\u4e2d", "\ud7ff"])
    if kind == 6:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = rng.sample(KEYS, rng.randrange(1, 4))
    return {k: random_json(rng, depth + 1) for k in keys}


def random_value(rng):
    """Anything a caller might pass by mistake."""
    kind = rng.randrange(12)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([0, 1, -1, 2**63, -2**63 - 1, 2**64, 10**40, True])
    if kind == 2:
        return rng.choice([0.0, float("nan"), float("inf"), -1e30])
    if kind == 3:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(64)))  # invalid UTF-8 too
    if kind == 4:
        return "t" * rng.choice([1, 255, 256, 4096, 1 << 20])
    if kind == 5:
        return rng.choice(["a\0b", "\udcff", "success", "failure", "completed", "filtered",
                           "bash", "", "{}", "{\"rl\": {\"steps\": 2}}"])
    if kind == 6:
        return random_json(rng)
    if kind == 7:
        return json.dumps(random_json(rng))
    if kind == 8:
        return json.dumps(random_json(rng))[:rng.randrange(1, 40)].encode()  # cut JSON
    if kind == 9:
        return [1, 2]
    if kind == 10:
        return rng.choice([object(), 1.5j, b"\xff\xfe\xfd"])
    return rng.randrange(-3, 6)


def small(cfg):
    """A random experiment that runs fast when it is valid: no verification, two steps."""
    if not isinstance(cfg, dict):
        return {} if cfg is None else cfg
    return dict(cfg, plan={"verify_candidates": 0}, rl={"steps": 2})


def call(fn, *args):
    try:
        fn(*args)
    except ALLOWED:
        pass


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    cli("trace", "gen", "dapo-math", "--steps", "1", "--batch", "8", "--samples", "4", "-o",
        str(path))
    return path


def test_random_arguments_never_crash(tmp_path, trace_file):
    rng = random.Random(20260613)
    r = libra.Router({"sched": {"buckets": "tp1:4000,tp2:12000,tp4:30000"}})
    for i, tp in enumerate([1, 2, 4]):
        r.add_instance(i, tp)
    live = ["t0", "t1", b"\xff\xfe"]
    v = lambda: random_value(rng)  # noqa: E731
    entry_points = [
        lambda: r.add_instance(v(), v()),
        lambda: r.start(rng.choice(live + [v()]), v()),
        lambda: r.tool_return(rng.choice(live + [v()]), v(), v(), v()),
        lambda: r.route(rng.choice(live + [v()]), v(), v()),
        lambda: r.turn_done(rng.choice(live + [v()]), v()),
        lambda: r.finish(rng.choice(live + [v()]), v()),
        lambda: r.step(v()),
        lambda: libra.prompt_key(v()),
        lambda: libra.Router(v()),
        lambda: libra.trace.read(v()),
        lambda: list(libra.trace.read(trace_file)),
        lambda: libra.trace.write(tmp_path / f"w{rng.randrange(4)}.jsonl", v(), [v(), v()]),
        lambda: libra.trace.write(rng.choice([v(), tmp_path / "bytes\xff.jsonl"]), v(), []),
    ]
    for _ in range(ITERATIONS):
        call(rng.choice(entry_points))
    # planning and simulating are slower: fewer calls, each on a small experiment
    for _ in range(30):
        call(libra.plan, small(rng.choice([v(), {"cluster": {"gpus": v()}}])))
        call(libra.sim, small(rng.choice([v(), {"sim": {"modes": v()}}])))
    # the router still answers a well-formed trajectory
    r.start("after", 1)
    d = r.route("after", 100)
    assert d.reason == "first" and 0 <= d.instance < 3
    r.turn_done("after", 10)
    r.finish("after")
    r.close()
