"""End-to-end tests of `libra plan`'s verification (docs/planner.md §8): why a candidate failed,
the exit when every candidate failed for a setting, the best of each kind at the optimum's
split, the colocated mode's message, the table's columns with the pool on, and a bad --export.

Needs LIBRA_BIN (the built binary).
"""

import json
import os
import re
import subprocess

LIBRA = os.environ["LIBRA_BIN"]


def run(*args):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120)


def test_every_candidate_failing_for_a_setting_exits_2_naming_it():
    """As libra sim does when every run failed for a setting (docs/cli.md)."""
    for args in ((), ("--json",)):
        r = run("plan", "--set", "rl.trajectory_timeout_s=1", *args)
        assert r.returncode == 2, (r.returncode, r.stdout[-300:])
        assert r.stdout == ""
        assert re.search(r"libra: plan: verification: all \d+ candidates failed to simulate: "
                         r"rl\.trajectory_timeout_s 1 s stopped every trajectory", r.stderr)


def test_a_failed_candidate_says_why():
    r = run("plan", "--json", "--set", "rl.trajectory_timeout_s=5")
    assert r.returncode == 0, r.stderr
    cands = json.loads(r.stdout)["verification"]["candidates"]
    failed = [c for c in cands if c["trained_tokens_per_s"] is None]
    assert failed and all("rl.trajectory_timeout_s 5 s stopped" in c["error"] for c in failed)
    assert all("error" not in c for c in cands if c["trained_tokens_per_s"] is not None)
    text = run("plan", "--set", "rl.trajectory_timeout_s=5").stdout
    assert re.search(r"failed \[1\]", text)
    assert re.search(r"\n  \[1\] rl\.trajectory_timeout_s 5 s stopped every trajectory", text)


def test_the_best_of_each_kind_at_the_optimums_split_is_simulated():
    for verify in ("1", "16"):
        r = run("plan", "--json", "--verify", verify)
        assert r.returncode == 0, r.stderr
        cands = json.loads(r.stdout)["verification"]["candidates"]
        split = [c for c in cands if c["origin"] == "optimum"][0]["train_gpus"]
        for tp in (1, 2, 4, 8):
            assert any(not c["colocated"] and c["train_gpus"] == split and
                       re.fullmatch(rf"tp{tp}x\d+", c["instances"]) for c in cands), (verify, tp)


def test_colocated_mode_says_what_is_verified():
    out = run("plan", "--mode", "colocated").stdout
    assert ("verification: none (plan.mode colocated is not verified: the verification of "
            "plan.mode async simulates colocated candidates beside its async ones)") in out


def test_the_table_fits_the_longest_origin():
    out = run("plan", "--set", "ehp.enabled=true").stdout
    lines = out.split("\n")
    head = [i for i, ln in enumerate(lines) if ln.startswith("  candidate ")][0]
    ends = {lines[head].index("train") + len("train")}
    for row in lines[head + 1:]:
        m = re.match(r"[ *] (.+?) +(\d+) ", row)
        if not m:
            break
        ends.add(m.end(2))
    assert len(ends) == 1, ends
    assert "no pool" in out


def test_a_bad_export_format_has_no_usage_line():
    r = run("plan", "--verify", "0", "--export", "bogus")
    assert r.returncode == 2
    assert r.stderr == ("libra: plan: --export: unknown format 'bogus' (one of sglang, vllm, "
                        "slurm, ray, k8s, verl, megatron)\n")
