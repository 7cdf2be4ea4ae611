"""End-to-end tests of the files a command reads and writes (docs/cli.md, cli/main.c,
cli/cli_config.c): no output replaces an input or another output, and standard input is read
once.

- Every flag that writes a file (-o, `sim --perfetto`, `route eval --decisions`, `serve
  --capture` and `--decisions`, `emu --ports-file`) is refused, before anything runs, where it
  names an input file (an operand, a --presets, --config, --trace or --plan file) or another
  output: `emu exp.json --ports-file exp.json` replaced the experiment with the ports, `sim
  exp.json --perfetto exp.json` with the trace-event file, `serve --capture plan.json` appended
  trajectories to the plan.
- An output naming the trace that the config file or `--set workload.trace=` gives (`plan`,
  `sim`), or a file of LIBRA_PRESETS, is refused likewise, naming workload.trace or
  LIBRA_PRESETS, and the file is left as it was (the flag loop knew `--trace FILE` only: a
  trace named in the config was overwritten by the plan or the simulation's table).
- `-` (standard input) given for more than one of a command's inputs (an operand, a --presets,
  --config or --trace file, or the config's own `"trace": "-"`) is refused with exit 2 (in
  `calibrate` and `trace import` it was already): the second reader
  found standard input empty and reported "empty file" or "empty: no JSON value" about the
  wrong input. One `-` is still read, and a sweep reads a config on standard input once (each
  cell read it again: `libra sim - --seeds 2` said "empty: no JSON value").

Needs LIBRA_BIN.
"""

import json
import os
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
FAST = ["--verify", "0"]
TWICE = "'-' given twice: standard input can be read once\n"
TRACE_TWICE = "workload.trace '-': standard input is read already, and can be read once\n"


def run(*args, stdin=None, cwd=None):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120, env=env,
                          cwd=cwd, input=stdin)


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.jsonl"
    r = run("trace", "gen", "r2e-gym", "--steps", "2", "--batch", "16", "-o", str(path))
    assert r.returncode == 0, r.stderr
    return path


# ---- -o naming the config's trace --------------------------------------------------------------

SHORT = {"plan": [*FAST, "--export", "verl"], "sim": ["--set", "rl.steps=2"]}


@pytest.mark.parametrize("command", ["plan", "sim"])
@pytest.mark.parametrize("where", ["config", "set"])
def test_output_naming_the_configs_trace_is_refused(tmp_path, trace, command, where):
    exp = tmp_path / "exp.json"
    exp.write_text(json.dumps({"workload": {"trace": "t.jsonl"}}) + "\n")
    source = [str(exp)] if where == "config" else ["--set", "workload.trace=./t.jsonl"]
    before = trace.read_bytes()
    r = run(command, *source, *SHORT[command], "-o", "t.jsonl", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    named = "t.jsonl" if where == "config" else "./t.jsonl"
    assert r.stderr.startswith(
        f"libra: {command}: -o 't.jsonl' names the workload.trace file '{named}': writing it "
        "would replace the input\nusage: "), r.stderr
    assert "searched in" not in r.stderr  # refused before the planner ran
    assert trace.read_bytes() == before and r.stdout == ""
    r = run(command, *source, *SHORT[command], "-o", "out.txt", cwd=tmp_path)  # another is written
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.txt").stat().st_size > 0


# ---- standard input read once ------------------------------------------------------------------

def test_plan_refuses_config_and_trace_both_from_standard_input():
    r = run("plan", "-", "--trace", "-", stdin=json.dumps({"rl": {"steps": 3}}))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("libra: plan: " + TWICE), r.stderr
    assert r.stdout == ""


def test_plan_refuses_a_config_from_standard_input_naming_it_as_its_trace():
    doc = {"workload": {"trace": "-"}, "plan": {"verify_candidates": 0}}
    r = run("plan", "-", stdin=json.dumps(doc))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("libra: plan: " + TRACE_TWICE), r.stderr


@pytest.mark.parametrize("args", [["plan", "--presets", "-", "--presets", "-", *FAST],
                                  ["plan", "--presets", "-", "-", *FAST],
                                  ["presets", "--presets", "-", "--presets", "-"],
                                  ["sim", "--presets", "-", "-"],
                                  ["route", "eval", "-", "--config", "-", "--policy", "cmlfq"]])
def test_presets_from_standard_input_twice_are_refused(args):
    r = run(*args, stdin='{"workloads": []}\n')
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"libra: {args[0]}: " + TWICE), r.stderr
    assert "empty" not in r.stderr


def test_plan_reads_one_standard_input(trace, tmp_path):
    r = run("plan", "--trace", "-", *FAST, stdin=trace.read_text())
    assert r.returncode == 0, r.stderr
    assert "length sample: trace -, 32 trajectories" in r.stdout
    exp = tmp_path / "exp.json"
    exp.write_text(json.dumps({"workload": {"trace": "-"}}) + "\n")
    r = run("plan", str(exp), *FAST, stdin=trace.read_text())
    assert r.returncode == 0, r.stderr
    r = run("plan", "-", "--presets", "-", *FAST, stdin="{}")
    assert r.returncode == 2 and r.stderr.startswith("libra: plan: " + TWICE), r.stderr


# ---- outputs of every flag -------------------------------------------------------------------

