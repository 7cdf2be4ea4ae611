"""A policy that needs what a live router never learns (oracle: each trajectory's true remaining
tokens) refused where the router is live (libra.Router, libra serve) and kept where the lengths
are known (route eval, sim); the Python package's TypeErrors naming what each argument accepts
(docs/python.md); and libra sim's table keeping its columns under a long layout.

The Python checks run the package from the source tree (python/) on this build's liblibra.so in
a child /usr/bin/python3, with the environment tests/CMakeLists.txt gives tests/python (under a
sanitized build, the ASan runtime preloaded).
"""

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from cli_run import refused, run
from emu_util import Emu

SRC = Path(os.environ["LIBRA_SOURCE_DIR"])
BUILD = Path(os.environ["LIBRA_BINARY_DIR"])
BUCKETS = "tp1:4000,tp2:12000,tp4:30000"


def python_env():
    env = dict(os.environ, PYTHONPATH=str(SRC / "python"),
               LIBRA_LIBRARY=str(BUILD / "liblibra.so"))
    cache = (BUILD / "CMakeCache.txt").read_text()
    if re.search(r"^LIBRA_SANITIZE:BOOL=(ON|1|TRUE)$", cache, re.M):
        cc = re.search(r"^CMAKE_C_COMPILER:\w+=(.*)$", cache, re.M).group(1)
        rt = subprocess.run([cc, "-print-file-name=libclang_rt.asan-x86_64.so"],
                            capture_output=True, text=True, check=True).stdout.strip()
        env.update(LD_PRELOAD=rt, ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")
    return env


def python(script):
    """Runs script (with libra imported) in /usr/bin/python3; returns what it printed, parsed as
    JSON."""
    r = subprocess.run(["/usr/bin/python3", "-c", "import json, libra\n" + textwrap.dedent(script)],
                       capture_output=True, text=True, env=python_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# ---- oracle where the router is live ---------------------------------------------------------

# One reason wherever a live router refuses oracle (the gateway and the Python Router).
ORACLE_REASON = ("a live router never learns (libra route eval and libra sim have them): "
                 "choose another policy")

def test_the_python_router_refuses_oracle():
    got = python(f"""
        try:
            libra.Router({{"sched": {{"policy": "oracle", "buckets": "{BUCKETS}"}}}})
            print(json.dumps(None))
        except libra.Error as e:
            print(json.dumps([e.code_name, e.message, e.line, e.col]))
    """)
    assert got is not None, "libra.Router took sched.policy oracle"
    code, message, line, col = got
    assert code == "EINVAL" and (line, col) == (1, 12), got  # at "policy" in the config's JSON
    assert message.startswith("sched.policy: oracle") and "true remaining tokens" in message
    assert message.endswith(ORACLE_REASON), message


def test_the_python_router_places_oracle_past_a_byte_order_mark():
    """libra.h: a config may start with a BOM, which LINE:COL count from past (it once gave the
    refusal no place at all)."""
    got = python(f"""
        try:
            libra.Router("\\ufeff{{\\n \\"sched\\": {{\\"policy\\": \\"oracle\\", "
                         "\\"buckets\\": \\"{BUCKETS}\\"}}}}")
        except libra.Error as e:
            print(json.dumps([e.file, e.line, e.col]))
    """)
    assert got == ["config", 2, 12], got


def test_the_python_router_takes_the_other_policies():
    got = python(f"""
        print(json.dumps([libra.Router({{"sched": {{"policy": p, "buckets": "{BUCKETS}"}}}})
                          .buckets for p in ("cmlfq", "load_balance", "plas", "cmlfq_h")]))
    """)
    assert got == [BUCKETS] * 4


@pytest.mark.parametrize("how", [["--set", "sched.policy=oracle"], ["CONFIG"]])
def test_serve_refuses_oracle_at_start_up(tmp_path, how):
    config = tmp_path / "oracle.json"
    config.write_text('{"sched": {"policy": "oracle"}}\n')
    args = [str(config) if a == "CONFIG" else a for a in how]
    with Emu() as emu:
        r = run("serve", "--listen", "127.0.0.1:0", "--engine",
                f"http://127.0.0.1:{emu.port()}", *args, timeout=30)
    err = refused(r)
    where = "serve: --set sched.policy" if how[0] == "--set" else f"{config}:1:12: sched.policy"
    assert err.startswith(f"libra: {where}: oracle"), err
    assert err.rstrip().endswith(ORACLE_REASON) and "usage:" not in err, err


def test_route_eval_and_sim_keep_oracle(tmp_path):
    trace = tmp_path / "t.jsonl"
    assert run("trace", "gen", "r2e-gym", "--steps", "3", "-o", str(trace)).returncode == 0
    r = run("route", "eval", str(trace), "--buckets", BUCKETS, "--policy", "oracle", "--json")
    assert r.returncode == 0, r.stderr
    r = run("sim", "--steps", "3", "--set", "sched.policy=oracle", "--set", "sim.modes=libra")
    assert r.returncode == 0, r.stderr


# ---- what each Python argument accepts, named in its TypeError --------------------------------

TYPE_ERRORS = [
    ("libra.plan(5)",
     "config: expected a dict, JSON text (str or bytes), an os.PathLike or None, not int"),
    ("libra.sim([])",
     "config: expected a dict, JSON text (str or bytes), an os.PathLike or None, not list"),
    ("libra.Router(1.5)",
     "config: expected a dict, JSON text (str or bytes), an os.PathLike or None, not float"),
    ("libra.trace.read(None)", "path: expected str, bytes or an os.PathLike, not NoneType"),
    ("libra.trace.write(3, {}, [])", "path: expected str, bytes or an os.PathLike, not int"),
    ("libra.trace.write('/nonexistent/x.jsonl', None, [])",
     "header: expected a dict or JSON text (str or bytes), not NoneType"),
    ("libra.prompt_key(7)", "prompt: expected str or bytes, not int"),
    ("R.start('a', None)", "prompt: expected an int, str or bytes, not NoneType"),
    ("R.start(1, 'p')", "trajectory: expected str or bytes, not int"),
    ("R.add_instance('0', 1)", "instance: expected an int, not str"),
    ("R.tool_return('a', 5)", "tool: expected str, bytes or None, not int"),
    ("R.tool_return('a', 'bash', 5)", "status: expected str, bytes or None, not int"),
    ("R.tool_return('a', 'bash', None, '5')", "payload_tokens: expected an int or None, not str"),
    ("R.route('a', 1.0)", "context_tokens: expected an int or None, not float"),
    ("R.route('a', None, 'now')", "now_s: expected a number or None, not str"),
    ("R.turn_done('a', 2.5)", "generated_tokens: expected an int or None, not float"),
    ("R.finish('a', 3)", "status: expected str, bytes or None, not int"),
    ("R.step('now')", "now_s: expected a number or None, not str"),
]


def test_type_errors_name_what_each_argument_accepts():
    calls = [call for call, _ in TYPE_ERRORS]
    got = python(f"""
        R = libra.Router({{"sched": {{"buckets": "{BUCKETS}"}}}})
        R.add_instance(0, 1)
        R.start("a", "p")
        R.route("a")
        out = []
        for call in {calls!r}:
            try:
                eval(call)
                out.append(None)
            except TypeError as e:
                out.append(str(e))
        print(json.dumps(out))
    """)
    assert dict(zip(calls, got)) == dict(TYPE_ERRORS)


def test_records_name_what_they_accept(tmp_path):
    trace, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    assert run("trace", "gen", "r2e-gym", "--steps", "1", "-o", str(trace)).returncode == 0
    got = python(f"""
        try:
            header = libra.trace.read({str(trace)!r}).header
            libra.trace.write({str(out)!r}, header, [[]])
        except TypeError as e:
            print(json.dumps(str(e)))
    """)
    assert got == "record: expected a dict or JSON text (str or bytes), not list"
    assert not out.exists()


# ---- libra sim's table under a long layout ---------------------------------------------------

HEAD = ("mode       layout                                 tokens/s   traj/s   step s  roll % "
        "train %  tail %  disc %")


def table(stdout):
    lines = stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("mode "))
    return lines[start], lines[start + 1:lines.index("", start)]


def test_sim_table_columns_line_up_under_a_long_layout():
    r = run("sim", str(SRC / "examples/sim-r2e-gym-qwen3-14b.json"), "--steps", "6")
    assert r.returncode == 0, r.stderr
    head, rows = table(r.stdout)
    assert any("tp1x4,tp2x2,tp4x2 (verified)" in row for row in rows), rows
    at = head.index("layout")
    for row in rows:
        assert len(row) == len(head), (head, row)  # numbers end under their headers
        assert row[at - 1] == " " and row[at] != " ", (head, row)


def test_sim_table_keeps_its_widths_when_every_layout_fits():
    r = run("sim", "--steps", "3")
    assert r.returncode == 0, r.stderr
    head, rows = table(r.stdout)
    assert head == HEAD and rows and all(len(row) == len(HEAD) for row in rows)


def test_sweep_table_columns_line_up_under_a_long_value(tmp_path):
    """A swept value longer than its column (a trace's path) widens the column."""
    trace = str(tmp_path / ("a-trace-with-a-long-name-" * 2 + ".jsonl"))
    r = run("trace", "gen", "r2e-gym", "--steps", "2", "-o", trace)
    assert r.returncode == 0, r.stderr
    r = run("sim", "--steps", "3", "--set", "sim.modes=colocated",
            "--sweep", f"workload.trace={trace}")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("workload.trace "))
    head, row = lines[at], lines[at + 1]
    assert row.startswith(trace + " "), row
    assert head.index("colocated") == row.index(row[len(trace):].split()[0], len(trace)), \
        (head, row)
