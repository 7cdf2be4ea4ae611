"""The framework recipes (docs/recipes/): each gateway recipe's "Rehearse" block, taken from
the page and run as written — `libra emu` as the engines, `libra serve` in front of them,
`libra load --style slime|areal|skyrl` as the framework — then what it left checked: the
gateway followed every trajectory by the identity the framework sends, routed every turn,
passed the weight updates (a step each), and listed the NCCL group's ranks as the fleet's TP
sizes. And the Python helpers the pages give for the weight-update group, against a live
gateway. Real processes on loopback, ports chosen by the OS."""

import json
import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from emu_util import LIBRA, Emu, Serve, get

RECIPES = Path(os.environ["LIBRA_SOURCE_DIR"]) / "docs" / "recipes"
FLEET = [1, 1, 2, 4]  # the rehearsals' engines: tp1x2,tp2,tp4

# What each framework's identity looks like at the gateway (the decisions' trajectory names).
IDENTITY = {"slime": r"routing_key:s\d+-\d", "areal": r"rid:t\d+", "skyrl": r"trajectory_id:\d+-\d"}


def block(page, language, marker):
    """The page's ```language block whose first line is marker."""
    text = (RECIPES / page).read_text()
    found = [b for b in re.findall(r"```%s\n(.*?)```" % language, text, re.S)
             if b.startswith(marker + "\n")]
    assert len(found) == 1, "%s has one %s block starting %r" % (page, language, marker)
    return found[0]


def module(name, source):
    """source run as a module called name, importable by the next ones."""
    mod = types.ModuleType(name)
    exec(compile(source, name + ".py", "exec"), mod.__dict__)
    sys.modules[name] = mod
    return mod


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("framework", ["slime", "areal", "skyrl"])
def test_the_rehearsal_runs_and_the_gateway_routes_the_frameworks_traffic(framework, tmp_path):
    script = tmp_path / "rehearse.sh"
    script.write_text(block(framework + ".md", "sh", "# rehearse: " + framework))
    env = {**os.environ, "PATH": os.path.dirname(LIBRA) + os.pathsep + os.environ["PATH"]}
    env.pop("LIBRA_ADMIN_TOKEN", None)
    p = subprocess.run(["sh", str(script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    load = json.loads((tmp_path / "load.json").read_text())
    assert load["style"] == framework
    assert [s["trajectories"] for s in load["steps"]] == [8, 8, 8]
    assert load["weight_updates"] == 2
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["step"] == 2  # each update's new weight version began a step
    assert [e["tp"] for e in status["engines"]] == FLEET
    metrics = (tmp_path / "metrics.txt").read_text()
    assert "\nlibra_single_turn_requests_total 0\n" in metrics  # every turn named its trajectory
    # every turn the framework sent was routed, under the identity it sends
    decisions = lines(tmp_path / "decisions.jsonl")
    turns = sum(s["turns"] for s in load["steps"])
    assert len(decisions) == turns == sum(e["requests"] for e in status["engines"])
    names = {d["trajectory"] for d in decisions}
    assert all(re.fullmatch(IDENTITY[framework], n) for n in names), sorted(names)[:4]
    assert len(names) == 4 * load["groups_launched"]
    for name in names:  # a trajectory's turns in order, one decision each
        mine = [d["turn"] for d in decisions if d["trajectory"] == name]
        assert mine == list(range(len(mine)))
    # and captured as a trace at the stop (the framework sends no finish: censored)
    captured = lines(tmp_path / "captured.jsonl")[1:]
    assert len(captured) == len(names)
    assert {r["finish"] for r in captured} == {"aborted"}
    assert sum(len(r["turns"]) for r in captured) == turns
    assert {r["step"] for r in captured} == {2}  # all ended at the stop, in the last step
    subprocess.run([LIBRA, "trace", "validate", str(tmp_path / "captured.jsonl")], check=True,
                   capture_output=True)
    # the weight-update group as the gateway listed it: ranks = TP, offsets in listing order
    fleet_file = tmp_path / "fleet.json"
    if fleet_file.exists():
        fleet = json.loads(fleet_file.read_text())
        assert [e["ranks"] for e in fleet["engines"]] == FLEET
        assert [e["rank_offset"] for e in fleet["engines"]] == [0, 1, 2, 4]
        assert fleet["world_size"] == 1 + sum(FLEET)


def test_every_gateway_recipe_has_a_rehearsal_and_names_its_sources():
    for framework in ["slime", "areal", "skyrl"]:
        page = (RECIPES / (framework + ".md")).read_text()
        assert "## Sources" in page and "## Not established" in page
        assert re.search(r"\| [0-9a-f]{8} \|", page), framework  # commits read
        block(framework + ".md", "sh", "# rehearse: " + framework)


@pytest.fixture
def helpers():
    """The README's libra_ranks module and the AReaL page's group set-up, as printed."""
    ranks = module("libra_ranks", block("README.md", "python", "# libra_ranks.py: each engine's "
                                        "place in a trainer's NCCL weight-update group"))
    group = module("areal_libra_group", block("areal.md", "python", "# areal_libra_group.py: in "
                                              "place of AReaL's per-address "
                                              "/init_weights_update_group calls"))
    yield ranks, group
    sys.modules.pop("libra_ranks", None)
    sys.modules.pop("areal_libra_group", None)


def test_the_weight_group_helpers_give_each_engine_its_first_rank(helpers):
    ranks, group = helpers
    with Emu("--instances", "tp4,tp1,tp2x2", "--fail", "instance=1,after_s=50",
             scale="0.1") as emu, \
            Serve(*[i["url"] for i in emu.instances],
                  args=["--set", "sched.buckets=tp1:4000,tp2:12000,tp4:30000",
                        "--poll-s", "0.1"]) as gw:
        urls = [i["url"] for i in emu.instances]
        members, world = ranks.weight_group(gw.url)
        assert members == [(urls[0], 1, 4), (urls[1], 5, 1), (urls[2], 6, 2), (urls[3], 8, 2)]
        assert world == 10
        # the AReaL patch sets the group up on each engine at its own URL (no token needed)
        assert group.init_weights_update_group(gw.url, "127.0.0.1", 29500, "libra-test") == 10
        # an engine that died can no longer join: the group is set up again without it
        deadline = time.monotonic() + 20
        while get(gw.port, "/libra/v1/engines")[1]["engines"][1]["state"] != "dead":
            assert time.monotonic() < deadline, "engine 1 never died"
            time.sleep(0.05)
        members, world = ranks.weight_group(gw.url)
        assert members == [(urls[0], 1, 4), (urls[2], 5, 2), (urls[3], 7, 2)]
        assert world == 9
        assert group.init_weights_update_group(gw.url, "127.0.0.1", 29501, "libra-test-2") == 9
