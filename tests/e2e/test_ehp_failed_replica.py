"""End-to-end tests of a hybrid replica whose GPU failed (docs/ehp.md "A failed member"):
the replica leaves the elastic pool for good, and the pool lends another one in its place.

The run: qwen3-4b planned as HSDP on 48 GPUs, a core of one 8-GPU group and two 8-GPU hybrid
replicas, each serving rollout as one TP8 instance (instances 3 and 4); replica 0 trains in
step 5, when instance 3's GPU fails (294 s), and the pool borrows again after step 24.
"""

import json
import os
import subprocess

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
RUN = ("--model", "qwen3-4b", "--set", "plan.fsdp=search", "--set", "sim.modes=libra", "--set",
       "ehp.enabled=true", "--set", "plan.verify_candidates=0", "--steps", "40", "--set",
       "sim.fail_time_s=294", "--set", "sim.fail_instance=3")
POOL_PID = 4  # the Perfetto process "elastic pool (hybrid replicas)", a thread per replica


def pool_trace(tmp_path, step):
    """The pool's trace events of the step: (replica, kind, name)."""
    path = tmp_path / f"t{step}.json"
    p = subprocess.run([LIBRA, "sim", *RUN, "--set", f"sim.trace_step={step}", "--perfetto",
                        str(path)], capture_output=True, text=True, timeout=240, cwd=SOURCE_DIR)
    assert p.returncode == 0, p.stderr
    events = json.loads(path.read_text())["traceEvents"]
    return [(e["tid"], e["ph"], e["name"]) for e in events
            if e.get("pid") == POOL_PID and e["ph"] != "M"]


def test_the_failed_replica_is_lost_at_its_failure(tmp_path):
    events = pool_trace(tmp_path, 5)
    assert (0, "X", "training") in events
    assert events[-2:] == [(0, "i", "join failed"), (0, "i", "replica lost")]


def test_the_pool_lends_another_replica_in_its_place(tmp_path):
    events = pool_trace(tmp_path, 25)
    joins = [tid for tid, ph, name in events if name == "starting trainers"]
    assert joins == [1], events
    assert all(tid == 1 for tid, _, _ in events), events