def refused_at_once(args, cwd, env=None):
    full = dict(os.environ)
    full.pop("LIBRA_PRESETS", None)
    full.update(env or {})
    try:  # an emulator or a gateway that is not refused would serve until killed
        r = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=20, env=full,
                           cwd=cwd)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} ran instead of being refused")
    assert r.returncode == 2 and r.stdout == "", (args, r.returncode, r.stderr)
    return r.stderr


@pytest.fixture
def files(tmp_path):
    (tmp_path / "exp.json").write_text('{"rl": {"steps": 2}}\n')
    r = run("plan", "exp.json", "--json", *FAST, "-o", "plan.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return tmp_path


@pytest.mark.parametrize("args,said", [
    (["sim", "exp.json", "--perfetto", "exp.json"],
     "--perfetto 'exp.json' names the input file 'exp.json'"),
    (["emu", "exp.json", "--ports-file", "./exp.json"],
     "--ports-file './exp.json' names the input file 'exp.json'"),
    (["serve", "--plan", "plan.json", "--capture", "plan.json"],
     "--capture 'plan.json' names the --plan file 'plan.json'"),
    (["serve", "--plan", "plan.json", "--decisions", "plan.json"],
     "--decisions 'plan.json' names the --plan file 'plan.json'"),
    (["serve", "--plan", "plan.json", "--capture", "c.jsonl", "--decisions", "./c.jsonl"],
     "--capture and --decisions name one file, './c.jsonl'"),
])
def test_an_output_flag_naming_an_input_or_another_output_is_refused(files, args, said):
    before = {p.name: p.read_bytes() for p in files.iterdir()}
    err = refused_at_once(args, files)
    assert said in err and "would replace" in err, err
    assert {p.name: p.read_bytes() for p in files.iterdir()} == before


def test_perfetto_naming_the_configs_trace_or_a_libra_presets_file_is_refused(files, trace):
    (files / "t.json").write_text(json.dumps({"workload": {"trace": "t.jsonl"},
                                               "rl": {"steps": 2}}) + "\n")
    before = trace.read_bytes()
    err = refused_at_once(["sim", "t.json", "--perfetto", "t.jsonl"], trace.parent)
    assert "--perfetto 't.jsonl' names the workload.trace file 't.jsonl'" in err, err
    assert trace.read_bytes() == before
    (files / "p.json").write_text('{"hardware": []}\n')
    err = refused_at_once(["sim", "exp.json", "--perfetto", "p.json"], files,
                          env={"LIBRA_PRESETS": "p.json"})
    assert "--perfetto 'p.json' names the LIBRA_PRESETS file 'p.json'" in err, err


def test_a_sweep_reads_a_config_on_standard_input_once(files):
    args = ["--seeds", "2", "--json", "--set", "sim.modes=colocated"]
    from_file = run("sim", "exp.json", *args, cwd=files)
    from_stdin = run("sim", "-", *args, cwd=files, stdin=(files / "exp.json").read_text())
    assert from_file.returncode == 0 and from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout


@pytest.mark.parametrize("args", [("trace", "stats", "{f}", "-o", "{f}"),
                                  ("config", "show", "{f}", "-o", "{f}"),
                                  ("trace", "import", "--from", "jsonl", "{f}", "-o", "{f}")])
def test_an_output_naming_the_input_fifo_is_refused(tmp_path, args):
    """-o naming the FIFO the command reads: it waited for a writer (or read its own output)."""
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    r = subprocess.run([LIBRA, *[a.format(f=fifo) for a in args]], capture_output=True,
                       text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stderr
    assert f"-o '{fifo}' is the input '{fifo}', a pipe or FIFO: " in r.stderr, r.stderr


@pytest.mark.parametrize("args", [("trace", "stats", "-"), ("config", "show", "-")])
def test_an_output_into_the_standard_input_pipe_is_refused(args):
    """-o /dev/stdin while standard input is the input pipe: exit 0 and the result lost in a
    pipe nobody reads (a larger one would block forever)."""
    text = '{"libra_trace":1,"workload":"x"}\n' if args[0] == "trace" else "{}\n"
    r = subprocess.run([LIBRA, *args, "-o", "/dev/stdin"], input=text, capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 2, r.stderr
    assert "-o '/dev/stdin' is the input '-', a pipe or FIFO: " in r.stderr, r.stderr


def test_a_trace_waiting_for_its_output_fifos_reader_stops_on_a_signal(tmp_path):
    """trace gen -o FIFO with no reader waited to open it with the stop signals blocked: only
    SIGKILL ended it."""
    import signal
    import time
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    p = subprocess.Popen([LIBRA, "trace", "gen", "search-r1", "--steps", "1", "-o", str(fifo)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == -signal.SIGTERM
    finally:
        p.kill()
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_temporary_file_in_the_way_is_named(tmp_path):
    """-o FILE where FILE.tmp is a directory said "cannot write 'FILE': is a directory", naming a
    file that does not exist."""
    (tmp_path / "out.md.tmp").mkdir()
    r = run("config", "doc", "-o", str(tmp_path / "out.md"))
    assert r.returncode == 3, r.stderr
    assert r.stderr == (f"libra: cannot write '{tmp_path}/out.md': cannot create "
                        f"'{tmp_path}/out.md.tmp' beside it to replace it whole: "
                        "is a directory\n"), r.stderr
