"""End-to-end tests of fixes to `libra trace` (docs/trace-format.md):

- an import writes each GRPO group's records together (by first appearance of its step and
  prompt, then by sample), so that consecutive runs of group_size records are one group;
- `trace stats --json` reports an absent group_size as null;
- a whole-document import cut short without a final newline is reported on its last line;
- `trace stats` prints undefined shares (no trajectories, no tool calls) as `-`;
- `--from jsonl` reads `"tool": ""` as no call, as an empty CSV cell;
- tau-bench errors name the JSON path of the member at fault ("150.trial: ...");
- an import with --samples K refuses a (step, prompt) group of other than K trajectories;
- readers of a trace whose header gives group_size refuse a run of group_size consecutive
  records that names more than one (step, prompt_id), and every producer writes none.

Needs LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import json
import os
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
TAU = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "bench/data/tau-bench/gpt-4o-airline.json")


def run(*args):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120, env=env)


def records(stdout):
    return [json.loads(x) for x in stdout.splitlines()[1:]]


def assert_grouped(recs, n):
    """Consecutive runs of n records are one (step, prompt) each, samples 0..n-1."""
    assert len(recs) % n == 0
    for i in range(0, len(recs), n):
        g = recs[i:i + n]
        assert {(r["step"], r["prompt_id"]) for r in g} == {(g[0]["step"], g[0]["prompt_id"])}
        assert [r["sample"] for r in g] == list(range(n))


def test_tau_bench_import_writes_groups_together():
    r = run("trace", "import", "--from", "tau-bench", TAU, "--samples", "4")
    assert r.returncode == 0, r.stderr
    recs = records(r.stdout)
    assert len(recs) == 200
    assert_grouped(recs, 4)
    # by first appearance of the prompt: the file's first task comes first
    first = json.load(open(TAU))[0]["task_id"]
    assert recs[0]["prompt_id"] == first


def test_jsonl_import_writes_groups_together(tmp_path):
    rows = []
    for s in range(2):
        for p in (5, 3):
            rows.append({"traj_id": f"{p}-{s}", "step": 0, "prompt_id": p, "sample": s,
                         "turn": 0, "prompt_tokens": 10, "generated_tokens": 5 + p})
    f = tmp_path / "t.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in rows))
    r = run("trace", "import", "--from", "jsonl", str(f), "--samples", "2")
    assert r.returncode == 0, r.stderr
    recs = records(r.stdout)
    assert [(x["prompt_id"], x["sample"]) for x in recs] == [(5, 0), (5, 1), (3, 0), (3, 1)]


def test_openai_chat_import_writes_groups_together(tmp_path):
    lines = []
    for trial in range(2):
        for task in ("a", "b"):
            lines.append({"task_id": task, "trial": trial, "messages": [
                {"role": "user", "content": "q"}, {"role": "assistant", "content": "x"}]})
    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = run("trace", "import", "--from", "openai-chat", str(f), "--samples", "2")
    assert r.returncode == 0, r.stderr
    assert_grouped(records(r.stdout), 2)


def test_stats_json_absent_group_size_is_null(tmp_path):
    f = tmp_path / "h.jsonl"
    f.write_text('{"libra_trace":1,"workload":"w"}\n')
    r = run("trace", "stats", "--json", str(f))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["trace"]["group_size"] is None


@pytest.mark.parametrize("fmt", ["tau-bench", "swe-agent"])
def test_truncated_document_is_reported_on_its_last_line(tmp_path, fmt):
    f = tmp_path / "t.json"
    f.write_text("[")
    r = run("trace", "import", "--from", fmt, str(f))
    assert r.returncode == 2
    assert f"{f}:1:2: " in r.stderr, r.stderr
    f.write_text('[\n  {"a": 1')
    r = run("trace", "import", "--from", fmt, str(f))
    assert r.returncode == 2
    assert f"{f}:2:10: " in r.stderr, r.stderr


def test_stats_text_prints_undefined_shares_as_dash(tmp_path):
    f = tmp_path / "h.jsonl"
    f.write_text('{"libra_trace":1,"workload":"w"}\n')
    r = run("trace", "stats", str(f))
    assert r.returncode == 0, r.stderr
    assert "0.0%" not in r.stdout
    assert "\nfinish: -\n" in r.stdout
    assert "\ntool status: -\n" in r.stdout


def test_jsonl_empty_tool_is_no_call(tmp_path):
    row = {"traj_id": 1, "step": 0, "prompt_id": 0, "turn": 0, "prompt_tokens": 5,
           "generated_tokens": 3, "finish": "completed"}
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({**row, "tool": ""}) + "\n")
    b.write_text(json.dumps(row) + "\n")
    ra, rb = run("trace", "import", "--from", "jsonl", str(a)), \
        run("trace", "import", "--from", "jsonl", str(b))
    assert ra.returncode == 0, ra.stderr
    assert records(ra.stdout) == records(rb.stdout)


def test_tau_bench_sample_error_names_the_trial():
    r = run("trace", "import", "--from", "tau-bench", TAU, "--samples", "3")
    assert r.returncode == 2
    assert ":39845:5: " in r.stderr, r.stderr  # its "trial" member
    assert ": 150.trial: 3 is not below the header's group_size 3" in r.stderr, r.stderr


def test_tau_bench_no_assistant_names_the_traj(tmp_path):
    f = tmp_path / "te.json"
    f.write_text('[{"task_id":0,"trial":0,"reward":1,"traj":[]}]')
    r = run("trace", "import", "--from", "tau-bench", str(f))
    assert r.returncode == 2
    col = f.read_text().index('"traj"') + 1
    assert f"{f}:1:{col}: 0.traj: no assistant message" in r.stderr, r.stderr


def tau_without(tmp_path, task, trial):
    runs = [r for r in json.load(open(TAU)) if not (r["task_id"] == task and r["trial"] == trial)]
    f = tmp_path / "miss.json"
    f.write_text(json.dumps(runs))
    return f


def test_import_refuses_a_group_short_of_samples(tmp_path):
    f = tau_without(tmp_path, 0, 1)
    r = run("trace", "import", "--from", "tau-bench", str(f), "--samples", "4")
    assert r.returncode == 2
    assert r.stdout == ""
    assert f"libra: {f}: step 0, task_id 0 (prompt_id 0): 3 trajectories, not --samples 4" \
        in r.stderr, r.stderr
    assert "give --samples N that every prompt has, or complete the log" in r.stderr
    assert "usage" not in r.stderr
    # without --samples nothing is checked
    assert run("trace", "import", "--from", "tau-bench", str(f)).returncode == 0


def test_import_names_the_line_of_a_short_group(tmp_path):
    lines = [{"task_id": t, "trial": k, "messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "x"}]}
        for t, k in (("a", 0), ("a", 1), ("b", 0))]
    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = run("trace", "import", "--from", "openai-chat", str(f), "--samples", "2")
    assert r.returncode == 2
    assert f"libra: {f}:3:1: step 0, task_id b (prompt_id 1): 1 trajectories, not --samples 2" \
        in r.stderr, r.stderr


def mixed_trace(tmp_path):
    recs = [records(run("trace", "gen", "r2e-gym", "--steps", "1", "--batch", "4",
                        "--samples", "2").stdout)]
    head = '{"libra_trace":1,"workload":"r2e-gym","model":"qwen3-14b","group_size":2}\n'
    a, b, c, d = recs[0]
    f = tmp_path / "mixed.jsonl"
    f.write_text(head + "".join(json.dumps(x) + "\n" for x in (a, c, b, d)))
    return f, c


def test_readers_refuse_a_run_of_group_size_records_of_two_groups(tmp_path):
    f, c = mixed_trace(tmp_path)
    msg = (f"{f}:3:1: step 0, prompt_id {c['prompt_id']}: not the group (step 0, prompt_id ")
    r = run("trace", "validate", str(f))
    assert r.returncode == 1 and msg in r.stdout + r.stderr, r.stdout + r.stderr
    for args in (["sim", "--trace", str(f), "--samples", "2", "--batch", "4", "--steps", "1",
                  "--set", "sim.modes=libra"], ["route", "eval", str(f), "--policy", "cmlfq"]):
        r = run(*args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)


def test_a_trace_without_group_size_is_not_checked(tmp_path):
    f, _ = mixed_trace(tmp_path)
    lines = f.read_text().splitlines(True)
    f.write_text('{"libra_trace":1,"workload":"r2e-gym"}\n' + "".join(lines[1:]))
    r = run("trace", "validate", str(f))
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("preset", ["search-r1", "dapo-math", "dapo-math-verl", "r2e-gym",
                                    "r2e-gym-drift"])
def test_every_generated_trace_keeps_its_groups_whole(tmp_path, preset):
    f = tmp_path / "g.jsonl"
    r = run("trace", "gen", preset, "--steps", "3", "-o", str(f))
    assert r.returncode == 0, r.stderr
    v = run("trace", "validate", str(f))
    assert v.returncode == 0, v.stdout + v.stderr
    recs = records(f.read_text())
    assert_grouped(recs, json.loads(f.read_text().splitlines()[0])["group_size"])
