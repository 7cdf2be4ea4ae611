"""End-to-end tests of what a preset file may say (docs/cli.md `libra presets`).

A model preset sets the MLP fields of its kind only: an MoE model's `ffn`, or a dense model's
`top_k` and `expert_ffn`, would be ignored by the cost model, so another value than 0 is
refused at FILE:LINE:COL naming the field. Names are lower case and found ignoring case: a
file cannot bring a name that differs from a built-in one (or another of its own) only in
case, a name given twice in one file is refused naming both positions, and a config or flag
may write a name in any case. Every built-in preset still loads and runs. A workload preset's
`samples` and `batch_trajectories` are the defaults of rl.samples and rl.batch_trajectories, so
they take those keys' ranges, and a group of one sample cannot go with dynamic sampling: a preset
the config would refuse is refused where the file says it, by every command. Needs LIBRA_BIN.
"""

import json
import os
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]

HARDWARE = {
    "name": "g1", "bf16_flops_per_s": 1e15, "hbm_bytes": 8e10, "hbm_bw_bytes_per_s": 2e12,
    "nvlink_bw_bytes_per_s": 4e11, "allreduce_bus_bw_bytes_per_s": 2e11,
    "allreduce_latency_s": 2e-5, "inter_node_bw_bytes_per_s": 2.5e10, "gpus_per_node": 8,
}
DENSE = {
    "name": "dense", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
    "ffn": 128, "vocab": 100,
}
MOE = {
    "name": "moe", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
    "vocab": 100, "experts": 8, "top_k": 2, "expert_ffn": 32,
}


def run(*args, env=None):
    full_env = dict(os.environ)
    full_env.pop("LIBRA_PRESETS", None)
    full_env.update(env or {})
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=60,
                          env=full_env)


def preset_file(tmp_path, hardware=(), models=()):
    """A preset file with one member per line."""
    lines = ['{"hardware": [']
    lines += [json.dumps(h) + ("," if i + 1 < len(hardware) else "")
              for i, h in enumerate(hardware)]
    lines += ['], "models": [']
    lines += [json.dumps(m) + ("," if i + 1 < len(models) else "") for i, m in enumerate(models)]
    lines += [']}']
    path = tmp_path / "p.json"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def position(path, needle, nth=0):
    """1-based line and column of the nth occurrence of needle in the file."""
    text = open(path).read()
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def refused(r):
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
    return r.stderr


# ---- fields the model's kind ignores ---------------------------------------------------------

@pytest.mark.parametrize("model,field,why", [
    (dict(MOE, ffn=768), "ffn", "only dense models (experts 0) set it"),
    (dict(DENSE, top_k=2), "top_k", "only MoE models (experts > 0) set it"),
    (dict(DENSE, expert_ffn=32), "expert_ffn", "only MoE models (experts > 0) set it"),
])
def test_a_field_the_kind_ignores_is_refused(tmp_path, model, field, why):
    """By `libra presets` and by a command that would cost the model, from either source."""
    path = preset_file(tmp_path, hardware=[HARDWARE], models=[model])
    line, col = position(path, f'"{field}"')
    for args, env in ((("presets", "--presets", path), None),
                      (("cost", "--model", model["name"]), {"LIBRA_PRESETS": path})):
        err = refused(run(*args, env=env))
        assert err.startswith(f"libra: {path}:{line}:{col}: models.0.{field}: {why}"), err


def test_the_kinds_own_fields_and_zeros_are_taken(tmp_path):
    """0 is what a field of the other kind is when absent (the built-in MoE presets say ffn 0)."""
    path = preset_file(tmp_path, hardware=[HARDWARE],
                       models=[dict(DENSE, top_k=0, expert_ffn=0), dict(MOE, ffn=0)])
    r = run("presets", "--presets", path, "--json")
    assert r.returncode == 0, r.stderr
    models = {m["name"]: m for m in json.loads(r.stdout)["models"]}
    assert models["moe"]["ffn"] == 0 and models["dense"]["experts"] == 0
    for name in ("dense", "moe"):
        r = run("cost", "--json", "--model", name, "--hardware", "g1", "--gpus", "8", "--tp", "1",
                env={"LIBRA_PRESETS": path})
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["moe"] == (name == "moe")


