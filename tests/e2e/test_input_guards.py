"""End-to-end tests of four input guards (docs/cli.md, docs/workloads.md).

- Workload presets are named as hardware and model presets are: lower case ([a-z0-9._-],
  starting with a letter or digit), an upper-case name in a preset file refused at its
  FILE:LINE:COL, a name given twice in one file refused at the second naming the first; a user
  file's name equal to a built-in replaces it, and a flag or config may write a name in any
  case while outputs carry the preset's own name.
- An integer flag or config value out of its key's range says the key's range, also when it is
  past int64 (99999999999999999999, from a flag) or written as 1e30, from a flag or from a file
  (FILE:LINE:COL); a file's integer past int64 is the JSON reader's error where it stands.
- `-o FILE` naming one of the command's own input files (an operand, or a --presets file; the
  same file by device and inode) is refused before the command runs, with exit 2, and the input
  is left as it was.
- A number given by a flag or `--set` is read as a config file's JSON writes numbers: decimal,
  without leading white space (hexadecimal such as "0x10" was read as 16).

Needs LIBRA_BIN.
"""

import json
import os
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
LOWER_CASE = "must be lower-case letters, digits, '.', '-', '_', starting with a letter or digit"


def run(*args, cwd=None):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def position(text, needle, nth=0):
    """1-based line and column of the nth occurrence of needle in text."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    line = text.count("\n", 0, i) + 1
    return line, i - (text.rfind("\n", 0, i) + 1) + 1


def workload_file(tmp_path, *presets, name="w.json"):
    """A preset file with one workload preset a line."""
    lines = ['{"workloads": [']
    lines += ["  " + json.dumps(w) + ("," if i + 1 < len(presets) else "")
              for i, w in enumerate(presets)]
    lines += ["]}"]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


# ---- workload preset names -------------------------------------------------------------------

def test_builtin_workload_presets_load():
    r = run("presets", "--json")
    assert r.returncode == 0, r.stderr
    names = [w["name"] for w in json.loads(r.stdout)["workloads"]]
    assert names == ["search-r1", "dapo-math", "dapo-math-verl", "r2e-gym", "r2e-gym-drift"]
    assert all(n == n.lower() for n in names)


@pytest.mark.parametrize("second", ["mine", "MINE"])
def test_a_workload_named_twice_in_one_file_is_refused_naming_the_first(tmp_path, second):
    path = workload_file(tmp_path, {"name": "mine", "base": "r2e-gym"},
                         {"name": second, "base": "search-r1", "prompts": 3})
    text = path.read_text()
    r = run("presets", "--presets", str(path))
    assert r.returncode == 2, r.stderr
    at = position(text, '"name"', 1)
    if second == "mine":
        first = position(text, '"name"', 0)
        assert r.stderr == (
            f"libra: {path}:{at[0]}:{at[1]}: workloads.1.name: 'mine' is defined twice in this "
            f"file, first at {first[0]}:{first[1]} (workloads.0.name)\n")
    else:  # one equal ignoring case is upper case, refused as such
        assert r.stderr == f"libra: {path}:{at[0]}:{at[1]}: workloads.1.name: 'MINE' {LOWER_CASE}\n"


@pytest.mark.parametrize("name", ["R2E-Gym", "a+b", "-x", ".x", "a b", "a/b", "x$(id)"])
def test_a_workload_name_outside_the_charset_is_refused(tmp_path, name):
    path = workload_file(tmp_path, {"name": name, "base": "r2e-gym", "prompts": 3})
    at = position(path.read_text(), '"name"')
    r = run("presets", "--presets", str(path))
    assert r.returncode == 2
    assert r.stderr == f"libra: {path}:{at[0]}:{at[1]}: workloads.0.name: '{name}' {LOWER_CASE}\n"


def test_a_user_workload_replaces_the_builtin_and_keeps_its_own_name(tmp_path):
    path = workload_file(tmp_path, {"name": "r2e-gym", "base": "R2E-GYM", "prompts": 3})
    r = run("presets", "--json", "--presets", str(path))
    assert r.returncode == 0, r.stderr
    found = [w for w in json.loads(r.stdout)["workloads"] if w["name"].lower() == "r2e-gym"]
    assert len(found) == 1 and found[0]["prompts"] == 3 and found[0]["origin"] == str(path)
    # a flag may write it in any case; outputs carry the preset's own name
    r = run("config", "show", "--json", "--presets", str(path), "--workload", "R2E-Gym")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["workload"]["name"] == "r2e-gym"
    r = run("trace", "gen", "R2E-GYM", "--presets", str(path), "--steps", "1", "--batch", "4")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0])["workload"] == "r2e-gym"


def test_a_workload_value_out_of_range_says_the_range(tmp_path):
    for value in (0, 1001, 1e30):
        path = workload_file(tmp_path, {"name": "x", "base": "r2e-gym", "max_turns": value})
        at = position(path.read_text(), '"max_turns"')
        r = run("presets", "--presets", str(path))
        assert r.returncode == 2
        assert r.stderr == (f"libra: {path}:{at[0]}:{at[1]}: workloads.0.max_turns: "
                            "out of range: must be in 1..1000\n"), value


# ---- integer ranges --------------------------------------------------------------------------

FLAG_CASES = [
    (["--gpus", "99999999999999999999"], "--gpus: must be in 1..65536"),
    (["--gpus", "-99999999999999999999"], "--gpus: must be in 1..65536"),
    (["--gpus", "1e30"], "--gpus: must be in 1..65536"),
    (["--steps", "99999999999999999999"], "--steps: must be in 1..10000000"),
    (["--batch", "99999999999999999999"], "--batch: must be in 1..1048576"),
    (["--set", "sim.seed=1e30"], "--set sim.seed: must be in 0..9007199254740991"),
    (["--set", "rl.steps=-99999999999999999999"], "--set rl.steps: must be in 1..10000000"),
    (["--set", "sim.max_seqs=1e400"], "--set sim.max_seqs: must be in 1..65536"),
    # not whole numbers: not integers, as before
    (["--gpus", "2.5"], "--gpus: must be an integer"),
    # not numbers as JSON writes them
    (["--gpus", "12x"], "--gpus: must be an integer, written as JSON writes one"),
    (["--gpus", "inf"], "--gpus: must be an integer, written as JSON writes one"),
    (["--gpus", "016"], "--gpus: must be an integer, written as JSON writes one"),
    (["--gpus", "+16"], "--gpus: must be an integer, written as JSON writes one"),
]


@pytest.mark.parametrize("flags,want", FLAG_CASES)
def test_an_integer_flag_out_of_range_says_the_keys_range(flags, want):
    r = run("plan", *flags)
    assert r.returncode == 2
    assert r.stderr == f"libra: {want}\n"


@pytest.mark.parametrize("value,want", [
    ("1e30", "cluster.gpus: must be in 1..65536"),
    ("-1e30", "cluster.gpus: must be in 1..65536"),
    ("65537", "cluster.gpus: must be in 1..65536"),
    ("8.5", "cluster.gpus: must be an integer"),
])
def test_an_integer_in_a_config_file_out_of_range_says_the_keys_range(tmp_path, value, want):
    path = tmp_path / "exp.json"
    path.write_text('{"rl": {"steps": 3},\n "cluster": {"gpus": %s}}\n' % value)
    at = position(path.read_text(), '"gpus"')
    r = run("plan", str(path))
    assert r.returncode == 2
    assert r.stderr == f"libra: {path}:{at[0]}:{at[1]}: {want}\n"
    r = run("config", "check", str(path))
    assert r.returncode == 1 and r.stderr == f"libra: {path}:{at[0]}:{at[1]}: {want}\n"


def test_an_integer_past_int64_in_a_file_is_a_parse_error_where_it_stands(tmp_path):
    path = tmp_path / "exp.json"
    path.write_text('{"cluster": {"gpus": 8, "hardware": "a800-80g"},\n'
                    ' "rl": {"steps": -99999999999999999999}}\n')
    r = run("config", "check", str(path))
    assert r.returncode == 1
    assert r.stderr.startswith(f"libra: {path}:2:") and "too big" in r.stderr, r.stderr


# ---- -o naming an input ----------------------------------------------------------------------

SMALL = {"cluster": {"gpus": 16}, "model": {"name": "qwen3-4b"},
         "workload": {"name": "dapo-math-verl"}, "rl": {"steps": 3, "batch_trajectories": 32}}


@pytest.fixture
def files(tmp_path):
    exp = tmp_path / "exp.json"
    exp.write_text(json.dumps(SMALL) + "\n")
    (tmp_path / "link.json").symlink_to("exp.json")
    r = run("trace", "gen", "dapo-math-verl", "--steps", "1", "--batch", "16", "-o",
            str(tmp_path / "t.jsonl"))
    assert r.returncode == 0, r.stderr
    r = run("sim", str(exp), "--json", "-o", str(tmp_path / "res.json"))
    assert r.returncode == 0, r.stderr
    (tmp_path / "p.json").write_text('{"workloads": [{"name": "mine", "base": "r2e-gym"}]}\n')
    return tmp_path


GUARDED = [
    (["sim", "exp.json"], "exp.json", "exp.json"),
    (["sim", "exp.json", "--json"], "./exp.json", "exp.json"),
    (["sim", "link.json"], "exp.json", "link.json"),
    (["sim", "exp.json"], "link.json", "exp.json"),
    (["plan", "exp.json", "--export", "slurm"], "exp.json", "exp.json"),
    (["plan", "exp.json", "--json"], "exp.json", "exp.json"),
    (["cost", "exp.json"], "exp.json", "exp.json"),
    (["config", "show", "exp.json"], "exp.json", "exp.json"),
    (["trace", "import", "--from", "jsonl", "t.jsonl"], "t.jsonl", "t.jsonl"),
    (["trace", "stats", "t.jsonl"], "t.jsonl", "t.jsonl"),
    (["route", "eval", "t.jsonl"], "t.jsonl", "t.jsonl"),
    (["report", "res.json"], "res.json", "res.json"),
    (["report", "exp.json", "res.json"], "res.json", "res.json"),
]


@pytest.mark.parametrize("args,out,named", GUARDED)
def test_output_naming_an_input_is_refused_before_running(files, args, out, named):
    before = {p.name: p.read_bytes() for p in files.iterdir() if not p.is_symlink()}
    r = run(*args, "-o", out, cwd=files)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(
        f"libra: {args[0]}: -o '{out}' names the input file '{named}': "
        "writing it would replace the input\nusage: "), r.stderr
    assert r.stdout == ""
    assert {p.name: p.read_bytes() for p in files.iterdir() if not p.is_symlink()} == before
    assert not list(files.glob("*.tmp"))


def test_output_naming_a_presets_file_is_refused(files):
    before = (files / "p.json").read_bytes()
    r = run("presets", "--presets", "p.json", "-o", "./p.json", cwd=files)
    assert r.returncode == 2
    assert r.stderr.startswith("libra: presets: -o './p.json' names the --presets file 'p.json'")
    assert (files / "p.json").read_bytes() == before


def test_outputs_that_are_not_inputs_are_written(files):
    # a new file, a device, and words that name no file even where a file has their name
    for args in (["sim", "exp.json", "-o", "out.txt"], ["sim", "exp.json", "-o", "/dev/null"],
                 ["trace", "gen", "dapo-math-verl", "--steps", "1", "--batch", "16", "-o",
                  "dapo-math-verl"],
                 ["trace", "gen", "dapo-math-verl", "--steps", "1", "--batch", "16", "-o",
                  "dapo-math-verl"],
                 ["cost", "calibration", "-o", "calibration"],
                 ["cost", "calibration", "-o", "calibration"],
                 ["report", "res.json", "-o", "page.html"]):
        r = run(*args, cwd=files)
        assert r.returncode == 0, (args, r.stderr)
    assert (files / "out.txt").stat().st_size > 0


def test_perfetto_and_output_keep_their_own_message(files):
    (files / "same.json").write_text("{}\n")
    r = run("sim", "exp.json", "--perfetto", "same.json", "-o", "same.json", cwd=files)
    assert r.returncode == 2
    assert "--perfetto and -o name one file, 'same.json'" in r.stderr


@pytest.mark.parametrize("perfetto,out", [("new.json", "link.json"), ("link.json", "new.json")])
def test_outputs_one_through_a_dangling_link_are_refused(files, perfetto, out):
    """A link whose target is not there yet writes that target: the two outputs are one."""
    (files / "link.json").unlink()
    (files / "link.json").symlink_to("sub/../new.json")
    (files / "sub").mkdir()
    r = run("sim", "exp.json", "--perfetto", perfetto, "-o", out, cwd=files)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert "--perfetto and -o name one file" in r.stderr, r.stderr
    assert not (files / "new.json").exists()


# ---- numbers as a config file writes them ------------------------------------------------------

@pytest.mark.parametrize("args,want", [
    (["cost", "--tp", " 4"], "--tp: expected an integer"),
    (["emu", "--time-scale", "0x10"], "--time-scale: expected a number in [1e-06, 1e+06], "
     "not '0x10'"),
    (["serve", "--engine", "http://127.0.0.1:9", "--grace-s", " 1"], "--grace-s: expected a "
     "number"),
    (["plan", "--set", "plan.time_limit_s=0x10"], "plan.time_limit_s: must be a finite number"),
    (["plan", "--set", "plan.time_limit_s=0x1p3"], "plan.time_limit_s: must be a finite number"),
    (["trace", "import", "--from", "openai-chat", "--chars-per-token", "0x10", "x.jsonl"],
     "--chars-per-token: expected a number in [0.01, 1000], not '0x10'"),
])
def test_a_number_flag_is_read_as_a_config_file_writes_numbers(args, want):
    """strtoll and strtod also read leading white space, hexadecimal ("0x10" was 16) and "inf":
    a flag or --set value is a number as a file's JSON has it, or refused, before anything runs
    (an emulator or a gateway that took the value would serve until killed)."""
    try:
        r = run(*args)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} ran instead of being refused")
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
    assert want in r.stderr, r.stderr


def test_a_diagnostic_echoes_control_bytes_escaped():
    """An error echoes what was given; a control byte in it (an escape sequence) is written
    as \\xHH, never raw to the terminal."""
    r = run("sim", "--workload", "a\x1b[31mred")
    assert r.returncode == 2 and "\x1b" not in r.stderr, r.stderr
    assert "'a\\x1b[31mred'" in r.stderr, r.stderr
