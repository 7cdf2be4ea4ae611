"""End-to-end tests of unusual inputs to `libra trace`, preset files and `libra config`
(docs/cli.md, docs/trace-format.md, docs/config.md).

- `trace import --from csv` reads a `reward` cell as a decimal number, as JSON writes one:
  hexadecimal (`0x10`, which C's strtod reads as 16), blanks around it and what JSON does not
  write (`+1`, `.5`, `1.`, `01`) are refused naming the cell, as `--from jsonl` refuses them.
- A NUL byte in a CSV line is refused at its column: it would end the cell's text, so two
  trajectory ids that differ after it (`r<NUL>a`, `r<NUL>b`) were read as one.
- A trace trajectory longer than 2^32 tokens (a trace holds up to 2^40 of each kind) makes
  `libra sim` refuse the training layout rather than crash: its length was cut to 32 bits,
  to 0 where it is a multiple of 2^32.
- Nodes of 64 GPUs (a preset's `gpus_per_node` or `cluster.gpus_per_node`, both up to 64) are
  planned and verified without writing past the TP pattern the verification pins (a sanitizer
  build reports it; the others corrupt the config beside it).
- `sim.fail_time_s` is -1 (never) or a time >= 0; a value between them, which acted as never,
  is refused naming the key.

- A zero-filled line (what a crash can leave in a file) is refused by its NUL byte, by the
  trace reader and by `trace import` (which skipped it as blank, losing its rows unseen).

Needs LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import json
import os

import pytest
from cli_run import refused, run

SMALL = ("--model", "qwen3-4b", "--batch", "8", "--steps", "2")
DATA = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "tests", "data", "trace")
CSV_HEADER = "traj_id,step,prompt_id,turn,prompt_tokens,generated_tokens"


def clean(r):
    """No sanitizer report and no signal, whatever the exit."""
    assert r.returncode >= 0, (r.returncode, r.stderr)
    assert "runtime error" not in r.stderr and "Sanitizer" not in r.stderr, r.stderr


# ---- trace import --from csv ------------------------------------------------------------------

@pytest.mark.parametrize("reward", ["0x10", "0x1p3", " 1", "1 ", "+1", ".5", "1.", "01"])
def test_csv_reward_not_written_as_a_decimal_number_is_refused(tmp_path, reward):
    path = tmp_path / "t.csv"
    path.write_text(f"{CSV_HEADER},reward\nr0,0,1,0,10,5,{reward}\n")
    err = refused(run("trace", "import", "--from", "csv", str(path)))
    assert err.startswith(f"libra: {path}:2:15: reward: expected a number, got '{reward}'"), err


@pytest.mark.parametrize("reward,want", [("1e3", 1000.0), ("-0.25", -0.25), ("1", 1.0),
                                         ("0.5", 0.5)])
def test_csv_decimal_rewards_are_taken(tmp_path, reward, want):
    path = tmp_path / "t.csv"
    path.write_text(f"{CSV_HEADER},reward\nr0,0,1,0,10,5,{reward}\n")
    r = run("trace", "import", "--from", "csv", str(path))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[1])["reward"] == want


def test_csv_nul_byte_is_refused_where_it_stands(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(f"{CSV_HEADER},tool,status,payload_tokens\n".encode()
                     + b"r\0a,0,1,0,10,5,bash,success,1\nr\0b,0,1,1,10,5,,,\n")
    out = tmp_path / "out.jsonl"
    err = refused(run("trace", "import", "--from", "csv", str(path), "-o", str(out)))
    assert err.startswith(f"libra: {path}:2:2: a NUL byte"), err
    assert not out.exists()


ZEROS = b"\0" * 64 + b"\n"  # what a crash can leave of a block of a file: zeros


def with_zeros(src, at):
    """src's lines with a zero-filled one inserted before line `at` (1-based)."""
    lines = open(src, "rb").read().splitlines(keepends=True)
    return b"".join(lines[:at - 1]) + ZEROS + b"".join(lines[at - 1:])


@pytest.mark.parametrize("fmt,name", [("jsonl", "turns.jsonl"), ("csv", "turns.csv")])
def test_import_refuses_a_zero_filled_line(tmp_path, fmt, name):
    """A line of NUL bytes was skipped as blank (C's strchr finds the NUL terminator in any set
    of characters), so its rows were lost without a word."""
    path = tmp_path / name
    path.write_bytes(with_zeros(f"{DATA}/{name}", 3))
    out = tmp_path / "out.jsonl"
    err = refused(run("trace", "import", "--from", fmt, str(path), "-o", str(out)))
    assert err.startswith(f"libra: {path}:3:1: a NUL byte"), err
    assert not out.exists()


