"""The gateway's output files (docs/serve.md "Outputs"): --capture and --decisions are appended
across restarts, a line is written before the call it records is answered (so kill -9 loses no
acknowledged trajectory), a line a crash cut short is mended at the next start, a file that is
another trace (or no file of lines) is refused, every decision line is JSON whatever the
identity, and a file that cannot be written makes the exit status 3."""

import contextlib
import json
import signal
import subprocess

import pytest

from emu_util import LIBRA, Emu, ScriptedVllm, Serve, answer, post

BUCKETS = ["--set", "sched.buckets=tp1:40960"]


def trajectory(port, tid):
    """One turn of trajectory tid, then its finish; returns the finish's status."""
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 2},
            "libra": {"trajectory": tid}}
    assert post(port, "/generate", body)[0] == 200
    return post(port, "/libra/v1/trajectories/%s/events" % tid,
                {"kind": "finish", "status": "completed"})[0]


@contextlib.contextmanager
def serving(*urls, args):
    """A gateway stopped when the block ends, failed or not; its (exit status, standard error)
    are then gw.stopped."""
    gw = Serve(*urls, args=args)
    try:
        yield gw
    finally:
        gw.stopped = gw.stop()


def lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def captured_ids(path):
    header, *records = lines(path)
    assert header["libra_trace"] == 1, header
    return [r["extra"]["id"] for r in records]


