"""End-to-end tests of input guards of `libra calibrate`, `libra route eval` and `libra trace
import` (docs/calibrate.md, docs/routing.md, docs/trace-format.md, docs/cli.md).

- `route eval --decisions FILE` naming one of the command's input files (the trace, the
  --config or a --presets file; by device and inode) or the -o file is refused before the run,
  with exit 2, and the input is left as it was.
- A `libra serve` capture given to `libra calibrate` as `-` is read from standard input as a
  capture file is.
- A verl log's perf/throughput and perf/time_per_step must be numbers > 0, and the GPU count they
  give must be one the gpus option could give (1..2^20); otherwise the error names the metric or
  the figure, not "the log gives no GPU count".
- An input's options after a comma are whole: `FILE,` (a trailing comma) is refused.
- `--name` without `-o` (no preset is written for it to name) is refused.
- A verl step or Megatron-LM iteration number past int64 is refused at its column, not read as
  the largest int64.
- `trace import` refusing a trajectory whose rows are not contiguous names the file and line of
  its earlier last row, also when that row is in an earlier input file.
- `-` (standard input) given twice to `calibrate` or `trace import` is refused: the second read
  would find nothing, and a CSV without rows would be reported as having no header.
- `trace import` refuses `--workload`, `--model` and a tool-status list that are not valid UTF-8
  (the header would be a line no command can read, or the list would lose the member), naming
  the flag, and a list that gives a text twice, as the config's lists do.
- `calibrate --name` is refused (naming the flag) unless a preset can have it: past 47 bytes it
  was cut, and the `--hardware` name printed then named no preset.
- A bad value (a flag's, an input's option, a workload preset) is named without the usage line,
  which docs/cli.md keeps for flag errors; `trace` without a subcommand says it is missing.
- `trace import --from csv` reads numbers as JSON writes them (no `+1`, `.5`, `1.`, `01`), as
  `--from jsonl` does; `--from verl` refuses a step 0 (verl's steps count from 1); a verl log
  whose only step line has no step number is refused at it, not as an unknown input; a
  tau-bench or SWE-agent document past the 1 GiB whole-file limit says so (a regular file by
  its size, unread).

Needs LIBRA_BIN.
"""

import json
import os
import shutil
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE = os.environ.get("LIBRA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CALIB = os.path.join(SOURCE, "tests", "data", "calibrate")
SMALL = os.path.join(SOURCE, "tests", "data", "trace", "small.jsonl")
VERL_LINE = ("(TaskRunner pid=1) step:1 - response_length/mean:1000.0 - prompt_length/mean:200.0"
             " - timing_s/update_actor:15.56 - perf/total_num_tokens:1228800"
             " - perf/time_per_step:110.56 - perf/throughput:{thr}\n")


def run(*args, stdin=None, cwd=None):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd, stdin=stdin)


# ---- route eval --decisions ------------------------------------------------------------------

@pytest.mark.parametrize("which", ["trace", "config", "presets", "output"])
def test_route_decisions_naming_an_input_or_the_output_is_refused(tmp_path, which):
    trace = tmp_path / "t.jsonl"
    shutil.copy(SMALL, trace)
    config = tmp_path / "exp.json"
    config.write_text("{}\n")
    presets = tmp_path / "p.json"
    presets.write_text('{"hardware": []}\n')
    out = tmp_path / "report.txt"
    target = {"trace": trace, "config": config, "presets": presets, "output": out}[which]
    before = {p: p.read_bytes() for p in (trace, config, presets)}
    r = run("route", "eval", str(trace), "--policy", "cmlfq", "--buckets", "tp1:4000,tp2:30000",
            "--config", str(config), "--presets", str(presets), "-o", str(out),
            "--decisions", str(target if which == "output" else tmp_path / "." / target.name))
    assert r.returncode == 2, r.stderr
    assert "--decisions" in r.stderr and "would replace" in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in before} == before
    assert r.stdout == ""


