"""End-to-end contract of the `libra` command line (docs/cli.md), whatever commands exist.

The command list is read from `libra --help`, so a new command is covered by the --help and
unknown-flag checks, and must be documented in docs/cli.md and man/libra.1, without editing
this file. Needs LIBRA_BIN (the built binary), LIBRA_SOURCE_DIR, and for the install test
LIBRA_BINARY_DIR and LIBRA_CMAKE (set by tests/CMakeLists.txt).
"""

import os
import re
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]

EXIT_USAGE = 2


def run(*args, binary=LIBRA):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)


def listed_commands():
    """Names of the indented lines that follow "commands:" in `libra --help`."""
    lines = run("--help").stdout.splitlines()
    names = []
    for line in lines[lines.index("commands:") + 1:]:
        if not line.startswith("  "):
            break
        names.append(line.split()[0])
    return names


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(libra VERSION ([0-9.]+)", f.read()).group(1)


def usage_lines(text):
    return [line for line in text.splitlines() if line.startswith("usage:")]


def test_version_names_build_and_libraries():
    r = run("--version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"libra {project_version()}"
    fields = dict(line.split(": ", 1) for line in lines[1:])
    assert set(fields) == {"git", "build", "compiler", "jansson", "libevent"}
    assert all(v.strip() for v in fields.values()), fields
    for lib in ("jansson", "libevent"):
        assert re.match(r"[0-9]+\.[0-9]+", fields[lib]), (lib, fields[lib])


def test_help_lists_commands_and_exits_0():
    r = run("--help")
    assert r.returncode == 0
    assert r.stdout.startswith("usage: libra <command>")
    assert "\ncommands:\n" in r.stdout
    assert r.stderr == ""


def test_no_arguments_is_a_usage_error():
    r = run()
    assert r.returncode == EXIT_USAGE
    assert r.stdout == ""
    assert "usage: libra" in r.stderr


def test_unknown_command_is_a_usage_error():
    r = run("no-such-command")
    assert r.returncode == EXIT_USAGE
    assert r.stdout == ""
    assert r.stderr.startswith("libra: unknown command 'no-such-command'\n")
    assert len(usage_lines(r.stderr)) == 1


@pytest.mark.parametrize("cmd", listed_commands())
def test_command_help(cmd):
    r = run(cmd, "--help")
    assert r.returncode == 0, r.stderr
    assert re.search(rf"^usage: libra {re.escape(cmd)}\b", r.stdout, re.M), r.stdout


@pytest.mark.parametrize("cmd", listed_commands())
def test_command_unknown_flag(cmd):
    r = run(cmd, "--no-such-flag")
    assert r.returncode == EXIT_USAGE, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("libra: ")
    assert "--no-such-flag" in r.stderr
    assert len(usage_lines(r.stderr)) == 1, r.stderr


@pytest.mark.parametrize("args,whole", [
    (["plan", "--gpu=8"], "--gpus"),
    (["plan", "--gpu", "8"], "--gpus"),
    (["sim", "--step", "2"], "--steps"),
    (["route", "eval", "x.jsonl", "--polic", "cmlfq"], "--policy"),
    (["cost", "--presets=x.json", "--jso"], "--json"),
])
def test_a_long_flag_is_spelled_whole(args, whole):
    """getopt_long would take an unambiguous prefix; libra refuses it and names the flag."""
    r = run(*args)
    assert r.returncode == EXIT_USAGE and r.stdout == ""
    assert f"(did you mean {whole}?)" in r.stderr


@pytest.mark.parametrize("args,says", [
    (["plan", "--export"], "flag '--export' needs a value"),
    (["sim", "--gpus"], "flag '--gpus' needs a value"),
    (["plan", "-o"], "flag '-o' needs a value"),
    (["sim", "--nope"], "unknown or malformed flag '--nope'"),
    (["sim", "--json=1"], "unknown or malformed flag '--json=1'"),
])
def test_a_flag_without_its_value_is_named_as_such(args, says):
    """A known flag given last without its value is told apart from an unknown one."""
    r = run(*args)
    assert r.returncode == EXIT_USAGE and r.stdout == ""
    assert r.stderr.startswith(f"libra: {args[0]}: {says}\n"), r.stderr


@pytest.mark.parametrize("args,flag", [
    (["sim", "--gpus", "8", "--gpus", "16"], "--gpus"),
    (["route", "eval", "x.jsonl", "--policy", "all", "--policy", "cmlfq"], "--policy"),
    (["plan", "--verify", "2", "--verify=3"], "--verify"),
    (["config", "show", "-o", "a.json", "--output", "b.json"], "-o/--output"),
    (["trace", "gen", "--steps", "1", "--steps", "2"], "--steps"),
])
def test_a_single_valued_flag_given_twice_is_refused(args, flag):
    """Taking the last would let an earlier value look effective (docs/cli.md "Common flags")."""
    r = run(*args)
    assert r.returncode == EXIT_USAGE and r.stdout == "", r.stderr
    assert f": {flag} given twice: it takes one value\n" in r.stderr, r.stderr


def test_repeatable_flags_may_be_repeated():
    r = run("config", "show", "--set", "cluster.gpus=8", "--set", "rl.steps=3",
            "--set", "cluster.gpus=16")
    assert r.returncode == 0, r.stderr
    assert '"gpus": 16' in r.stdout and '"steps": 3' in r.stdout
    r = run("presets", "--json", "--json")  # a flag without a value: no effect
    assert r.returncode == 0, r.stderr
    with open(os.path.join(SOURCE_DIR, "docs", "cli.md"), encoding="utf-8") as f:
        rule = f.read().split("A flag that takes one value is given at most once")[1].split("\n\n")[0]
    for flag in ("--set", "--presets", "--sweep", "--engine", "--pool-replica", "--fail",
                 "--stall"):
        assert f"`{flag}`" in rule, flag


@pytest.mark.parametrize("cmd", listed_commands())
def test_command_is_documented(cmd):
    with open(os.path.join(SOURCE_DIR, "docs", "cli.md"), encoding="utf-8") as f:
        assert re.search(rf"^### `libra {re.escape(cmd)}\b", f.read(), re.M), (
            f"docs/cli.md lacks a '### `libra {cmd}`' section"
        )
    with open(os.path.join(SOURCE_DIR, "man", "libra.1"), encoding="utf-8") as f:
        assert re.search(rf"^\.SS {re.escape(cmd)}\b", f.read(), re.M), (
            f"man/libra.1 lacks a '.SS {cmd}' paragraph under COMMANDS"
        )


@pytest.mark.parametrize("cmd", listed_commands())
def test_the_docs_synopsis_is_the_helps(cmd):
    """docs/cli.md's synopsis of a command is its --help's usage paragraph, word for word."""
    with open(os.path.join(SOURCE_DIR, "docs", "cli.md"), encoding="utf-8") as f:
        section = f.read().split(f"### `libra {cmd}`", 1)[1]
    synopsis = re.search(r"^```\n(libra .*?)^```", section, re.M | re.S).group(1)
    usage = run(cmd, "--help").stdout.split("\n\n", 1)[0].replace("usage:", "", 1)
    assert synopsis.split() == usage.split()


def test_docs_exit_code_table_matches_the_header():
    """docs/cli.md and the man page list every exit code include/libra/libra.h defines."""
    with open(os.path.join(SOURCE_DIR, "include", "libra", "libra.h"), encoding="utf-8") as f:
        codes = {int(v) for v in re.findall(r"LIBRA_EXIT_\w+ = ([0-9]+)", f.read())}
    with open(os.path.join(SOURCE_DIR, "docs", "cli.md"), encoding="utf-8") as f:
        section = f.read().split("\n## Exit status\n", 1)[1].split("\n## ", 1)[0]
    documented = {int(v) for v in re.findall(r"^\| ([0-9]+) \|", section, re.M)}
    assert documented == codes
    with open(os.path.join(SOURCE_DIR, "man", "libra.1"), encoding="utf-8") as f:
        man = f.read()
    exit_status = man.split(".SH EXIT STATUS", 1)[1].split("\n.SH ", 1)[0]
    in_man = {int(v) for v in re.findall(r"^\.IP ([0-9]+)\b", exit_status, re.M)}
    assert in_man == codes


def test_man_page_renders_without_warnings():
    r = subprocess.run(
        ["groff", "-man", "-ww", "-z", os.path.join(SOURCE_DIR, "man", "libra.1")],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_install(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(
        [os.environ["LIBRA_CMAKE"], "--install", os.environ["LIBRA_BINARY_DIR"],
         "--prefix", str(prefix)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    binary = prefix / "bin" / "libra"
    assert os.access(binary, os.X_OK)
    assert (prefix / "share" / "man" / "man1" / "libra.1").stat().st_size > 0
    docs = prefix / "share" / "doc" / "libra"
    assert (docs / "cli.md").is_file()
    assert (docs / "README.md").is_file()
    r = run("--version", binary=str(binary))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"libra {project_version()}\n")


def full_device():
    """/dev/full, where every write fails with ENOSPC; None where the system has none."""
    path = "/dev/full"
    return path if os.path.exists(path) and not os.path.isfile(path) else None


CALIBRATE = ("calibrate", *(os.path.join(SOURCE_DIR, "tests", "data", "calibrate",
                                          "vllm-c%d.json" % c) for c in (1, 8, 32)),
             "--model", "qwen2.5-7b")


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("plan", "--help"),
                                  ("presets",), ("config", "doc"), CALIBRATE])
def test_stdout_that_cannot_be_written_fails_the_run(args):
    """Output to a full disk or a closed stdout is an I/O error (exit 3) that says why, help
    text included."""
    closed = subprocess.run([LIBRA, *args], stdout=subprocess.DEVNULL, capture_output=False,
                            stderr=subprocess.PIPE, text=True, timeout=60,
                            preexec_fn=lambda: os.close(1))
    assert closed.returncode == 3, closed.stderr
    assert "cannot write '<stdout>'" in closed.stderr
    if full_device():
        with open(full_device(), "w") as out:
            r = subprocess.run([LIBRA, *args], stdout=out, stderr=subprocess.PIPE, text=True,
                               timeout=60)
        assert r.returncode == 3 and "no space left on device" in r.stderr, r.stderr


def test_emu_whose_ready_lines_cannot_be_written_stops():
    """A driver reads emu's ports from stdout: when they cannot be written it exits 3."""
    if not full_device():
        pytest.skip("no /dev/full")
    with open(full_device(), "w") as out:
        r = subprocess.run([LIBRA, "emu"], stdout=out, stderr=subprocess.PIPE, text=True,
                           timeout=30)
    assert r.returncode == 3 and "cannot write '<stdout>'" in r.stderr, r.stderr


def read_fifo(path, got):
    with open(path, "rb") as f:
        got.append(f.read())


@pytest.mark.parametrize("args", [
    ("config", "doc"),
    ("trace", "gen", "r2e-gym", "--steps", "1", "--batch", "4", "--samples", "2"),
])
def test_output_to_a_fifo_is_written_in_place(tmp_path, args):
    """-o names a FIFO (or a device, /dev/stdout): it is written, not replaced by a file."""
    import threading
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=read_fifo, args=(fifo, got))
    reader.start()
    r = run(*args, "-o", str(fifo))
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert got and got[0], "nothing read from the FIFO"
    import stat
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_output_through_a_symlink_writes_its_target(tmp_path):
    (tmp_path / "real.md").write_text("old\n")
    os.symlink("real.md", tmp_path / "link.md")
    r = run("config", "doc", "-o", str(tmp_path / "link.md"))
    assert r.returncode == 0, r.stderr
    assert os.path.islink(tmp_path / "link.md")
    assert (tmp_path / "real.md").read_text().startswith("#")
    assert sorted(os.listdir(tmp_path)) == ["link.md", "real.md"]


def test_output_that_fails_leaves_the_old_file(tmp_path):
    """-o FILE is written whole: a failed write leaves what FILE held, and no temporary file."""
    out = tmp_path / "doc.md"
    out.write_text("old\n")
    os.chmod(tmp_path, 0o500)
    try:
        r = run("config", "doc", "-o", str(out))
        if os.access(tmp_path, os.W_OK):  # root writes anyway
            assert r.returncode == 0
            return
        assert r.returncode == 3 and f"cannot write '{out}'" in r.stderr, r.stderr
        assert out.read_text() == "old\n"
    finally:
        os.chmod(tmp_path, 0o700)
    assert sorted(os.listdir(tmp_path)) == ["doc.md"]


@pytest.mark.parametrize("args", [("config", "doc", "-o"),
                                  ("route", "eval", "tests/data/trace/small.jsonl", "--policy",
                                   "cmlfq", "--decisions")])
def test_an_output_whose_temporary_file_cannot_be_made_names_it(args):
    """A file is replaced whole through a temporary file beside it; where that cannot be made
    and the file exists, the error names the temporary file: "cannot write '/proc/version': no
    such file or directory" named a file that is there."""
    r = run(*args[:2], *(os.path.join(SOURCE_DIR, a) if a.startswith("tests/") else a
                         for a in args[2:]), "/proc/version")
    assert r.returncode == 3, r.stderr
    assert r.stderr == ("libra: cannot write '/proc/version': cannot create '/proc/version.tmp' "
                        "beside it to replace it whole: no such file or directory\n"), r.stderr


BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("args,name,source", [
    (("config", "check"), "c.json", None),
    (("trace", "validate"), "t.jsonl", "tests/data/trace/small.jsonl"),
    (("trace", "import", "--from", "csv"), "t.csv", "tests/data/trace/turns.csv"),
])
def test_a_utf8_byte_order_mark_is_skipped(tmp_path, args, name, source):
    """Windows editors and spreadsheets ("CSV UTF-8") start a file with one; it is no part of
    the text, from a file or from standard input."""
    text = (open(os.path.join(SOURCE_DIR, source), "rb").read() if source
            else b'{"cluster": {"gpus": 16}}\n')
    path = tmp_path / name
    path.write_bytes(BOM + text)
    marked = run(*args, str(path))
    (tmp_path / "plain").write_bytes(text)
    plain = run(*args, str(tmp_path / "plain"))
    assert marked.returncode == 0 and plain.returncode == 0, marked.stderr
    assert marked.stdout.replace(str(path), "X") == plain.stdout.replace(
        str(tmp_path / "plain"), "X")
    piped = subprocess.run([LIBRA, *args, "-"], input=BOM + text, capture_output=True,
                           timeout=60)
    assert piped.returncode == 0, piped.stderr


@pytest.mark.parametrize("command", ["sim", "plan"])
def test_readme_shows_what_the_command_prints(command):
    """README.md's `libra sim` and `libra plan` examples are the built-in default's output, byte
    for byte (the plan's once drifted from what the command printed)."""
    with open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    start = readme.index(f"```\n$ libra {command}\n") + len(f"```\n$ libra {command}\n")
    shown = readme[start:readme.index("```", start)]
    p = subprocess.run([LIBRA, command], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    assert p.stdout == shown


@pytest.mark.parametrize("args,flag", [(["sim", "-o", ""], "-o/--output"),
                                       (["sim", "--workload", ""], "--workload"),
                                       (["plan", "--set", ""], "--set")])
def test_an_empty_flag_value_is_a_usage_error(args, flag):
    p = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(f"libra: {args[0]}: {flag}: an empty value\n")


@pytest.mark.parametrize("args,message", [
    (["sim", "--gpus", "8", "--set", "cluster.gpus=16"],
     "--gpus and --set cluster.gpus both set cluster.gpus"),
    (["plan", "--set", "cluster.gpus=16", "--gpus", "8"],
     "--set cluster.gpus and --gpus both set cluster.gpus"),
    (["sim", "--trace", "t.jsonl", "--set", "workload.trace=u.jsonl"],
     "--trace and --set workload.trace both set workload.trace"),
])
def test_a_key_two_flags_set_is_a_usage_error(args, message):
    p = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(f"libra: {args[0]}: {message}\n")
