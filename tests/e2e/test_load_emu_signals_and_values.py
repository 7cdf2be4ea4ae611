"""End-to-end tests of `libra load`'s signals and of `libra load` and `libra emu`'s flag values
and request ids (docs/cli.md, docs/emu.md, docs/load.md).

- A second SIGTERM while `libra load` writes its report does not kill it: the JSON document,
  the -o trace and the message are written whole, and the exit status is the first signal's.
- A bad flag value names the flag (and the key of a KEY=VALUE list) without the usage line.
- The areal/slime refusal of `rl.sync_mode keep` from a flag comes whatever the transport.
- The emulator takes a request id as SGLang and vLLM do: a string, on every endpoint.
- The emulator's own errors spell their type one way per status class.
- `--base-port` and `--ports-file` go together; the -o trace names the engines' URLs.

Needs LIBRA_BIN.
"""

import json
import os
import signal
import subprocess
import time

import pytest

from emu_util import LIBRA, Emu, generate, get, post, raw_request

SCALE = "0.005"


def run(*args, timeout=60):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=timeout)


def urls_of(emu):
    return ",".join(i["url"] for i in emu.instances)


def weight_version(port):
    """The emulated instance's weight version: a weight update changes it."""
    return get(port, "/get_weight_version")[1]["weight_version"]


# ---- libra load: signals while the report is written ------------------------------------------

