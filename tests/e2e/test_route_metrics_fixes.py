"""Fixes to routing metrics' output (docs/routing.md "Metrics", "Cost and regret"; docs/sim.md
"Routing"): load_balance's regret in `libra route eval`, and the simulator's siblings split."""

import json
import os

import pytest

from cli_run import run

ROOT = os.environ.get("LIBRA_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
BUCKETS = "tp1:4000,tp2:12000,tp4:30000"
OWN = ("per_decision_gpu_s", "per_trajectory_gpu_s", "path_per_trajectory_gpu_s")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("route") / "t.jsonl")
    r = run("trace", "gen", "r2e-gym", "--steps", "12", "--batch", "32", "-o", path)
    assert r.returncode == 0, r.stderr
    return path


def evaluate(trace, *extra):
    r = run("route", "eval", trace, "--buckets", BUCKETS, *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("extra", [[], ["--folds", "4"]])
def test_load_balance_regret_is_null_in_json(trace, extra):
    """load_balance chooses no bucket: its own regrets would charge wherever the idle registry
    placed it (always bucket 0, the majority class's numbers), so they are null like its
    accuracies; the constant baselines beside them are every policy's and stay."""
    doc = json.loads(evaluate(trace, "--json", *extra))
    lb = doc["policies"]["load_balance"]
    cm = doc["policies"]["cmlfq"]
    for split in ("all", "never"):
        r = lb[split]["regret"]
        assert all(r[k] is None for k in OWN), r
        assert r["decisions"] == cm[split]["regret"]["decisions"] > 0
        for row in ("majority_class", "best_constant"):
            assert r[row] == cm[split]["regret"][row]
    assert lb["all"]["accuracy"] is None and lb["confusion"] is None
    assert all(cm["all"]["regret"][k] is not None for k in OWN)


def test_load_balance_regret_is_na_in_text(trace):
    """The text table prints N/A in load_balance's three regret columns."""
    rows = {line[:15].strip(): line[15:].split() for line in evaluate(trace).splitlines()}
    assert rows["load_balance"][1:4] == ["N/A"] * 3, rows["load_balance"]
    assert "N/A" not in rows["cmlfq"][1:4]
    assert "N/A" not in rows["majority class"][:3]


def test_route_eval_has_no_siblings_split(trace):
    """route eval splits by step alone (seen or never): no siblings split."""
    doc = json.loads(evaluate(trace, "--json"))
    for m in doc["policies"].values():
        assert "siblings" not in m and "seen" in m and "never" in m


def test_sim_siblings_split_is_always_present(tmp_path):
    """A mode whose decisions never fell in siblings still has the split, with 0 decisions, as
    seen and never have theirs: the document's shape does not depend on a count."""
    with open(os.path.join(ROOT, "data", "presets", "workloads.json")) as f:
        w = [x for x in json.load(f)["workloads"] if x["name"] == "r2e-gym"][0]
    presets = tmp_path / "small.json"
    presets.write_text(json.dumps({"workloads": [dict(w, name="r2e-small", prompts=20)]}))
    r = run("sim", "--presets", str(presets), "--workload", "r2e-small", "--steps", "12",
            "--set", "sim.modes=libra,rollout",
            "--set", "sched.buckets=tp1x4:4000,tp2x2:12000,tp4x2:30000", "--json")
    assert r.returncode == 0, r.stderr
    modes = json.loads(r.stdout)["modes"]
    for name in ("libra", "rollout"):
        routing = modes[name]["routing"]
        assert set(routing) == {"all", "seen", "never", "siblings"}, (name, list(routing))
    assert modes["libra"]["routing"]["siblings"]["decisions"] == 0
    assert modes["libra"]["routing"]["siblings"]["accuracy"] is None
