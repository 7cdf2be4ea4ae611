"""`libra report` on `libra sim` results at their edges (docs/report.md): captions whose command,
with the config the input was made with, runs and reproduces it (a timeline cut to the run's
steps, a sweep of one seed over a trace), sweep figures with nothing to draw listed under "Not
drawn", and a sweep whose grid disagrees with its cells refused.
"""

import html
import json
import os
import re
import shlex
import subprocess

LIBRA = os.environ["LIBRA_BIN"]
SWEEP_FIGURES = ["trained-tokens-per-s", "mean-step-s", "rollout-utilisation",
                 "train-utilisation", "tail-share", "ratios"]


def libra(*args, codes=(0,), cwd=None):
    p = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=240, cwd=cwd)
    assert p.returncode in codes, p.stderr
    return p


def reproduces(result, config, tmp_path):
    """Runs the command the page of result says made it, with config, and compares."""
    page = tmp_path / "page.html"
    libra("report", str(result), "-o", str(page))
    m = re.search(r"Made by <code>(.*?) \(", page.read_text())
    assert m, page.read_text()[:2000]
    words = shlex.split(html.unescape(m.group(1)))
    assert words[:3] == ["libra", "sim", "CONFIG"], words
    again = tmp_path / "again.json"
    p = libra(*[str(config) if w == "CONFIG" else w for w in words[1:]], "-o", str(again),
              codes=(0, 1, 2), cwd=tmp_path)
    assert p.returncode != 2, (words, p.stderr)
    assert json.loads(again.read_text()) == json.loads(result.read_text()), words


def test_a_timeline_caption_reproduces_a_range_past_the_run(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"sim": {"timeline_steps": "0:10000000"}, '
                      '"rl": {"batch_trajectories": 8}}')
    first = tmp_path / "first.json"
    libra("sim", str(config), "--steps", "3", "--json", "-o", str(first))
    assert json.loads(first.read_text())["modes"]["libra"]["timeline"]["steps"]["last"] == 2
    reproduces(first, config, tmp_path)


def test_a_one_seed_sweep_of_a_trace_has_a_caption_that_runs(tmp_path):
    libra("trace", "gen", "r2e-gym", "--steps", "4", "--batch", "8", "-o",
          str(tmp_path / "tr.jsonl"))
    config = tmp_path / "cts.json"
    config.write_text('{"workload": {"trace": "tr.jsonl"}, "sim": {"seed": 5}, '
                      '"rl": {"steps": 3, "batch_trajectories": 8}}')
    first = tmp_path / "first.json"
    libra("sim", str(config), "--sweep", "rl.sync_interval=1,5", "--json", "-o", str(first),
          cwd=tmp_path)
    reproduces(first, config, tmp_path)


def not_drawn(sweep, tmp_path):
    """The figures the page of sweep lists under "Not drawn", having written none of them."""
    figs = tmp_path / "figs"
    page = tmp_path / "page.html"
    libra("report", str(sweep), "-o", str(page), "--svg", str(figs))
    listed = re.findall(r"<li><code>([^<]*)</code>", page.read_text())
    for name in listed:
        assert not (figs / f"sweep-{name}.svg").exists(), name
    return listed


def test_a_sweep_without_libra_lists_its_ratios_as_not_drawn(tmp_path):
    sweep = tmp_path / "ca.json"
    libra("sim", "--steps", "3", "--batch", "8", "--sweep", "sim.modes=colocated,async",
          "--json", "-o", str(sweep))
    assert not_drawn(sweep, tmp_path) == ["ratios"]
    assert (tmp_path / "figs" / "sweep-mean-step-s.svg").exists()


def test_a_sweep_whose_cells_all_failed_draws_nothing(tmp_path):
    sweep = tmp_path / "failed.json"
    libra("sim", "--steps", "3", "--batch", "8", "--sweep", "cluster.gpus=2,4", "--json", "-o",
          str(sweep), codes=(1,))
    assert not_drawn(sweep, tmp_path) == SWEEP_FIGURES + ["failed cells"]


def test_a_grid_that_disagrees_with_the_cells_is_refused(tmp_path):
    sweep = tmp_path / "sw.json"
    libra("sim", "--steps", "3", "--batch", "8", "--sweep", "rl.sync_interval=1,2", "--seeds",
          "2", "--json", "-o", str(sweep))
    doc = json.loads(sweep.read_text())
    doc["grid"][0]["values"].append("3")
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc, indent=1))
    p = libra("report", str(edited), "-o", str(tmp_path / "page.html"), codes=(2,))
    assert re.match(rf"libra: {re.escape(str(edited))}:\d+:\d+: grid: ", p.stderr), p.stderr
    assert "3 grid points" in p.stderr and "6 cells" in p.stderr, p.stderr
    assert "Usage" not in p.stderr and not (tmp_path / "page.html").exists()
