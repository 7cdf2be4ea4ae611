"""End-to-end tests of input guards of `libra calibrate` and `libra route eval` (docs/cli.md,
docs/calibrate.md, docs/routing.md).

- A Megatron-LM log's `recompute_granularity` other than full, selective or None is refused at
  its position, not costed as no recompute.
- A Megatron-LM iteration's `global batch size` is a whole number of sequences: 256.4 is
  refused at its position, not rounded.
- A serving result whose inter-token latencies sum past the largest number is refused naming
  `itls` and the request, not blamed on a duration "too short" for infinite decode time.
- One file given twice as calibrate's INPUT (by any spelling: its device and inode) is refused:
  its points would count twice and the standard errors shrink on no new measurement.
- A verl line with `timing_s/update_actor` whose `step:` is not a step number (`step:-1`,
  `step:abc`) is refused at its position, not dropped without a word or a count.
- `route eval --truncated exact` with a `--policy` that consults no prefix tree (the only models
  that learn a truncated trajectory as censored) is refused, not taken to no effect; `censored`
  (the default) is taken, and `exact` with cmlfq or cmlfq_h, or with `--placebo`.
- `route eval --decisions` on standard output (`-`, or the file standard output is redirected
  to) while the report goes there too is refused: the two would be mixed in one stream, or the
  report written to a file the decisions have replaced. With `-o FILE` it is taken.
- `route eval` on a cluster so large that the planner's layout holds more than 4096 instances of
  one TP size runs (a bucket layout once held at most 4096; now as many as a cluster has GPUs).

Needs LIBRA_BIN.
"""

import json
import os
import shutil
import subprocess

import pytest

from cli_run import LIBRA, refused, run

