"""End-to-end tests of what `libra report`, `libra emu` and `libra serve` refuse before they
write or serve anything (docs/cli.md, docs/report.md, docs/emu.md, docs/serve.md).

- `libra emu --fail` and `--stall` given twice for one instance are refused (exit 2, naming the
  flag and the instance): an instance fails once and stalls once, so the second would silently
  replace the first. A stall that would begin when or after its instance has failed is refused
  too: it would change nothing. An empty item in a fault spec (`instance=0,,after_s=1`, a
  trailing ',') is refused as any empty value is, not skipped.
- `libra emu --host` with a port in it (`127.0.0.1:8000`) is a bad flag (exit 2, pointing at
  `--base-port`), not an address the OS fails to listen on (exit 3); bare and bracketed IPv6
  addresses still listen.
- `libra serve --admin-token-file` reads the file's first line no further than a request's
  headers could carry it (64 KiB): a file of one endless line (`/dev/zero`) or a line of
  megabytes is refused at once (exit 2) instead of being read into memory whole.
- `libra serve --listen ::1` is refused: unbracketed, it read as host `::` (every interface)
  and port 1, where the loopback was meant; `[::1]:PORT` and `::1:PORT` still listen.
- `libra report --svg DIR` never writes a figure over one of its inputs or over `-o`'s file
  (exit 2, nothing written), and a figure file that cannot be written (a directory of its name)
  is found before any figure is written, so no half of the figures is left behind (exit 3).
- `libra report` refuses a sweep whose cells do not hold one run per seed at every grid point,
  or a cell of no grid point (exit 2, FILE:LINE:COL and the member): the medians would be of
  fewer seeds than the captions say, or points would be left out without a word.

Needs LIBRA_BIN.
"""

import json
import os

import pytest

from cli_run import run, refused
from emu_util import Emu


# ---- libra emu: faults and --host ----------------------------------------------------------

@pytest.mark.parametrize("args,said", [
    (["--fail", "instance=0,after_s=1", "--fail", "instance=0,after_s=2"],
     "libra: emu: --fail: instance: 0 is given twice (an instance fails once)\n"),
    (["--instances", "tp1x2", "--stall", "instance=1,after_s=1,for_s=2",
      "--stall", "instance=1,after_s=5,for_s=1"],
     "libra: emu: --stall: instance: 1 is given twice (an instance stalls once)\n"),
    (["--stall", "instance=0,after_s=2,for_s=1", "--fail", "instance=0,after_s=1"],
     "libra: emu: --stall: after_s: instance 0 would stall at 2 s, at or after it fails at 1 s "
     "(--fail): the stall would never begin\n"),
    # equal times: the failure comes first, so the stall never begins
    (["--fail", "instance=0,after_s=1.5", "--stall", "instance=0,after_s=1.5,for_s=1"],
     "libra: emu: --stall: after_s: instance 0 would stall at 1.5 s, at or after it fails at "
     "1.5 s (--fail): the stall would never begin\n"),
])
def test_emu_refuses_a_fault_that_would_replace_or_miss_another(args, said):
    assert refused(run("emu", *args, timeout=30)) == said


def test_emu_still_takes_a_stall_before_the_failure_of_its_instance():
    with Emu("--stall", "instance=0,after_s=100,for_s=1", "--fail", "instance=0,after_s=200",
             "--fail", "instance=1,after_s=5", "--instances", "tp1x2") as emu:
        assert [i["instance"] for i in emu.instances] == [0, 1]


@pytest.mark.parametrize("flag,spec", [
    ("--fail", "instance=0,after_s=1,"), ("--fail", "instance=0,,after_s=1"),
    ("--fail", ",instance=0,after_s=1"), ("--stall", "instance=0,after_s=1,for_s=1,"),
])
def test_emu_refuses_an_empty_item_in_a_fault(flag, spec):
    err = refused(run("emu", flag, spec, timeout=30))
    assert err == f"libra: emu: {flag}: an empty item in '{spec}'\n"  # a value: no usage


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:1", "a:b"])
def test_emu_refuses_a_host_that_is_no_address(host):
    err = refused(run("emu", "--host", host, timeout=30))
    assert err == f"libra: emu: --host: '{host}' is not an address (a port is --base-port's)\n"


# ---- libra serve: the admin token file -----------------------------------------------------

def test_serve_reads_no_more_of_an_endless_token_file_than_a_token_holds():
    r = run("serve", "--engine", "http://127.0.0.1:9", "--admin-token-file", "/dev/zero",
            timeout=20)
    assert refused(r) == "libra: serve: /dev/zero: the admin token holds a NUL byte\n"


@pytest.mark.parametrize("length,said", [
    (4097, "not 4097"), (65536, "not 65536"), (65537, "not more than 65536"),
    (8 << 20, "not more than 65536"),
])
def test_serve_refuses_a_token_line_too_long_without_reading_it_whole(tmp_path, length, said):
    token = tmp_path / "token"
    token.write_text("x" * length + "\n")
    r = run("serve", "--engine", "http://127.0.0.1:9", "--admin-token-file", str(token),
            timeout=20)
    assert refused(r) == (f"libra: serve: {token}: the admin token must be 16 to 4096 "
                          f"characters, {said}\n")


