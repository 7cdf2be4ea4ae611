"""The Python binding (python/libra) given what a new user gets wrong: every mistake raises a
Python exception — libra.Error with the library's message where the library refused it,
TypeError or ValueError where Python refuses it first — and none writes or reads another file
than the one named, crashes, or runs without end.

Needs LIBRA_LIBRARY (liblibra.so of the build) and python/ on PYTHONPATH (tests/CMakeLists.txt).
"""

import os
import pathlib
import subprocess
import sys

import pytest

import libra

HEADER = {"libra_trace": 1, "workload": "r2e-gym", "model": "qwen3-14b", "group_size": 2,
          "lossy": False, "generator": {"name": "r2e-gym", "seed": 1}}
RECORD = {"step": 1, "prompt_id": 9, "epoch": 0, "sample": 0, "version_start": 1,
          "finish": "truncated", "turns": [{"prompt_tokens": 655, "generated_tokens": 2048}]}
BUCKETS = "tp1:1000,tp2:3000"
MAX_TOKENS = 1 << 40  # TRACE_MAX_TOKENS


def router():
    r = libra.Router({"sched": {"buckets": BUCKETS}})
    r.add_instance(1, 1)
    r.add_instance(2, 2)
    return r


# ---- paths -------------------------------------------------------------------------------------

def test_a_path_with_a_nul_is_refused_not_cut_short(tmp_path):
    """A NUL inside an os.PathLike would end the C string there: the file before it would be
    read or written instead of the one named."""
    (tmp_path / "a").write_text("")
    with pytest.raises(ValueError, match="NUL"):
        libra.trace.read(pathlib.Path(str(tmp_path / "a") + "\0b"))
    with pytest.raises(ValueError, match="NUL"):
        libra.trace.write(pathlib.Path(str(tmp_path / "o") + "\0x.jsonl"), HEADER, [RECORD])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_an_empty_trace_path_is_refused_at_open(tmp_path, monkeypatch):
    """Nothing is written under a made-up name (".tmpPID" in the working directory) while the
    records go in, to fail only at the end."""
    monkeypatch.chdir(tmp_path)

    def records():
        assert not list(tmp_path.iterdir())
        yield RECORD

    with pytest.raises(libra.Error) as e:
        libra.trace.write("", HEADER, records())
    assert e.value.code_name == "EIO" and "cannot write ''" in e.value.message
    assert not list(tmp_path.iterdir())


def test_a_config_path_that_never_ends_is_refused():
    """/dev/zero as a config: refused at its first NUL, not read until memory runs out."""
    with pytest.raises(ValueError, match="NUL"):
        libra.plan(pathlib.Path("/dev/zero"))


def test_a_config_file_past_the_limit_is_refused(tmp_path, monkeypatch):
    """A config file is read up to the library's limit on a file read whole (1 GiB) and no
    further, as the commands read one."""
    monkeypatch.setattr(libra, "_MAX_FILE_BYTES", 16)
    path = tmp_path / "c.json"
    path.write_text('{"rl": {"steps": 3}}')  # 20 bytes
    with pytest.raises(ValueError, match=r"c\.json: larger than 16 bytes"):
        libra.plan(path)


def test_config_paths_that_cannot_be_read_raise_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        libra.plan(tmp_path / "missing.json")
    with pytest.raises(IsADirectoryError):
        libra.sim(tmp_path)
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(libra.Error) as e:
        libra.Router(tmp_path / "empty.json")
    assert e.value.file == str(tmp_path / "empty.json") and e.value.line == 1


# ---- the router --------------------------------------------------------------------------------

def test_token_counts_past_a_traces_raise_the_librarys_error():
    r = router()
    r.start("t", 1)
    with pytest.raises(libra.Error) as e:
        r.route("t", MAX_TOKENS + 1)
    assert e.value.code_name == "EINVAL" and "context_tokens" in e.value.message
    r.route("t", 10)
    with pytest.raises(libra.Error, match="generated_tokens"):
        r.turn_done("t", 2**63 - 1)
    r.turn_done("t", 10)  # the refused call left the turn in flight
    with pytest.raises(libra.Error, match="payload_tokens"):
        r.tool_return("t", "bash", "success", MAX_TOKENS + 1)
    r.finish("t")
    r.step(now_s=1.0)


def test_clocks_must_be_finite_and_steps_ordered():
    r = router()
    r.start("t", 1)
    for bad in (float("inf"), float("-inf"), 10**400, -10**400):  # an int past a double: inf
        with pytest.raises(libra.Error, match="now_s"):
            r.route("t", now_s=bad)
        with pytest.raises(libra.Error, match="now_s"):
            r.step(now_s=bad)
    for call in (lambda: r.route("t", now_s=float("nan")), lambda: r.step(now_s=float("nan"))):
        with pytest.raises(ValueError, match="now_s: NaN is not a time"):
            call()  # NaN was taken as no time given: the library's clock
    r.step(now_s=5.0)
    with pytest.raises(libra.Error, match="before the previous step"):
        r.step(now_s=4.0)
    r.step(now_s=5.0)


