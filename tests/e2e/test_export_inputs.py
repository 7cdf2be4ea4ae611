"""`libra plan --export` (docs/export.md) given what a new user gets wrong: outputs that cannot
be written are refused before the plan is searched, nothing is left half-written, a command
line that is not UTF-8 still gives whole, parseable outputs, and preset names that would need
quoting in the shell scripts never reach them.

Needs LIBRA_BIN (the built binary) and Debian's python3-yaml.
"""

import json
import os
import subprocess

import pytest
import yaml

LIBRA = os.environ["LIBRA_BIN"]
FAST = ["--set", "plan.verify_candidates=0"]
FORMATS = ["sglang", "vllm", "slurm", "ray", "k8s", "verl", "megatron"]


def libra(*args, env=None, cwd=None):
    e = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    e.update(env or {})
    return subprocess.run([LIBRA, *args], capture_output=True, timeout=240, env=e, cwd=cwd)


@pytest.mark.parametrize("where", ["missing_dir", "directory", "dangling_dir", "not_a_dir"])
def test_an_output_that_cannot_be_written_is_refused_before_the_search(tmp_path, where):
    target = {"missing_dir": tmp_path / "no" / "x.sh", "directory": tmp_path,
              "dangling_dir": tmp_path / "dangling", "not_a_dir": tmp_path / "f" / "x.sh"}[where]
    (tmp_path / "f").write_text("")
    os.symlink(tmp_path / "nowhere" / "x.sh", tmp_path / "dangling")
    r = libra("plan", "--export", "sglang", "-o", str(target))
    assert r.returncode == 3 and r.stdout == b""
    err = r.stderr.decode()
    assert f"cannot write '{target}'" in err
    assert "searched in" not in err  # refused before the planner ran


def test_a_dangling_link_to_a_file_is_written_through(tmp_path):
    os.symlink(tmp_path / "engines.sh", tmp_path / "link")
    r = libra("plan", *FAST, "--export", "vllm", "-o", str(tmp_path / "link"))
    assert r.returncode == 0
    assert (tmp_path / "engines.sh").read_text().startswith("#!/bin/sh\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engines.sh", "link"]


@pytest.mark.parametrize("fmt", ["sglang", "ray"])
def test_a_full_device_fails_with_nothing_claimed(fmt):
    r = libra("plan", *FAST, "--export", fmt, "-o", "/dev/full")
    assert r.returncode == 3 and b"cannot write '/dev/full'" in r.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_command_that_is_not_utf8_gives_whole_utf8_outputs(tmp_path, fmt):
    """The header names the command, each byte that is not UTF-8 as '?': a config path in
    Latin-1 (\\xe9) must not cut the ray JSON short (json_pack refuses such a string) or make
    the k8s YAML unreadable."""
    config = os.path.join(os.fsencode(tmp_path), b"caf\xe9.json")
    with open(config, "w") as f:
        f.write('{"plan": {"verify_candidates": 0}}')
    r = libra("plan", config, "--export", fmt)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("utf-8")  # valid UTF-8 throughout
    assert "caf?.json" in text
    if fmt == "ray":
        doc = json.loads(text)
        assert doc["command"].endswith("caf?.json'")
        assert doc["placement_groups"] and doc["plan"]["model"] == "qwen3-14b"
    elif fmt == "k8s":
        assert len([d for d in yaml.safe_load_all(text) if d]) > 3
    same = libra("plan", os.fsencode(tmp_path) + b"/caf\xe9.json", "--export", fmt)
    assert same.stdout == r.stdout  # still a pure function of the command


@pytest.mark.parametrize("odd", [b"nl\ntouch PWNED\n.json", b'q"$(touch PWNED)".json',
                                 b"caf\xe9.json"])