def test_trace_reader_names_a_zero_filled_line_by_its_nul_byte(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(with_zeros(f"{DATA}/small.jsonl", 3))
    r = run("trace", "validate", str(path))
    assert r.returncode == 1 and r.stderr.startswith(f"libra: {path}:3:1: a NUL byte"), r.stderr


# ---- traces of very long trajectories ---------------------------------------------------------

@pytest.mark.parametrize("prompt,generated", [(2 ** 40, 2 ** 40), (2 ** 32 - 50, 50)])
def test_sim_on_a_trace_of_trajectories_past_32_bit_lengths_refuses_the_layout(tmp_path, prompt,
                                                                              generated):
    path = tmp_path / "long.jsonl"
    lines = [json.dumps({"libra_trace": 1, "workload": "search-r1", "group_size": 4})]
    lines += [json.dumps({"step": 0, "prompt_id": 1, "epoch": 0, "sample": s,
                          "version_start": 0, "finish": "completed",
                          "turns": [{"prompt_tokens": prompt, "generated_tokens": generated}]})
              for s in range(4)]
    path.write_text("\n".join(lines) + "\n")
    assert run("trace", "validate", str(path)).returncode == 0
    r = run("sim", "--trace", str(path), "--gpus", "16", "--model", "qwen3-4b", "--samples", "4",
            "--batch", "4", "--steps", "1", "--set", "sim.modes=colocated,async")
    clean(r)
    err = refused(r, 1)
    assert "no training layout" in err and "exceeds every micro-batch" in err, err


# ---- nodes of 64 GPUs -------------------------------------------------------------------------

HARDWARE_64 = {
    "name": "wide", "bf16_flops_per_s": 1e15, "hbm_bytes": 8e10, "hbm_bw_bytes_per_s": 2e12,
    "nvlink_bw_bytes_per_s": 4e11, "allreduce_bus_bw_bytes_per_s": 2e11,
    "allreduce_latency_s": 2e-5, "inter_node_bw_bytes_per_s": 2.5e10, "gpus_per_node": 64,
}


@pytest.mark.parametrize("command", ["plan", "sim"])
@pytest.mark.parametrize("where", ["preset", "config"])
def test_nodes_of_64_gpus_plan_and_verify_cleanly(tmp_path, command, where):
    if where == "preset":
        presets = tmp_path / "p.json"
        presets.write_text(json.dumps({"hardware": [HARDWARE_64]}))
        args, env = ("--hardware", "wide"), {"LIBRA_PRESETS": str(presets)}
    else:
        args, env = ("--set", "cluster.gpus_per_node=64"), None
    r = run(command, "--gpus", "64", *SMALL, *args, "--json", env=env)
    clean(r)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["config_digest"]


# ---- sim.fail_time_s --------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["-0.5", "-1e-9", "-0.999"])
def test_a_failure_time_between_never_and_zero_is_refused(tmp_path, value):
    path = tmp_path / "x.json"
    path.write_text('{"sim": {"fail_time_s": %s}}\n' % value)
    err = refused(run("config", "check", str(path)), 1)
    assert err.startswith(f"libra: {path}:1:10: sim.fail_time_s: "), err
    assert "neither -1 (never) nor a time >= 0" in err, err
    err = refused(run("sim", *SMALL, "--set", f"sim.fail_time_s={value}"))
    assert err.startswith("libra: --set sim.fail_time_s: "), err


@pytest.mark.parametrize("value", ["-1", "-1.0", "0", "-0"])
def test_never_and_time_zero_are_taken(tmp_path, value):
    path = tmp_path / "x.json"
    path.write_text('{"sim": {"fail_time_s": %s}}\n' % value)
    r = run("config", "check", str(path))
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


# ---- config check of a config naming a trace ----------------------------------------------------

def test_config_check_refuses_the_trace_plan_and_sim_refuse(tmp_path):
    """check said ok of a trace whose groups are not rl.samples (plan and sim exit 2) and of a
    trace that does not exist (plan exits 3): it now reads the trace as they do."""
    trace = tmp_path / "g.jsonl"
    assert run("trace", "gen", "search-r1", "--steps", "2", "--batch", "8", "--samples", "2",
               "-o", str(trace)).returncode == 0
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"workload": {"trace": str(trace)}}))
    for cmd in (("plan", str(config), "--verify", "0"), ("sim", str(config), "--steps", "2")):
        assert run(*cmd).returncode == 2
    r = run("config", "check", str(config))
    assert r.returncode == 1 and "group_size), not rl.samples = 4" in r.stderr, r.stderr
    assert run("config", "show", str(config)).returncode == 2
    assert run("config", "check", str(config), "--samples", "2").returncode == 0
    config.write_text(json.dumps({"workload": {"trace": str(tmp_path / "none.jsonl")}}))
    r = run("config", "check", str(config))
    assert r.returncode == 3 and "none.jsonl" in r.stderr, r.stderr


def test_a_groups_error_names_the_key_the_file_gives(tmp_path):
    """A file's rl.samples not dividing the preset's batch blamed rl.batch_trajectories, which
    the file does not hold, without the file or a position."""
    config = tmp_path / "s3.json"
    config.write_text('{"rl": {"samples": 3}}\n')
    for cmd, code in ((("config", "check"), 1), (("plan",), 2)):
        r = run(*cmd, str(config))
        assert r.returncode == code, r.stderr
        assert r.stderr.startswith(
            f"libra: {config}:1:9: rl.samples: 3 does not divide rl.batch_trajectories (32, "
            "from workload preset 'r2e-gym'): training takes whole groups"), r.stderr