def test_route_decisions_to_another_file_is_written(tmp_path):
    trace = tmp_path / "t.jsonl"
    shutil.copy(SMALL, trace)
    r = run("route", "eval", str(trace), "--policy", "cmlfq", "--buckets", "tp1:4000,tp2:30000",
            "--decisions", str(tmp_path / "d.jsonl"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "d.jsonl").read_text().startswith('{"trajectory": ')


# ---- calibrate: a capture on standard input -----------------------------------------------------

def test_calibrate_reads_a_capture_from_standard_input():
    path = os.path.join(CALIB, "capture.jsonl")
    by_name = run("calibrate", path, "--model", "qwen3-4b", "--json")
    assert by_name.returncode == 0, by_name.stderr
    with open(path) as f:
        by_stdin = run("calibrate", "-", "--model", "qwen3-4b", "--json", stdin=f)
    assert by_stdin.returncode == 0, by_stdin.stderr
    assert by_stdin.stdout.replace('"-"', '"%s"' % path) == by_name.stdout


# ---- calibrate: verl's GPU count -----------------------------------------------------------------

@pytest.mark.parametrize("thr", ["0", "-5", "np.float64(-1.0)"])
def test_calibrate_verl_throughput_must_be_positive(tmp_path, thr):
    log = tmp_path / "v.log"
    text = VERL_LINE.format(thr=thr)
    log.write_text(text)
    r = run("calibrate", str(log), "--model", "qwen2.5-7b")
    assert r.returncode == 2, r.stderr
    col = text.index("perf/throughput:") + len("perf/throughput:") + 1
    assert r.stderr.startswith(f"libra: {log}:1:{col}: perf/throughput: expected a number > 0"), \
        r.stderr


@pytest.mark.parametrize("thr,gpus", [("1e-300", "1.11e+304"), ("2.2e-6", "5.05e+09"),
                                      ("1e9", "1.11e-05")])
def test_calibrate_verl_gpu_count_out_of_range_is_named(tmp_path, thr, gpus):
    log = tmp_path / "v.log"
    log.write_text(VERL_LINE.format(thr=thr))
    r = run("calibrate", str(log), "--model", "qwen2.5-7b")
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        f"libra: {log}:1: step 1: perf/total_num_tokens / (perf/throughput × "
        f"perf/time_per_step) gives {gpus} GPUs, not 1 to 1048576; give the count as "
        f"FILE,gpus=N\n"), r.stderr


def test_calibrate_verl_gpus_option_overrides_an_odd_throughput(tmp_path):
    log = tmp_path / "v.log"
    log.write_text(VERL_LINE.format(thr="1e-300"))
    r = run("calibrate", f"{log},gpus=32", "--model", "qwen2.5-7b", "--json")
    assert r.returncode == 0, r.stderr


# ---- calibrate: an input's options ---------------------------------------------------------------

def test_calibrate_input_with_a_trailing_comma_is_refused():
    r = run("calibrate", "vllm-c1.json,", "vllm-c8.json", "--model", "qwen2.5-7b", cwd=CALIB)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(
        "libra: calibrate: input 'vllm-c1.json,': an option is empty (a trailing comma)\n"), \
        r.stderr


def test_calibrate_name_without_the_preset_file_is_refused():
    """--name names the preset -o writes; without -o it named nothing (and was not checked)."""
    r = run("calibrate", "vllm-c1.json", "vllm-c8.json", "--model", "qwen2.5-7b", "--name",
            "BAD NAME", cwd=CALIB)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.startswith(
        "libra: calibrate: --name names the preset that -o writes: give -o PRESETS\n"), r.stderr


# ---- calibrate: step numbers ---------------------------------------------------------------------

def test_calibrate_verl_step_past_int64_is_refused(tmp_path):
    log = tmp_path / "v.log"
    log.write_text(VERL_LINE.format(thr="347.3227").replace("step:1 ",
                                                            "step:99999999999999999999 "))
    r = run("calibrate", str(log), "--model", "qwen2.5-7b")
    assert r.returncode == 2, r.stderr
    col = log.read_text().index("step:") + 1
    assert r.stderr == f"libra: {log}:1:{col}: step: number too long\n"