def test_the_k8s_gateway_comment_quotes_the_preset_files(tmp_path, odd):
    """The YAML's header shows the gateway's command to copy: a --presets path was written raw,
    so a newline ended the comment (another YAML document), a byte that is not UTF-8 made the
    file unreadable, and $(...) ran when pasted. It is quoted as sh words are, control bytes and
    bytes that are not UTF-8 as in the command line above it."""
    presets = os.path.join(os.fsencode(tmp_path), odd)
    with open(presets, "w") as f:
        f.write('{"schema": "libra.presets/1"}')
    r = libra("plan", *FAST, "--presets", presets, "--export", "k8s")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("utf-8")
    objects = [d for d in yaml.safe_load_all(text) if d]
    assert all(isinstance(d, dict) for d in objects), objects[0]
    (line,) = [x for x in text.splitlines() if x.startswith("#       --presets ")]
    assert line.split("--presets ", 1)[1].startswith("'"), line


@pytest.mark.parametrize("name", ["my model", "it's", "a\"b", "$(id)", "`id`", "a\nb", "x;y",
                                  "a}b", "-dash", "UPPER"])
def test_preset_names_that_need_quoting_are_refused(tmp_path, name):
    """A model preset's name reaches the scripts (MODEL=${LIBRA_MODEL_PATH:-NAME}, comments,
    --model of libra serve): names outside [a-z0-9._-] are refused where the file is read."""
    source = os.path.join(os.environ.get("LIBRA_SOURCE_DIR", "."), "data", "presets",
                          "models.json")
    with open(source) as f:
        doc = json.load(f)
    model = dict(next(m for m in doc["models"] if m["name"] == "qwen3-14b"), name=name)
    presets = tmp_path / "p.json"
    presets.write_text(json.dumps(dict(doc, models=[model])))
    r = libra("plan", *FAST, "--model", name, "--export", "sglang",
              env={"LIBRA_PRESETS": str(presets)})
    assert r.returncode == 2 and r.stdout == b""
    assert b"models.0.name" in r.stderr  # refused where the preset file names it


def test_a_cased_model_name_is_written_as_its_preset(tmp_path):
    r = libra("plan", *FAST, "--model", "QWEN3-14B", "--export", "sglang")
    assert r.returncode == 0
    assert b"MODEL=${LIBRA_MODEL_PATH:-qwen3-14b}\n" in r.stdout


@pytest.mark.parametrize("fmt", ["sglang", "vllm", "slurm"])
def test_a_large_cluster_gives_scripts_sh_reads(tmp_path, fmt):
    """4096 GPUs: 160 engines, within one gateway's 256 (the largest cluster is refused below)."""
    out = tmp_path / "x.sh"
    r = libra("plan", *FAST, "--gpus", "4096", "--export", fmt, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert subprocess.run(["sh", "-n", str(out)]).returncode == 0
    r = libra("plan", *FAST, "--gpus", "65537", "--export", fmt)
    assert r.returncode == 2 and b"1..65536" in r.stderr


@pytest.mark.parametrize("fmt", ["sglang", "vllm", "slurm", "k8s", "ray"])
def test_more_engines_than_one_gateway_registers_are_refused_where_one_serves_them(fmt):
    """8192 GPUs plan 672 engines; libra serve registers 256, so the formats that put every
    engine behind one gateway wrote a script whose gateway exited 2 (ray starts none)."""
    r = libra("plan", "--gpus", "8192", *FAST, "--export", fmt)
    if fmt == "ray":
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 2 and r.stdout == b"", r.stderr
    assert (f"--export {fmt}: the plan's 672 rollout engines are more than one libra serve "
            "gateway registers (256)").encode() in r.stderr, r.stderr


@pytest.mark.parametrize("fmt", ["sglang", "ray"])
def test_jobs_and_progress_change_no_byte_of_an_export(fmt):
    """The header names the command that made the plan: --jobs and --progress, which change
    nothing of it, made the same plan export other bytes."""
    plain = libra("plan", *FAST, "--export", fmt)
    assert plain.returncode == 0, plain.stderr
    for extra in (["--jobs", "1", "--progress"], ["--jobs=2"]):
        r = libra("plan", *FAST, *extra, "--export", fmt)
        assert r.returncode == 0, r.stderr
        assert r.stdout == plain.stdout