SOURCE = os.environ.get("LIBRA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CALIB = os.path.join(SOURCE, "tests", "data", "calibrate")
SMALL = os.path.join(SOURCE, "tests", "data", "trace", "small.jsonl")
MODEL = "qwen2.5-7b"
BUCKETS = "tp1:4000,tp2:30000"


def position(lines, needle, value):
    """1-based line and column of value on the first of lines that holds needle."""
    for i, line in enumerate(lines):
        if needle in line:
            return i + 1, line.index(value, line.index(needle)) + 1
    raise AssertionError(needle)


# ---- calibrate: Megatron-LM logs ----------------------------------------------------------------

def megatron_edited(tmp_path, needle, old, value):
    """The committed Megatron-LM log with old's last word replaced by value on the line holding
    needle: the file written, and the line and column of value."""
    lines = open(os.path.join(CALIB, "megatron.log")).read().split("\n")
    at = next(i for i, line in enumerate(lines) if needle in line)
    lines[at] = lines[at].replace(old, old.rsplit(" ", 1)[0] + " " + value)
    log = tmp_path / "m.log"
    log.write_text("\n".join(lines))
    return log, position(lines, needle, value)


@pytest.mark.parametrize("value", ["weird", "Full", "fullx"])
def test_megatron_unknown_recompute_granularity_is_refused(tmp_path, value):
    log, (line, col) = megatron_edited(tmp_path, "recompute_granularity", " full", value)
    err = refused(run("calibrate", str(log), "--model", MODEL))
    assert err == (f"libra: {log}:{line}:{col}: recompute_granularity: expected full, selective "
                   f"or None, got '{value}'\n"), err


@pytest.mark.parametrize("value", ["selective", "None"])
def test_megatron_recompute_granularity_without_full_recompute_is_taken(tmp_path, value):
    text = open(os.path.join(CALIB, "megatron.log")).read()
    log = tmp_path / "m.log"
    log.write_text(text.replace("recompute_granularity ........................... full",
                                "recompute_granularity ........................... " + value))
    r = run("calibrate", str(log), "--model", MODEL, "--json")
    assert r.returncode == 0, r.stderr
    assert not any(p["full_recompute"] for p in json.loads(r.stdout)["train_points"])


@pytest.mark.parametrize("value", ["256.4", "0.5"])
def test_megatron_fractional_global_batch_is_refused(tmp_path, value):
    log, (line, col) = megatron_edited(tmp_path, "iteration       20/", "global batch size:   256",
                                       value)
    err = refused(run("calibrate", str(log), "--model", MODEL))
    assert err == (f"libra: {log}:{line}:{col}: global batch size: expected a whole number of "
                   f"sequences, got '{value}'\n"), err


# ---- calibrate: serving results -------------------------------------------------------------------

@pytest.mark.parametrize("extra,at,why", [
    ({"itls": [[0.02] * 49, [1e308] * 49]}, "[1e+308",
     "itls.1: the inter-token latencies sum past the largest number"),
    ({"latencies": [1.7e308, 1.7e308]}, '"latencies"',
     "latencies: the requests' decode times sum past the largest number"),
])
def test_times_summing_past_the_largest_number_are_refused(tmp_path, extra, at, why):
    """A request's inter-token latencies, or the run's decode times, each finite but summing to
    infinity: refused at the member, not blamed on a duration "too short" for them."""
    run_doc = {"duration": 10.0, "input_lens": [100, 100], "output_lens": [50, 50],
               "ttfts": [0.1, 0.1], "itls": [[0.02] * 49, [0.02] * 49], **extra}
    path = tmp_path / "run.json"
    text = json.dumps(run_doc)
    path.write_text(text)
    err = refused(run("calibrate", str(path), "--model", MODEL, "--hold", "decode_t_seq_s"))
    assert err == (f"libra: {path}:1:{text.index(at) + 1}: {why} (a time in seconds is far "
                   "less)\n"), err


# ---- calibrate: one file given twice --------------------------------------------------------------

@pytest.mark.parametrize("spelling", ["same", "dot", "option"])
def test_one_input_file_given_twice_is_refused(tmp_path, spelling):
    c1, c8 = tmp_path / "c1.json", tmp_path / "c8.json"
    shutil.copy(os.path.join(CALIB, "vllm-c1.json"), c1)
    shutil.copy(os.path.join(CALIB, "vllm-c8.json"), c8)
    again = {"same": str(c1), "dot": str(tmp_path / "." / "c1.json"),
             "option": str(c1) + ",tp=1"}[spelling]
    out = tmp_path / "p.json"
    r = run("calibrate", str(c1), str(c8), again, "--model", MODEL, "-o", str(out))
    err = refused(r)
    assert (f"libra: calibrate: input '{again}' is the file of input '{c1}' again: its points "
            "would count twice" in err), err
    assert "usage: libra calibrate" in err
    assert not out.exists()


def test_two_files_of_one_content_are_two_inputs(tmp_path):
    c1, c1b, c8 = tmp_path / "c1.json", tmp_path / "c1b.json", tmp_path / "c8.json"
    shutil.copy(os.path.join(CALIB, "vllm-c1.json"), c1)
    shutil.copy(os.path.join(CALIB, "vllm-c1.json"), c1b)
    shutil.copy(os.path.join(CALIB, "vllm-c8.json"), c8)
    r = run("calibrate", str(c1), str(c1b), str(c8), "--model", MODEL, "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["decode_points"]) == 3


# ---- calibrate: verl step numbers ------------------------------------------------------------------

VERL = ("(TaskRunner pid=1) step:{step} - response_length/mean:1000.0 - prompt_length/mean:200.0"
        " - timing_s/update_actor:15.56 - perf/total_num_tokens:1228800"
        " - perf/time_per_step:110.56 - perf/throughput:347.3227\n")


@pytest.mark.parametrize("step", ["-1", "abc", "1.5", ""])
def test_verl_update_line_without_a_step_number_is_refused(tmp_path, step):
    log = tmp_path / "verl.log"
    log.write_text(VERL.format(step=1) + VERL.format(step=step))
    col = len("(TaskRunner pid=1) ") + 1
    err = refused(run("calibrate", str(log), "--model", MODEL))
    assert err == (f"libra: {log}:2:{col}: step: expected a step number (digits) before ' - ', "
                   f"got '{step}'\n"), err


def test_verl_lines_without_an_update_are_still_left_alone(tmp_path):
    log = tmp_path / "verl.log"
    log.write_text(VERL.format(step=1) + "global step:abc - reward:1.0\n"
                   "epoch_step:x - timing_s/update_actor:1.0\n" + VERL.format(step=2))
    r = run("calibrate", str(log), "--model", MODEL, "--json")
    assert r.returncode == 0, r.stderr
    assert [p["step"] for p in json.loads(r.stdout)["train_points"]] == [1, 2]


# ---- route eval --truncated -------------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["load_balance", "length_aware", "la_mlfq", "oracle", "plas",
                                    "predictor"])
def test_truncated_exact_without_a_tree_policy_is_refused(policy):
    err = refused(run("route", "eval", SMALL, "--buckets", BUCKETS, "--policy", policy,
                      "--truncated", "exact"))
    assert err.startswith(f"libra: route: --truncated exact has no effect with --policy {policy}: "
                          "only cmlfq and cmlfq_h learn from the prefix trees, where a truncated "
                          "trajectory is censored\n"), err


