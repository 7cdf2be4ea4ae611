"""End-to-end tests of how `libra trace import` reports bad input (docs/trace-format.md,
"Importing" and "Errors").

- `-o` naming a file that an input expands to (a verl dump directory's `{step}.jsonl`) is
  refused as `-o` naming an input file given by name is, and the input is left as it was.
- A file of a verl dump directory given again names the directory as the input holding it.
- Every check of a verl trajectory (the `--samples` rule too) is reported at FILE:LINE:COL.
- A missing key inside a nested object is reported at the line and column of the object that
  lacks it (tau-bench, swe-agent, openai-chat).
- A CSV cell holds an integer exactly as a JSON number does: `10.0` and `1e1` are 10, `+1`,
  `01` and `1.5` are refused.
- A verl row whose `step` differs from its `{step}.jsonl` file's name is refused, naming both.

Needs LIBRA_BIN.
"""

import json
import os
import re
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]


def run(*args, cwd=None):
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def verl_row(step, text="x", output="a"):
    return json.dumps({"input": text, "output": output, "step": step}) + "\n"


def records(stdout):
    """The trajectory records of a trace printed on stdout (the header dropped)."""
    return [json.loads(x) for x in stdout.splitlines()[1:]]


# ---- -o and the files of a dump directory ------------------------------------------------------


def test_output_naming_a_file_of_a_dump_directory_is_refused(tmp_path):
    """-o naming a {step}.jsonl that a verl dump directory expands to is refused (exit 2) and
    the dump is left as it was."""
    dump = tmp_path / "d"
    dump.mkdir()
    row = '{"input":"q","output":"a","score":1.0,"step":1}\n'
    (dump / "1.jsonl").write_text(row)
    r = run("trace", "import", "--from", "verl", str(dump), "-o", str(dump / "1.jsonl"))
    assert r.returncode == 2, r.stderr
    assert "writing it would replace the input" in r.stderr
    assert f"'{dump / '1.jsonl'}'" in r.stderr
    assert (dump / "1.jsonl").read_text() == row