def start_load(emu, out):
    """A long `libra load --json -o out` run against emu, once a step has finished."""
    first = weight_version(emu.port(0))
    p = subprocess.Popen([LIBRA, "load", "--engines", urls_of(emu), "--time-scale", SCALE,
                          "--steps", "100000", "--batch", "8", "--set", "rl.sync_interval=1",
                          "--set", "rl.sync_mode=abort_resume", "--json", "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while weight_version(emu.port(0)) == first:  # a step has finished
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.05)
    return p


def assert_reported(p, stdout, stderr):
    """Exit 143 (the first signal's), a whole JSON document and the message."""
    assert p.returncode == 143, (p.returncode, stderr)
    assert "libra: load: SIGTERM: interrupted after " in stderr, stderr
    doc = json.loads(stdout)
    assert doc["error"].startswith("interrupted after ") and doc["steps"], doc.get("error")


def test_a_second_sigterm_while_the_trace_is_written_is_caught(tmp_path):
    """A second SIGTERM while `libra load` writes its report (held here at opening the -o
    FIFO, which waits for its reader) neither kills it nor loses the buffered JSON document:
    once read, the trace is whole and the run exits 143 with its report."""
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        p = start_load(emu, fifo)
        p.send_signal(signal.SIGTERM)
        time.sleep(1)  # the run winds down and waits at the FIFO for a reader
        p.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        assert p.poll() is None, p.communicate()
        with open(fifo) as f:
            trace = f.read()
        stdout, stderr = p.communicate(timeout=60)
    assert_reported(p, stdout, stderr)
    assert json.loads(trace.splitlines()[0])["libra_trace"] == 1


def test_sigterms_in_a_burst_leave_the_report_and_trace_whole(tmp_path):
    """SIGTERM, then SIGTERMs over and over while the run winds down and writes its report (as
    `timeout` or an impatient driver sends them): the report and message are whole, the -o
    trace is valid and no temporary file is left beside it."""
    out = tmp_path / "t.jsonl"
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        p = start_load(emu, out)
        deadline = time.monotonic() + 60
        while p.poll() is None and time.monotonic() < deadline:
            p.send_signal(signal.SIGTERM)
            time.sleep(0.0005)
        stdout, stderr = p.communicate(timeout=60)
    assert_reported(p, stdout, stderr)
    assert run("trace", "stats", str(out)).returncode == 0
    assert sorted(f.name for f in tmp_path.iterdir()) == ["t.jsonl"]


# ---- bad values: the flag and key, no usage line ----------------------------------------------

NOWHERE = "http://127.0.0.1:1"


@pytest.mark.parametrize("args,why", [
    (["emu", "--host", "[]"], "libra: emu: --host: '[]' is not an address"),
    (["emu", "--host", "127.0.0.1:8000"], "libra: emu: --host: "),
    (["emu", "--ports-file", "-"], "libra: emu: --ports-file: "),
    (["emu", "--fail", "instance=0,after_s=-1"], "libra: emu: --fail: after_s: expected a "),
    (["emu", "--fail", "instance=0.5,after_s=1"], "libra: emu: --fail: instance: expected an "),
    (["emu", "--fail", "instance=0"], "libra: emu: --fail: after_s: missing"),
    (["emu", "--fail", "instance=0,after_s=1,for_s=2"], "libra: emu: --fail: for_s: "),
    (["emu", "--fail", "instance=0,instance=1,after_s=1"], "libra: emu: --fail: instance: "),
    (["emu", "--stall", "instance=0,after_s=1,for_s=0"], "libra: emu: --stall: for_s: "),
    (["emu", "--stall", "instance=0,after_s=1"], "libra: emu: --stall: for_s: missing"),
    (["emu", "--stall", "instance=0,after_s=1,x"], "libra: emu: --stall: "),
    (["emu", "--fail", "instance=3,after_s=1"], "libra: emu: --fail: instance: 3 does not"),
    (["emu", "--instances", "tp3"], "--instances"),
    (["emu", "--time-scale", "0"], "libra: emu: --time-scale: "),
    (["load", "--engines", "http://127.0.0.1:0"], "libra: load: --engines: "),
    (["load", "--engines", "ftp://x"], "libra: load: --engines: "),
    (["load", "--engines", NOWHERE + "," + NOWHERE], "libra: load: --engines: "),
    (["load", "--engines", NOWHERE, "--style", "bogus"], "libra: load: --style: expected "),
    (["load", "--engines", NOWHERE, "--style", "areal", "--set", "rl.sync_mode=keep"],
     "libra: load: --set rl.sync_mode: rl.sync_mode keep has no effect with --style areal"),
])
def test_a_bad_value_names_its_flag_without_the_usage_line(args, why):
    """docs/cli.md "Errors": a bad value says which flag (and key) and why, exit 2, and is not
    followed by the usage line, which is for flags the command does not take."""
    r = run(*args)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
    assert r.stderr.startswith(why) or why in r.stderr, r.stderr
    assert "usage:" not in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr


@pytest.mark.parametrize("args", [["emu", "--bogus"], ["load", "--engines"],
                                  ["load", "--engines", NOWHERE, "--trainer", "--engines",
                                   NOWHERE + "," + "http://127.0.0.1:2"]])
def test_a_flag_not_taken_keeps_the_usage_line(args):
    """An unknown flag, a missing value or a wrong combination is a usage error: one usage
    line follows the message."""
    r = run(*args)
    assert r.returncode == 2 and "usage: libra " in r.stderr, r.stderr


@pytest.mark.parametrize("style", ["areal", "slime"])
@pytest.mark.parametrize("transport", [None, "disk_restart", "nccl"])
def test_keep_with_areal_or_slime_is_refused_for_the_style_whatever_the_transport(style,
                                                                                  transport):
    """rl.sync_mode keep from a flag with areal or slime is refused for what the style does,
    also with the default transport (disk_restart), whose own refusal of keep would hide it."""
    extra = ["--set", "rl.transport=" + transport] if transport else []
    r = run("load", "--engines", NOWHERE, "--style", style, "--set", "rl.sync_mode=keep",
            *extra)
    assert r.returncode == 2, r.stderr
    assert f"keep has no effect with --style {style}" in r.stderr, r.stderr
    assert "disk_restart restarts" not in r.stderr, r.stderr


# ---- libra emu: request ids and error bodies --------------------------------------------------

def test_a_request_id_is_a_string_on_every_endpoint():
    """SGLang's rid (GenerateReqInput, AbortReq) and vLLM's request_id are strings: a string is
    taken by /generate, /abort_request and vLLM's completions, a number is refused by all, the
    message naming the member."""
    with Emu() as emu:
        port = emu.port()
        status, doc = generate(port, [1, 2, 3], 2, rid="5")
        assert status == 200 and doc["meta_info"]["id"] == "5", doc
        assert post(port, "/abort_request", {"rid": "5"})[0] == 200
        for path, body in (("/generate", {"input_ids": [1], "rid": 5}),
                           ("/abort_request", {"rid": 5}),
                           ("/v1/completions", {"model": emu.instances[0]["model"],
                                                "prompt": [1], "request_id": 5})):
            status, doc = post(port, path, body)
            member = "request_id" if "request_id" in body else "rid"
            assert status == 400, (path, doc)
            assert doc["error"]["message"] == member + ": expected a string", (path, doc)


def error_type(answer):
    status, doc = answer
    return status, doc["error"]["type"]


def test_the_emulators_errors_spell_one_type_per_status():
    """Every error the emulator answers itself names one type per status class: 404 for an
    unknown path and for a development-mode path without --dev-mode alike, 400 for a framing
    error and a bad body alike."""
    with Emu() as emu:
        port = emu.port()
        nosuch = error_type(get(port, "/nosuch"))
        pause = error_type(post(port, "/pause", {}))
        assert nosuch == pause == (404, "not_found_error"), (nosuch, pause)
        bad_body = error_type(post(port, "/generate", {"input_ids": [1], "stream": "yes"}))
        not_json = error_type(post(port, "/generate", raw="[1]"))
        framing = raw_request(port, b"POST /generate HTTP/1.1\r\nContent-Length: x\r\n\r\n")
        assert bad_body == not_json == (400, "invalid_request_error"), (bad_body, not_json)
        assert framing[0] == 400 and framing[1]["error"]["type"] == bad_body[1], framing


# ---- libra emu --base-port with --ports-file; the trace's engines --------------------------------

def test_base_port_and_ports_file_go_together(tmp_path):
    """Both flags act: the instances listen from the base port and the file has their lines; the
    usage line does not write them as alternatives."""
    assert "--base-port P | --ports-file" not in run("emu", "--help").stdout
    ports = tmp_path / "ports"
    with Emu("--instances", "tp1x2", "--base-port", "19431", "--ports-file", str(ports)) as emu:
        assert [i["port"] for i in emu.instances] == [19431, 19432]
        lines = [json.loads(ln) for ln in ports.read_text().splitlines()]
        assert lines == emu.instances


def test_the_trace_header_names_the_engines_urls(tmp_path):
    """The -o trace's header says which engines produced it: their URLs in --engines order."""
    out = tmp_path / "t.jsonl"
    with Emu("--instances", "tp1x2", scale=SCALE) as emu:
        urls = [i["url"] for i in reversed(emu.instances)]
        r = run("load", "--engines", ",".join(urls), "--time-scale", SCALE, "--steps", "1",
                "--batch", "8", "-o", str(out), timeout=120)
    assert r.returncode == 0, r.stderr
    header = json.loads(out.read_text().splitlines()[0])
    assert header["import"]["engines"] == urls, header
    assert header["import"]["source"] == "libra load", header
