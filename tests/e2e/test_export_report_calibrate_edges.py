"""End-to-end tests of edge cases of `libra report` (docs/report.md "Errors": an edited sweep
and a plan placement libra never writes are refused), `libra plan --export` (verl's pools keep
each TP group on one node, and a pipeline whose PP does not divide the layers says how to split
them, docs/export.md) and `libra calibrate` (a refusal quotes the fit's value, docs/calibrate.md
"When it refuses").

Needs LIBRA_BIN (the built binary) and LIBRA_SOURCE_DIR (for the calibration test data).
"""

import json
import os
import re
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
CALIB = os.path.join(os.environ.get("LIBRA_SOURCE_DIR", "."), "tests", "data", "calibrate")


def libra(*args, cwd=None):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A short sweep of 2 points by 2 seeds and a default plan, as libra writes them."""
    d = tmp_path_factory.mktemp("made")
    p = libra("sim", "--sweep", "rl.samples=4,8", "--seeds", "2", "--steps", "3", "--json",
              "-o", str(d / "sweep.json"))
    assert p.returncode == 0, p.stderr
    p = libra("plan", "--json", "-o", str(d / "plan.json"))
    assert p.returncode == 0, p.stderr
    return d


def refused(src, tmp_path, edit, member, says):
    """src edited: libra report exits 2 naming FILE:LINE:COL, member and the reason."""
    doc = json.loads(src.read_text())
    edit(doc)
    path = tmp_path / src.name
    path.write_text(json.dumps(doc, indent=1))
    p = libra("report", str(path), "-o", str(tmp_path / "page.html"))
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert re.match(rf"libra: {re.escape(str(path))}:\d+:\d+: {re.escape(member)}: ", p.stderr)
    assert says in p.stderr, p.stderr
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("edit,member,says", [
    (lambda d: d.update(seeds=[]), "seeds", "no seed, where a sweep has one or more"),
    (lambda d: d.pop("seeds"), "seeds", "seeds: missing: no seed"),  # placed at the document
    (lambda d: d["cells"][0].update(result=None), "cells.0",
     "result: missing: a cell holds its run's result, or its error"),
    (lambda d: d.update(summary=[]), "summary", "no grid point, where a sweep has one or more"),
    (lambda d: d["cells"][1].update(error={"message": "x", "kind": "input"}), "cells.1.error",
     "a cell holds its run's result or its error, not both"),
])
def test_an_edited_sweep_is_refused(made, tmp_path, edit, member, says):
    """A sweep whose seeds or summary is emptied, or a cell with neither a result nor an error,
    would draw medians of other seeds than the caption names: refused, exit 2."""
    refused(made / "sweep.json", tmp_path, edit, member, says)


def gpu(d, node, k):
    return d["placement"][node]["gpus"][k]


ROLLOUT_NODE = 3  # the default plan: training on nodes 0-2, three TP8 engines on nodes 3-5


@pytest.mark.parametrize("edit,member,says", [
    (lambda d: gpu(d, 0, 0).update(gpu=99), "placement.0.gpus.0.gpu",
     "99 is no GPU of a node of 8 (gpus_per_node)"),
    (lambda d: d.update(gpus_per_node=3), "placement.0.gpus.3.gpu",
     "3 is no GPU of a node of 3"),
    (lambda d: d["placement"][1].update(node=0), "placement.1.node",
     "node 0 is placed twice (placement 0 and 1)"),
    (lambda d: gpu(d, 0, 1).update(gpu=0), "placement.0.gpus.1.gpu",
     "GPU 0 of node 0 is placed twice (gpus 0 and 1)"),
    (lambda d: d["placement"][0].update(node=99), "placement.0.node",
     "99 is no node of the placement's 6"),
    (lambda d: gpu(d, ROLLOUT_NODE, 0).update(instance=99), "placement.3.gpus.0.instance",
     "99 is no instance of the plan's 3 (rollout.instances)"),
    (lambda d: gpu(d, ROLLOUT_NODE, 0).update(instance_tp=3), "placement.3.gpus.0.instance_tp",
     "3 is no TP of the plan's instances"),
    (lambda d: gpu(d, ROLLOUT_NODE, 7).update(instance=1), "placement.4.gpus.0.instance",
     "an engine's TP group is on one node"),
    (lambda d: d["placement"].pop(), "placement", "40 GPUs placed where the plan has 48"),
    (lambda d: gpu(d, ROLLOUT_NODE, 2).pop("instance_tp"), "placement.3.gpus.2",
     "instance_tp: missing: a GPU of an engine carries its instance and its TP"),
])
def test_a_placement_libra_never_writes_is_refused(made, tmp_path, edit, member, says):
    """Each node and GPU once and in range, every GPU placed, each engine whole on one node and
    of a TP the plan has: anything else would be drawn off its row or as another fleet."""
    doc = json.loads((made / "plan.json").read_text())
    assert doc["gpus"] == 48 and doc["rollout"]["instances"]["tp8"] == 3
    refused(made / "plan.json", tmp_path, edit, member, says)


def test_a_placement_without_a_gpu_number_is_left_out_not_refused(made, tmp_path):
    """A GPU without its number (read as 0, it was refused as GPU 0 placed twice, without a
    position: fuzz_report) leaves the layout out with the figure's note, as a missing member
    does everywhere (docs/report.md); nothing of the placement is judged then."""
    doc = json.loads((made / "plan.json").read_text())
    gpu(doc, 1, 5).pop("gpu")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    p = libra("report", str(path))
    assert p.returncode == 0, p.stderr
    assert "placement[1].gpus[5]: no gpu number below 8, or no role" in p.stdout


def pools(text):
    return {k: int(v) for k, v in re.findall(r"^(\w+\.n\w+)=(\d+)$", text, re.M)}


def test_verl_pools_keep_each_tp_group_on_one_node(tmp_path):
    """20 GPUs, 12 rolling out as 3 x TP4: verl's GPUs per node must be a multiple of TP 4 that
    divides the pool (3 nodes of 4), not 6, which would split the second engine."""
    p = libra("plan", "--verify", "0", "--gpus", "20", "--export", "verl")
    assert p.returncode == 0, p.stderr
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=4\n" in p.stdout
    got = pools(p.stdout)
    assert got["rollout.nnodes"] == 3 and got["rollout.n_gpus_per_node"] == 4, got
    assert "a multiple of TP 4: 3 nodes of 4" in p.stdout


@pytest.mark.parametrize("args", [["verl.log,gpus=16", "--model", "qwen2.5-7b"],
                                  ["verl.log", "--model", "qwen2.5-14b"]])
def test_calibrate_refusal_quotes_the_real_fit(args):
    """The points ask for an MFU above 1 (the fit scales as 1/GPUs: 0.68 at 24 GPUs): the
    refusal quotes the first estimate past 1, a lower bound of the fit, not the -0.0000 of a
    diverged re-linearisation."""
    p = libra("calibrate", *args, cwd=CALIB)
    assert p.returncode == 1, p.stderr
    m = re.search(r"the fit gives train_mfu = (-?[\d.]+) or more, outside \(0, 1\]", p.stderr)
    assert m and float(m.group(1)) > 1.0, p.stderr


def test_pipeline_stages_split_layers_the_pp_does_not_divide():
    """qwen3-235b-a22b's 94 layers over PP 8: Megatron builds layers / PP on every stage unless
    told the first and last stages' counts, so both exports give them (11, 12 x 6, 11)."""
    args = ("plan", "--verify", "0", "--model", "qwen3-235b-a22b", "--gpus", "256", "--export")
    mega = libra(*args, "megatron")
    assert mega.returncode == 0, mega.stderr
    assert "--pipeline-model-parallel-size 8\n" in mega.stdout
    assert ("--decoder-first-pipeline-num-layers 11\n"
            "--decoder-last-pipeline-num-layers 11\n") in mega.stdout
    verl = libra(*args, "verl")
    assert verl.returncode == 0, verl.stderr
    key = "+actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_"
    assert f"{key}first_pipeline_stage=11\n{key}last_pipeline_stage=11\n" in verl.stdout
    even = libra("plan", "--verify", "0", "--export", "megatron")  # 40 layers, PP divides them
    assert even.returncode == 0 and "pipeline-num-layers" not in even.stdout