def test_outputs_are_appended_across_restarts_and_a_kill_9_loses_no_acknowledged_line(tmp_path):
    capture, decisions = tmp_path / "capture.jsonl", tmp_path / "decisions.jsonl"
    args = [*BUCKETS, "--capture", str(capture), "--decisions", str(decisions), "--state-dir",
            str(tmp_path / "state")]
    with Emu() as emu:
        url = emu.instances[0]["url"]
        with serving(url, args=args) as gw:
            for k in range(3):
                assert trajectory(gw.port, "k%d" % k) == 200  # acknowledged: committed
            gw.proc.send_signal(signal.SIGKILL)
        assert captured_ids(capture) == ["libra:k0", "libra:k1", "libra:k2"]
        with Serve(url, args=args) as gw:
            assert trajectory(gw.port, "k3") == 200
        assert captured_ids(capture) == ["libra:k0", "libra:k1", "libra:k2", "libra:k3"]
        assert [d["trajectory"] for d in lines(decisions)] == \
            ["libra:k0", "libra:k1", "libra:k2", "libra:k3"]
    p = subprocess.run([LIBRA, "trace", "validate", str(capture)], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stderr


def test_a_last_line_cut_short_is_removed_at_the_next_start(tmp_path):
    capture, decisions = tmp_path / "capture.jsonl", tmp_path / "decisions.jsonl"
    args = [*BUCKETS, "--capture", str(capture), "--decisions", str(decisions)]
    with Emu() as emu:
        url = emu.instances[0]["url"]
        with Serve(url, args=args) as gw:
            assert trajectory(gw.port, "a") == 200
        for path in (capture, decisions):
            with open(path, "a") as f:
                f.write('{"step": 0, "prom')  # a crash in the middle of a line
        with serving(url, args=args) as gw:
            assert trajectory(gw.port, "b") == 200
        rc, err = gw.stopped
        assert rc == 0, err
        for flag, path in (("--capture", capture), ("--decisions", decisions)):
            assert "libra: serve: %s '%s': its last line was cut short" % (flag, path) in err
    assert captured_ids(capture) == ["libra:a", "libra:b"]
    assert [d["trajectory"] for d in lines(decisions)] == ["libra:a", "libra:b"]


@pytest.mark.parametrize("flag,content,says", [
    ("--capture", '{"libra_trace": 1, "workload": "swe-bench", "model": "qwen3-14b"}\n',
     "is a trace of workload 'swe-bench' and model 'qwen3-14b', not of this gateway's "
     "'r2e-gym' and 'qwen3-14b'"),
    ("--capture", "notes\n", "not a trace to append to"),
    ("--decisions", "notes\n", "its first line is not a decision"),
    ("--capture", "x" * 70000, "no whole line in its first 64 KiB"),
], ids=["another-trace", "not-a-trace", "not-decisions", "no-line"])
def test_a_file_that_is_not_this_output_is_refused_and_left_as_it_was(tmp_path, flag, content,
                                                                     says):
    path = tmp_path / "kept"
    path.write_text(content)
    with Emu() as emu:
        p = subprocess.run([LIBRA, "serve", "--engine", emu.instances[0]["url"], *BUCKETS, flag,
                            str(path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert says in p.stderr, p.stderr
    assert path.read_text() == content


@pytest.mark.parametrize("flag", ["--capture", "--decisions"])
def test_standard_output_is_not_an_output_file(flag):
    p = subprocess.run([LIBRA, "serve", "--engine", "http://127.0.0.1:9", *BUCKETS, flag, "-"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "%s: '-' is not a file" % flag in p.stderr, p.stderr


def test_every_decision_is_a_json_line_whatever_the_identity(tmp_path):
    decisions = tmp_path / "decisions.jsonl"
    with Emu() as emu, Serve(emu.instances[0]["url"],
                             args=[*BUCKETS, "--decisions", str(decisions)]) as gw:
        body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 2}}
        for tid in ('q"uote', "back\\slash", "new\nline\ttab\x01"):
            assert post(gw.port, "/generate", {**body, "libra": {"trajectory": tid}})[0] == 200
        skyrl = {"instance_id": 'i"1', "repetition_id": 0}  # SkyRL's object, taken as written
        assert post(gw.port, "/generate", {**body, "trajectory_id": skyrl})[0] == 200
        # a header's bytes as sent (http.client writes str values as Latin-1)
        assert post(gw.port, "/generate", body, headers={"X-Session-ID": 's"\\\xff'})[0] == 200
    got = [d["trajectory"] for d in lines(decisions)]
    assert got[:3] == ['libra:q"uote', "libra:back\\slash", "libra:new\nline\ttab\x01"]
    assert got[3] == "trajectory_id:" + json.dumps(skyrl)
    assert got[4] == list(b"session:s\"\\\xff")  # not UTF-8: its bytes


def test_a_decisions_file_that_cannot_be_written_makes_the_exit_status_3():
    with Emu() as emu:
        with serving(emu.instances[0]["url"], args=[*BUCKETS, "--decisions", "/dev/full"]) as gw:
            assert trajectory(gw.port, "a") == 200  # the gateway goes on serving
        rc, err = gw.stopped
    assert rc == 3, err
    assert "libra: serve: --decisions: cannot write '/dev/full': no space left on device; " \
        "--decisions stopped" in err, err


def test_an_engine_count_past_what_a_trace_holds_is_not_taken(tmp_path):
    """Two such turns overflowed the trajectory's sums, and the capture refused the record and
    stopped; a state dir would have held a count its restart refuses."""
    bogus = json.dumps({"choices": [{"text": "x"}],  # 2^62 tokens generated, it says
                        "usage": {"prompt_tokens": 3, "completion_tokens": 2 ** 62}}).encode()
    engine = ScriptedVllm(lambda h, path, body: answer(h, bogus))
    capture = tmp_path / "capture.jsonl"
    try:
        with serving(engine.url + ",tp=1",
                     args=[*BUCKETS, "--capture", str(capture)]) as gw:
            for _ in range(2):
                assert post(gw.port, "/v1/completions", {"prompt": "abc", "max_tokens": 4},
                            headers={"X-Session-ID": "bogus"})[0] == 200
            assert post(gw.port, "/libra/v1/trajectories/bogus/events",
                        {"kind": "finish", "status": "completed"})[0] == 200
    finally:
        engine.shutdown()
    rc, err = gw.stopped
    assert rc == 0, err
    (record,) = lines(capture)[1:]
    assert [t["generated_tokens"] for t in record["turns"]] == [0, 0]
