"""End-to-end tests of what `libra trace stats`, `libra route eval` and `libra presets` say
(docs/trace-format.md, docs/routing.md, docs/cli.md "Errors", docs/calibrate.md).

- `trace stats` prints "-" for the tail shares where its JSON has null (nothing generated), as
  for its other undefined figures, not "0.0%".
- `route eval --samples` on a trace whose header gives no `group_size`: route eval scores the
  trajectories as recorded, and only the planner groups them (dynamic sampling, group
  integrity, a trace shorter than one batch), so elsewhere the flag would change nothing and is
  refused naming the key; where the planner groups, it changes the report.
- A bad value of a flag of `route eval` or `trace`, and a refusal of a flag's value, is one
  line without the usage line; an unknown flag keeps the usage line.
- `presets`: a hardware preset file that sets a constant by hand (no `calibration`) shows it
  as from that file, not as calibrated, and lists it under the constants set by hand, not the
  calibrated ones; a preset with a `calibration` record is listed as calibrated.

Needs LIBRA_BIN.
"""

import json

import pytest

from cli_run import refused, run

EMPTY_TURN = {"prompt_tokens": 10, "generated_tokens": 0}
MYHW = {"name": "myhw", "bf16_flops_per_s": 5e14, "hbm_bytes": 85899345920,
        "hbm_bw_bytes_per_s": 3e12, "nvlink_bw_bytes_per_s": 4e11,
        "allreduce_bus_bw_bytes_per_s": 2e11, "allreduce_latency_s": 3e-5,
        "inter_node_bw_bytes_per_s": 2.5e10, "gpus_per_node": 8}


def write_jsonl(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def no_group_trace(tmp_path):
    """64 generated r2e-gym trajectories (two default batches) without the header's group_size."""
    path = tmp_path / "r2e.jsonl"
    r = run("trace", "gen", "r2e-gym", "--steps", "4", "--seed", "1", "--batch", "16",
            "--samples", "4", "-o", str(path))
    assert r.returncode == 0, r.stderr
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    del header["group_size"]
    out = tmp_path / "nogs.jsonl"
    out.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return str(out)


def report(trace, *args):
    """route eval's JSON report without its config digest (which covers the flags)."""
    r = run("route", "eval", trace, "--json", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    del doc["config_digest"]
    return doc


# ---- trace stats: undefined tail shares ------------------------------------------------------


def test_stats_text_prints_a_dash_where_the_json_tail_shares_are_null(tmp_path):
    trace = write_jsonl(tmp_path / "t.jsonl", [
        {"libra_trace": 1, "workload": "r2e-gym"},
        {"step": 0, "prompt_id": 1, "epoch": 0, "sample": 0, "version_start": 0,
         "finish": "completed", "turns": [EMPTY_TURN]}])
    r = run("trace", "stats", trace, "--json")
    assert r.returncode == 0, r.stderr
    overall = json.loads(r.stdout)["overall"]
    assert overall["longest_5pct_token_share"] is None
    assert overall["longest_10pct_token_share"] is None
    r = run("trace", "stats", trace)
    assert r.returncode == 0, r.stderr
    tail = [x for x in r.stdout.splitlines() if x.startswith("tail:")]
    assert tail == ["tail: the longest 5% of trajectories hold - of generated tokens, the "
                    "longest 10% -"], r.stdout


# ---- route eval --samples without the trace's group_size -------------------------------------


@pytest.mark.parametrize("flag, label", [(["--samples", "2"], "--samples"),
                                         (["--set", "rl.samples=16"], "--set rl.samples")])
def test_samples_that_cannot_act_without_group_size_are_refused(tmp_path, flag, label):
    err = refused(run("route", "eval", no_group_trace(tmp_path), *flag))
    assert err.startswith(f"libra: route: {label}: rl.samples has no effect here: the "
                          "trace's header gives no group_size"), err
    assert len(err.splitlines()) == 1, err


def test_samples_act_where_the_planner_groups_the_trajectories(tmp_path):
    trace = no_group_trace(tmp_path)
    ds = ("--set", "rl.dynamic_sampling=regenerate")
    assert report(trace, *ds, "--samples", "2") != report(trace, *ds, "--samples", "16")
    r = run("route", "eval", trace, "--samples", "2", "--set", "plan.group_integrity=true")
    assert r.returncode == 0, r.stderr
    short = ("--batch", "96")  # 64 trajectories: the planner cycles them into a batch
    assert report(trace, *short, "--samples", "1") != report(trace, *short, "--samples", "3")


def test_a_config_file_s_samples_is_taken_without_group_size(tmp_path):
    config = tmp_path / "c.json"
    config.write_text('{"rl": {"samples": 2}}\n')
    r = run("route", "eval", no_group_trace(tmp_path), "--config", str(config))
    assert r.returncode == 0, r.stderr


# ---- value errors: no usage line ---------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--truncated", "maybe"], "--truncated: expected censored or exact, not 'maybe'"),
    (["--policy", "CMLFQ"], "--policy: unknown policy 'CMLFQ'"),
    (["--train-steps", "-1"], "--train-steps: expected an integer"),
    (["--folds", "1"], "--folds: expected an integer in [2, 1000], not '1'"),
    (["--min-visits", "0"], "--min-visits: expected an integer"),
    (["--jobs", "0"], "--jobs: expected an integer"),
    (["--policy", "oracle", "--decisions", "-"], "--decisions '-' is standard output"),
    (["--decisions", "d.jsonl"], "--decisions needs one --policy"),
])
def test_route_eval_value_errors_have_no_usage_line(tmp_path, args, message):
    err = refused(run("route", "eval", no_group_trace(tmp_path), *args))
    assert err.startswith("libra: route: " + message) and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("args, message", [
    (["import", "--from", "bogus", "x"], "--from: expected jsonl"),
    (["import", "--from", "jsonl", "--samples", "0", "x"], "--samples: expected an integer"),
    (["import", "--from", "jsonl", "--chars-per-token", "x", "x"], "--chars-per-token: "),
    (["gen", "r2e-gym", "--steps", "0"], "--steps: expected an integer"),
    (["gen", "r2e-gym", "--batch", "3", "--samples", "2"], "--batch 3 is not a multiple"),
])
def test_trace_value_errors_have_no_usage_line(args, message):
    err = refused(run("trace", *args))
    assert err.startswith("libra: trace: " + message) and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("args", [["--polcy", "oracle"], ["--train-steps", "1", "--folds", "2"]])
