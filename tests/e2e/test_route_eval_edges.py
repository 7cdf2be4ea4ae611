"""Edges of `libra route eval` and what reads its result (docs/routing.md "The placebo check",
the bucket layout's cluster rule; docs/report.md): a placebo with nothing scored, a layout from a
config file placed at its position, and a negative per-decision regret refused by the report."""

import json

from cli_run import refused, run

BUCKETS = "tp1:4000,tp2:30000"


def record(step, sample, tokens):
    return {"step": step, "prompt_id": step, "epoch": 0, "sample": sample,
            "version_start": step, "finish": "completed",
            "turns": [{"prompt_tokens": 100, "generated_tokens": tokens}]}


def no_call_trace(tmp_path):
    """Single-turn trajectories: no tool return, so no routing decision to score."""
    path = tmp_path / "no_calls.jsonl"
    lines = [{"libra_trace": 1, "workload": "r2e-gym", "group_size": 2}]
    lines += [record(s, k, 5000 + 40 * s * k) for s in range(2) for k in range(2)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def test_a_placebo_with_no_decisions_reads_na_as_its_json_does(tmp_path):
    trace = no_call_trace(tmp_path)
    args = ("route", "eval", trace, "--placebo", "--buckets", BUCKETS)
    doc = json.loads(run(*args, "--json").stdout)
    assert doc["placebo"]["cmlfq_accuracy"] is None
    r = run(*args)
    assert r.returncode == 0, r.stderr
    line = r.stdout[r.stdout.index("placebo:"):]
    assert "0.0%" not in line and "N/A" in line, line


def test_a_layout_the_cluster_cannot_serve_is_placed_in_its_config_file(tmp_path):
    trace = str(tmp_path / "g.jsonl")
    assert run("trace", "gen", "r2e-gym", "--steps", "2", "-o", trace).returncode == 0
    config = tmp_path / "c.json"
    config.write_text('{\n  "cluster": {"gpus": 4},\n'
                      '  "sched": {"buckets": "tp1:4000,tp8:9000"}\n}\n')
    err = refused(run("route", "eval", trace, "--config", str(config)))
    assert err.startswith(f"libra: {config}:3:"), err
    assert "bucket 2 (tp8:9000) is served by TP8, but the cluster has 4 GPUs" in err, err
    # whatever config check accepts, every command accepts: it names the command refusing
    err = refused(run("config", "check", str(config)), code=1)
    assert err.startswith(f"libra: {config}:3:") and "libra route eval" in err, err


def test_the_report_refuses_a_negative_per_decision_regret(tmp_path):
    trace = str(tmp_path / "g.jsonl")
    assert run("trace", "gen", "r2e-gym", "--steps", "2", "-o", trace).returncode == 0
    r = run("route", "eval", trace, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    doc["policies"]["cmlfq"]["all"]["regret"]["per_decision_gpu_s"] = -5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    err = refused(run("report", str(bad), "-o", str(tmp_path / "r.html")))
    assert "policies.cmlfq.all.regret.per_decision_gpu_s" in err, err