def test_calibrate_megatron_iteration_past_int64_is_refused(tmp_path):
    with open(os.path.join(CALIB, "megatron.log")) as f:
        lines = f.read().split("\n")
    at = next(i for i, s in enumerate(lines) if "iteration       20/" in s)
    lines[at] = lines[at].replace("iteration       20/", "iteration 99999999999999999999/")
    log = tmp_path / "m.log"
    log.write_text("\n".join(lines))
    r = run("calibrate", str(log), "--model", "qwen2.5-7b")
    assert r.returncode == 2, r.stderr
    col = lines[at].index("iteration ") + len("iteration ") + 1
    assert r.stderr == f"libra: {log}:{at + 1}:{col}: iteration: number too long\n"


# ---- trace import: a trajectory's rows in two files ----------------------------------------------

def test_trace_import_names_where_a_repeated_trajectory_ended(tmp_path):
    row = ('{"traj_id":"r0","step":0,"prompt_id":7,"turn":0,"prompt_tokens":8,'
           '"generated_tokens":4}\n')
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(row.replace('"turn":0', '"turn":0,"tool":"bash","status":"success",'
                             '"payload_tokens":1') + row.replace('"turn":0', '"turn":1'))
    b.write_text(row)
    r = run("trace", "import", "--from", "jsonl", str(a), str(b), "-o", str(tmp_path / "t.jsonl"))
    assert r.returncode == 2, r.stderr
    assert r.stderr == (f"libra: {b}:1:2: traj_id: rows of 'r0' are not contiguous (its last "
                        f"row was at {a}:2)\n")
    assert not (tmp_path / "t.jsonl").exists()


# ---- standard input given twice ------------------------------------------------------------------

def test_calibrate_refuses_standard_input_twice():
    with open(os.path.join(CALIB, "vllm-c1.json")) as f:
        r = run("calibrate", "-", "vllm-c8.json", "-", "--model", "qwen2.5-7b", stdin=f,
                cwd=CALIB)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(
        "libra: calibrate: '-' given twice: standard input can be read once\n"), r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_trace_import_refuses_standard_input_twice(tmp_path, fmt):
    src = os.path.join(SOURCE, "tests", "data", "trace", "turns." + fmt)
    out = tmp_path / "t.jsonl"
    with open(src) as f:
        r = run("trace", "import", "--from", fmt, "-", "-", "-o", str(out), stdin=f)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(
        "libra: trace: '-' given twice: standard input can be read once\n"), r.stderr
    assert not out.exists()


@pytest.mark.parametrize("args", [("presets", "--presets", "{f}", "--presets", "{f}"),
                                  ("trace", "import", "--from", "jsonl", "{f}", "{f}"),
                                  ("config", "check", "/dev/stdin", "--presets", "-")])
def test_a_stream_named_twice_is_refused_not_read_twice(tmp_path, args):
    """A FIFO or pipe named twice (standard input as '-' and /dev/stdin too) was opened again
    after its writer had gone: the second read hung, or found it empty and blamed the file."""
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    r = run(*[a.format(f=fifo) for a in args], stdin=subprocess.PIPE)  # stdin: a pipe
    assert r.returncode == 2, r.stderr
    assert "are one stream (a pipe or FIFO): it can be read once\n" in r.stderr, r.stderr


# ---- trace import: header text a trace cannot hold -----------------------------------------------

TURNS = os.path.join(SOURCE, "tests", "data", "trace", "turns.jsonl")
CHAT = os.path.join(SOURCE, "tests", "data", "trace", "openai-chat", "sample.jsonl")


