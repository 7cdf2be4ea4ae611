"""End-to-end tests of more unusual inputs to `libra trace` and `libra cost` (docs/cli.md,
docs/trace-format.md).

- `trace import` reads its inputs a bounded line at a time: a stream without a newline
  (/dev/zero) is refused at the limit (64 MiB a line for the formats read by lines) instead of
  being read into memory without end.
- `trace import` refuses an input file given twice (also as `./x`, or inside a verl dump
  directory given too): its trajectories were imported twice without a word.
- `trace import --workload` or `--model` with a control character is refused naming the flag
  (the header's field alone, `workload: ...`, named neither the flag nor the command).
- `trace gen` of a workload preset whose values are each in range but draw a trajectory past
  the trace's bounds (tool waits past 2^50 microseconds) is bad input naming the preset and the
  trajectory (exit 2), not an internal error (exit 4).
- `libra cost --context-tokens` prints the context it was given (1234567, not 1.23457e+06),
  and refuses one past 2^32 - 1 as `--seq-tokens` does.
- A negative `tp` or header `group_size` is refused as below 1 (their lower bound), not as
  below 0; a table's trajectory starting at turn 1 is named as such, not as following turn -1;
  a whole number written as 1e18 is named with why it is not read as an integer.

Needs LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import copy
import json
import os
import shutil

import pytest
from cli_run import refused, run

SOURCE = os.environ["LIBRA_SOURCE_DIR"]
DATA = os.path.join(SOURCE, "tests", "data", "trace")
CSV_HEADER = "traj_id,step,prompt_id,turn,prompt_tokens,generated_tokens"


# ---- trace import: endless and unterminated input ----------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "csv", "verl", "openai-chat"])
def test_import_stops_at_a_line_without_end(tmp_path, fmt):
    out = tmp_path / "t.jsonl"
    err = refused(run("trace", "import", "--from", fmt, "/dev/zero", "-o", str(out), timeout=60))
    assert err == ("libra: /dev/zero:1:1: line longer than 67108864 bytes; the file is not read "
                   "past it\n"), err
    assert sorted(os.listdir(tmp_path)) == []


# ---- trace import: one input twice ---------------------------------------------------------------

@pytest.mark.parametrize("fmt,name", [("tau-bench", "tau-bench/airline-sample.json"),
                                      ("swe-agent", "swe-agent/django__django-11099.traj"),
                                      ("openai-chat", "openai-chat/sample.jsonl"),
                                      ("verl", "verl/1.jsonl"), ("jsonl", "turns.jsonl")])
def test_import_refuses_an_input_given_twice(tmp_path, fmt, name):
    src = tmp_path / os.path.basename(name)
    shutil.copy(os.path.join(DATA, name), src)
    again = os.path.join(str(tmp_path), ".", src.name)
    out = tmp_path / "out.jsonl"
    err = refused(run("trace", "import", "--from", fmt, str(src), again, "-o", str(out)))
    assert err.startswith(f"libra: trace: input '{again}' is the file of input '{src}' again: "
                          "its trajectories would be imported twice\n"), err
    assert not out.exists()


def test_import_refuses_a_verl_file_and_its_dump_directory(tmp_path):
    dump = tmp_path / "dump"
    shutil.copytree(os.path.join(DATA, "verl"), dump)
    err = refused(run("trace", "import", "--from", "verl", str(dump), str(dump / "2.jsonl")))
    assert f"input '{dump / '2.jsonl'}' is the file of input '{dump}' again" in err, err


# ---- trace import: a header name from a flag ------------------------------------------------------

@pytest.mark.parametrize("flag", ["--workload", "--model"])
def test_import_names_the_flag_of_a_name_with_a_control_character(tmp_path, flag):
    out = tmp_path / "t.jsonl"
    err = refused(run("trace", "import", "--from", "jsonl", os.path.join(DATA, "turns.jsonl"),
                      flag, "a\tb", "-o", str(out)))
    assert err.startswith(f"libra: trace: {flag}: must not hold control characters\n"), err
    assert not out.exists()


# ---- trace gen: a preset drawing a trajectory past the trace's bounds ---------------------------

def slow_pool_preset(tmp_path):
    with open(os.path.join(SOURCE, "data", "presets", "workloads.json")) as f:
        doc = json.load(f)
    w = copy.deepcopy(next(w for w in doc["workloads"] if w["name"] == "search-r1"))
    w["name"] = "slow-pool"
    w["tools"][0]["pool"].update(service_median_s=86400, service_sigma=3, utilisation=0.99,
                                 workers=1)
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"workloads": [w]}))
    return path


def test_gen_of_a_preset_past_the_trace_bounds_is_bad_input(tmp_path):
    presets = slow_pool_preset(tmp_path)
    out = tmp_path / "t.jsonl"
    err = refused(run("trace", "gen", "slow-pool", "--steps", "1", "--presets", str(presets),
                      "-o", str(out)))
    assert err.startswith("libra: workload preset 'slow-pool' draws a trajectory a trace cannot "
                          "hold (step 0, prompt "), err
    assert "queue_us: " in err and "past 1125899906842624" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


# ---- cost --context-tokens -----------------------------------------------------------------------

def test_cost_prints_the_context_it_was_given():
    r = run("cost", "--context-tokens", "1234567")
    assert r.returncode == 0, r.stderr
    assert "), 1234567 tokens of context per sequence\n" in r.stdout, r.stdout[:400]


@pytest.mark.parametrize("value", ["4294967296", "9223372036854775807"])
def test_cost_refuses_a_context_past_32_bits(value):
    err = refused(run("cost", "--context-tokens", value))
    assert err.startswith("libra: cost: --context-tokens: expected an integer in "
                          f"[0, 4294967295], not '{value}'\n"), err


# ---- messages naming the bound that was broken -------------------------------------------------

TRAJ = ('{"step":0,"prompt_id":1,"epoch":0,"sample":0,"version_start":0,"finish":"completed",'
        '"turns":[{"prompt_tokens":1,"generated_tokens":1%s}]}\n')


@pytest.mark.parametrize("value", ["-3", "-1"])
def test_a_negative_group_size_is_below_one(tmp_path, value):
    path = tmp_path / "t.jsonl"
    path.write_text('{"libra_trace":1,"workload":"x","group_size":%s}\n' % value)
    r = run("trace", "validate", str(path))
    assert r.returncode == 1, r.stderr
    assert r.stderr == f"libra: {path}:1:33: group_size: must be >= 1, got {value}\n", r.stderr


@pytest.mark.parametrize("value", ["-3", "-1"])
def test_a_negative_tp_is_below_one(tmp_path, value):
    path = tmp_path / "t.jsonl"
    timing = ',"instance":0,"tp":%s,"sent_us":1,"done_us":2' % value
    path.write_text('{"libra_trace":1,"workload":"x"}\n' + TRAJ % timing)
    r = run("trace", "validate", str(path))
    assert r.returncode == 1, r.stderr
    assert r.stderr.endswith(f": turns.0.tp: must be >= 1, got {value}\n"), r.stderr


def test_a_table_trajectory_starting_past_turn_zero_is_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(f"{CSV_HEADER}\nr0,0,1,1,10,5\n")
    err = refused(run("trace", "import", "--from", "csv", str(path)))
    assert err == f"libra: {path}:2:8: turn: 1 starts the trajectory (expected 0)\n", err


@pytest.mark.parametrize("value,says", [
    ("1e18", "expected an integer, got 1e+18: a number with a decimal point or an exponent is "
     "read as one only below 9e15"),
    ("12.5", "expected an integer, got a real number"),
])
def test_a_whole_number_past_exact_reals_says_why(tmp_path, value, says):
    path = tmp_path / "t.jsonl"
    path.write_text('{"libra_trace":1,"workload":"x"}\n' + (TRAJ % "").replace(
        '"prompt_tokens":1,', f'"prompt_tokens":{value},'))
    r = run("trace", "validate", str(path))
    assert r.returncode == 1, r.stderr
    assert r.stderr.endswith(f": turns.0.prompt_tokens: {says}\n"), r.stderr
