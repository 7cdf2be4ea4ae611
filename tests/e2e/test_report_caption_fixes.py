"""Reproductions of `libra report` captions that named a command other than the one that made
the input, and of a page that left out what it counts (docs/report.md).

A caption's "Made by" command, with the named config, reproduces the input: each route
evaluation here is made, its page's command is run with the config it was made with, and the
two results must be the same document, config digest included. An attribution sweep's page
counts its failed cells as a plain sweep's does.
"""

import html
import json
import os
import re
import shlex
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
SMALL = os.path.join(SOURCE_DIR, "tests", "data", "trace", "small.jsonl")
LAYOUT = ["--buckets", "tp1:4000,tp2:12000,tp4:30000"]


def libra(*args, codes=(0,)):
    p = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=240)
    assert p.returncode in codes, p.stderr
    return p


def made_by(result, tmp_path):
    """The command the page of result says made it, and what it cites in brackets."""
    page = tmp_path / "page.html"
    libra("report", str(result), "-o", str(page))
    m = re.search(r"Made by <code>(.*?) \((.*?)\)</code>", page.read_text())
    assert m, page.read_text()[:2000]
    return html.unescape(m.group(1)), html.unescape(m.group(2))


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    out = {"small": SMALL, "r2e": str(d / "r2e.jsonl"), "r2e40": str(d / "r2e40.jsonl")}
    libra("trace", "gen", "r2e-gym", "--steps", "6", "--seed", "1", "--batch", "32",
          "--samples", "4", "-o", out["r2e"])
    libra("trace", "gen", "r2e-gym", "--steps", "40", "--seed", "1", "-o", out["r2e40"])
    return out


@pytest.mark.parametrize("trace,flags,absent", [
    ("small", [], ["--buckets"]),  # the planner's layout: no --buckets, and no counts
    ("r2e", LAYOUT, []),
    ("r2e", LAYOUT + ["--folds", "3"], ["--train-steps"]),
    ("r2e", LAYOUT + ["--train-steps", "2", "--min-visits", "3", "--truncated", "exact"], []),
    ("r2e40", LAYOUT + ["--placebo", "--policy", "plas", "--seed", "7"], []),
    ("r2e40", LAYOUT + ["--placebo", "--policy", "cmlfq"], []),
    ("r2e40", LAYOUT + ["--placebo"], ["--policy"]),
    ("r2e", LAYOUT + ["--policy", "cmlfq"], ["--placebo"]),
])
def test_a_route_caption_reproduces_its_input(traces, tmp_path, trace, flags, absent):
    config = tmp_path / "config.json"
    config.write_text("{}")  # the defaults: the config the input was made with
    first = tmp_path / "first.json"
    libra("route", "eval", traces[trace], *flags, "--config", str(config), "--json", "-o",
          str(first), codes=(0, 1))
    command, cited = made_by(first, tmp_path)
    doc = json.loads(first.read_text())
    assert cited.startswith(f"config digest {doc['config_digest']}, seed {doc['seed']}")
    words = shlex.split(command)
    assert words[:3] == ["libra", "route", "eval"] and words.count("CONFIG") == 1
    for flag in absent:
        assert flag not in words, command
    for flag in flags:
        assert flag in words, command
    again = tmp_path / "again.json"
    words = [str(config) if w == "CONFIG" else w for w in words[1:]]
    p = libra(*words, "-o", str(again), codes=(0, 1, 2))
    assert p.returncode != 2, (command, p.stderr)
    assert json.loads(again.read_text()) == doc, command


def test_an_attribution_page_counts_its_failed_cells(tmp_path):
    sweep = tmp_path / "attribution.json"
    libra("sim", "--steps", "6", "--attribution", "--sweep", "cluster.gpus=8,48", "--seeds", "2",
          "--json", "-o", str(sweep), codes=(1,))
    cells = json.loads(sweep.read_text())["cells"]
    failed = sum("error" in c for c in cells)
    assert failed
    page = tmp_path / "page.html"
    libra("report", str(sweep), "-o", str(page))
    assert (f"<code>failed cells</code>: {failed} of {len(cells)} runs failed and are in no "
            "median (cells[].error)") in page.read_text()


def test_a_placebo_of_another_type_is_refused(traces, tmp_path):
    """The caption reads placebo's presence as --placebo: a value libra never writes there is
    refused, not read as the flag."""
    result = tmp_path / "route.json"
    libra("route", "eval", traces["r2e"], *LAYOUT, "--json", "-o", str(result))
    doc = json.loads(result.read_text())
    doc["placebo"] = 7
    result.write_text(json.dumps(doc, indent=1))
    p = libra("report", str(result), "-o", str(tmp_path / "page.html"), codes=(2,))
    assert re.match(rf"libra: {re.escape(str(result))}:\d+:\d+: placebo: must be an object, ",
                    p.stderr), p.stderr
