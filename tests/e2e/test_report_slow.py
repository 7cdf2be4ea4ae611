"""`libra report`'s page in a real browser (labelled slow; docs/report.md).

Headless Chromium opens the page from disk and dumps the DOM it built: every figure must be
there as SVG, and the browser must log no console message (the page has no script, so any
message is a parse or resource error). Chromium is not in scripts/apt-packages.txt (too heavy
for CI); without it the test is skipped, saying so.
"""

import os
import re
import shutil
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not CHROMIUM, reason="chromium not installed (Debian package chromium; "
                                         "not in scripts/apt-packages.txt on purpose)")
def test_chromium_renders_the_page_without_console_errors(tmp_path):
    """One page with every kind of figure: a run with its GPU timeline, a run of the elastic
    pool (lent replicas in the Gantt chart) and an attribution sweep."""
    def sim(name, *args):
        out = tmp_path / name
        subprocess.run([LIBRA, "sim", "--json", *args, "-o", str(out)], check=True,
                       capture_output=True, timeout=240)
        return str(out)

    inputs = [
        sim("run.json", "--steps", "6", "--set", "sim.tune_steps=2", "--timeline", "1:4"),
        sim("pool.json", os.path.join(SOURCE_DIR, "examples", "sim-search-r1-qwen3-14b.json"),
            "--set", "sim.modes=libra", "--set", "ehp.enabled=true", "--steps", "16",
            "--timeline", "0:15"),
        sim("attribution.json", "--steps", "3", "--set", "sim.tune_steps=1", "--attribution",
            "--seeds", "2"),
    ]
    page = tmp_path / "report.html"
    subprocess.run([LIBRA, "report", *inputs, "-o", str(page), "--svg", str(tmp_path / "svg")],
                   check=True, capture_output=True, timeout=120)
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'ud'}",
                        "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    ids = sorted(f.stem for f in (tmp_path / "svg").iterdir())
    assert sorted(re.findall(r'<svg xmlns="http://www.w3.org/2000/svg" id="([^"]+)"',
                             p.stdout)) == ids
    console = [line for line in p.stderr.splitlines() if "CONSOLE" in line]
    assert console == []
