"""End-to-end tests of input guards of `libra emu` and `libra load` (docs/cli.md, docs/emu.md,
docs/load.md).

- `libra load` stopped by SIGINT or SIGTERM stops the run as an engine's failure does (the turns
  in flight cancelled, the steps finished reported) and says so on standard error, exiting
  128 + the signal (130 for SIGINT), rather than dying without a word.
- An `--engines` URL with a query or a fragment is refused (exit 2, naming the flag and the
  URL): the API's paths are appended to a base URL, so every turn would go to a wrong target.
- `--set rl.sync_mode=keep` with `--style areal` or `slime`, whose clients abort the turns in
  flight for an update their own way, is refused: it would change nothing.
- A `libra load` run whose weight update failed at its pause resumes no engine on its way out
  and counts no update.
- A `libra load` run whose every trajectory reached `rl.trajectory_timeout_s` stops with an
  error naming the key (exit 1, the steps printed), not a table of zeros and exit 0.
- `libra emu --ports-file -` is refused: the ready lines go to standard output already, and
  twice them would read as twice the instances.
- `libra emu --host` with brackets that enclose nothing or no whole address (`[]`, `[::1`,
  `[::1]:8000`) is refused as a bad flag (exit 2), not tried as an address to listen on.

Needs LIBRA_BIN.
"""

import http.client
import json
import signal
import subprocess
import time

import pytest

from emu_util import LIBRA, Emu

SCALE = "0.005"


def run(*args, timeout=60):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=timeout)


def refused(r):
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
    return r.stderr


# ---- libra load -------------------------------------------------------------------------------

