"""End-to-end tests of `libra presets` and `libra config` (docs/cli.md, docs/config.md).

Bad preset files (a typo'd key, a wrong type, impossible values) must exit 2 naming
FILE:LINE:COL; `config check` exits 1 on an invalid file; JSON output carries the envelope;
the layers of the config override each other in order. Needs LIBRA_BIN and LIBRA_SOURCE_DIR.
"""

import json
import os
import re
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]

ENVELOPE = {"schema", "libra_version", "seed", "config_digest"}

HARDWARE = {
    "name": "g1", "bf16_flops_per_s": 1e12, "hbm_bytes": 8e9, "hbm_bw_bytes_per_s": 1e11,
    "nvlink_bw_bytes_per_s": 1e11, "allreduce_bus_bw_bytes_per_s": 5e10,
    "allreduce_latency_s": 2e-5, "inter_node_bw_bytes_per_s": 1e10, "gpus_per_node": 4,
}
MODEL = {
    "name": "m1", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
    "ffn": 128, "vocab": 100,
}


def run(*args, env=None):
    full_env = dict(os.environ)
    full_env.pop("LIBRA_PRESETS", None)
    full_env.update(env or {})
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=60,
                          env=full_env)


def preset_file(tmp_path, name, hardware=(), models=()):
    """Writes a preset file with one member per line; returns its path."""
    lines = ['{"hardware": [']
    lines += [json.dumps(h) + ("," if i + 1 < len(hardware) else "")
              for i, h in enumerate(hardware)]
    lines += ['], "models": [']
    lines += [json.dumps(m) + ("," if i + 1 < len(models) else "")
              for i, m in enumerate(models)]
    lines += [']}']
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def position(path, needle):
    """1-based line and column of the first occurrence of needle in the file."""
    text = open(path).read()
    i = text.index(needle)
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def bad_model(**change):
    m = dict(MODEL)
    m.update(change)
    return m


@pytest.mark.parametrize("case,entry,needle,why", [
    ("typo", bad_model(haeds=4), '"haeds"', "unknown key (did you mean 'heads'?)"),
    ("wrong_type", bad_model(layers="2"), '"layers"', "must be an integer"),
    ("kv_heads", bad_model(kv_heads=3), '"kv_heads"', "3 does not divide heads (4)"),
    ("zero_heads", bad_model(heads=0), '"heads"', "must be in 1..1024"),
])
def test_bad_model_preset(tmp_path, case, entry, needle, why):
    path = preset_file(tmp_path, f"{case}.json", models=[entry])
    r = run("presets", "--presets", path)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    line, col = position(path, needle)
    assert r.stderr.startswith(f"libra: {path}:{line}:{col}: models.0."), r.stderr
    assert why in r.stderr


def test_negative_bandwidth(tmp_path):
    h = dict(HARDWARE, nvlink_bw_bytes_per_s=-400e9)
    path = preset_file(tmp_path, "neg.json", hardware=[h])
    r = run("presets", "--presets", path)
    assert r.returncode == 2
    line, col = position(path, '"nvlink_bw_bytes_per_s"')
    assert r.stderr == (f"libra: {path}:{line}:{col}: hardware.0.nvlink_bw_bytes_per_s: "
                        "must be in 1000000..1e+15\n")


@pytest.mark.parametrize("schema", ["libra.presets/2", "libra.plan/1", 1])
def test_a_preset_file_of_another_schema_is_refused(tmp_path, schema):
    """A future version or another document is not read as this one."""
    path = tmp_path / "p.json"
    path.write_text('{"schema": %s,\n "models": [%s]}\n' % (json.dumps(schema), json.dumps(MODEL)))
    r = run("presets", "--presets", str(path))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == f'libra: {path}:1:2: schema: must be "libra.presets/1"\n'


def test_bad_preset_through_environment(tmp_path):
    path = preset_file(tmp_path, "env.json", models=[bad_model(kv_heads=3)])
    r = run("config", "show", env={"LIBRA_PRESETS": path})
    assert r.returncode == 2
    assert f"libra: {path}:" in r.stderr


def test_unreadable_preset_file(tmp_path):
    r = run("presets", "--presets", str(tmp_path / "missing.json"))
    assert r.returncode == 3
    assert "cannot read" in r.stderr