@pytest.mark.parametrize("fmt,flag,value,why", [
    ("jsonl", "--workload", b"r\xffx", "must be valid UTF-8"),
    ("jsonl", "--model", b"q\xc3", "must be valid UTF-8"),
    ("openai-chat", "--failure-text", b"Error,x\xff", "must be valid UTF-8"),
    ("openai-chat", "--timeout-text", b"\xed\xa0\x80", "must be valid UTF-8"),  # a surrogate
    ("openai-chat", "--timeout-text", b"a,a", "'a' is listed twice"),
    ("openai-chat", "--exit-code-pattern", b"rc=,exit code,rc=", "'rc=' is listed twice"),
])
def test_trace_import_refuses_header_text_it_cannot_write(tmp_path, fmt, flag, value, why):
    """Non-UTF-8 names went into the header as they were (a trace no command could read); a
    list's non-UTF-8 member was left out of the header's import object without a word."""
    out = tmp_path / "t.jsonl"
    r = run("trace", "import", "--from", fmt, TURNS if fmt == "jsonl" else CHAT, flag,
            os.fsdecode(value), "-o", str(out))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"libra: trace: {flag}: {why}"), r.stderr
    assert not out.exists()


def test_trace_import_keeps_utf8_header_text(tmp_path):
    out = tmp_path / "t.jsonl"
    r = run("trace", "import", "--from", "openai-chat", CHAT, "--workload", "r\u00e9sum\u00e9",
            "--model", "\u6a21\u578b", "--failure-text", "Error,\u00e9chec", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert run("trace", "validate", str(out)).returncode == 0
    with open(out, encoding="utf-8") as f:
        header = json.loads(f.readline())
    assert (header["workload"], header["model"]) == ("r\u00e9sum\u00e9", "\u6a21\u578b")
    assert header["import"]["failure_text"] == ["Error", "\u00e9chec"]


# ---- calibrate --name: a name the presets can hold ---------------------------------------------

PRESET_NAME_RULE = ("must be lower-case letters, digits, '.', '-', '_', starting with a letter or "
                    "digit")


@pytest.mark.parametrize("name,why", [
    ("b" * 48, "must be shorter than 48 bytes"),
    ("b" * 60, "must be shorter than 48 bytes"),
    ("Abc", f"'Abc' {PRESET_NAME_RULE}"),
    ("a b", f"'a b' {PRESET_NAME_RULE}"),
    ("-x", f"'-x' {PRESET_NAME_RULE}"),
])
def test_calibrate_refuses_a_name_no_preset_can_have(tmp_path, name, why):
    """A name past 47 bytes was cut to 47 in the preset, so the `--hardware NAME` it printed
    was refused; a bad value is named without the usage line (docs/cli.md)."""
    out = tmp_path / "y.json"
    r = run("calibrate", "vllm-c1.json", "vllm-c8.json", "--model", "qwen2.5-7b", "--name", name,
            "-o", str(out), cwd=CALIB)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == f"libra: calibrate: --name: {why}\n"
    assert not out.exists()


def test_calibrate_name_of_47_bytes_is_the_preset_cost_finds(tmp_path):
    out, name = tmp_path / "y.json", "b" * 47
    r = run("calibrate", "vllm-c1.json", "vllm-c8.json", "--model", "qwen2.5-7b", "--name", name,
            "-o", str(out), cwd=CALIB)
    assert r.returncode == 0, r.stderr
    r = run("cost", "--presets", str(out), "--hardware", name, "--model", "qwen2.5-7b")
    assert r.returncode == 0, r.stderr


# ---- bad values say why without the usage line ------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (("trace", "import", "--from", "openai-chat", "--timeout-text", "a,,b", CHAT),
     "libra: trace: --timeout-text: an empty or blank text in 'a,,b' would match every output"),
    (("trace", "import", "--from", "jsonl", "--workload", "a\tb", TURNS),
     "libra: trace: --workload: must not hold control characters"),
    (("trace", "import", "--from", "xml", TURNS), "libra: trace: --from: expected jsonl, csv"),
    (("calibrate", "v.log,gpus=0"),
     "libra: calibrate: input 'v.log,gpus=0': gpus: expected an integer in 1..1048576"),
    (("calibrate", "vllm-c1.json", "vllm-c8.json", "--model", "qwen2.5-7b", "--hold", "t_fix"),
     "libra: calibrate: --hold: unknown constant 't_fix'"),
    (("calibrate", "vllm-c1.json,tp=3", "--model", "qwen2.5-7b"),
     "libra: calibrate: input 'vllm-c1.json,tp=3': tp 3 does not divide"),
    (("trace", "gen", "nosuch"), "libra: trace: unknown workload preset 'nosuch'"),
    (("trace", "gen", "r2e-gym", "--batch", "30"),
     "libra: trace: --batch 30 is not a multiple of --samples 4"),
])
def test_a_bad_value_prints_no_usage_line(args, message):
    r = run(*args, cwd=CALIB)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.startswith(message) and "usage:" not in r.stderr, r.stderr


