"""man/libra.1 against the binary: every long flag a command's --help lists is on the page
(docs/cli.md: the page "says the same in brief"), and what the page claims of --version and of
the elastic pool holds; docs/cli.md's environment table and --jobs row, docs/export.md's headers
and the README's count of verified candidates against the binary; the usage pointer of each
trace subcommand."""

import os
import re
import subprocess

import pytest

from cli_run import refused, run

PAGE_PATH = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "man", "libra.1")

# The commands whose subcommands print a --help of their own, beside the command's.
SUBCOMMANDS = {
    "config": ("show", "check", "doc"),
    "trace": ("validate", "stats", "import", "gen"),
    "cost": ("calibration",),
    "route": ("eval",),
}


def page():
    with open(PAGE_PATH, encoding="utf-8") as f:
        return f.read()


def commands():
    """The command names `libra --help` lists under its commands."""
    r = run("--help")
    assert r.returncode == 0, r.stderr
    names = re.findall(r"^  ([a-z]+)  ", r.stdout, re.M)
    assert "serve" in names and "trace" in names, r.stdout
    return names


def help_invocations():
    out = []
    for name in commands():
        out.append((name,))
        out.extend((name, sub) for sub in SUBCOMMANDS.get(name, ()))
    return out


def on_page(flag, text):
    """Whether --flag is on the page as groff spells it (\\-\\-flag, not a longer flag)."""
    spelt = flag.replace("-", "\\-")
    return re.search(re.escape(spelt) + r"(?![a-z0-9]|\\-)", text) is not None


def help_flags(help_text):
    """The long flags of a --help: in its usage lines and at the head of its flag lines (not
    those its prose cites, such as a benchmark tool's)."""
    usage, _, rest = help_text.partition("\n\n")
    heads = [re.split(r"\s{2,}", line.strip())[0] for line in rest.splitlines()
             if re.match(r"  (-\w, )?--", line)]
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]", usage + "\n".join(heads)))


def test_every_help_flag_is_on_the_man_page():
    text = page()
    missing = []
    for args in help_invocations():
        r = run(*args, "--help")
        assert r.returncode == 0, (args, r.stderr)
        for flag in sorted(help_flags(r.stdout)):
            if not on_page(flag, text):
                missing.append(" ".join(args) + " " + flag)
    assert not missing, "\n".join(missing)


def test_version_claim_matches_the_binary():
    r = run("--version")
    assert r.returncode == 0, r.stderr
    libs = [lib for lib in ("jansson", "libevent", "curl") if lib in r.stdout.lower()]
    m = re.search(r"the versions of ([a-z, ]+?)\.\n", page())
    assert m, "no --version sentence"
    claimed = re.findall(r"[a-z]+", m.group(1).replace(" and ", " "))
    assert claimed == libs, (claimed, r.stdout)


def test_description_does_not_call_the_pool_unimplemented():
    text = page()
    desc = text[text.index(".SH DESCRIPTION"):text.index(".SH COMMANDS")]
    assert "not yet implemented" not in desc
    assert "ehp.enabled" in desc and "\\-\\-pool\\-replica" in desc


@pytest.mark.parametrize("sub,args", [
    ("gen", ("r2e-gym", "--bogus")),
    ("validate", ("--bogus",)),
    ("stats", ("--bogus",)),
    ("import", ("--bogus",)),
])
def test_trace_usage_points_to_the_help_listing_the_flags(sub, args):
    err = refused(run("trace", sub, *args))
    usage = err.splitlines()[-1]
    helper = "libra trace gen --help" if sub == "gen" else "libra trace --help"
    assert usage.startswith("usage: libra trace " + sub), err
    assert usage.endswith("(see " + helper + ")"), err
    flag = "--samples" if sub == "gen" else "--all"
    assert flag in run(*helper.split()[1:]).stdout


def cli_md():
    with open(os.path.join(os.environ["LIBRA_SOURCE_DIR"], "docs", "cli.md"),
              encoding="utf-8") as f:
        return f.read()


def test_cli_md_environment_lists_every_variable_a_help_reads():
    text = cli_md()
    table = text[text.index("## Environment"):]
    table = table[:table.index("\n\n", table.index("| variable"))]
    read = set()
    for args in help_invocations():
        read |= set(re.findall(r"\bLIBRA_[A-Z_]+\b", run(*args, "--help").stdout))
    missing = [v for v in sorted(read) if "| `" + v + "` |" not in table]
    assert not missing, missing


def test_cli_md_jobs_row_names_every_command_that_takes_it():
    row = next(line for line in cli_md().splitlines() if line.startswith("| `--jobs J` |"))
    takers = [" ".join(args) for args in help_invocations()
              if "--jobs" in help_flags(run(*args, "--help").stdout)]
    assert "sim" in takers and "plan" in takers, takers
    missing = [name for name in takers if "`" + name + "`" not in row
               and not (name == "route" and "`route eval`" in row)]
    assert not missing, (missing, row)


def export_md():
    with open(os.path.join(os.environ["LIBRA_SOURCE_DIR"], "docs", "export.md"),
              encoding="utf-8") as f:
        return f.read()


def made_by(fmt, text):
    """The command an export's header names: '# made by: ...', or ray's "command" member."""
    if fmt == "ray":
        m = re.search(r'^\s*"command": "(libra plan [^"]*--export ray[^"]*)",$', text, re.M)
    else:
        m = re.search(r"^# made by: (libra plan .*--export " + fmt + r"\b.*)$", text, re.M)
    return m and m.group(1)


@pytest.mark.parametrize("fmt", ["sglang", "slurm", "ray", "k8s", "verl", "megatron"])
def test_export_md_headers_are_what_their_commands_write(fmt, tmp_path):
    doc = export_md()
    commands = [part.split("#")[0].strip() for line in doc.splitlines()
                for part in re.split(r"&&|\|", line)
                if re.match(r"\s*libra plan [^`[]*--export " + fmt + r"\b", part)]
    assert commands, "no command of --export " + fmt
    argv = commands[0].split()[1:]
    r = subprocess.run([os.environ["LIBRA_BIN"], *argv], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    written = r.stdout
    if "-o" in argv:
        written = (tmp_path / argv[argv.index("-o") + 1]).read_text()
    assert made_by(fmt, doc) == made_by(fmt, written), (commands[0], made_by(fmt, written))


def test_default_verification_count_in_readme_and_reproduction():
    r = run("plan")
    assert r.returncode == 0, r.stderr
    count = re.search(r"^verification: (\d+) candidates", r.stdout, re.M).group(1)
    src = os.environ["LIBRA_SOURCE_DIR"]
    with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    with open(os.path.join(src, "docs", "reproduction.md"), encoding="utf-8") as f:
        repro = f.read()
    assert re.findall(r"the exact planner proposes (\d+)", readme) == [count]
    assert re.findall(r"verified among (\d+) planner candidates", repro) == [count]