def test_a_nul_escape_is_refused_in_our_words(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"model":{"name":"a\\u0000b"}}')
    r = run("config", "check", str(path))
    assert r.returncode == 1 and r.stdout == "", r.stderr  # an invalid file
    assert r.stderr == f"libra: {path}:1:27: a string may not contain \\u0000\n", r.stderr
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"libra_trace": 1, "x": "\\u0000"}\n')
    r = run("trace", "stats", str(trace))
    assert r.returncode == 2 and "invalid JSON: a string may not contain \\u0000\n" in r.stderr, (
        r.stderr)


def test_a_directory_for_a_file_says_so(tmp_path):
    """Every command's file reading says why it failed, here that the path is a directory."""
    for args in (("config", "check"), ("trace", "stats"), ("report",), ("sim",),
                 ("route", "eval"), ("sim", "--trace"), ("presets", "--presets")):
        r = run(*args, str(tmp_path))
        key = "workload.trace: " if args[-1] == "--trace" else ""  # a key's file: the key named
        assert r.returncode == 3 and r.stdout == "", (args, r.stderr)
        assert r.stderr == f"libra: {key}cannot read '{tmp_path}': is a directory\n", \
            (args, r.stderr)


def test_a_trace_a_config_names_that_cannot_be_read_names_the_key(tmp_path):
    """workload.trace, from a config file or --set, names its key when its file cannot
    be read, from plan, sim and config check alike."""
    config = tmp_path / "c.json"
    missing = tmp_path / "none.jsonl"
    config.write_text(json.dumps({"workload": {"trace": str(missing)}}))
    for args in (("plan", str(config)), ("sim", "--set", f"workload.trace={missing}"),
                 ("config", "check", str(config))):
        r = run(*args)
        assert r.returncode == 3 and r.stderr == (f"libra: workload.trace: cannot read "
                                                  f"'{missing}': no such file or directory\n"), \
            (args, r.stderr)


def test_presets_json_lists_origin_and_confidence(tmp_path):
    path = preset_file(tmp_path, "user.json", hardware=[HARDWARE], models=[MODEL])
    r = run("presets", "--json", env={"LIBRA_PRESETS": path})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert ENVELOPE <= set(doc)
    assert doc["schema"] == "libra.presets/1"
    hw = {h["name"]: h for h in doc["hardware"]}
    assert {"a100-80g", "a800-80g", "h100-sxm", "h800", "h20", "h200", "g1"} <= set(hw)
    assert hw["a800-80g"]["origin"] == "builtin"
    assert hw["g1"]["origin"] == path
    assert "allreduce_bus_bw_bytes_per_s" in hw["h20"]["assumed"]
    models = {m["name"]: m for m in doc["models"]}
    assert models["qwen3-30b-a3b"]["params_active"] < models["qwen3-30b-a3b"]["params_total"]
    assert models["m1"]["origin"] == path
    assert "r2e-gym" in {w["name"] for w in doc["workloads"]}


def test_presets_table_marks_assumed_values():
    r = run("presets")
    assert r.returncode == 0, r.stderr
    h20 = next(line for line in r.stdout.splitlines() if line.startswith("h20 "))
    assert "350*" in h20
    a800 = next(line for line in r.stdout.splitlines() if line.startswith("a800-80g "))
    assert "*" not in a800 and "builtin" in a800


def test_presets_json_is_deterministic():
    assert run("presets", "--json").stdout == run("presets", "--json").stdout