def test_serve_takes_a_token_of_4096_characters_ending_in_crlf(tmp_path):
    """The longest token with a Windows line end still reaches the next check (the engine)."""
    token = tmp_path / "token"
    token.write_bytes(b"t" * 4096 + b"\r\n")
    r = run("serve", "--engine", "http://127.0.0.1:9", "--admin-token-file", str(token),
            timeout=20)
    assert r.returncode == 3 and r.stdout == "", r.stderr
    assert "engine http://127.0.0.1:9 cannot be reached" in r.stderr


# ---- libra serve: --listen -----------------------------------------------------------------

@pytest.mark.parametrize("listen", ["::1", "fe80:::80", "1::"])
def test_serve_refuses_an_unbracketed_host_ending_in_a_colon(listen):
    """`--listen ::1` read as host :: (every interface) and port 1; the loopback with a port is
    [::1]:PORT (or ::1:PORT)."""
    err = refused(run("serve", "--engine", "http://127.0.0.1:9", "--listen", listen))
    assert err.startswith(f"libra: serve: --listen: '{listen}': a host may not end in ':' "), err


# ---- libra report: --svg and sweeps --------------------------------------------------------

@pytest.fixture(scope="module")
def sim_result(tmp_path_factory):
    path = tmp_path_factory.mktemp("sim") / "run.json"
    r = run("sim", "--steps", "2", "--json", "-o", str(path))
    assert r.returncode == 0, r.stderr
    return path


@pytest.fixture(scope="module")
def sweep_result(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "sweep.json"
    r = run("sim", "--steps", "2", "--seeds", "2", "--sweep", "rl.samples=4,8", "--json", "-o",
            str(path))
    assert r.returncode == 0, r.stderr
    return path


def test_report_svg_refuses_to_write_a_figure_over_an_input(tmp_path, sim_result):
    figs = tmp_path / "figs"
    figs.mkdir()
    inp = figs / "sim-step-time.svg"  # a result saved under a figure's name
    inp.write_bytes(sim_result.read_bytes())
    err = refused(run("report", str(inp), "--svg", str(figs)))
    assert err.startswith(f"libra: report: --svg '{figs}' would write '{inp}' over the input "
                          f"file '{inp}'\n"), err
    assert inp.read_bytes() == sim_result.read_bytes()
    assert os.listdir(figs) == ["sim-step-time.svg"]


def test_report_svg_refuses_a_figure_that_is_the_output_page(tmp_path, sim_result):
    figs = tmp_path / "figs"
    page = figs / "sim-utilisation.svg"
    err = refused(run("report", str(sim_result), "--svg", str(figs), "-o", str(page)))
    assert err.startswith(f"libra: report: -o and --svg name one file, '{page}': one would "
                          "replace the other\n"), err
    assert not os.path.exists(page) and os.listdir(figs) == []


def test_report_svg_writes_no_figure_when_one_cannot_be_written(tmp_path, sim_result):
    figs = tmp_path / "figs"
    (figs / "sim-utilisation.svg").mkdir(parents=True)
    page = tmp_path / "page.html"
    r = run("report", str(sim_result), "--svg", str(figs), "-o", str(page))
    assert r.returncode == 3 and r.stdout == "", r.stderr
    assert r.stderr == f"libra: cannot write '{figs}/sim-utilisation.svg': is a directory\n"
    assert os.listdir(figs) == ["sim-utilisation.svg"]  # sim-step-time.svg was not written
    assert not page.exists()


def test_report_svg_may_share_a_device_with_the_page(tmp_path, sim_result):
    figs = tmp_path / "figs"
    r = run("report", str(sim_result), "--svg", str(figs), "-o", "/dev/null")
    assert r.returncode == 0, r.stderr
    assert "sim-step-time.svg" in os.listdir(figs)


def edited(src, tmp_path, edit):
    doc = json.loads(src.read_text())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("edit,said", [
    (lambda d: d.update(cells=d["cells"][:3]),
     "1:2: cells: grid point 1 holds 1 run, not one per seed (2): the sweep is cut short or "
     "edited"),
    (lambda d: d.update(cells=[]),
     "1:2: cells: grid point 0 holds 0 runs, not one per seed (2): the sweep is cut short or "
     "edited"),
    (lambda d: d.update(cells=d["cells"] + d["cells"][:1]),
     "1:2: cells: grid point 0 holds 3 runs, not one per seed (2): the sweep is cut short or "
     "edited"),
    (lambda d: d["cells"][0].update(point=2),
     "cells.0.point: 2 is no grid point (the summary has 2)"),
    (lambda d: d["cells"][0].pop("point"),
     "cells.0.point: missing: a cell is the run of a grid point"),
])
def test_report_refuses_a_sweep_without_one_run_per_seed_at_each_point(tmp_path, sweep_result,
                                                                      edit, said):
    path = edited(sweep_result, tmp_path, edit)
    err = refused(run("report", str(path), "-o", str(tmp_path / "page.html")))
    assert err.startswith(f"libra: {path}:") and err.rstrip("\n").endswith(said), err
    assert not (tmp_path / "page.html").exists()


def test_report_draws_a_whole_sweep(sweep_result):
    r = run("report", str(sweep_result))
    assert r.returncode == 0, r.stderr
    assert "median across its 2 seeds" in r.stdout