@pytest.mark.parametrize("args", [("--policy", "oracle", "--truncated", "censored"),
                                  ("--policy", "cmlfq", "--truncated", "exact"),
                                  ("--policy", "cmlfq_h", "--truncated", "exact"),
                                  ("--policy", "oracle", "--placebo", "--truncated", "exact"),
                                  ("--truncated", "exact")])
def test_truncated_is_taken_where_it_acts(args):
    r = run("route", "eval", SMALL, "--buckets", BUCKETS, *args, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["truncated"] == args[-1]


# ---- route eval --decisions on standard output --------------------------------------------------------

@pytest.mark.parametrize("extra", [(), ("-o", "-"), ("--json",)])
def test_decisions_on_standard_output_with_the_report_is_refused(extra):
    err = refused(run("route", "eval", SMALL, "--buckets", BUCKETS, "--policy", "oracle",
                      "--decisions", "-", *extra))
    assert err.startswith("libra: route: --decisions '-' is standard output, which the report is "
                          "written to (give it -o FILE)\n"), err


def test_decisions_to_the_file_standard_output_goes_to_is_refused(tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        env = dict(os.environ)
        env.pop("LIBRA_PRESETS", None)
        r = subprocess.run([LIBRA, "route", "eval", SMALL, "--buckets", BUCKETS, "--policy",
                            "oracle", "--decisions", str(out)], stdout=f, stderr=subprocess.PIPE,
                           text=True, timeout=120, env=env)
    assert r.returncode == 2, r.stderr
    assert f"--decisions '{out}' is standard output" in r.stderr
    assert out.read_text() == ""


def test_decisions_on_standard_output_with_the_report_in_a_file_is_taken(tmp_path):
    report = tmp_path / "report.json"
    r = run("route", "eval", SMALL, "--buckets", BUCKETS, "--policy", "oracle", "--decisions",
            "-", "-o", str(report), "--json")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(json.loads(x)["policy"] == "oracle" for x in lines)
    assert json.loads(report.read_text())["schema"] == "libra.route-eval/1"


# ---- route eval: a huge cluster --------------------------------------------------------------

def test_route_eval_plans_a_cluster_of_more_than_4096_instances_of_one_tp_size():
    """The planner's layout for 40000 GPUs holds more than 4096 instances of TP8, which a layout
    once could not: it was refused as a bucket's instance count out of range."""
    r = run("route", "eval", SMALL, "--gpus", "40000", "--policy", "oracle", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "libra.route-eval/1"


# ---- a bad value has no usage line ----------------------------------------------------------------

@pytest.mark.parametrize("args,says", [
    (("cost", "--tp", "4", "--dp", "100"), "libra: cost: the layout needs 400 GPUs"),
    (("cost", "--gpus", "1", "--tp", "2"), "libra: cost: the layout needs 2 GPUs"),
    (("cost", "--balance-minibatch"), "libra: cost: --balance-minibatch balances each"),
    (("route", "eval", SMALL, "--buckets", BUCKETS, "--folds", "100"),
     "libra: route: --folds 100: the trace has 5 prompts"),
    (("route", "eval", SMALL, "--buckets", BUCKETS, "--train-steps", "10"),
     "libra: route: --train-steps 10 leaves nothing to evaluate"),
    (("route", "eval", SMALL, "--buckets", BUCKETS, "--seed", "5"),
     "libra: route: --seed: sim.seed has no effect without --placebo"),
    (("route", "eval", SMALL, "--buckets", BUCKETS, "--policy", "load_balance", "--set",
      "sched.rebuild_interval=7"), "libra: route: --set sched.rebuild_interval"),
    (("calibrate", os.path.join(CALIB, "verl.log"), "--name", "my-a800"),
     "libra: calibrate: --name names the preset that -o writes"),
    (("serve", "--engine", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--mode", "bogus"),
     "libra: serve: --mode: expected shadow or cmlfq (sched.policy), not 'bogus'"),
])
def test_a_bad_value_is_one_line_without_the_usage_line(args, says):
    """docs/cli.md: a bad value — out of range, or one that changes nothing where it is given —
    says which flag and why, without the usage line kept for a flag the command does not
    take."""
    err = refused(run(*args))
    assert err.startswith(says) and err.count("\n") == 1 and "usage:" not in err, err