def test_an_unknown_flag_or_flags_excluding_each_other_keep_the_usage_line(tmp_path, args):
    err = refused(run("route", "eval", no_group_trace(tmp_path), *args))
    assert err.splitlines()[-1].startswith("usage: libra route eval TRACE"), err


# ---- presets: a hand-set decode constant ---------------------------------------------------------


def presets_text(path):
    """myhw's decode row, its rows of the later tables, and those tables' titles."""
    r = run("presets", "--presets", path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    decode = lines.index("decode constants per hardware (docs/calibration.md):")
    rows = [x for x in lines[decode:] if x.startswith("myhw ")]
    titles = [x for x in lines if x.startswith(("calibrated constants", "constants set by hand"))]
    return rows[0], rows[1:], titles


def write_presets(tmp_path, **constants):
    path = str(tmp_path / "myhw.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"hardware": [dict(MYHW, **constants)]}, f)
    return path


def test_a_hand_set_decode_constant_is_from_the_preset_file(tmp_path):
    path = write_presets(tmp_path, decode_t_fix_s=0.005, train_mfu=0.4)
    decode, more, titles = presets_text(path)
    assert decode.split()[1:3] == ["5", "30"], decode
    assert decode.endswith(f"  t_fix: preset file {path}; t_seq: built in"), decode
    assert titles == ["constants set by hand (in a preset file, without calibration; -: built "
                      "in):"], titles
    assert more[0].split()[1:4] == ["5", "-", "0.4"] and more[0].endswith("  " + path), more
    r = run("presets", "--presets", path, "--json")
    hw = [h for h in json.loads(r.stdout)["hardware"] if h["name"] == "myhw"][0]
    assert (hw["calibration"], hw["origin"], hw["decode_t_fix_s"]) == ("", path, 0.005)


def test_a_calibrated_decode_constant_is_listed_as_calibrated(tmp_path):
    path = write_presets(tmp_path, decode_t_fix_s=0.005, decode_t_seq_s=4e-5,
                         calibration="libra calibrate: 5 decode points")
    decode, more, titles = presets_text(path)
    assert decode.endswith("  libra calibrate (below)"), decode
    assert titles == ["calibrated constants (libra calibrate; -: built in):"], titles
    assert more[0].split()[1:4] == ["5", "40", "-"], more
    assert more[0].endswith("  libra calibrate: 5 decode points"), more


@pytest.mark.parametrize("buckets", [[], ["--buckets", "tp1:4000,tp2:30000"]])
def test_route_eval_refuses_a_broken_update_rule_where_the_value_was_set(tmp_path, buckets):
    """With plan.mode async route eval refuses the update rules as plan does, whether or not
    --buckets spares it the planner, at the file's line and column."""
    config = tmp_path / "stale.json"
    config.write_text('{\n  "rl": {"max_staleness": 0}\n}\n')
    err = refused(run("route", "eval", no_group_trace(tmp_path), "--config", str(config),
                      "--policy", "cmlfq", *buckets))
    assert err.startswith(f"libra: {config}:2:10: rl.max_staleness: 0 is below"), err