def config_show(*args, env=None):
    r = run("config", "show", *args, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_show_default_matches_the_example():
    default = config_show()
    assert ENVELOPE <= set(default)
    assert default["schema"] == "libra.config/1"
    assert re.fullmatch(r"[0-9a-f]{16}", default["config_digest"])
    path = os.path.join(SOURCE_DIR, "examples", "default.json")
    example = config_show(path)
    assert example == default
    with open(path, encoding="utf-8") as f:
        spelt = json.load(f)  # every key spelt out, as docs/config.md says
    assert spelt == {k: v for k, v in default.items() if k not in ENVELOPE}
    assert default["cluster"] == {"hardware": "a800-80g", "gpus": 48, "gpus_per_node": 8}
    assert default["model"]["name"] == "qwen3-14b"
    assert default["rl"]["batch_trajectories"] == 32 and default["rl"]["samples"] == 4


def test_every_example_checks():
    examples = os.path.join(SOURCE_DIR, "examples")
    for name in sorted(os.listdir(examples)):
        if name.endswith(".json"):
            r = run("config", "check", os.path.join(examples, name))
            assert (r.returncode, r.stdout) == (0, "ok\n"), (name, r.stderr)


def test_precedence_defaults_presets_file_flags(tmp_path):
    presets = preset_file(tmp_path, "p.json", hardware=[HARDWARE])
    cfg = tmp_path / "exp.json"
    cfg.write_text('{"cluster": {"hardware": "g1"}, "rl": {"steps": 7}}')
    shown = config_show(str(cfg), "--presets", presets)
    assert shown["cluster"]["gpus_per_node"] == 4  # the hardware preset's
    assert shown["rl"]["steps"] == 7  # the file's
    shown = config_show(str(cfg), "--presets", presets, "--steps", "9",
                        "--set", "cluster.gpus_per_node=2")
    assert shown["rl"]["steps"] == 9 and shown["cluster"]["gpus_per_node"] == 2
    # the workload preset supplies the group size and batch, below the file and flags
    shown = config_show("--workload", "search-r1")
    assert (shown["rl"]["samples"], shown["rl"]["batch_trajectories"]) == (5, 2560)
    shown = config_show("--workload", "search-r1", "--samples", "8", "--batch", "64")
    assert (shown["rl"]["samples"], shown["rl"]["batch_trajectories"]) == (8, 64)


def test_show_output_is_a_valid_config(tmp_path):
    out = tmp_path / "shown.json"
    r = run("config", "show", "--gpus", "16", "--seed", "5", "-o", str(out))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    r = run("config", "check", str(out))
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    again = config_show(str(out))
    assert again == json.loads(out.read_text())
    # a config check refuses is not shown: its output would not be a valid config
    for args, why in ((["--set", "rl.max_staleness=0"], "libra: --set rl.max_staleness: 0 is "
                       "below rl.sync_interval - 1"),
                      (["--gpus", "16", "--set", "sim.async_train_gpus=16"],
                       "libra: --set sim.async_train_gpus: 16 of 16 GPUs")):
        refused = tmp_path / "refused.json"
        r = run("config", "show", *args, "-o", str(refused))
        assert r.returncode == 2 and r.stderr.startswith(why), r.stderr
        assert not refused.exists()


def test_check_reports_position_and_exits_1(tmp_path):
    cfg = tmp_path / "bad.json"
    cfg.write_text('{\n  "cluster": {\n    "gpus": 0\n  }\n}\n')
    r = run("config", "check", str(cfg))
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr == f"libra: {cfg}:3:5: cluster.gpus: must be in 1..65536\n"
    r = run("config", "show", str(cfg))
    assert r.returncode == 2


def test_check_unknown_section_and_preset(tmp_path):
    cfg = tmp_path / "bad.json"
    cfg.write_text('{"clustr": {}}')
    r = run("config", "check", str(cfg))
    assert r.returncode == 1
    assert "1:2: clustr: unknown section (did you mean 'cluster'?)" in r.stderr
    cfg.write_text('{"": 1}')  # no name to suggest another for
    r = run("config", "check", str(cfg))
    assert r.returncode == 1 and r.stderr.endswith(
        ':1:1: "": unknown section (an empty name)\n'), r.stderr
    cfg.write_text('{"model": {"name": "qwen4"}}')
    r = run("config", "check", str(cfg))
    assert r.returncode == 1
    assert "1:12: model.name: unknown model preset 'qwen4'" in r.stderr


def test_flag_errors_name_the_flag():
    r = run("config", "show", "--gpus", "0")
    assert (r.returncode, r.stderr) == (2, "libra: --gpus: must be in 1..65536\n")
    r = run("config", "show", "--set", "rl.stepz=3")
    assert r.returncode == 2
    assert "--set rl.stepz: unknown key 'rl.stepz' (did you mean 'rl.steps'?)" in r.stderr
    r = run("config", "show", "--set", "rl.steps")
    assert r.returncode == 2 and "usage: " in r.stderr
    r = run("config", "show", "--json", "--jsonl")
    assert r.returncode == 2


def test_digest_follows_the_config():
    a = config_show()["config_digest"]
    assert config_show("--model", "QWEN3-14B")["config_digest"] == a
    assert config_show("--steps", "101")["config_digest"] != a


def test_doc_matches_docs_config_md():
    r = run("config", "doc")
    assert r.returncode == 0
    with open(os.path.join(SOURCE_DIR, "docs", "config.md"), encoding="utf-8") as f:
        assert r.stdout == f.read()


def test_help_lists_every_key():
    r = run("config", "--help")
    assert r.returncode == 0
    doc = run("config", "show").stdout
    for section, keys in json.loads(doc).items():
        if isinstance(keys, dict):
            for key in keys:
                assert f"  {section}.{key} " in r.stdout, (section, key)
    assert "--presets FILE" in r.stdout


@pytest.mark.parametrize("sets,why", [
    ([], "rl.transport: reshard moves weights in place"),
    (["rl.transport=disk_restart", "rl.sync_mode=keep"], "rl.sync_mode: keep generates"),
    (["rl.transport=nccl", "rl.max_staleness=0"], "rl.max_staleness: 0 is below"),
    (["rl.transport=nccl", "sim.async_tp=3"], "sim.async_tp: 3: must be 1, 2, 4 or 8"),
    (["rl.transport=nccl", "sim.async_train_gpus=16"], "sim.async_train_gpus: 16 of 16 GPUs"),
    (["rl.transport=nccl", "sim.async_tp=8", "sim.async_train_gpus=12"],
     "sim.async_tp with sim.async_train_gpus: no TP8 instance fits the 4 GPUs left for rollout"),
    (["rl.transport=nccl", "sim.timeline_steps=5:6"], "sim.timeline_steps: step 5 is past"),
    (["rl.transport=nccl", "sim.trace_step=3"], "sim.trace_step: step 3 is past"),
    (["sim.modes=rollout"], "the rollout layout needs a fleet"),  # transport: rollout's inert
    (["sim.modes=rollout", "sched.buckets=tp8x3:40000"], "the fleet takes 24 of 16 GPUs"),
    (["rl.transport=nccl", "sim.modes=libra", "sim.planner=false",
      "sched.buckets=tp8x2:40000"], "the fleet takes 16 of 16 GPUs and leaves none to train"),
    (["rl.transport=nccl", "sim.modes=libra", "sim.planner=false", "cluster.gpus=12",
      "sched.buckets=tp8x1:40000"], "the rollout instances do not fit the 8 GPUs left"),
])
def test_check_refuses_what_sim_refuses_before_a_run(tmp_path, sets, why):
    """Whatever config check accepts, libra sim accepts: the rules sim applies to a config
    before any run (sim_config_check) are check's too, and each refusal is sim's own."""
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"cluster": {"gpus": 16}, "model": {"name": "qwen3-4b"},
                                "rl": {"batch_trajectories": 8, "steps": 3,
                                       "transport": "reshard"},
                                "sim": {"modes": ["async"]}}), encoding="utf-8")
    args = [a for s in sets for a in ("--set", s)]
    r = run("config", "check", str(path), *args)
    assert r.returncode == 1 and r.stdout == "" and why in r.stderr, r.stderr
    perfetto = ["--perfetto", str(tmp_path / "p.json")] if "sim.trace_step" in why else []
    r = run("sim", str(path), "--json", *perfetto, *args)
    assert r.returncode == 2 and r.stdout == "" and why in r.stderr, r.stderr


