"""End-to-end tests of weight updates whose body names no weight_version (docs/serve.md
"Weight versions"): vLLM's /update_weights (SkyRL), SGLang's /update_weights_from_disk and
/update_weights_from_distributed as AReaL sends them (docs/recipes/areal.md, the bodies as it
quotes them). The gateway numbers such an update (libra-update-N) and a step begins; the
number stands, through the version polls and the answers of later turns, until the engine
reports a version other than the one it reported before the update. The engines are `libra
emu` (docs/emu.md), which the gateway drives as SGLang engines and which answer vLLM's calls
in development mode."""

import time

import pytest

from emu_util import (ADMIN, Emu, ScriptedVllm, Serve, answer, assert_weights_never_go_back,
                      generate, get, post)
from test_serve_pool import (confirm, killed_when_done, pool, ready, retake, serve, step,
                             until)

POLL = ["--poll-s", "0.1"]


@pytest.fixture
def fleet(tmp_path):
    decisions = tmp_path / "decisions.jsonl"
    with Emu("--instances", "tp1x2", "--dev-mode", scale="0.005") as emu, \
            Serve(*[i["url"] for i in emu.instances],
                  args=["--set", "sched.buckets=tp1:30000", "--decisions", str(decisions),
                        *POLL]) as gw:
        gw.decisions = decisions
        yield gw


def engines(gw):
    return [(e["weight_version"], e["step"]) for e in get(gw.port, "/libra/v1/engines")[1]
            ["engines"]]


def turn(gw, trajectory):
    status, doc = generate(gw.port, [100, 101, 102], 3, libra={"trajectory": trajectory,
                                                              "emu": {"gen_tokens": 3}})
    assert status == 200, doc


def admin(gw, path, body=None):
    status, doc = post(gw.port, path, body, headers=ADMIN)
    assert status == 200, doc
    return doc


def polls_pass():
    time.sleep(0.6)  # several --poll-s rounds: each asks the engines their weight version


def test_a_vllm_update_keeps_its_number_through_polls_and_answers(fleet):
    turn(fleet, "A")
    assert engines(fleet) == [("default", 0)] * 2
    admin(fleet, "/update_weights", {"update_info": {}})
    assert engines(fleet) == [("libra-update-1", 1)] * 2
    polls_pass()
    assert engines(fleet) == [("libra-update-1", 1)] * 2
    turn(fleet, "A")  # its answer names the engine's own version, unchanged: "default"
    polls_pass()
    assert engines(fleet) == [("libra-update-1", 1)] * 2
    assert get(fleet.port, "/libra/v1/status")[1]["step"] == 1
    assert_weights_never_go_back(fleet.decisions)


@pytest.mark.parametrize("path,body", [
    ("/update_weights_from_disk", {"model_path": "/m", "abort_all_request": True}),
    ("/update_weights_from_distributed",
     {"names": [], "dtypes": [], "shapes": [], "group_name": "g", "abort_all_requests": True}),
], ids=["disk", "nccl"])
def test_an_areal_update_begins_a_step(fleet, path, body):
    turn(fleet, "A")
    if path.endswith("distributed"):  # the group AReaL sets up on each engine first
        for e in get(fleet.port, "/libra/v1/engines")[1]["engines"]:
            port = int(e["url"].rsplit(":", 1)[1])
            status, doc = post(port, "/init_weights_update_group", {
                "master_address": "127.0.0.1", "master_port": 29500, "rank_offset": 1,
                "world_size": 3, "group_name": "g", "backend": "nccl"})
            assert status == 200, doc
    admin(fleet, "/pause_generation")
    admin(fleet, path, body)
    admin(fleet, "/continue_generation")
    polls_pass()
    assert engines(fleet) == [("libra-update-1", 1)] * 2
    turn(fleet, "A")
    polls_pass()
    assert engines(fleet) == [("libra-update-1", 1)] * 2
    assert_weights_never_go_back(fleet.decisions)


def test_a_version_the_engine_then_reports_is_taken(fleet):
    admin(fleet, "/update_weights", {"update_info": {}})
    assert engines(fleet) == [("libra-update-1", 1)] * 2
    admin(fleet, "/update_weights_from_disk", {"model_path": "/m", "weight_version": "v7"})
    polls_pass()
    assert engines(fleet) == [("v7", 2)] * 2


def test_a_numbered_version_stands_through_a_restart(tmp_path):
    """The number is state the gateway acknowledged: after a kill -9 and a restart on the
    state dir, the engine, which still says "default", keeps it, through the polls too."""
    args = ["--set", "sched.buckets=tp1:30000", "--state-dir", str(tmp_path / "state"), *POLL]
    with Emu("--instances", "tp1x2", "--dev-mode", scale="0.005") as emu:
        urls = [i["url"] for i in emu.instances]
        with killed_when_done(Serve(*urls, args=args)) as gw:
            admin(gw, "/update_weights", {"update_info": {}})
            assert engines(gw) == [("libra-update-1", 1)] * 2
            polls_pass()  # a commit window: the registry is written
        with Serve(*urls, args=args) as again:
            assert engines(again) == [("libra-update-1", 1)] * 2
            polls_pass()
            assert engines(again) == [("libra-update-1", 1)] * 2
            admin(again, "/update_weights", {"update_info": {}})
            assert engines(again) == [("libra-update-2", 2)] * 2
            assert get(again.port, "/libra/v1/status")[1]["step"] == 2


def test_a_pool_replica_that_loads_a_numbered_update_on_wake_takes_the_number():
    """A numbered update from disk while the trainer holds a replica's GPUs leaves its engine
    out; woken, the engine loads it and takes its number, as the core's engine did."""
    with Emu("--instances", "tp1x2", scale="0.005") as emu:
        urls = [i["url"] for i in emu.instances]
        with serve(urls, 1, *POLL) as gw:
            retake(gw, 0)
            assert step(gw, 0, 0, "begin")[0] == 200
            body = {"model_path": "/m", "abort_all_request": True}
            assert len(admin(gw, "/update_weights_from_disk", body)["engines"]) == 1
            assert engines(gw) == [("libra-update-1", 1), ("default", 0)]
            assert admin(gw, "/libra/v1/pool/lend", {"replica": 0})["accepted"] == "lend"
            assert step(gw, 0, 0, "end")[0] == 200
            lend = ready(gw, 0, "lend")
            assert confirm(gw, "released", lend)[0] == 200
            until(lambda: pool(gw)["replicas"][0]["engine"] == "serving", "the engine serves")
            polls_pass()
            assert engines(gw) == [("libra-update-1", 1)] * 2


def test_a_vllm_engine_keeps_its_version_through_a_restart(tmp_path):
    """A vLLM engine reports no version: the one its row has stands after a restart."""
    engine = ScriptedVllm(lambda h, path, body: answer(h, b'{"success": true}'))
    args = ["--set", "sched.buckets=tp1:30000", "--state-dir", str(tmp_path / "state")]
    try:
        with killed_when_done(Serve(engine.url + ",tp=1", args=args)) as gw:
            admin(gw, "/update_weights", {"update_info": {}})
            assert engines(gw) == [("libra-update-1", 1)]
            polls_pass()
        with Serve(engine.url + ",tp=1", args=args) as again:
            assert engines(again) == [("libra-update-1", 1)]
    finally:
        engine.shutdown()
