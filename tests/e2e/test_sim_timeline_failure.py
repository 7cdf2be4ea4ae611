"""End-to-end tests of the GPU timeline (`libra sim --timeline`, docs/sim.md "GPU timeline")
with an injected instance failure (`sim.fail_time_s`, `sim.fail_instance`).

A failed instance's engine is gone for good, but its GPUs stay in the fleet: in colocated mode
they are among the trainer's, so its row keeps the train and the switches of every step, and
only its rollout stops at the failure; in the disaggregated modes its row holds nothing after
the failure (no weight update reaches it). The timeline's invariants hold with the failure.
"""

import json
import os
import subprocess

from pytest import approx

LIBRA = os.environ["LIBRA_BIN"]
STEPS = ["--steps", "4", "--set", "sim.tune_steps=2", "--set", "sim.warmup_steps=1"]
FAIL_S = 100.0
FAIL = ["--set", f"sim.fail_time_s={FAIL_S}", "--set", "sim.fail_instance=0"]


def modes(*args):
    p = subprocess.run([LIBRA, "sim", "--json", *STEPS, "--timeline", "0:3", *args],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["modes"]


def use_s(row, use):
    return sum(b - a for a, b, u in row["intervals"] if u == use)


def check_invariants(m):
    """Each row's intervals add up to its seconds of each use, busy_share is rollout_s over the
    window, and the rows' rollout weighted by TP is the steps' rollout utilisation x GPUs."""
    tl = m["timeline"]
    window = tl["to_s"] - tl["from_s"]
    for row in tl["instances"]:
        for use in ("rollout", "train", "sync"):
            assert use_s(row, use) == approx(row[f"{use}_s"], abs=1e-6), (row["instance"], use)
        assert row["busy_share"] == approx(row["rollout_s"] / window)
        ends = [x for iv in row["intervals"] for x in iv[:2]]
        assert ends == sorted(ends)
    gpus = sum(row["tp"] for row in tl["instances"])
    busy = sum(row["rollout_s"] * row["tp"] for row in tl["instances"])
    steps = m["steps"]
    want, start = 0.0, tl["from_s"]
    for st in steps:
        want += st["rollout_utilisation"] * gpus * (st["end_s"] - start)
        start = st["end_s"]
    assert busy == approx(want, rel=1e-6)
    if tl["trainer"] is not None:
        assert tl["trainer"]["train_s"] == approx(sum(st["train_s"] for st in steps))


def test_colocated_failed_instance_still_trains_and_switches():
    ok = modes("--set", "sim.modes=colocated")["colocated"]
    failed = modes("--set", "sim.modes=colocated", *FAIL)["colocated"]
    tl = failed["timeline"]
    assert tl["trainer"]["gpus"] == ok["timeline"]["trainer"]["gpus"]
    assert [st["train_s"] for st in failed["steps"]] == [st["train_s"] for st in ok["steps"]]
    for row in tl["instances"]:  # every GPU trains and switches, the failed instance's too
        assert row["train_s"] == approx(tl["trainer"]["train_s"]), row["instance"]
        assert row["sync_s"] == approx(ok["timeline"]["instances"][0]["sync_s"])
        assert row["sync_s"] > 0
    dead = tl["instances"][0]
    assert {iv[2] for iv in dead["intervals"]} == {"rollout", "train", "sync"}
    assert all(b <= FAIL_S for a, b, u in dead["intervals"] if u == "rollout")
    assert any(a >= FAIL_S for a, b, u in dead["intervals"] if u == "train")
    assert dead["busy_share"] < tl["instances"][1]["busy_share"]
    check_invariants(failed)


def test_disaggregated_failed_instance_row_is_idle_after_the_failure():
    for name, m in modes("--set", "sim.modes=async,libra", *FAIL).items():
        dead = m["timeline"]["instances"][0]
        assert all(b <= FAIL_S for a, b, u in dead["intervals"]), name
        assert dead["train_s"] == 0, name
        check_invariants(m)