SMALL_A800 = {
    "name": "a800-80g", "bf16_flops_per_s": 312e12, "hbm_bytes": 60e9,
    "hbm_bw_bytes_per_s": 2.039e12, "nvlink_bw_bytes_per_s": 400e9,
    "allreduce_bus_bw_bytes_per_s": 150e9, "allreduce_latency_s": 30e-6,
    "inter_node_bw_bytes_per_s": 12.5e9, "gpus_per_node": 8,
}


def digest_of(*args, env=None):
    r = run(*args, "--json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["config_digest"]


@pytest.mark.parametrize("command", [("plan", "--verify", "0"), ("cost",), ("config", "show")])
def test_digest_covers_the_presets_values(tmp_path, command):
    """docs/cli.md: the digest hashes the effective configuration with the presets applied, so
    a preset file redefining the hardware the config names gives another digest."""
    presets = preset_file(tmp_path, "small.json", hardware=[SMALL_A800])
    built_in = digest_of(*command)
    from_file = digest_of(*command, "--presets", presets)
    assert from_file != built_in
    assert digest_of(*command, env={"LIBRA_PRESETS": presets}) == from_file
    assert digest_of(*command, "--presets", presets) == from_file


def test_digest_is_one_for_the_same_inputs_in_every_command(tmp_path):
    presets = preset_file(tmp_path, "small.json", hardware=[SMALL_A800])
    cfg = tmp_path / "exp.json"
    cfg.write_text(json.dumps({"rl": {"steps": 2}, "plan": {"verify_candidates": 0},
                               "sim": {"modes": ["colocated"]}}))
    digests = {c: digest_of(c, str(cfg), "--presets", presets)
               for c in ("plan", "cost", "sim")}
    assert set(digests.values()) == {digest_of("config", "show", str(cfg), "--presets", presets)}


@pytest.mark.parametrize("extra,name", [
    ((), "ok.json"),
    (("--set", "rl.sync_interval=9"), "ok.json"),
])
def test_staleness_rule_names_the_flag_that_set_it(tmp_path, extra, name):
    cfg = tmp_path / name
    cfg.write_text("{}")
    for args in (("config", "check", str(cfg)), ("config", "show")):
        r = run(*args, *extra, "--set", "rl.max_staleness=0")
        assert r.returncode in (1, 2) and r.stdout == "", r.stderr
        assert r.stderr.startswith("libra: --set rl.max_staleness: "), r.stderr
        assert str(cfg) not in r.stderr


def test_a_rule_only_load_refuses_names_the_flag_too(tmp_path):
    """Without async in sim.modes the update rules are libra load's (docs/cli.md): still
    reported at the flag that set the value, not at the file that did not."""
    cfg = tmp_path / "colocated.json"
    cfg.write_text('{"sim": {"modes": ["colocated"]}}')
    r = run("config", "check", str(cfg), "--set", "rl.max_staleness=0")
    assert r.returncode == 1 and r.stderr.startswith("libra: --set rl.max_staleness: 0 is below"), \
        r.stderr
    cfg.write_text('{"sim": {"modes": ["colocated"]}, "rl": {"max_staleness": 0}}')
    r = run("config", "check", str(cfg))
    assert r.returncode == 1 and r.stderr.startswith(f"libra: {cfg}: rl.max_staleness: 0 is"), \
        r.stderr


def test_staleness_rule_names_the_file_position(tmp_path):
    cfg = tmp_path / "x.json"
    cfg.write_text('{"rl": {"max_staleness": 0}}')
    r = run("config", "check", str(cfg))
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"libra: {cfg}:1:9: rl.max_staleness: 0 is below"), r.stderr


def test_max_seqs_rule_blames_the_key_set(tmp_path):
    cfg = tmp_path / "ok.json"
    cfg.write_text("{}")
    want = "libra: --set sim.max_seqs: "
    for args, code in ((("config", "check", str(cfg)), 1), (("plan", "--verify", "0"), 2)):
        r = run(*args, "--set", "sim.max_seqs=9000")
        assert r.returncode == code and r.stderr.startswith(want), r.stderr
        assert "sim.max_batched_tokens: 8192 is below sim.max_seqs (9000)" in r.stderr
    cfg.write_text('{"sim": {"max_seqs": 9000}}')
    r = run("config", "check", str(cfg))
    assert r.returncode == 1 and r.stderr.startswith(f"libra: {cfg}:1:10: "), r.stderr
    # both set: the later-applied one is blamed (the flag over the file)
    r = run("config", "check", str(cfg), "--set", "sim.max_batched_tokens=4096")
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("libra: --set sim.max_batched_tokens: "), r.stderr
