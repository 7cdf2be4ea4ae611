"""The Python binding at the edges of what Python can say and libra can take: a closed trace
reader, integers past int64, surrogates and NULs in strings, a clock past a double's range, and
the messages docs/python.md quotes.

Needs LIBRA_BIN, LIBRA_LIBRARY and python/ on PYTHONPATH (tests/CMakeLists.txt).
"""

import os
import re

import pytest

import libra
from cli import run as cli

DOC = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "docs", "python.md")
HEADER = {"libra_trace": 1, "workload": "r2e-gym", "model": "qwen3-14b", "group_size": 2,
          "lossy": False, "generator": {"name": "r2e-gym", "seed": 1}}
RECORD = {"step": 1, "prompt_id": 9, "epoch": 0, "sample": 0, "version_start": 1,
          "finish": "truncated", "turns": [{"prompt_tokens": 655, "generated_tokens": 2048}]}


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("edges") / "t.jsonl"
    cli("trace", "gen", "dapo-math", "--steps", "1", "--batch", "2", "--samples", "2", "-o",
        str(path))
    return path


def router():
    r = libra.Router({"sched": {"buckets": "tp1:1000"}})
    r.add_instance(0, 1)
    r.start("t", 1)
    return r


# ---- a closed reader ---------------------------------------------------------------------------

def test_a_closed_reader_refuses_to_read_rather_than_end(trace_file):
    """A reader read past its with block (or its close) is a mistake, not the end of the trace:
    a half-read trace must not look like a shorter one."""
    with libra.trace.read(trace_file) as r:
        next(r)
    assert r.header["libra_trace"] == 1  # the header stays: it was read at open
    with pytest.raises(ValueError, match="closed"):
        list(r)
    r2 = libra.trace.read(trace_file)
    r2.close()
    with pytest.raises(ValueError, match="closed"):
        next(r2)
    r2.close()  # closing twice is harmless, as for a file


def test_a_reader_at_its_end_keeps_ending(trace_file):
    with libra.trace.read(trace_file) as r:
        assert len(list(r)) == len(trace_file.read_text().splitlines()) - 1
        assert list(r) == []


# ---- values libra's JSON cannot take ----------------------------------------------------------

@pytest.mark.parametrize("config, want", [
    ({"rl": {"steps": 10**30}}, "config: rl.steps: expected -9223372036854775808.."
                                "9223372036854775807, not 1000000000000000000000000000000"),
    ({"rl": {"steps": -2**63 - 1}}, "config: rl.steps: expected -9223372036854775808.."),
    ({"rl": {"x": [1, 10**5000]}}, r"config: rl.x\[1\]: expected .*, not an int of 16610 bits"),
    ({"workload": {"trace": "a\0b"}}, "config: workload.trace: contains a NUL character"),
    ({"model": {"name": "\ud800"}}, r"config: model.name: contains '\\ud800', a surrogate"),
    ({"model": {"name": "\ud83d\ude00"}}, r"config: model.name: contains '\\ud83d', a surr"),
    ({"model": {"a\0": 1}}, "config: model: key 'a\\\\x00': contains a NUL character"),
    ({"model": {"\udcff": 1}}, r"config: model: key '\\udcff': contains '\\udcff', a surr"),
])
def test_config_values_past_libras_json_are_refused_by_field(config, want):
    with pytest.raises(ValueError, match=want):
        libra.plan(config)


def test_int64_bounds_reach_the_library():
    """The extremes of int64 are JSON libra reads: the library judges them."""
    for n in (2**63 - 1, -2**63):
        with pytest.raises(libra.Error, match="rl.steps: must be in"):
            libra.plan({"rl": {"steps": n}})


def test_trace_records_past_libras_json_are_refused_by_field(tmp_path):
    out = tmp_path / "o.jsonl"
    bad_reward = dict(RECORD, reward=10**30)
    with pytest.raises(ValueError, match="record: reward: expected -9223372036854775808"):
        libra.trace.write(out, HEADER, [bad_reward])
    with pytest.raises(ValueError, match=r"header: workload: contains '\\ud800', a surrogate"):
        libra.trace.write(out, dict(HEADER, workload="\ud800"), [])
    assert not out.exists()


# ---- string arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("call, what", [
    (lambda: libra.prompt_key("\ud800"), "prompt"),
    (lambda: router().start("\ud800", 1), "trajectory"),
    (lambda: router().start("u", "\udf00"), "prompt"),
    (lambda: libra.plan("{\"\ud800\":1}"), "config"),
    (lambda: router().finish("t", "\ud800"), "status"),
])
def test_a_surrogate_argument_raises_valueerror_naming_it(call, what):
    with pytest.raises(ValueError, match=rf"^{what}: contains '\\ud[8-f]00', a surrogate"):
        call()


def test_surrogate_escapes_stand_for_their_bytes():
    """U+DC80..U+DCFF are os.fsdecode's stand-ins for undecodable bytes: they pass as those
    bytes, so a path or id from the OS reaches the library as it was."""
    assert libra.prompt_key("\udcff") == libra.prompt_key(b"\xff")


# ---- the clock -------------------------------------------------------------------------------

def test_an_int_past_a_doubles_range_is_an_infinite_now_s():
    r = router()
    for huge in (10**400, -10**400):
        for call in (lambda: r.route("t", 5, huge), lambda: r.step(huge)):
            with pytest.raises(libra.Error, match="now_s") as e:
                call()
            assert e.value.code_name == "EINVAL" and len(str(e.value)) < 200


def test_an_out_of_range_int_argument_is_not_printed_whole():
    with pytest.raises(ValueError, match=r"^instance: expected 0\.\.\d+, not an int of 1329 bits$"):
        router().add_instance(10**400, 1)


# ---- what the doc quotes ----------------------------------------------------------------------

def test_the_oracle_refusal_reads_as_the_doc_quotes():
    with open(DOC, encoding="utf-8") as f:
        quoted = re.search(r"`(config[^`]*sched\.policy: oracle routes by) \.\.\.`", f.read())
    assert quoted, "docs/python.md quotes the oracle refusal"
    with pytest.raises(libra.Error) as e:
        libra.Router({"sched": {"policy": "oracle"}})
    assert str(e.value).startswith(quoted.group(1))