def test_every_builtin_preset_loads_and_runs():
    r = run("presets", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["models"] and doc["hardware"]
    for m in doc["models"]:
        assert (m["ffn"] == 0) == (m["experts"] > 0), m["name"]
        if m["experts"] == 0:
            assert m["top_k"] == 0 and m["expert_ffn"] == 0, m["name"]
        r = run("cost", "--model", m["name"], "--gpus", "64", "--seq-tokens", "1024")
        assert r.returncode == 0, (m["name"], r.stderr)
    for h in doc["hardware"]:
        r = run("cost", "--hardware", h["name"])
        assert r.returncode == 0, (h["name"], r.stderr)


# ---- names that differ only in case ---------------------------------------------------------

def test_a_name_in_upper_case_is_refused(tmp_path):
    """It would replace the built-in a800-80g under another spelling; names are lower case."""
    path = preset_file(tmp_path, hardware=[dict(HARDWARE, name="A800-80G")])
    line, col = position(path, '"name"')
    for args, env in ((("presets", "--presets", path), None),
                      (("config", "show"), {"LIBRA_PRESETS": path})):
        err = refused(run(*args, env=env))
        assert err == (f"libra: {path}:{line}:{col}: hardware.0.name: 'A800-80G' must be "
                       "lower-case letters, digits, '.', '-', '_', starting with a letter or "
                       "digit\n"), err


@pytest.mark.parametrize("kind", ["hardware", "models"])
def test_a_name_twice_in_one_file_names_both(tmp_path, kind):
    entry = HARDWARE if kind == "hardware" else DENSE
    path = preset_file(tmp_path, **{kind: [entry, dict(entry, name="x"), entry]})
    first = position(path, '"name"')
    second = position(path, '"name"', nth=2)
    err = refused(run("presets", "--presets", path))
    assert err == (f"libra: {path}:{second[0]}:{second[1]}: {kind}.2.name: '{entry['name']}' is "
                   f"defined twice in this file, first at {first[0]}:{first[1]} "
                   f"({kind}.0.name)\n"), err


def test_a_name_is_found_in_any_case_and_a_file_replaces_the_builtin(tmp_path):
    path = preset_file(tmp_path, hardware=[dict(HARDWARE, name="a800-80g", gpus_per_node=4)])
    shown = json.loads(run("config", "show", "--hardware", "A800-80G", "--model",
                           "QWEN3-14B").stdout)
    assert (shown["cluster"]["hardware"], shown["model"]["name"]) == ("a800-80g", "qwen3-14b")
    assert shown["cluster"]["gpus_per_node"] == 8
    r = run("config", "show", "--hardware", "A800-80G", env={"LIBRA_PRESETS": path})
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["cluster"]["hardware"] == "a800-80g"
    assert shown["cluster"]["gpus_per_node"] == 4  # the file's preset, not the built-in one
    listed = json.loads(run("presets", "--json", env={"LIBRA_PRESETS": path}).stdout)
    a800 = [h for h in listed["hardware"] if h["name"].lower() == "a800-80g"]
    assert len(a800) == 1 and a800[0]["origin"] == path


# ---- workload fields that are config defaults ------------------------------------------------

def workload_file(tmp_path, **fields):
    path = tmp_path / "w.json"
    path.write_text('{"workloads": [\n' + json.dumps(dict(name="big", base="search-r1", **fields))
                    + "\n]}\n")
    return str(path)


@pytest.mark.parametrize("fields,field,why", [
    (dict(samples=2000, batch_trajectories=2000), "samples", "out of range: must be in 1..1024"),
    (dict(batch_trajectories=2 ** 20 + 5), "batch_trajectories",
     "out of range: must be in 1..1048576"),
    (dict(samples=1, batch_trajectories=8, dynamic_sampling="regenerate"), "samples",
     "1 with dynamic_sampling regenerate: a group of one sample always has equal rewards, so "
     "every group would be dropped and nothing would train"),
])
def test_a_workload_the_config_would_refuse_is_refused_at_its_field(tmp_path, fields, field, why):
    """`presets` and `trace gen` took it; the commands that run it refused it later as
    "workload preset 'big': must be in 1..1024", naming neither the field nor the file."""
    path = workload_file(tmp_path, **fields)
    line, col = position(path, f'"{field}"')
    out = tmp_path / "t.jsonl"
    for args in (("presets",), ("trace", "gen", "big", "--steps", "1", "-o", str(out)),
                 ("sim", "--workload", "big", "--steps", "1")):
        err = refused(run(*args, "--presets", path))
        assert err.startswith(f"libra: {path}:{line}:{col}: workloads.0.{field}: {why}"), err
    assert not out.exists()


def test_a_workload_at_the_config_limits_is_taken(tmp_path):
    path = workload_file(tmp_path, samples=1024, batch_trajectories=2 ** 20)
    r = run("config", "show", "--workload", "big", "--presets", path)
    assert r.returncode == 0, r.stderr
    rl = json.loads(r.stdout)["rl"]
    assert (rl["samples"], rl["batch_trajectories"]) == (1024, 2 ** 20)
    presets = json.loads(run("presets", "--json", "--presets", path).stdout)["workloads"]
    (big,) = [w for w in presets if w["name"] == "big"]
    assert big["batch_trajectories"] == 2 ** 20, big  # the table's batch column, in the JSON too


@pytest.mark.parametrize("base,why", [
    ('"later"', "no workload preset 'later' before this one (a base is built in, or defined "
                "earlier in this file or in an earlier --presets file)"),
    ("3", "expected a preset's name (a string)"),
])
def test_a_base_not_defined_before_its_preset_says_so(tmp_path, base, why):
    """A base names a preset before it (built in, earlier in the file, an earlier file); one
    named later, or of another type, was "no such workload preset", though it was there."""
    path = tmp_path / "w.json"
    path.write_text('{"workloads": [\n{"name": "first", "base": ' + base + '},\n'
                    '{"name": "later", "base": "search-r1"}\n]}\n')
    line, col = position(str(path), '"base"')
    err = refused(run("presets", "--presets", str(path)))
    assert err == f"libra: {path}:{line}:{col}: workloads.0.base: {why}\n", err