def served(port):
    """Whether the emulated instance on port has received a generation request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    line = next(l for l in text.splitlines() if l.startswith("libra_emu_requests_total "))
    return float(line.split()[1]) > 0


@pytest.mark.parametrize("sig,name", [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")])
def test_load_stopped_by_a_signal_says_so_and_exits_128_plus_it(tmp_path, sig, name):
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = ",".join(i["url"] for i in emu.instances)
        out = tmp_path / "t.jsonl"
        # far more steps than the test waits for: the signal meets the run in flight
        p = subprocess.Popen([LIBRA, "load", "--engines", urls, "--time-scale", SCALE,
                              "--steps", "100000", "--batch", "8", "--json", "-o", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the run has started once the engines have served a turn
        while not any(served(i["port"]) for i in emu.instances):
            assert p.poll() is None, p.communicate()
            time.sleep(0.05)
        p.send_signal(sig)
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 128 + sig, (p.returncode, stderr)
        assert f"libra: load: {name}: interrupted after " in stderr, stderr
        assert " of 100000 steps" in stderr, stderr
        doc = json.loads(stdout)  # a whole document: the steps finished, and why it stopped
        assert doc["error"].startswith("interrupted after ") and len(doc["steps"]) < 100000
        assert out.read_text().startswith('{"libra_trace"')


def test_load_whose_every_trajectory_timed_out_says_nothing_trained():
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = ",".join(i["url"] for i in emu.instances)
        r = run("load", "--engines", urls, "--time-scale", SCALE, "--steps", "2", "--batch", "8",
                "--set", "rl.trajectory_timeout_s=0.001", "--json")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "rl.trajectory_timeout_s 0.001 s stopped every trajectory" in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    assert doc["error"].startswith("rl.trajectory_timeout_s") and len(doc["steps"]) == 2


def is_paused(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/is_paused")
    paused = json.loads(c.getresponse().read())["is_paused"]
    c.close()
    return paused


def test_load_stopped_mid_update_resumes_the_engines_it_paused():
    """Stopped between a weight update's pause and its end, the run sends the paused engines
    the call that ends the pause on its way out (vLLM's /resume here): they do not stay paused,
    holding every turn a next client sends."""
    with Emu("--instances", "tp1x2", "--dev-mode", scale=SCALE) as emu:
        urls = ",".join(i["url"] for i in emu.instances)
        p = subprocess.Popen([LIBRA, "load", "--engines", urls, "--style", "skyrl",
                              "--time-scale", SCALE, "--steps", "100000", "--batch", "8",
                              "--set", "rl.sync_interval=1", "--set", "rl.sync_mode=abort_resume",
                              "--set", "rl.transport=disk_reload"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while not any(is_paused(i["port"]) for i in emu.instances):  # an update has begun
            assert p.poll() is None, p.communicate()
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=60)
        assert p.returncode == 130, (p.returncode, stderr)
        assert "did not resume" not in stderr, stderr
        assert not any(is_paused(i["port"]) for i in emu.instances)


def test_load_whose_pause_failed_resumes_no_engine_and_counts_no_update():
    """A skyrl update against engines without vLLM's development-mode endpoints fails at its
    pause (404): the error names that failure alone, not every engine as "paused ... did not
    resume" (the resume was owed from the update's start, not from a pause that succeeded),
    and the update that never ran is not counted among the weight updates."""
    with Emu("--instances", "tp1x4", scale=SCALE) as emu:
        urls = ",".join(i["url"] for i in emu.instances)
        r = run("load", "--engines", urls, "--style", "skyrl", "--time-scale", SCALE,
                "--steps", "3", "--batch", "8", "--set", "rl.sync_interval=1",
                "--set", "rl.transport=disk_reload", "--json")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "/pause?mode=wait with status 404" in r.stderr, r.stderr
    assert "did not resume" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["weight_updates"] == 0


@pytest.mark.parametrize("suffix", ["?x=1", "#frag", "/v1?x=1", "/?x"])
def test_load_refuses_an_engine_url_with_a_query_or_fragment(suffix):
    url = "http://127.0.0.1:1234" + suffix
    err = refused(run("load", "--engines", url))
    assert "--engines: " in err and "a query or fragment in a base URL" in err, err


@pytest.mark.parametrize("style", ["areal", "slime"])
def test_load_refuses_sync_mode_keep_with_a_style_that_aborts(style):
    err = refused(run("load", "--engines", "http://127.0.0.1:1234", "--style", style,
                      "--set", "rl.sync_mode=keep", "--set", "rl.transport=nccl"))
    assert f"rl.sync_mode keep has no effect with --style {style}" in err, err
    assert "--set rl.sync_mode" in err, err


def test_load_takes_sync_mode_keep_from_an_experiment_file_with_areal(tmp_path):
    # the file describes the job for libra sim too: its value is taken (the run then fails on
    # the unreachable engine, exit 1, past every input check)
    exp = tmp_path / "exp.json"
    exp.write_text(json.dumps({"rl": {"sync_mode": "keep", "transport": "nccl", "steps": 1,
                                      "batch_trajectories": 4}}))
    r = run("load", str(exp), "--engines", "http://127.0.0.1:1", "--style", "areal")
    assert r.returncode == 1, (r.returncode, r.stderr)


# ---- libra emu --------------------------------------------------------------------------------

def test_emu_refuses_ports_file_on_standard_output():
    err = refused(run("emu", "--ports-file", "-"))
    assert "--ports-file: '-' is standard output" in err, err


@pytest.mark.parametrize("host", ["[]", "[::1", "::1]", "[::1]:8000"])
def test_emu_refuses_a_host_with_stray_brackets(host):
    err = refused(run("emu", "--host", host))
    assert f"--host: '{host}' is not an address" in err, err


@pytest.mark.parametrize("host", ["[::1]", "::1"])
def test_emu_still_listens_on_a_bracketed_or_bare_ipv6_host(host):
    with Emu("--host", host) as emu:
        assert emu.instances[0]["url"].startswith("http://[::1]:")


@pytest.mark.parametrize("target,path", [("//x/pause_generation", "//x/pause_generation"),
                                         ("//v1/models", "//v1/models"),
                                         ("//h/health", "//h/health")])
def test_a_path_opening_with_two_slashes_is_that_path(target, path):
    """A request target "//x/pause_generation" was read as host x and path /pause_generation:
    it paused the engine (and //v1/models answered about /models)."""
    with Emu(scale=SCALE) as emu:
        c = http.client.HTTPConnection("127.0.0.1", emu.instances[0]["port"], timeout=30)
        c.request("POST" if "pause" in target else "GET", target, body=b"{}")
        r = c.getresponse()
        body = r.read().decode()
        assert r.status == 404 and path in body, (r.status, body)
        c.request("GET", "/v1/models")
        assert c.getresponse().status == 200
