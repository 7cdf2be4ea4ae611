"""End-to-end tests of input guards of `libra presets`, `libra cost` and `libra config`
(docs/cli.md, docs/config.md).

- `-o` naming a file of LIBRA_PRESETS, which the command reads as it reads a `--presets` file,
  is refused before the command runs (exit 2, naming LIBRA_PRESETS and the file), by any
  spelling of the path, and the file is left as it was; another output, or a device such as
  /dev/null, is still written.
- A preset's origin is its file's path whole, however long: `libra presets` does not show (nor
  write in its JSON) a path cut at 127 bytes, which would name another file.
- `libra presets` lists every tool of a workload whole, not a list cut at 127 bytes.
- A `libra cost` training layout of more GPUs than 64 bits count (TP, PP, CP and DP 65536 each)
  is refused as larger than the cluster, with its size, not wrapped round to 0 GPUs and let
  through to another check.

Needs LIBRA_BIN.
"""

import copy
import json
import os
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE = os.environ.get("LIBRA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
HARDWARE = {
    "name": "g1", "bf16_flops_per_s": 1e15, "hbm_bytes": 8e10, "hbm_bw_bytes_per_s": 2e12,
    "nvlink_bw_bytes_per_s": 4e11, "allreduce_bus_bw_bytes_per_s": 2e11,
    "allreduce_latency_s": 2e-5, "inter_node_bw_bytes_per_s": 2.5e10, "gpus_per_node": 8,
}


def run(*args, env=None, cwd=None):
    full_env = dict(os.environ)
    full_env.pop("LIBRA_PRESETS", None)
    full_env.update(env or {})
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=60,
                          env=full_env, cwd=cwd)


def refused(r):
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
    return r.stderr


# ---- -o naming a LIBRA_PRESETS file ---------------------------------------------------------

@pytest.mark.parametrize("command", [("presets",), ("presets", "--json"), ("cost",),
                                     ("config", "show")])
@pytest.mark.parametrize("spelling", ["p.json", "./p.json"])
def test_output_naming_a_libra_presets_file_is_refused(tmp_path, command, spelling):
    presets = tmp_path / "p.json"
    presets.write_text(json.dumps({"hardware": [HARDWARE]}) + "\n")
    before = presets.read_bytes()
    (tmp_path / "q.json").write_text('{"hardware": []}\n')
    env = {"LIBRA_PRESETS": f"{tmp_path / 'q.json'}:p.json"}  # found past another file
    err = refused(run(*command, "-o", spelling, env=env, cwd=tmp_path))
    assert f"-o '{spelling}' names the LIBRA_PRESETS file 'p.json'" in err, err
    assert presets.read_bytes() == before
    assert not (tmp_path / "p.json.tmp").exists()
    for out in ("other.out", "/dev/null"):  # outputs beside it are written
        r = run(*command, "-o", out, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "other.out").stat().st_size > 0


# ---- what libra presets shows whole ----------------------------------------------------------

def test_a_long_preset_path_is_the_origin_whole(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    presets = deep / "p.json"
    with open(os.path.join(SOURCE, "data", "presets", "workloads.json")) as f:
        workload = dict(json.load(f)["workloads"][0], name="w1")
    presets.write_text(json.dumps({"hardware": [HARDWARE], "workloads": [workload]}) + "\n")
    assert len(str(presets)) > 127
    r = run("presets", "--json", "--presets", str(presets))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {h["name"]: h["origin"] for h in doc["hardware"]}["g1"] == str(presets)
    assert {w["name"]: w["origin"] for w in doc["workloads"]}["w1"] == str(presets)
    r = run("presets", "--presets", str(presets))
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("g1 "))
    assert row.endswith(" " + str(presets)), row


def test_every_tool_of_a_workload_is_listed_whole(tmp_path):
    with open(os.path.join(SOURCE, "data", "presets", "workloads.json")) as f:
        workload = copy.deepcopy(json.load(f)["workloads"][0])
    workload["name"] = "many-tools"
    names = [f"tool_number_{i}_long" for i in range(8)]
    workload["tools"] = [dict(workload["tools"][0], name=n) for n in names]
    presets = tmp_path / "w.json"
    presets.write_text(json.dumps({"workloads": [workload]}) + "\n")
    r = run("presets", "--presets", str(presets))
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("many-tools "))
    assert row.endswith(" " + ",".join(names)), row


# ---- libra cost layouts ----------------------------------------------------------------------

def test_a_layout_past_64_bits_of_gpus_is_refused_as_larger_than_the_cluster():
    err = refused(run("cost", "--tp", "65536", "--pp", "65536", "--cp", "65536", "--dp",
                      "65536"))
    assert "cost: the layout needs 18446744073709551616 GPUs, the cluster has 48" in err, err
    err = refused(run("cost", "--tp", "8", "--dp", "7"))
    assert "cost: the layout needs 56 GPUs, the cluster has 48" in err, err


def test_balancing_the_one_mini_batch_is_refused():
    """With one mini-batch (the default) --balance-minibatch changed nothing: the batch is dealt
    balanced already. With more it changes the step."""
    err = refused(run("cost", "--balance-minibatch"))
    assert "--balance-minibatch balances each of --minibatches N (> 1) mini-batches" in err, err
    plain, balanced = (run("cost", "--minibatches", "4", "--batch", "50", *flag, "--json")
                       for flag in ((), ("--balance-minibatch",)))
    assert plain.returncode == 0 and balanced.returncode == 0, balanced.stderr
    step = [json.loads(r.stdout)["training"]["step"]["step_s"] for r in (plain, balanced)]
    assert step[0] != step[1], step
