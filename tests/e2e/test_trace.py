"""End-to-end tests of `libra trace validate|stats|import` (docs/trace-format.md).

Inputs are the small committed examples under tests/data/trace/: small.jsonl (a valid trace),
bad.jsonl (one bad line of each kind), turns.csv and turns.jsonl (the same per-turn table in
both syntaxes), verl/ (two rollout_data_dir dump files), tau-bench/, swe-agent/ and
openai-chat/ (agent logs). The statistics and the importers' estimates are checked against an
independent computation in Python over the same file; each tool-status rule is checked to
change the statuses it should.
"""

import json
import math
import os
import shutil
import subprocess
import threading

import pytest

LIBRA = os.environ["LIBRA_BIN"]
DATA = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "tests", "data", "trace")


def run(*args, stdin=None):
    return subprocess.run([LIBRA, "trace", *args], capture_output=True, text=True, timeout=60,
                          input=stdin)


def data(name):
    return os.path.join(DATA, name)


def records(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


# ---- validate ---------------------------------------------------------------------------------


def test_validate_valid_trace():
    r = run("validate", data("small.jsonl"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{data('small.jsonl')}: valid, 12 trajectories\n"
    assert r.stderr == ""


def test_progress_when_asked():
    for cmd in ("validate", "stats"):
        r = run(cmd, data("small.jsonl"), "--progress")
        assert r.returncode == 0, r.stderr
        assert r.stderr.splitlines()[-1].startswith(f"libra trace {cmd}: 12 trajectories read, ")


def test_validate_reports_first_error_and_exits_1():
    r = run("validate", data("bad.jsonl"))
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr == (f"libra: {data('bad.jsonl')}:3:115: turns.0.generated_tokens: "
                        "must be >= 0, got -7\n")


def test_validate_all_reports_every_bad_line():
    r = run("validate", "--all", data("bad.jsonl"))
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    where = [line.split(": ", 2)[1] for line in lines[:-1]]
    prefix = data("bad.jsonl")
    assert where == [f"{prefix}:3:115", f"{prefix}:4:139", f"{prefix}:5:137",
                     f"{prefix}:6:115", f"{prefix}:7:1", f"{prefix}:8:2"]
    assert "note: unknown key" in lines[1]
    assert "invalid JSON" in lines[2]
    assert "cached_tokens: 500 exceeds prompt_tokens 410" in lines[3]
    assert lines[4].endswith("sample: missing")
    assert lines[5].endswith("step: expected an integer, got a string")
    assert lines[-1] == f"libra: {prefix}: 6 invalid lines"


def test_validate_header_and_truncation(tmp_path):
    small = open(data("small.jsonl"), encoding="utf-8").read()
    headless = tmp_path / "headless.jsonl"
    headless.write_text(small.split("\n", 1)[1])
    r = run("validate", str(headless))
    assert r.returncode == 1
    assert r.stderr == (f"libra: {headless}:1:1: libra_trace: missing: line 1 must be the trace "
                        'header {"libra_trace": 1, ...}\n')
    cut = tmp_path / "cut.jsonl"
    cut.write_text(small[:-40])
    r = run("validate", str(cut))
    assert r.returncode == 1
    assert r.stderr == f"libra: {cut}:13:1: truncated line: no newline at end of file\n"
    newer = tmp_path / "v2.jsonl"
    newer.write_text(small.replace('"libra_trace":1', '"libra_trace":2', 1))
    r = run("validate", str(newer))
    assert r.returncode == 1
    assert "libra_trace: unsupported schema version 2 (this libra reads 1)" in r.stderr


def feed_endlessly(pipe, first):
    """Writes first, then zeros without a newline, until the reader goes away."""
    try:
        pipe.write(first)
        zeros = bytes(1 << 20)
        while True:
            pipe.write(zeros)
    except (BrokenPipeError, ValueError):
        pass


def test_an_endless_line_is_refused_at_the_limit():
    # a stream that never sends a newline has no line end to look for: the reader stops once
    # the line passes 64 MiB (docs/trace-format.md rule 6) instead of reading for ever
    too_long = "line longer than 67108864 bytes; the file is not read past it"
    r = run("validate", "--all", "/dev/zero")  # --all too: nothing after the line is read
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"libra: /dev/zero:1:1: {too_long}",
                                     "libra: /dev/zero: 1 invalid line"]
    p = subprocess.Popen([LIBRA, "trace", "stats", "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    feeder = threading.Thread(target=feed_endlessly,
                              args=(p.stdin, b'{"libra_trace":1,"workload":"x"}\n'))
    feeder.start()
    try:
        rc = p.wait(timeout=60)
    finally:
        p.kill()
        p.wait()
        feeder.join()
    assert rc == 2
    assert p.stdout.read() == b""
    assert p.stderr.read().decode() == f"libra: <stdin>:2:1: {too_long}\n"


def test_validate_reads_stdin():
    with open(data("small.jsonl"), encoding="utf-8") as f:
        r = run("validate", "-", stdin=f.read())
    assert r.returncode == 0, r.stderr
    assert r.stdout == "-: valid, 12 trajectories\n"


def test_missing_file_is_an_io_error():
    r = run("validate", data("no-such-file.jsonl"))
    assert r.returncode == 3
    assert "cannot read" in r.stderr


def test_usage_errors():
    for args in ([], ["frobnicate"], ["validate"], ["stats", "a", "b"], ["import", "x.csv"],
                 ["import", "--from", "xml", "x"], ["validate", "--json", "x"]):
        r = run(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stdout == ""
        assert r.stderr.startswith("libra: trace: ")


def help_of(sub):
    """The help that lists sub's flags: trace's, but gen's own."""
    return "libra trace gen" if sub == "gen" else "libra trace"


def test_a_subcommands_usage_error_prints_its_own_usage():
    for sub, usage in (("validate", "libra trace validate FILE [--all] [--progress]"),
                       ("stats", "libra trace stats FILE [--json] [-o FILE] [--progress]"),
                       ("import", "libra trace import --from FORMAT IN... [-o FILE] [flags]"),
                       ("gen", "libra trace gen WORKLOAD [flags]")):
        r = run(sub, "--bogus")
        assert r.returncode == 2, (sub, r.stderr)
        assert r.stderr == ("libra: trace: unknown or malformed flag '--bogus'\n"
                            f"usage: {usage} (see {help_of(sub)} --help)\n"), r.stderr


# ---- stats ------------------------------------------------------------------------------------


def quantile(values, q):
    """Hyndman and Fan type 7, as docs/trace-format.md specifies."""
    v = sorted(values)
    h = (len(v) - 1) * q
    lo = math.floor(h)
    return v[lo] if lo + 1 >= len(v) else v[lo] + (h - lo) * (v[lo + 1] - v[lo])


def test_stats_json_matches_an_independent_computation():
    r = run("stats", data("small.jsonl"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "libra.trace-stats/1"
    assert set(doc) >= {"libra_version", "seed", "config_digest", "trace", "overall", "steps",
                        "prompts", "drift"}
    assert doc["seed"] is None  # not a synthetic trace
    assert doc["trace"] == {"workload": "r2e-gym", "model": "qwen3-14b", "lossy": False,
                            "group_size": 2}

    _, trajs = records(data("small.jsonl"))
    gen = [sum(t["generated_tokens"] for t in x["turns"]) for x in trajs]
    overall = doc["overall"]
    assert overall["trajectories"] == len(trajs)
    assert overall["generated_tokens"]["max"] == max(gen)
    for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
        assert overall["generated_tokens"][key] == pytest.approx(quantile(gen, q), rel=1e-12)
    assert overall["generated_tokens"]["mean"] == pytest.approx(sum(gen) / len(gen), rel=1e-12)
    top = sorted(gen, reverse=True)
    assert overall["longest_5pct_token_share"] == pytest.approx(top[0] / sum(gen))
    assert overall["longest_10pct_token_share"] == pytest.approx(sum(top[:2]) / sum(gen))
    calls = [c for x in trajs for t in x["turns"] for c in t.get("calls", [])]
    assert sum(overall["tool_status"].values()) == len(calls)
    assert overall["tool_status"]["timeout"] == sum(c["status"] == "timeout" for c in calls)
    assert overall["exec_us"]["n"] == len(calls)

    steps = sorted({x["step"] for x in trajs})
    assert [s["step"] for s in doc["steps"]] == steps
    means = [sum(g for g, x in zip(gen, trajs) if x["step"] == s) /
             sum(x["step"] == s for x in trajs) for s in steps]
    mx, my = sum(steps) / len(steps), sum(means) / len(means)
    slope = (sum((x - mx) * (y - my) for x, y in zip(steps, means)) /
             sum((x - mx) ** 2 for x in steps))
    assert doc["drift"]["generated_tokens_per_step"] == pytest.approx(slope, rel=1e-12)

    by_prompt = {}
    for x in trajs:
        by_prompt.setdefault(x["prompt_id"], set()).add((x["step"], x["epoch"]))
    assert doc["prompts"] == {
        "distinct": len(by_prompt),
        "in_multiple_steps": sum(len({s for s, _ in v}) > 1 for v in by_prompt.values()),
        "in_multiple_epochs": sum(len({e for _, e in v}) > 1 for v in by_prompt.values()),
    }


def test_stats_is_deterministic_and_text_mode_works(tmp_path):
    a = run("stats", data("small.jsonl"), "--json")
    b = run("stats", data("small.jsonl"), "--json", "-o", str(tmp_path / "s.json"))
    assert a.returncode == b.returncode == 0
    assert (tmp_path / "s.json").read_text() == a.stdout
    t = run("stats", data("small.jsonl"))
    assert t.returncode == 0, t.stderr
    assert t.stdout.startswith(f"trace {data('small.jsonl')}: workload r2e-gym, 12 trajectories"
                               " in 3 steps\n")
    assert "generated_tokens" in t.stdout


@pytest.mark.parametrize("seed,want", [
    ("7", 7), ('"abc"', None), ("-5", None), ("3.5", None), ("1e300", None), ("null", None)])
def test_stats_seed_is_the_generators_integer_seed(tmp_path, seed, want):
    """The envelope's seed is one a computation used: a generator's integer seed >= 0, else
    null, never a foreign generator's string or number copied as it stands."""
    trace = tmp_path / "s.jsonl"
    trace.write_text('{"libra_trace":1,"workload":"x","generator":{"seed":%s}}\n'
                     '{"step":0,"prompt_id":1,"epoch":0,"sample":0,"version_start":0,'
                     '"finish":"completed","turns":[{"prompt_tokens":10,"generated_tokens":5}]}\n'
                     % seed)
    r = run("stats", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["seed"] == want


@pytest.mark.parametrize("presets", ["missing.json", "dup.json"])
def test_stats_reads_no_presets(tmp_path, presets):
    """docs/workloads.md: trace stats takes no presets, so LIBRA_PRESETS (a missing file, a
    broken one) changes nothing: the envelope's digest is the default config's."""
    (tmp_path / "dup.json").write_text('{"workloads": [{"name": "m", "base": "r2e-gym"},'
                                       ' {"name": "m", "base": "r2e-gym"}]}\n')
    clean = run("stats", data("small.jsonl"), "--json")
    env = dict(os.environ, LIBRA_PRESETS=str(tmp_path / presets))
    r = subprocess.run([LIBRA, "trace", "stats", data("small.jsonl"), "--json"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == clean.returncode == 0, r.stderr
    assert r.stdout == clean.stdout


def test_stats_output_through_a_dangling_symlink_creates_its_target(tmp_path):
    """docs/cli.md: a symbolic link keeps pointing at the file it names, which is the one
    written, also when that file does not exist yet."""
    os.symlink("target.jsonl", tmp_path / "link.jsonl")
    r = run("stats", data("small.jsonl"), "-o", str(tmp_path / "link.jsonl"))
    assert r.returncode == 0, r.stderr
    assert os.readlink(tmp_path / "link.jsonl") == "target.jsonl"
    assert (tmp_path / "target.jsonl").read_text().startswith("trace ")
    assert sorted(os.listdir(tmp_path)) == ["link.jsonl", "target.jsonl"]


def test_stats_on_a_bad_trace_exits_2():
    r = run("stats", data("bad.jsonl"))
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.startswith(f"libra: {data('bad.jsonl')}:3:115: ")


def avg_ranks(v):
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    ranks = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and v[order[j]] == v[order[i]]:
            j += 1
        for k in range(i, j):
            ranks[order[k]] = (i + 1 + j) / 2
        i = j
    return ranks


def spearman(x, y):
    """Pearson over average ranks; None when either side is constant."""
    rx, ry = avg_ranks(x), avg_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def test_stats_return_signal_and_task_effect_match_an_independent_computation(tmp_path):
    """On a generated r2e-gym trace (hundreds of returns at each early depth, some censored
    trajectories, prompts repeated as GRPO groups), return_signal and task_effect are what
    docs/trace-format.md defines, recomputed here in plain Python."""
    path = tmp_path / "r2e.jsonl"
    g = subprocess.run([LIBRA, "trace", "gen", "r2e-gym", "--steps", "8", "--seed", "3", "-o",
                        str(path)], capture_output=True, text=True, timeout=60)
    assert g.returncode == 0, g.stderr
    r = run("stats", str(path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    _, trajs = records(str(path))

    rows, censored_trajs, censored_returns = [], 0, 0
    for x in trajs:
        gen = [u["generated_tokens"] for u in x["turns"]]
        if x["finish"] in ("truncated", "aborted"):
            censored_trajs += 1
            censored_returns += sum(len(u.get("calls", [])) for u in x["turns"])
            continue
        for d, u in enumerate(x["turns"], start=1):
            for c in u.get("calls", []):
                rows.append((d, c["status"] in ("failure", "timeout"), c["payload_tokens"],
                             sum(gen[d:])))
    sig = doc["return_signal"]
    assert censored_trajs > 0  # the exclusion is exercised
    assert (sig["censored_trajectories"], sig["censored_returns"]) == (censored_trajs,
                                                                        censored_returns)
    assert sig["returns"] == len(rows) and sig["min_returns_per_depth"] == 10
    pooled = {"status": [0.0, 0, 0], "payload": [0.0, 0, 0]}
    skipped = [0, 0]
    by_depth = []
    for d in sorted({row[0] for row in rows}):
        at = [row for row in rows if row[0] == d]
        if len(at) < 10:
            skipped[0] += 1
            skipped[1] += len(at)
            continue
        rem = [row[3] for row in at]
        rho = {"status": spearman([float(row[1]) for row in at], rem),
               "payload": spearman([row[2] for row in at], rem)}
        by_depth.append((d, len(at), rho["status"], rho["payload"]))
        for k, v in rho.items():
            if v is not None:
                pooled[k][0] += v * len(at)
                pooled[k][1] += len(at)
                pooled[k][2] += 1
    assert [sig["skipped_depths"], sig["skipped_returns"]] == skipped
    assert len(sig["by_depth"]) == len(by_depth)
    for got, (d, n, rs, rp) in zip(sig["by_depth"], by_depth):
        assert (got["depth"], got["returns"]) == (d, n)
        for key, want in (("status_rho", rs), ("payload_rho", rp)):
            assert got[key] == (None if want is None else pytest.approx(want, abs=1e-12))
    for k in ("status", "payload"):
        assert pooled[k][1] > 0
        assert sig[k]["rho"] == pytest.approx(pooled[k][0] / pooled[k][1], abs=1e-12)
        assert (sig[k]["returns"], sig[k]["depths"]) == (pooled[k][1], pooled[k][2])
    assert sig["depth"]["returns"] == len(rows)
    assert sig["depth"]["rho"] == pytest.approx(
        spearman([row[0] for row in rows], [row[3] for row in rows]), abs=1e-12)

    groups = {}
    for x in trajs:
        groups.setdefault(x["prompt_id"], []).append(
            math.log1p(sum(u["generated_tokens"] for u in x["turns"])))
    groups = [v for v in groups.values() if len(v) >= 2]
    n, k = sum(len(v) for v in groups), len(groups)
    grand = sum(sum(v) for v in groups) / n
    msb = sum(len(v) * (sum(v) / len(v) - grand) ** 2 for v in groups) / (k - 1)
    msw = sum((y - sum(v) / len(v)) ** 2 for v in groups for y in v) / (n - k)
    n0 = (n - sum(len(v) ** 2 for v in groups) / n) / (k - 1)
    icc = min(1.0, max(0.0, (msb - msw) / (msb + (n0 - 1) * msw)))
    eff = doc["task_effect"]
    assert (eff["prompts"], eff["trajectories"]) == (k, n)
    assert eff["metric"] == "log1p_generated_tokens"
    assert eff["icc1"] == pytest.approx(icc, abs=1e-12)
    assert eff["mean_square_between"] == pytest.approx(msb, rel=1e-12)
    assert eff["mean_square_within"] == pytest.approx(msw, rel=1e-12)

    t = run("stats", str(path))
    assert t.returncode == 0, t.stderr
    assert (f"{censored_trajs} truncated or aborted\ntrajectories ({censored_returns} returns)"
            in t.stdout)
    assert "ICC(1)" in t.stdout


# ---- import -----------------------------------------------------------------------------------


def test_import_csv_and_jsonl_tables_agree(tmp_path):
    out_csv, out_jsonl = tmp_path / "csv.jsonl", tmp_path / "jsonl.jsonl"
    # no --samples: step 1's prompt has one trajectory, a group --samples 2 would refuse
    r = run("import", "--from", "csv", data("turns.csv"), "--workload", "r2e-gym",
            "-o", str(out_csv))
    assert r.returncode == 0, r.stderr
    r = run("import", "--from", "jsonl", data("turns.jsonl"), "--workload", "r2e-gym",
            "-o", str(out_jsonl))
    assert r.returncode == 0, r.stderr
    h_csv, t_csv = records(out_csv)
    h_jsonl, t_jsonl = records(out_jsonl)
    assert t_csv == t_jsonl
    assert h_csv["import"] == {"from": "csv"} and h_jsonl["import"] == {"from": "jsonl"}
    assert h_csv["lossy"] is False and "group_size" not in h_csv
    assert len(t_csv) == 3
    r0, r1, r2 = t_csv
    assert [len(t.get("calls", [])) for t in r0["turns"]] == [1, 1, 0]
    assert [c["tool"] for c in r1["turns"][0]["calls"]] == ["bash", "editor"]
    assert r2["finish"] == "truncated" and r2["version_start"] == 1
    assert "cached_tokens" not in r2["turns"][0]
    assert run("validate", str(out_csv)).returncode == 0


@pytest.mark.parametrize("value", ["99999999999999999999", "9223372036854775807", "1025", "0",
                                   "-1", "2x", ""])
def test_import_samples_out_of_range_is_refused(value):
    """--samples takes what rl.samples takes (1..1024): a larger group size was written into a
    header that every command replaying the trace then refused."""
    r = run("import", "--from", "csv", data("turns.csv"), "--samples", value)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert "--samples: " in r.stderr and "group_size" not in r.stderr
    if value.isdigit() and value != "0":
        assert "[1, 1024]" in r.stderr, r.stderr


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tau-bench", "swe-agent", "openai-chat"])
def test_import_of_a_directory_is_an_io_error(tmp_path, fmt):
    """docs/cli.md, libra trace: exit 3 when a file cannot be read, as validate and stats
    say of a directory."""
    r = run("import", "--from", fmt, str(tmp_path))
    assert r.returncode == 3 and r.stdout == ""
    assert r.stderr == (f"libra: cannot read '{tmp_path}': is a directory (only --from verl "
                        "reads a dump directory)\n")


def test_import_csv_without_a_header_row_fails(tmp_path):
    """The first line of a CSV file names its columns: an empty or blank file has none, and is
    an error rather than a file that adds nothing."""
    for text in ("", "\n\n"):
        empty = tmp_path / "empty.csv"
        empty.write_text(text)
        out = tmp_path / "out.jsonl"
        r = run("import", "--from", "csv", data("turns.csv"), str(empty), "-o", str(out))
        assert r.returncode == 2 and not out.exists()
        assert r.stderr == (f"libra: {empty}:1:1: no header row: the first line of a CSV file "
                            "names its columns\n")


@pytest.mark.parametrize("fmt,name,text", [
    ("csv", "header.csv", None),  # the header row of turns.csv alone
    ("tau-bench", "runs.json", "[]\n"),
    ("verl", "1.jsonl", ""),
    ("openai-chat", "chats.jsonl", "\n\n"),
])
def test_import_of_input_without_a_trajectory_fails(tmp_path, fmt, name, text):
    """A header alone is a trace no command can run: refused, and nothing written."""
    path = tmp_path / name
    if text is None:
        text = open(data("turns.csv")).readline()
    path.write_text(text)
    out = tmp_path / "out.jsonl"
    r = run("import", "--from", fmt, str(path), "-o", str(out))
    assert r.returncode == 2 and not out.exists(), r.stderr
    assert r.stderr == f"libra: {path}: nothing to import: no trajectory in the input\n"


def test_import_verl_dump_directory():
    r = run("import", "--from", "verl", data("verl"), "--workload", "search-r1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header, trajs = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header["lossy"] is True
    assert header["import"]["from"] == "verl"
    assert header["import"]["chars_per_token"] == 4.0
    assert "generated_tokens" in header["import"]["estimated"]
    assert [t["step"] for t in trajs] == [1, 1, 1, 1, 2, 2, 2]
    assert [(t["prompt_id"], t["epoch"], t["sample"]) for t in trajs] == [
        (0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1), (2, 0, 0), (2, 0, 1), (0, 1, 0)]
    assert [len(t["turns"]) for t in trajs] == [2, 3, 1, 2, 3, 1, 2]
    assert trajs[0]["turns"][0]["calls"][0]["tool"] == "search"
    assert trajs[4]["turns"][0]["calls"][0]["tool"] == "code_interpreter"
    assert trajs[5]["finish"] == "truncated"
    assert trajs[0]["extra"] == {"acc": True, "gts": "Umberto Eco"}
    assert trajs[0]["reward"] == 1.0

    # the input text of the first sample, at 4 characters a token, rounded up
    with open(data("verl/1.jsonl"), encoding="utf-8") as f:
        first = json.loads(f.readline())
    assert trajs[0]["turns"][0]["prompt_tokens"] == math.ceil(len(first["input"]) / 4)
    coarse = run("import", "--from", "verl", data("verl/1.jsonl"), "--chars-per-token", "8")
    assert coarse.returncode == 0, coarse.stderr
    assert json.loads(coarse.stdout.splitlines()[1])["turns"][0]["prompt_tokens"] == \
        math.ceil(len(first["input"]) / 8)


def test_import_verl_files_out_of_step_order_fail():
    r = run("import", "--from", "verl", data("verl/2.jsonl"), data("verl/1.jsonl"))
    assert r.returncode == 2
    assert r.stdout == ""
    assert "step: 1 after step 2 (give dump files in step order)" in r.stderr


def test_import_verl_dump_directory_with_two_files_of_one_step_fails(tmp_path):
    """1.jsonl and 01.jsonl are both step 1: their order would be the filesystem's, so the
    output would not be the same on every machine. Refused, naming both."""
    for name in ("1.jsonl", "01.jsonl", "2.jsonl"):
        (tmp_path / name).write_text('{"input":"q","output":"a","step":%s}\n' % name[-7])
    r = run("import", "--from", "verl", str(tmp_path))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"libra: {tmp_path}: '01.jsonl' and '1.jsonl' are both step 1 (one file " \
        "per step)\n"


def test_failed_import_writes_nothing(tmp_path):
    bad = tmp_path / "bad.csv"
    with open(data("turns.csv"), encoding="utf-8") as f:
        bad.write_text(f.read() + "r3,2,9,0,0,655,,x,,,,,,,\n")
    out = tmp_path / "out.jsonl"
    r = run("import", "--from", "csv", str(bad), "-o", str(out))
    assert r.returncode == 2
    assert r.stderr == (f"libra: {bad}:9:17: generated_tokens: expected an integer, got 'x'\n")
    assert not out.exists()
    assert os.listdir(tmp_path) == ["bad.csv"]
    r = run("import", "--from", "csv", str(bad))
    assert r.returncode == 2 and r.stdout == ""


# ---- import: agent logs (tau-bench, SWE-agent) ------------------------------------------------


def est(text, cpt=4):
    """The importers' estimate: characters / chars-per-token, rounded up."""
    return math.ceil(len(text or "") / cpt)


def test_import_tau_bench_sample(tmp_path):
    path = data("tau-bench/airline-sample.json")
    out = tmp_path / "tau.jsonl"
    # no --samples: each task has one trial here, a group --samples 4 would refuse
    r = run("import", "--from", "tau-bench", path, "--workload", "tau-airline", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert run("validate", str(out)).returncode == 0
    header, trajs = records(out)
    assert header["lossy"] is True and "group_size" not in header
    assert header["import"]["from"] == "tau-bench"
    assert header["import"]["failure_text"] == ["^Error:"]
    assert "setup_us" in header["import"]["unknown"]  # the log does not say
    with open(path, encoding="utf-8") as f:
        runs = json.load(f)
    assert [(t["prompt_id"], t["sample"], t["step"]) for t in trajs] == \
        [(12, 3, 0), (38, 2, 0), (13, 1, 0), (9, 2, 0)]
    assert [t["finish"] for t in trajs] == ["completed", "completed", "completed", "truncated"]
    assert [t["reward"] for t in trajs] == [run_["reward"] for run_ in runs]
    assert [t["extra"] for t in trajs] == [
        {"task_id": 12, "trial": 3, "ended_by": "user"},
        {"task_id": 38, "trial": 2, "ended_by": "transfer_to_human_agents"},
        {"task_id": 13, "trial": 1, "ended_by": "user"},
        {"task_id": 9, "trial": 2}]
    # a turn per assistant message; the calls and their estimates, independently
    for t, run_ in zip(trajs, runs):
        msgs = run_["traj"]
        assistants = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        assert len(t["turns"]) == len(assistants)
        context = 0
        for turn, i in zip(t["turns"], assistants):
            context = sum(est(m["content"]) + sum(est(c["function"]["arguments"])
                                                  for c in m.get("tool_calls") or [])
                          for m in msgs[:i])
            assert turn["prompt_tokens"] == context
            m = msgs[i]
            assert turn["generated_tokens"] == est(m["content"]) + sum(
                est(c["function"]["arguments"]) for c in m.get("tool_calls") or [])
    # run 63 (task 13): one call fails with "Error: ..."; run 109 ends on 30 turns with 5
    failures = [[c for u in t["turns"] for c in u.get("calls", []) if c["status"] == "failure"]
                for t in trajs]
    assert [len(f) for f in failures] == [0, 0, 1, 5]
    assert len(trajs[3]["turns"]) == 30 and trajs[3]["turns"][-1]["calls"][0]["tool"] == \
        "book_reservation"
    # the first tool call of run 63 and its payload
    first_tool = next(m for m in runs[2]["traj"] if m["role"] == "tool")
    calls0 = [c for u in trajs[2]["turns"] for c in u.get("calls", []) if c["tool"] != "user"]
    assert calls0[0]["tool"] == first_tool["name"]
    assert calls0[0]["payload_tokens"] == est(first_tool["content"])
    assert all("queue_us" not in c and "exec_us" not in c for c in calls0)
    assert all("start_us" not in t for t in trajs)

    # a custom rule: no failures at all
    r = run("import", "--from", "tau-bench", path, "--failure-text", "")
    assert r.returncode == 0, r.stderr
    assert '"failure"' not in r.stdout


def test_import_tau_bench_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[\n  {"task_id": 3, "trial": 0, "traj": [\n'
                   '    {"role": "assistant", "content": "hi"},\n'
                   '    {"role": "tool", "tool_call_id": "x", "content": "?"}]}]\n')
    r = run("import", "--from", "tau-bench", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"libra: {bad}:4:22: 0.traj.1.tool_call_id: 'x' answers no open tool "
                        "call of the last assistant message\n")
    bad.write_text('[{"task_id": 3, "trial": 0, "traj": [}]\n')
    r = run("import", "--from", "tau-bench", str(bad))
    assert r.returncode == 2
    assert r.stderr == f"libra: {bad}:1:38: invalid JSON: unexpected token near '}}'\n"
    r = run("import", "--from", "tau-bench", data("swe-agent/sympy__sympy-20590.traj"))
    assert r.returncode == 2
    assert r.stderr.endswith(":1:1: expected an array of runs (tau-bench results)\n")


def test_import_swe_agent_sample(tmp_path):
    paths = [data("swe-agent/django__django-11099.traj"),
             data("swe-agent/sympy__sympy-20590.traj")]
    out = tmp_path / "swe.jsonl"
    r = run("import", "--from", "swe-agent", *paths, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert run("validate", str(out)).returncode == 0
    header, (django, sympy) = records(out)
    assert header["import"]["from"] == "swe-agent" and header["lossy"] is True
    # the container's start is not logged; SWE-bench evaluates the patch elsewhere
    assert {"setup_us", "reward"} <= set(header["import"]["unknown"])
    docs = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            docs.append(json.load(f))

    # submitted: completed, the submit step's call dropped, estimates scaled to model_stats
    assert django["finish"] == "completed"
    assert [len(u.get("calls", [])) for u in django["turns"]] == [1, 1, 1, 1, 0]
    assert [u["calls"][0]["tool"] for u in django["turns"][:4]] == \
        ["find_file", "open", "edit", "python"]
    assert [u["calls"][0]["status"] for u in django["turns"][:4]] == \
        ["success", "success", "success", "failure"]
    steps = docs[0]["trajectory"]
    assert [u["calls"][0]["payload_tokens"] for u in django["turns"][:4]] == \
        [est(s["observation"]) for s in steps[:4]]
    assert [u["calls"][0]["exec_us"] for u in django["turns"][:4]] == \
        [round(s["execution_time"] * 1e6) for s in steps[:4]]
    stats = docs[0]["info"]["model_stats"]
    assert sum(u["prompt_tokens"] for u in django["turns"]) == stats["tokens_sent"]
    assert sum(u["generated_tokens"] for u in django["turns"]) == stats["tokens_received"]
    sent = [sum(est(m["content"]) for m in s["query"]) for s in steps]
    assert django["extra"]["scale"]["prompt_tokens"] == pytest.approx(
        stats["tokens_sent"] / sum(sent))
    assert django["extra"]["final_action"] == "submit"
    assert django["extra"]["instance"] == "django__django-11099"

    # exit_cost: truncated, the last call kept; no token totals, so nothing is scaled
    assert sympy["finish"] == "truncated" and sympy["prompt_id"] == 1
    assert [u["calls"][0]["tool"] for u in sympy["turns"]] == ["search_dir", "pytst", "pytest"]
    assert [u["calls"][0]["status"] for u in sympy["turns"]] == ["success", "failure", "success"]
    hist = docs[1]["history"]
    steps = docs[1]["trajectory"]
    context = est(hist[0]["content"]) + est(hist[1]["content"])
    for u, s in zip(sympy["turns"], steps):
        assert u["prompt_tokens"] == context
        assert u["generated_tokens"] == est(s["response"])
        context += u["generated_tokens"] + est(s["observation"])
    assert "scale" not in sympy["extra"]

    # the same instance twice (two runs' files; one file given twice is refused): one prompt,
    # two samples
    for run_dir in ("run1", "run2"):
        (tmp_path / run_dir).mkdir()
        shutil.copy(paths[0], tmp_path / run_dir)
    name = os.path.basename(paths[0])
    r = run("import", "--from", "swe-agent", str(tmp_path / "run1" / name),
            str(tmp_path / "run2" / name))
    assert r.returncode == 0, r.stderr
    _, *again = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(t["prompt_id"], t["sample"]) for t in again] == [(0, 0), (0, 1)]


def test_import_swe_agent_errors(tmp_path):
    bad = tmp_path / "x.traj"
    bad.write_text('{"trajectory": [\n  {"action": ["ls"]}]}\n')
    r = run("import", "--from", "swe-agent", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"libra: {bad}:2:4: trajectory.0.action: expected a string\n"
    # provider token totals that are not counts are refused, not dropped
    sample = os.path.join(DATA, "swe-agent", "django__django-11099.traj")
    with open(sample, encoding="utf-8") as f:
        doc = json.load(f)
    for key, value in (("tokens_sent", -5), ("tokens_received", "x"), ("api_calls", 1.5)):
        d = json.loads(json.dumps(doc))
        d["info"]["model_stats"][key] = value
        bad.write_text(json.dumps(d))
        r = run("import", "--from", "swe-agent", str(bad))
        assert r.returncode == 2 and r.stdout == "", (key, r.stderr)
        assert f"info.model_stats.{key}: expected an integer >= 0" in r.stderr, r.stderr
    # a step's execution_time that is no time a trace can hold is refused, not dropped
    for value in (-1, "1", 1e300, 1e12, True):
        bad.write_text(json.dumps({"trajectory": [{"action": "ls", "observation": "a",
                                                   "execution_time": value}], "info": {}}))
        r = run("import", "--from", "swe-agent", str(bad))
        assert r.returncode == 2 and r.stdout == "", (value, r.stderr)
        assert r.stderr.startswith(f"libra: {bad}:1:") and r.stderr.endswith(
            ": trajectory.0.execution_time: expected seconds from 0 to 1125899906\n"), r.stderr
    bad.write_text(json.dumps({"trajectory": [{"action": "ls", "execution_time": None}]}))
    r = run("import", "--from", "swe-agent", str(bad))
    assert r.returncode == 0 and "exec_us" not in r.stdout, r.stderr


def test_import_rules_for_swe_agent_and_tau_bench():
    """--timeout-text and --exit-code-pattern change the statuses of the other text formats too,
    and the header reports the rules in use."""
    django = data("swe-agent/django__django-11099.traj")

    def statuses(*args):
        r = run("import", "--from", "swe-agent", django, *args)
        assert r.returncode == 0, r.stderr
        header, traj = [json.loads(line) for line in r.stdout.splitlines()]
        return header, [c["status"] for u in traj["turns"] for c in u.get("calls", [])]

    header, default = statuses()
    assert header["import"]["timeout_text"] == [
        "timed out", "TimeoutError", "was cancelled because it took more than",
        "has no new output after"]
    assert header["import"]["exit_code_pattern"] == []
    assert header["import"]["failure_text"] == ["Traceback", "Error", "command not found"]
    assert default == ["success", "success", "success", "failure"]
    # the python run printed a Traceback: as a timeout text it wins over the failure text
    header, timed = statuses("--timeout-text", "Traceback")
    assert header["import"]["timeout_text"] == ["Traceback"]
    assert timed == ["success", "success", "success", "timeout"]

    tau = data("tau-bench/airline-sample.json")
    r = run("import", "--from", "tau-bench", tau, "--timeout-text", "^Error:")
    assert r.returncode == 0, r.stderr
    header, *trajs = [json.loads(line) for line in r.stdout.splitlines()]
    assert header["import"]["timeout_text"] == ["^Error:"]
    assert [sum(c["status"] == "timeout" for u in t["turns"] for c in u.get("calls", []))
            for t in trajs] == [0, 0, 1, 5]
    assert '"failure"' not in r.stdout


# ---- import: OpenAI chat messages -------------------------------------------------------------


CHAT = "openai-chat/sample.jsonl"


def chat_lines():
    with open(data(CHAT), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def est_content(content):
    """Estimated tokens of a message's content: a string, or a list of text parts (each part
    rounded up on its own)."""
    if isinstance(content, list):
        return sum(est(p.get("text")) for p in content)
    return est(content)


def est_generated(m):
    calls = [c["function"] for c in m.get("tool_calls") or []]
    if m.get("function_call"):
        calls.append(m["function_call"])
    return est_content(m.get("content")) + sum(est(c.get("arguments")) for c in calls)


def call_statuses(traj):
    return [[c["status"] for c in u.get("calls", [])] for u in traj["turns"]]


def import_chat(*args):
    r = run("import", "--from", "openai-chat", data(CHAT), *args)
    assert r.returncode == 0, r.stderr
    header, *trajs = [json.loads(line) for line in r.stdout.splitlines()]
    return header, trajs


def test_import_openai_chat_sample(tmp_path):
    out = tmp_path / "chat.jsonl"
    # no --samples: parse-7 has one attempt, a group --samples 2 would refuse
    r = run("import", "--from", "openai-chat", data(CHAT), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert run("validate", str(out)).returncode == 0
    header, trajs = records(out)
    lines = chat_lines()
    imp = header["import"]
    assert header["lossy"] is True and "group_size" not in header
    assert imp["from"] == "openai-chat" and imp["chars_per_token"] == 4.0
    assert imp["failure_text"] == ["Traceback", "Error", "command not found"]
    assert imp["timeout_text"] == ["timed out", "TimeoutError",
                                   "was cancelled because it took more than",
                                   "has no new output after"]
    assert imp["exit_code_pattern"] == ["exit code", "<returncode>"]
    assert imp["status_precedence"].startswith("timeout_text, then exit_code_pattern")

    # identity: calc-1 twice (attempts 0 and 1), parse-7, and a prompt told apart by its text
    assert [(t["prompt_id"], t["sample"]) for t in trajs] == \
        [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]
    assert [t["finish"] for t in trajs] == \
        ["completed", "truncated", "completed", "completed", "completed"]
    assert [t["reward"] for t in trajs] == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert [t.get("extra") for t in trajs] == [
        {"task_id": "calc-1", "attempt": 0, "ended_by": "finish"},
        {"task_id": "calc-1", "attempt": 1, "scale": trajs[1]["extra"]["scale"]},
        {"instance_id": "parse-7"}, None, None]
    assert all(t["step"] == 0 and t["epoch"] == 0 for t in trajs)

    # statuses by the default rules (timeout > exit code > failure text > success)
    assert [call_statuses(t) for t in trajs] == [
        [["success", "success"], ["failure"], ["success"], ["success"], []],
        [["timeout"], ["failure"], ["other"]],
        [["failure"], ["success"], ["failure"], []],
        [["success"], []],
        [["timeout"], []]]
    # parallel calls keep the order of tool_calls, joined by id though answered out of order
    assert [c["tool"] for c in trajs[0]["turns"][0]["calls"]] == ["view", "bash"]
    msgs = lines[0]["messages"]
    assert [c["payload_tokens"] for c in trajs[0]["turns"][0]["calls"]] == \
        [est(msgs[4]["content"]), est(msgs[3]["content"])]

    # line 1: the provider's counts of every assistant message, as they are
    usages = [m["usage"] for m in msgs if m["role"] == "assistant"]
    assert [(u["prompt_tokens"], u["generated_tokens"], u["cached_tokens"])
            for u in trajs[0]["turns"]] == \
        [(u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"]["cached_tokens"])
         for u in usages]
    assert "scale" not in trajs[0]["extra"]

    # line 2: estimates scaled to the line's usage totals
    line = lines[1]
    msgs = line["messages"]
    assistants = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    prompts = [sum(est_generated(m) if m["role"] == "assistant" else est_content(m["content"])
                   for m in msgs[:i]) for i in assistants]
    gens = [est_generated(msgs[i]) for i in assistants]
    turns = trajs[1]["turns"]
    assert sum(u["prompt_tokens"] for u in turns) == line["usage"]["prompt_tokens"]
    assert sum(u["generated_tokens"] for u in turns) == line["usage"]["completion_tokens"]
    assert trajs[1]["extra"]["scale"] == {
        "prompt_tokens": pytest.approx(line["usage"]["prompt_tokens"] / sum(prompts)),
        "generated_tokens": pytest.approx(line["usage"]["completion_tokens"] / sum(gens))}
    assert all("cached_tokens" not in u for u in turns)

    # line 3: estimates; function_call and user-message observations are calls
    msgs = lines[2]["messages"]
    turns = trajs[2]["turns"]
    assert [c["tool"] for u in turns for c in u.get("calls", [])] == ["read_file", "user", "user"]
    context = 0
    k = 0
    for m in msgs:
        if m["role"] == "assistant":
            assert turns[k]["prompt_tokens"] == context
            assert turns[k]["generated_tokens"] == est_generated(m)
            context += est_generated(m)
            k += 1
        else:
            if k > 0:  # each observation is the one call of the turn before it
                assert turns[k - 1]["calls"][-1]["payload_tokens"] == est(m["content"])
            context += est(m["content"])
    assert k == len(turns)

    # lines 4 and 5: the tool definitions count toward every prompt
    tools = json.dumps(lines[3]["tools"], sort_keys=True, separators=(",", ":"))
    first = lines[3]["messages"][:2]
    assert trajs[3]["turns"][0]["prompt_tokens"] == est(tools) + sum(
        est_content(m["content"]) for m in first)
    assert trajs[3]["turns"][0]["prompt_tokens"] == trajs[4]["turns"][0]["prompt_tokens"]


def test_import_openai_chat_rules_each_change_the_statuses():
    """Each rule, removed or replaced, changes statuses the default rules gave: none is idle."""
    _, base = import_chat()
    base = [call_statuses(t) for t in base]

    # without timeout texts: the killed pip install exits -1 (failure), the TimeoutError
    # traceback is a failure text
    header, trajs = import_chat("--timeout-text", "")
    assert header["import"]["timeout_text"] == []
    got = [call_statuses(t) for t in trajs]
    assert got[1][0] == ["failure"] and got[4][0] == ["failure"]
    assert "timeout" not in json.dumps(got)

    # without exit codes: the failing pytest run (exit 1, no failure text) passes, the passing
    # one that mentions "Error" fails, and mini-swe-agent's <returncode>1</returncode> passes
    header, trajs = import_chat("--exit-code-pattern", "")
    got = [call_statuses(t) for t in trajs]
    assert base[0][1:4] == [["failure"], ["success"], ["success"]]
    assert got[0][1:4] == [["success"], ["success"], ["failure"]]
    assert base[2][1:3] == [["success"], ["failure"]] and got[2][1:3] == [["success"], ["success"]]
    # the exit code beats the failure text: "command not found" with exit 127 stays a failure,
    # the FileNotFoundError (no exit code) no longer is one without failure texts
    header, trajs = import_chat("--failure-text", "")
    got = [call_statuses(t) for t in trajs]
    assert got[1][1] == ["failure"] and base[2][0] == ["failure"] and got[2][0] == ["success"]

    # replaced: an anchored timeout text, an exit-code pattern of one's own
    header, trajs = import_chat("--timeout-text", "^bash:", "--exit-code-pattern",
                                "finished with exit code")
    assert header["import"]["timeout_text"] == ["^bash:"]
    assert header["import"]["exit_code_pattern"] == ["finished with exit code"]
    got = [call_statuses(t) for t in trajs]
    assert got[1][:2] == [["failure"], ["timeout"]]
    assert got[2][1:3] == [["success"], ["success"]]  # <returncode> is no longer read


def test_import_openai_chat_help_gives_the_defaults():
    r = run("--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    header, _ = import_chat()
    for key in ("timeout_text", "exit_code_pattern", "failure_text"):
        assert '"' + ",".join(header["import"][key]) + '"' in text, key
    assert "openai-chat" in text


def test_import_rule_flags_refuse_nonsense():
    cases = [
        (["--from", "openai-chat", "--timeout-text", "a,,b"], "--timeout-text: an empty or blank "
         "text in 'a,,b' would match every output"),
        (["--from", "swe-agent", "--failure-text", "^"], "--failure-text: an empty or blank text "
         "in '^'"),
        (["--from", "tau-bench", "--failure-text", "Error, "], "--failure-text: an empty or blank "
         "text in 'Error, '"),
        (["--from", "openai-chat", "--exit-code-pattern", "exit code 1"],
         "--exit-code-pattern: 'exit code 1' ends in a digit"),
        (["--from", "csv", "--timeout-text", "x"], "--timeout-text: --from csv does not classify "
         "tool outputs"),
        (["--from", "verl", "--exit-code-pattern", "rc="], "--exit-code-pattern: --from verl does "
         "not classify tool outputs"),
        # a tiny ratio made estimates past any count (a wrapped negative prompt_tokens before)
        (["--from", "openai-chat", "--chars-per-token", "1e-300"], "--chars-per-token: expected "
         "a number in [0.01, 1000], not '1e-300'"),
        (["--from", "verl", "--chars-per-token", "1001"], "--chars-per-token: expected a number "
         "in [0.01, 1000], not '1001'"),
        # a table gives token counts: the ratio would change nothing
        (["--from", "csv", "--chars-per-token", "3"], "--chars-per-token: --from csv does not "
         "estimate tokens"),
        (["--from", "jsonl", "--chars-per-token", "4"], "--chars-per-token: --from jsonl does not "
         "estimate tokens"),
    ]
    for args, msg in cases:
        r = run("import", *args, data(CHAT))
        assert r.returncode == 2, (args, r.stderr)
        assert r.stdout == ""
        assert r.stderr.startswith("libra: trace: " + msg), (args, r.stderr)


def test_import_openai_chat_errors(tmp_path):
    good = open(data(CHAT), encoding="utf-8").readline()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + '{"messages": [{"role": "user", "content": "hi"}, '
                   '{"role": "assistant", "content": "x", "tool_calls": '
                   '[{"id": "a", "function": {"name": "f"}}]}, '
                   '{"role": "tool", "tool_call_id": "zz", "content": "?"}]}\n')
    r = run("import", "--from", "openai-chat", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    col = bad.read_text().splitlines()[1].index('"tool_call_id"') + 1
    assert r.stderr == (f"libra: {bad}:2:{col}: messages.2.tool_call_id: 'zz' answers no open "
                        "tool call of the last assistant message\n")
    bad.write_text("\n" + good + '{"messages": [}\n')
    r = run("import", "--from", "openai-chat", str(bad))
    assert r.returncode == 2
    assert r.stderr == f"libra: {bad}:3:15: invalid JSON: unexpected token near '}}'\n"
    bad.write_text('{"task_id": [1], "messages": []}\n')
    r = run("import", "--from", "openai-chat", str(bad))
    assert r.stderr == f"libra: {bad}:1:2: task_id: expected a string or an integer\n"
    bad.write_text('{"id": 3, "messages": [{"role": "user", "content": "q"}]}\n')
    r = run("import", "--from", "openai-chat", str(bad))
    assert r.stderr == (f"libra: {bad}:1:11: messages: no assistant message (nothing to "
                        "import)\n")
    # a whole tau-bench file is not one trajectory per line
    r = run("import", "--from", "openai-chat", data("tau-bench/airline-sample.json"))
    assert r.returncode == 2
    assert "invalid JSON" in r.stderr


@pytest.mark.parametrize("parts,where,why", [
    ('[5, {"type": "text", "text": "hello"}]', "content.0", "expected a content part object"),
    ('[{"type": "text", "text": 5}]', "content.0.text", "expected a string"),
])
def test_import_openai_chat_refuses_malformed_content_parts(tmp_path, parts, where, why):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": "a", "messages": [{"role": "user", "content": "hi"}, '
                   '{"role": "assistant", "content": %s}]}\n' % parts)
    r = run("import", "--from", "openai-chat", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"libra: {bad}:1:")
    assert r.stderr.endswith(f": messages.1.{where}: {why}\n"), r.stderr


@pytest.mark.parametrize("usage,own,key,why", [
    ('{"prompt_tokens": 0, "completion_tokens": 0}', "", "prompt_tokens",
     "0 leaves no tokens for the 1 turns without a usage of their own (those with one count 0)"),
    ('{"completion_tokens": 0}', "", "completion_tokens", "0 leaves no tokens"),
    ('{"prompt_tokens": 50}', ', "usage": {"prompt_tokens": 60}', "prompt_tokens",
     "50 differs from the 60 that the assistant messages' own usage sums to"),
])
def test_import_openai_chat_refuses_a_usage_its_turns_cannot_sum_to(tmp_path, usage, own, key,
                                                                    why):
    """A line's usage is a total the turns are scaled to sum to exactly (docs/trace-format.md);
    one they cannot reach is refused, not dropped without a word."""
    bad = tmp_path / "z.jsonl"
    bad.write_text('{"id": "a", "usage": %s, "messages": [{"role": "user", "content": "hi"}, '
                   '{"role": "assistant", "content": "xyz"%s}]}\n' % (usage, own))
    r = run("import", "--from", "openai-chat", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    col = bad.read_text().index(f'"{key}"') + 1
    assert r.stderr.startswith(f"libra: {bad}:1:{col}: usage.{key}: {why}"), r.stderr
    good = tmp_path / "g.jsonl"  # a total they can reach is met exactly
    good.write_text('{"id": "a", "usage": {"prompt_tokens": 9, "completion_tokens": 4}, '
                    '"messages": [{"role": "user", "content": "hi"}, '
                    '{"role": "assistant", "content": "xyz"}]}\n')
    r = run("import", "--from", "openai-chat", str(good))
    assert r.returncode == 0, r.stderr
    turn = json.loads(r.stdout.splitlines()[1])["turns"][0]
    assert (turn["prompt_tokens"], turn["generated_tokens"]) == (9, 4)