def test_file_of_a_dump_directory_given_again_names_the_directory(tmp_path):
    """A dump file given after its directory is refused naming the directory as the input that
    already holds it."""
    (tmp_path / "vd5").mkdir()
    (tmp_path / "vd5" / "1.jsonl").write_text(verl_row(1))
    r = run("trace", "import", "--from", "verl", "vd5", "vd5/1.jsonl", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "input 'vd5/1.jsonl'" in r.stderr
    assert "input 'vd5'" in r.stderr, r.stderr


# ---- verl: every check at its row ---------------------------------------------------------------


def test_verl_samples_rule_is_reported_at_the_row(tmp_path):
    """A verl sample past --samples is refused at FILE:LINE:COL of the row it came from."""
    dump = tmp_path / "v1.jsonl"
    dump.write_text(verl_row(1) + verl_row(1))
    r = run("trace", "import", "--from", "verl", str(dump), "--samples", "1")
    assert r.returncode == 2, r.stderr
    assert f"libra: {dump}:2:1: sample: 1 is not below the header's group_size 1" in r.stderr
    assert r.stdout == ""


def test_verl_row_checks_name_the_row_in_a_later_file(tmp_path):
    """The trajectory check names the file and line the failing row is on, also when it is not
    the first file's."""
    dump = tmp_path / "d"
    dump.mkdir()
    (dump / "1.jsonl").write_text(verl_row(1))
    (dump / "2.jsonl").write_text(verl_row(2, "y") + verl_row(2, "y"))
    r = run("trace", "import", "--from", "verl", str(dump), "--samples", "1")
    assert r.returncode == 2, r.stderr
    assert f"libra: {dump}/2.jsonl:2:1: sample: 1 is not below" in r.stderr


# ---- missing keys in nested objects -------------------------------------------------------------


@pytest.mark.parametrize("fmt,name,text,where", [
    ("tau-bench", "nm.json", '[{"task_id":1,"trial":0,"traj":[{"content":"x"},'
     '{"role":"assistant","content":"a"}]}]\n', "1:33: 0.traj.0.role"),
    ("swe-agent", "nm.traj", '{"trajectory":[{"observation":"x","response":"r"}],"history":[],'
     '"info":{}}\n', "1:16: trajectory.0.action"),
])
def test_a_missing_key_points_at_the_object_lacking_it(tmp_path, fmt, name, text, where):
    """A tau-bench message without a role, a SWE-agent step without an action: reported at the
    line and column of the object that lacks the key."""
    doc = tmp_path / name
    doc.write_text(text)
    r = run("trace", "import", "--from", fmt, str(doc))
    assert r.returncode == 2, r.stderr
    assert f"libra: {doc}:{where}: missing" in r.stderr


def test_tau_bench_missing_key_on_a_later_line(tmp_path):
    """In a pretty-printed tau-bench document the line is the one of the object lacking the
    key."""
    runs = [{"task_id": 1, "trial": 0,
             "traj": [{"role": "user", "content": "q"}, {"content": "x"}]}]
    doc = tmp_path / "pretty.json"
    doc.write_text(json.dumps(runs, indent=1) + "\n")
    text = doc.read_text().splitlines()
    line = next(i for i, x in enumerate(text, 1) if '"x"' in x) - 1
    col = text[line - 1].index("{") + 1
    r = run("trace", "import", "--from", "tau-bench", str(doc))
    assert r.returncode == 2, r.stderr
    assert f"libra: {doc}:{line}:{col}: 0.traj.1.role: missing" in r.stderr


def test_openai_chat_missing_function_name_points_at_the_function(tmp_path):
    """A tool call whose function lacks its name is reported at the function object, not at
    column 1."""
    line = ('{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,'
            '"tool_calls":[{"id":"c1","type":"function","function":{"arguments":"{}"}}]}]}')
    doc = tmp_path / "nm.jsonl"
    doc.write_text('{"messages":[{"role":"user","content":"q"},'
                   '{"role":"assistant","content":"a"}]}\n' + line + "\n")
    r = run("trace", "import", "--from", "openai-chat", str(doc))
    assert r.returncode == 2, r.stderr
    col = line.index('"function":{') + 1
    m = re.search(rf"{re.escape(str(doc))}:2:(\d+): messages\.1\.tool_calls\.0\.function\.name: "
                  r"missing", r.stderr)
    assert m, r.stderr
    assert int(m.group(1)) == col


# ---- CSV integers as JSON reads them ------------------------------------------------------------

CSV_HEAD = "traj_id,step,prompt_id,turn,prompt_tokens,generated_tokens\n"


def test_csv_integer_with_a_zero_fraction_reads_as_jsonl_does(tmp_path):
    """`10.0` and `1e1` in a CSV cell are the integer 10, as in a JSON Lines row, and both
    syntaxes give the same trace."""
    csv = tmp_path / "c.csv"
    csv.write_text(CSV_HEAD + "a,1,0,0,10.0,1e1\n")
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"traj_id":"a","step":1,"prompt_id":0,"turn":0,"prompt_tokens":10.0,'
                     '"generated_tokens":1e1}\n')
    a = run("trace", "import", "--from", "csv", str(csv))
    b = run("trace", "import", "--from", "jsonl", str(jsonl))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert records(a.stdout) == records(b.stdout)
    turn = records(a.stdout)[0]["turns"][0]
    assert turn["prompt_tokens"] == 10 and turn["generated_tokens"] == 10


def test_csv_refuses_what_json_refuses(tmp_path):
    """`+1`, `01`, `1.5` and a blank-padded number in a CSV integer cell are refused at the
    cell."""
    for cell in ("+1", "01", "1.5", " 1", "1e400"):
        csv = tmp_path / "c.csv"
        csv.write_text(CSV_HEAD + f'a,1,0,0,"{cell}",5\n')
        r = run("trace", "import", "--from", "csv", str(csv))
        assert r.returncode == 2, (cell, r.stderr)
        assert f"c.csv:2:9: prompt_tokens: expected an integer, got '{cell}'" in r.stderr


# ---- verl: a file's name and its rows' step -----------------------------------------------------


def test_verl_row_step_must_match_the_file_name(tmp_path):
    """A row of {step}.jsonl whose step is another is refused at its step key, naming both."""
    dump = tmp_path / "vd4"
    dump.mkdir()
    (dump / "1.jsonl").write_text(verl_row(2))
    (dump / "2.jsonl").write_text(verl_row(2))
    r = run("trace", "import", "--from", "verl", str(dump))
    assert r.returncode == 2, r.stderr
    assert re.search(rf"libra: {re.escape(str(dump))}/1\.jsonl:1:\d+: step: 2 in a file named "
                     r"for step 1", r.stderr), r.stderr
    assert r.stdout == ""


def test_verl_file_named_by_step_with_leading_zeros(tmp_path):
    """01.jsonl is step 1: its step-1 rows import; a file not named {step}.jsonl is not
    checked."""
    (tmp_path / "01.jsonl").write_text(verl_row(1))
    (tmp_path / "dump.jsonl").write_text(verl_row(5))
    r = run("trace", "import", "--from", "verl", str(tmp_path / "01.jsonl"),
            str(tmp_path / "dump.jsonl"))
    assert r.returncode == 0, r.stderr
    assert [t["step"] for t in records(r.stdout)] == [1, 5]