def test_finish_takes_none_as_the_library_does():
    """status None is "completed", as libra_router_finish's NULL."""
    r = router()
    r.start("t", 1)
    r.route("t", 10)
    r.turn_done("t", 5)
    r.finish("t", None)
    with pytest.raises(libra.Error) as e:
        r.finish("t", None)
    assert e.value.code_name == "ENOENT"


@pytest.mark.parametrize("call", [
    lambda r: r.add_instance("1", 1),
    lambda r: r.add_instance(1, 1.0),
    lambda r: r.start(None, 1),
    lambda r: r.start("t", 1.5),
    lambda r: r.route(5),
    lambda r: r.route("t", "5"),
    lambda r: r.route("t", now_s="x"),
    lambda r: r.turn_done("t", 1.5),
    lambda r: r.tool_return("t", 5),
    lambda r: r.finish("t", 5),
    lambda r: r.step(True),
])
def test_wrong_types_raise_typeerror(call):
    with pytest.raises(TypeError):
        call(router())


@pytest.mark.parametrize("call", [
    lambda r: r.add_instance(2**63, 1),
    lambda r: r.start("t\0", 1),
    lambda r: r.start("t", -1),
    lambda r: r.route("t", -5),
    lambda r: r.turn_done("t", -1),
    lambda r: r.tool_return("t", "b\0ash"),
])
def test_out_of_range_values_raise_valueerror(call):
    with pytest.raises(ValueError):
        call(router())


def test_the_library_refuses_what_python_passes_on():
    r = router()
    with pytest.raises(libra.Error, match="TP0"):
        r.add_instance(3, 0)
    with pytest.raises(libra.Error, match="not started"):
        r.route("nope")
    r.start(b"\xff", 1)
    with pytest.raises(libra.Error, match="started already"):
        r.start("\udcff", 1)  # the same bytes, surrogate-escaped


def test_plan_refuses_bad_configs_with_the_librarys_message():
    for config, want in [("", "empty: no JSON value"), (b"\xff", "unable to decode byte 0xff"),
                         ("[]", "must be a JSON object"),
                         ({"cluster": {"gpus": -8}}, "cluster.gpus: must be in 1..65536"),
                         ('{"cluster": {"gpus": ' + "1" * 31 + "}}", "too big integer")]:
        with pytest.raises(libra.Error, match=want) as e:
            libra.plan(config)
        assert e.value.code_name == "EINVAL" and e.value.file == "config"
    for config in (0, [], 1.5, memoryview(b"{}")):
        with pytest.raises(TypeError):
            libra.plan(config)


def test_trace_files_that_are_not_traces(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(libra.Error) as e:
        libra.trace.read(tmp_path / "empty.jsonl")
    assert e.value.code_name == "EINVAL" and e.value.line == 1
    for path in (tmp_path, tmp_path / "missing.jsonl", ""):
        with pytest.raises(libra.Error) as e:
            libra.trace.read(path)
        assert e.value.code_name == "EIO"
    for path in (tmp_path, tmp_path / "no" / "o.jsonl", tmp_path / "dangling"):
        if path.name == "dangling":
            os.symlink(tmp_path / "nowhere" / "x", path)
        with pytest.raises(libra.Error) as e:
            libra.trace.write(path, HEADER, [RECORD])
        assert e.value.code_name == "EIO"
    with pytest.raises(TypeError):
        libra.trace.write(tmp_path / "o.jsonl", HEADER, None)
    with pytest.raises(TypeError):
        libra.trace.write(tmp_path / "o.jsonl", HEADER, [None])
    assert not (tmp_path / "o.jsonl").exists()


# ---- the library and the error's file ----------------------------------------------------------

def import_libra_in(cwd, library):
    """What `import libra` says in a fresh interpreter run in cwd with LIBRA_LIBRARY=library."""
    env = dict(os.environ, LIBRA_LIBRARY=library,
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", "import libra; print(libra._lib.path)"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_libra_library_is_a_path_even_when_a_bare_name(tmp_path):
    """docs/cli.md: LIBRA_LIBRARY is the path of liblibra.so to load; a bare name is one in the
    working directory (it was handed to the system loader, which looks elsewhere)."""
    library = pathlib.Path(os.environ["LIBRA_LIBRARY"]).resolve()
    r = import_libra_in(library.parent, library.name)
    assert r.returncode == 0, r.stderr
    assert pathlib.Path(r.stdout.strip()) == library
    r = import_libra_in(tmp_path, str(tmp_path / "none.so"))
    assert r.returncode != 0
    assert f"LIBRA_LIBRARY: {tmp_path / 'none.so'} does not exist" in r.stderr, r.stderr


def test_an_errors_file_names_a_path_of_any_bytes(tmp_path):
    """Error.file is the config's path as the OS has it, not with its undecodable bytes
    replaced: os.fsencode(e.file) opens the file again."""
    path = pathlib.Path(os.fsdecode(bytes(tmp_path) + b"/bad_\xff.json"))
    path.write_text('{\n "rl": {\n  "steps": "x"}}\n')
    with pytest.raises(libra.Error) as e:
        libra.plan(path)
    assert e.value.file == str(path) and (e.value.line, e.value.col) == (3, 3), e.value