@pytest.mark.parametrize("args,message", [
    ((), "libra: trace: no subcommand: expected validate, stats, import or gen\n"),
    (("",), "libra: trace: an empty subcommand: expected validate, stats, import or gen\n"),
])
def test_trace_without_a_subcommand_says_so(args, message):
    r = run("trace", *args)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.startswith(message) and r.stderr.count("usage:") == 1, r.stderr


# ---- trace import: numbers, steps and whole documents ------------------------------------------

@pytest.mark.parametrize("column,value", [
    ("reward", "1."), ("reward", ".5"), ("reward", "+1"), ("reward", "01"), ("reward", "00.5"),
    ("reward", "1.e5"), ("generated_tokens", "01"), ("prompt_tokens", "00"),
])
def test_trace_import_csv_numbers_are_written_as_json_writes_them(tmp_path, column, value):
    """docs/trace-format.md: a number as JSON writes one, as `--from jsonl` reads it."""
    row = {"traj_id": "r0", "turn": "0", "prompt_tokens": "10", "generated_tokens": "5",
           "step": "0", "prompt_id": "0", "reward": "0.5"}
    row[column] = value
    table = tmp_path / "r.csv"
    table.write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n")
    r = run("trace", "import", "--from", "csv", str(table))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    kind = "a number" if column == "reward" else "an integer"
    assert f": {column}: expected {kind}, got '{value}'" in r.stderr, r.stderr


def test_trace_import_csv_reads_json_numbers(tmp_path):
    table = tmp_path / "r.csv"
    table.write_text("traj_id,turn,prompt_tokens,generated_tokens,step,prompt_id,reward\n"
                     "r0,0,10,5,0,0,-0.5e1\nr1,0,0,5,0,0,1E3\n")
    r = run("trace", "import", "--from", "csv", str(table))
    assert r.returncode == 0, r.stderr
    rewards = [json.loads(line)["reward"] for line in r.stdout.splitlines()[1:]]
    assert rewards == [-5.0, 1000.0]


def test_trace_import_verl_refuses_step_zero(tmp_path):
    """verl numbers training steps from 1 (version_start = step - 1); a 0.jsonl is validation's."""
    dump = tmp_path / "v0.jsonl"
    dump.write_text('{"input":"a","output":"b","step":0}\n')
    r = run("trace", "import", "--from", "verl", str(dump))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.startswith(f"libra: {dump}:1:27: step: expected an integer >= 1"), r.stderr


def test_calibrate_verl_log_of_one_bad_step_is_refused_at_the_step(tmp_path):
    """The only step line's step is not a number: the log is still verl's, and said so."""
    log = tmp_path / "v.log"
    log.write_text(VERL_LINE.format(thr="347.3227").replace("step:1 ", "step:-1 "))
    r = run("calibrate", str(log))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"libra: {log}:1:20: step: expected a step number (digits) before "
                               "' - ', got '-1'"), r.stderr


@pytest.mark.parametrize("fmt", ["swe-agent", "tau-bench"])
def test_trace_import_document_past_the_whole_file_limit(tmp_path, fmt):
    """A document read whole holds at most 1 GiB (docs/cli.md); a sparse file one byte past it
    is refused by its size, unread."""
    doc = tmp_path / "big.json"
    with open(doc, "wb") as f:
        f.truncate((1 << 30) + 1)
    r = run("trace", "import", "--from", fmt, str(doc))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == (f"libra: {doc}: larger than 1073741824 bytes, the most a file read "
                        "whole may hold\n")
