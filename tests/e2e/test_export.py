"""End-to-end tests of `libra plan --export` (docs/export.md): the exported sglang, vllm and
slurm scripts are run with stub executables first on their PATH (python3, vllm, srun,
scontrol, curl, libra and a trainer: small sh scripts that record their argv and environment
and exit 0, or for srun start the step's command), and what they launched is checked against
the plan's placement (`libra plan --json`): the engines' real flags, every instance and every
node's share of training started, CUDA_VISIBLE_DEVICES sets disjoint and covering the plan's
GPUs, distinct ports, the gateway registering each engine with its TP. The ray JSON and the
k8s YAML are parsed and checked for the same; verl and megatron against the training layout.

Needs LIBRA_BIN (the built binary), Debian's python3-yaml and shellcheck.
"""

import json
import os
import re
import subprocess
from collections import namedtuple

import pytest
import yaml

LIBRA = os.environ["LIBRA_BIN"]
MODEL = "/models/Qwen3-14B"

DEFAULT = []                                           # 48 GPUs: 3xTP8, training on 3 nodes
HETERO = ["--set", "plan.min_tp_sizes=3"]              # 48 GPUs: 10xTP2 + 1xTP4 + 1xTP8
PARTIAL = ["--gpus", "20", "--batch", "8", "--samples", "4",
           "--set", "plan.min_tp_sizes=3"]             # 8 + 8 + 4 GPUs: TP1, TP2 and TP4
PLANS = {"default": DEFAULT, "hetero": HETERO, "partial": PARTIAL}
MOE = ["--model", "qwen3-30b-a3b", "--gpus", "64", "--hardware", "h100-sxm", "--workload",
       "dapo-math", "--batch", "1024", "--set", "plan.verify_candidates=0"]  # EP 8 (planner.md)

RECORD = r"""#!/bin/sh
f=$(mktemp "$STUB_LOG/call.XXXXXX")
{
    echo "prog ${0##*/}"
    for a in "$@"; do echo "arg $a"; done
    env | sed 's/^/env /'
} > "$f"
"""

# srun: records its own flags, then runs the step's command on "node" --relative
SRUN = r"""#!/bin/sh
f=$(mktemp "$STUB_LOG/call.XXXXXX")
{
    echo "prog srun"
    for a in "$@"; do echo "arg $a"; done
} > "$f"
node=
while [ $# -gt 0 ]; do
    case "$1" in
    --relative=*) node=${1#--relative=}; shift ;;
    --*) shift ;;
    *) break ;;
    esac
done
SLURM_NODEID=$node exec "$@"
"""

SCONTROL = r"""#!/bin/sh
[ "$1 $2" = "show hostnames" ] || exit 1
i=0
while [ "$i" -lt "$STUB_NODES" ]; do echo "host$i"; i=$((i + 1)); done
"""

Call = namedtuple("Call", "prog args env")


def run(*args):
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=120)


def plan_doc(args):
    r = run("plan", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def export(fmt, args):
    r = run("plan", *args, "--export", fmt)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture
def stubs(tmp_path):
    """A directory of stubs and the log directory they record into."""
    bindir, log = tmp_path / "bin", tmp_path / "log"
    bindir.mkdir()
    log.mkdir()
    scripts = {name: RECORD for name in ("python3", "vllm", "libra", "trainer")}
    scripts.update(srun=SRUN, scontrol=SCONTROL, curl="#!/bin/sh\nexit 0\n")
    for name, text in scripts.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    return bindir, log


def run_script(text, args, stubs, tmp_path, **env):
    bindir, log = stubs
    script = tmp_path / "export.sh"
    script.write_text(text)
    full = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", STUB_LOG=str(log),
                LIBRA_MODEL_PATH=MODEL, **env)
    return subprocess.run(["sh", str(script), *args], capture_output=True, text=True,
                          timeout=60, env=full)


def take_calls(log):
    """The calls recorded since the last take, removed from the log."""
    calls = []
    for f in sorted(log.iterdir()):
        prog, args, env = None, [], {}
        for line in f.read_text().splitlines():
            kind, _, rest = line.partition(" ")
            if kind == "prog":
                prog = rest
            elif kind == "arg":
                args.append(rest)
            elif kind == "env" and "=" in rest:
                key, _, value = rest.partition("=")
                env[key] = value
        calls.append(Call(prog, args, env))
        f.unlink()
    return calls


def flags(words):
    """--key value pairs of a command line."""
    assert len(words) % 2 == 0, words
    out = dict(zip(words[::2], words[1::2]))
    assert len(out) == len(words) // 2, words
    return out


# ---- the plan's placement -----------------------------------------------------------------

def engines_of(doc):
    """instance -> (node, tp, GPUs)"""
    out = {}
    for node in doc["placement"]:
        for g in node["gpus"]:
            if "instance" in g:
                n, tp, gpus = out.get(g["instance"], (node["node"], g["instance_tp"], set()))
                assert n == node["node"]
                gpus.add(g["gpu"])
                out[g["instance"]] = (n, tp, gpus)
    assert len(out) == doc["rollout"]["instance_count"]
    return out


def training_of(doc):
    """node -> training GPUs"""
    out = {}
    for node in doc["placement"]:
        gpus = {g["gpu"] for g in node["gpus"] if g["role"] == "train"}
        if gpus:
            out[node["node"]] = gpus
    return out


def nodes_of(doc):
    return len(doc["placement"])


def check_engines(doc, launched, engine):
    """launched: (node, CUDA_VISIBLE_DEVICES, argv) of every engine started."""
    planned = engines_of(doc)
    assert len(launched) == len(planned)
    by_node, ports, found = {}, set(), set()
    for node, cvd, argv in launched:
        gpus = {int(g) for g in cvd.split(",")}
        if engine == "sglang":
            assert argv[:2] == ["-m", "sglang.launch_server"], argv
            f = flags(argv[2:])
            tp, model = int(f["--tp-size"]), f["--model-path"]
            mem = f["--mem-fraction-static"]
        else:
            assert argv[0] == "serve", argv
            model, f = argv[1], flags(argv[2:])
            tp, mem = int(f["--tensor-parallel-size"]), f["--gpu-memory-utilization"]
        assert model == MODEL and float(mem) == 0.9 and f["--host"] == "0.0.0.0"
        assert len(gpus) == tp
        matches = [i for i, (n, t, g) in planned.items() if (n, t, g) == (node, tp, gpus)]
        assert len(matches) == 1, (node, tp, gpus)
        found.add(matches[0])
        ports.add(int(f["--port"]))
        seen = by_node.setdefault(node, set())
        assert not seen & gpus, (node, seen, gpus)  # disjoint
        seen |= gpus
    assert found == set(planned) and len(ports) == len(planned)
    for node in range(nodes_of(doc)):  # covering every rollout GPU of every node
        want = set().union(*[g for n, _, g in planned.values() if n == node])
        assert by_node.get(node, set()) == want, node
    return {int(flags_of_port(argv)): (node, len(cvd.split(","))) for node, cvd, argv in launched}


def flags_of_port(argv):
    return argv[argv.index("--port") + 1]


def check_gateway(call, engines, hosts, listen):
    """engines: port -> (node, tp) of the launched engines."""
    assert call.prog == "libra" and call.args[0] == "serve"
    f = call.args[1:]
    assert f[f.index("--listen") + 1] == listen
    registered = [f[i + 1] for i, w in enumerate(f) if w == "--engine"]
    assert len(registered) == len(engines)
    for flag in registered:
        host, port, tp = re.fullmatch(r"http://([^:]+):(\d+),tp=(\d)", flag).groups()
        node, size = engines[int(port)]
        assert host == hosts[node] and int(tp) == size
    assert any(w.startswith("sched.buckets=") for w in f)


# ---- sglang and vllm ----------------------------------------------------------------------

@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("plan", ["default", "hetero", "partial"])
def test_engine_script_starts_the_planned_fleet(engine, plan, stubs, tmp_path):
    args = PLANS[plan]
    doc, text = plan_doc(args), export(engine, args)
    program = "python3" if engine == "sglang" else "vllm"
    launched = []
    for node in range(nodes_of(doc)):
        r = run_script(text, [str(node)], stubs, tmp_path)
        assert r.returncode == 0, r.stderr
        calls = take_calls(stubs[1])
        assert all(c.prog == program for c in calls)
        if not calls:
            assert "runs no engine of the plan" in r.stderr
        launched += [(node, c.env["CUDA_VISIBLE_DEVICES"], c.args) for c in calls]
    engines = check_engines(doc, launched, engine)
    hosts = [f"node-{k}.example" for k in range(nodes_of(doc))]
    r = run_script(text, ["serve"], stubs, tmp_path, LIBRA_HOSTS=" ".join(hosts))
    assert r.returncode == 0, r.stderr
    (call,) = take_calls(stubs[1])
    check_gateway(call, engines, hosts, "127.0.0.1:30000")
    if engine == "vllm":  # vLLM names no TP: the gateway must be told each one
        assert all(",tp=" in w for w in call.args if w.startswith("http://"))


def test_the_gateway_decides_on_the_planned_experiment(stubs, tmp_path):
    """The gateway's line carries the plan command's preset files and every key libra serve
    reads that the experiment sets, and libra serve takes them: a gateway on another hardware
    preset or router than the plan's would decide on another experiment."""
    base = next(h for h in json.loads(run("presets", "--json").stdout)["hardware"]
                if h["name"] == "a800-80g")
    del base["origin"]
    base["name"] = "lab-a800"
    presets = tmp_path / "lab presets.json"  # a word the script must quote
    presets.write_text(json.dumps({"schema": "libra.presets/1", "hardware": [base]}))
    config = tmp_path / "signal.json"  # a key that acts with --pool-steer alone
    config.write_text('{"ehp": {"signal": "reference"}}')
    args = [str(config), "--presets", str(presets), "--hardware", "lab-a800", "--set",
            "sched.policy=load_balance", "--set", "rl.max_staleness=6", "--batch", "64"]
    r = run_script(export("sglang", args), ["serve"], stubs, tmp_path,
                   LIBRA_HOSTS=" ".join(f"node-{k}" for k in range(6)))
    assert r.returncode == 0, r.stderr
    (call,) = take_calls(stubs[1])
    words = call.args[1:]
    settings = {words[i + 1] for i, w in enumerate(words) if w == "--set"}
    assert words[words.index("--presets") + 1] == str(presets), words
    assert words[words.index("--hardware") + 1] == "lab-a800", words
    assert {"sched.policy=load_balance", "rl.max_staleness=6",
            "rl.batch_trajectories=64"} <= settings, settings
    assert "sim.seed=1" not in settings and not any(s.startswith("rl.steps=") for s in settings)
    assert not any(s.startswith("ehp.signal=") for s in settings), settings
    # libra serve takes the line: it resolves the config, then finds no engine (exit 3)
    line = words[:words.index("--engine")]
    line[line.index("--listen") + 1] = "127.0.0.1:0"
    env = dict(os.environ)
    env.pop("LIBRA_PRESETS", None)
    r = subprocess.run([LIBRA, "serve", *line, "--engine", "http://127.0.0.1:9,tp=8"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 3, r.stderr


ONE_ENGINE = ["--gpus", "16", "--set", "plan.verify_candidates=0"]  # 8 train + 1 x TP8


@pytest.mark.parametrize("fmt", ["sglang", "vllm", "slurm"])
@pytest.mark.parametrize("plan", [HETERO, ONE_ENGINE], ids=["hetero", "one-engine"])
def test_scripts_are_posix_sh(fmt, plan, tmp_path):
    """shellcheck passes the scripts of a fleet of several engines and of one."""
    script = tmp_path / "export.sh"
    script.write_text(export(fmt, plan))
    r = subprocess.run(["shellcheck", "-s", "sh", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_engine_script_refuses_what_it_cannot_do(stubs, tmp_path):
    text = export("sglang", DEFAULT)
    for args, needle in (([], "usage:"), (["6"], "the plan has no node 6 (0-5)"),
                         (["serve"], "LIBRA_HOSTS names 1 hosts; the plan has 6 nodes")):
        r = run_script(text, args, stubs, tmp_path)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
    assert take_calls(stubs[1]) == []


# ---- slurm --------------------------------------------------------------------------------

@pytest.mark.parametrize("plan", ["default", "hetero"])
def test_slurm_script_places_engines_and_trainer(plan, stubs, tmp_path):
    args = PLANS[plan]
    doc, text = plan_doc(args), export("slurm", args)
    nodes = nodes_of(doc)
    assert f"#SBATCH --nodes={nodes}\n" in text and "#SBATCH --gres=gpu:8\n" in text
    r = run_script(text, [], stubs, tmp_path, SLURM_JOB_NODELIST="host[0-9]",
                   STUB_NODES=str(nodes), LIBRA_TRAIN_CMD="trainer --config x.yaml",
                   LIBRA_ADMIN_TOKEN="secret")
    assert r.returncode == 0, r.stderr
    calls = take_calls(stubs[1])
    steps = [c for c in calls if c.prog == "srun"]
    for c in steps:
        assert c.args[:2] == ["--nodes=1", "--ntasks=1"] and "--overlap" in c.args
    engines = [c for c in calls if c.prog == "python3"]
    launched = [(int(c.env["SLURM_NODEID"]), c.env["CUDA_VISIBLE_DEVICES"], c.args)
                for c in engines]
    ports = check_engines(doc, launched, "sglang")
    trainers = [c for c in calls if c.prog == "trainer"]
    planned = training_of(doc)
    assert len(trainers) == len(planned)
    assert sorted(int(c.env["LIBRA_TRAIN_NODE_RANK"]) for c in trainers) == \
        list(range(len(planned)))
    for c in trainers:
        node = int(c.env["SLURM_NODEID"])
        gpus = {int(g) for g in c.env["CUDA_VISIBLE_DEVICES"].split(",")}
        assert gpus == planned[node] and int(c.env["LIBRA_TRAIN_GPUS"]) == len(gpus)
        assert c.env["LIBRA_TRAIN_NNODES"] == str(len(planned)) and c.args == ["--config", "x.yaml"]
        assert c.env["MASTER_ADDR"] == f"host{min(planned)}"
        assert c.env["LIBRA_GATEWAY"] == "http://host0:30000"
        engine_gpus = [g for n, cvd, _ in launched if n == node
                       for g in map(int, cvd.split(","))]
        assert not gpus & set(engine_gpus)  # the node's engines and training are disjoint
    (gateway,) = [c for c in calls if c.prog == "libra"]
    assert gateway.env["SLURM_NODEID"] == "0"
    check_gateway(gateway, ports, [f"host{k}" for k in range(nodes)], "0.0.0.0:30000")
    assert len(steps) == len(engines) + len(trainers) + 1


def test_slurm_script_needs_the_trainer_and_whole_nodes(stubs, tmp_path):
    r = run_script(export("slurm", DEFAULT), [], stubs, tmp_path, SLURM_JOB_NODELIST="h",
                   STUB_NODES="6", LIBRA_ADMIN_TOKEN="secret")
    assert r.returncode != 0 and "LIBRA_TRAIN_CMD" in r.stderr
    assert take_calls(stubs[1]) == []
    r = run("plan", *PARTIAL, "--export", "slurm")
    assert r.returncode == 2 and r.stdout == ""
    assert "not whole nodes of 8" in r.stderr


# ---- ray ----------------------------------------------------------------------------------

@pytest.mark.parametrize("plan", ["default", "hetero", "partial"])
def test_ray_bundles_are_the_planned_groups(plan):
    args = PLANS[plan]
    doc, ray = plan_doc(args), json.loads(export("ray", args))
    assert ray["schema"] == "libra.export.ray/1"
    assert ray["config_digest"] == doc["config_digest"]
    planned, training = engines_of(doc), training_of(doc)
    launched, trainers = [], {}
    for group in ray["placement_groups"]:
        assert group["strategy"] == "STRICT_PACK"
        assert len(group["bundles"]) == len(group["roles"])
        assert sum(b["GPU"] for b in group["bundles"]) <= doc["gpus_per_node"]
        for bundle, role in zip(group["bundles"], group["roles"]):
            assert bundle["GPU"] == len(role["gpus"]) and bundle["CPU"] >= 1
            if role["role"] == "engine":
                assert role["argv"][:3] == ["python3", "-m", "sglang.launch_server"]
                assert int(flags_of_port(role["argv"])) == role["port"]
                argv = role["argv"][1:]
                argv[argv.index("--model-path") + 1] = MODEL  # ray runs the preset's name
                launched.append((group["node"], ",".join(map(str, role["gpus"])), argv))
            else:
                assert role["role"] == "trainer" and role["nnodes"] == len(training)
                trainers[role["node_rank"]] = (group["node"], set(role["gpus"]))
    check_engines(doc, launched, "sglang")
    assert [trainers[k] for k in sorted(trainers)] == sorted(training.items())
    assert len(planned) + len(training) == sum(len(g["roles"]) for g in ray["placement_groups"])


# ---- k8s ----------------------------------------------------------------------------------

@pytest.mark.parametrize("plan", ["default", "hetero", "partial"])
def test_k8s_manifests_pin_every_group(plan):
    args = PLANS[plan]
    doc, text = plan_doc(args), export("k8s", args)
    objects = [o for o in yaml.safe_load_all(text) if o is not None]
    kinds = [o["kind"] for o in objects]
    planned, training = engines_of(doc), training_of(doc)
    assert kinds.count("Deployment") == kinds.count("Service") - 1 == len(planned)
    assert kinds.count("Pod") == len(training)
    services = {o["metadata"]["name"]: o["spec"]["ports"][0]["port"]
                for o in objects if o["kind"] == "Service" and "ports" in o["spec"]}
    (trainers,) = [o for o in objects if o["metadata"]["name"] == "libra-trainer"]
    assert trainers["spec"] == {"clusterIP": "None", "selector": {"libra-role": "trainer"}}
    launched, used = [], {}
    for o in objects:
        if o["kind"] == "Service":
            continue
        spec = o["spec"]["template"]["spec"] if o["kind"] == "Deployment" else o["spec"]
        node = int(spec["nodeSelector"]["libra-node"])
        (container,) = spec["containers"]
        gpus = o["metadata"]["annotations"]["libra-gpus"]
        count = container["resources"]["limits"]["nvidia.com/gpu"]
        assert count == len(gpus.split(","))
        used[node] = used.get(node, 0) + count
        if o["kind"] == "Deployment":
            assert container["command"] == ["python3", "-m", "sglang.launch_server"]
            argv = ["-m", "sglang.launch_server", *container["args"]]
            argv[argv.index("--model-path") + 1] = MODEL
            launched.append((node, gpus, argv))
            assert container["ports"][0]["containerPort"] == int(flags_of_port(argv))
            assert services[o["metadata"]["name"]] == int(flags_of_port(argv))
        else:
            env = {e["name"]: e.get("value") for e in container["env"]}
            rank = int(env["LIBRA_TRAIN_NODE_RANK"])
            assert sorted(training)[rank] == node
            assert {int(g) for g in gpus.split(",")} == training[node]
            assert container["command"] == ["sh", "-c", "$(LIBRA_TRAIN_CMD)"]
            assert (spec["hostname"], spec["subdomain"]) == (f"libra-trainer-{rank}",
                                                             "libra-trainer")
            assert env["MASTER_ADDR"] == "libra-trainer-0.libra-trainer"
    check_engines(doc, launched, "sglang")
    assert all(n <= doc["gpus_per_node"] for n in used.values())
    assert "libra serve --listen 0.0.0.0:30000" in text


# ---- verl and megatron --------------------------------------------------------------------

def settings(text, sep):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.split(sep, 1) if sep in line else (line, "")
            assert key not in out, key
            out[key] = value
    return out


@pytest.mark.parametrize("plan", ["default", "hetero"])
def test_verl_overrides_are_the_training_layout(plan):
    args = PLANS[plan]
    doc, text = plan_doc(args), export("verl", args)
    s, train = settings(text, "="), doc["train"]
    mc = "actor_rollout_ref.actor.megatron."
    assert s["actor_rollout_ref.actor.strategy"] == "megatron"
    assert int(s[mc + "tensor_model_parallel_size"]) == train["tp"]
    assert int(s[mc + "pipeline_model_parallel_size"]) == train["pp"]
    assert int(s[mc + "context_parallel_size"]) == train["cp"]
    assert s["actor_rollout_ref.actor.use_dynamic_bsz"] == "True"
    assert int(s["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"]) == \
        train["micro_batch_tokens_per_gpu"]
    assert int(s["trainer.nnodes"]) * int(s["trainer.n_gpus_per_node"]) == train["gpus"]
    assert int(s["rollout.nnodes"]) * int(s["rollout.n_gpus_per_node"]) == doc["rollout"]["gpus"]
    sizes = [int(k[2:]) for k, n in doc["rollout"]["instances"].items() if n]
    assert int(s["actor_rollout_ref.rollout.tensor_model_parallel_size"]) == max(sizes)
    assert ("verl starts every rollout engine with one TP size" in text) == (len(sizes) > 1)


# The top-level groups of the verl configs the export names (Hydra's struct mode refuses a key
# outside them unless written with '+'): verl/trainer/config/ppo_megatron_trainer.yaml and
# ppo_trainer.yaml; the fully async ones (verl/experimental/fully_async_policy/config/) add the
# rollout pool and async_training.
VERL_GROUPS = {"actor_rollout_ref", "data", "critic", "reward_model", "algorithm", "trainer"}
VERL_CONFIGS = {
    "verl.trainer.main_ppo": {"ppo_megatron_trainer", "ppo_trainer"},
    "verl.experimental.fully_async_policy.fully_async_main":
        {"fully_async_ppo_megatron_trainer", "fully_async_ppo_trainer"},
}


@pytest.mark.parametrize("plan", ["async", "colocated", "fsdp"])
def test_verl_keys_are_those_of_the_config_the_export_names(plan):
    """Every key written without '+' is in a group of the config the header's command names:
    an async plan's rollout.* pool exists only in verl's fully async configs."""
    args = {"async": DEFAULT, "colocated": ["--mode", "colocated"], "fsdp": HSDP}[plan]
    text, doc = export("verl", args), plan_doc(args)
    m = re.search(r"python3 -m (\S+) \\\n#\s+--config-name=(\w+)", text)
    assert m, text
    module, config = m.groups()
    assert config in VERL_CONFIGS[module], (module, config)
    assert module.endswith("fully_async_main") == (doc["mode"] != "colocated")
    megatron = doc["train"]["sharding"] == "distributed_optimizer"
    assert config.endswith("megatron_trainer") == megatron
    groups = VERL_GROUPS | ({"rollout", "async_training"} if "fully_async" in config else set())
    for key in settings(text, "="):
        assert key.startswith("+") or key.split(".")[0] in groups, (key, config)


def test_megatron_arguments_are_the_training_layout():
    doc, text = plan_doc(HETERO), export("megatron", HETERO)
    s, train = settings(text, " "), doc["train"]
    assert int(s["--tensor-model-parallel-size"]) == train["tp"]
    assert int(s["--pipeline-model-parallel-size"]) == train["pp"]
    assert int(s["--context-parallel-size"]) == train["cp"]
    assert s["--micro-batch-size"] == "1" and "--use-distributed-optimizer" in s
    assert f"--max-tokens-per-gpu {train['micro_batch_tokens_per_gpu']}" in text
    assert ("--recompute-granularity" in s) == train["recompute"]


HSDP = ["--model", "qwen3-4b", "--set", "plan.fsdp=search", "--set", "plan.verify_candidates=0"]


def test_an_hsdp_plan_reaches_both_trainers_as_it_can():
    """verl's FSDP takes the shard group (fsdp_size); Megatron-LM's --use-torch-fsdp2 shards
    over every DP rank, and the export says how that differs from the plan."""
    train = plan_doc(HSDP)["train"]
    assert train["sharding"] == "hsdp" and 0 < train["shard_dp"] < train["dp"]
    group = train["shard_dp"] * train["cp"]
    v = settings(export("verl", HSDP), "=")
    assert int(v["actor_rollout_ref.actor.fsdp_config.fsdp_size"]) == group
    m = export("megatron", HSDP)
    assert "--use-torch-fsdp2" in settings(m, " ")
    assert f"# sharding: the plan's HSDP keeps one copy of the state per {group} GPUs;\n" in m
    assert "sharding" not in export("megatron", HETERO)


def test_expert_parallelism_reaches_both_trainers():
    train = plan_doc(MOE)["train"]
    ep = train["ep"]
    assert ep > 1 and train["step"]["ep_comm_s"] > 0
    m = settings(export("megatron", MOE), " ")
    assert int(m["--expert-model-parallel-size"]) == ep
    assert m["--expert-tensor-parallel-size"] == "1"
    v, mc = settings(export("verl", MOE), "="), "actor_rollout_ref.actor.megatron."
    assert int(v[mc + "expert_model_parallel_size"]) == ep
    assert v[mc + "expert_tensor_parallel_size"] == "1"
    assert "expert" not in export("megatron", HETERO)  # a dense model's plan has no EP


# ---- every format -------------------------------------------------------------------------

FORMATS = ["sglang", "vllm", "slurm", "ray", "k8s", "verl", "megatron"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_is_deterministic_and_names_its_origin(fmt, tmp_path):
    doc = plan_doc(HETERO)
    out = tmp_path / "out"
    r = run("plan", *HETERO, "--export", fmt, "-o", str(out))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    text, first = out.read_text(), export(fmt, HETERO)
    assert first == export(fmt, HETERO)  # the same bytes every run
    assert text == first.replace(f"--export {fmt}", f"--export {fmt} -o {out}")
    for needle in (doc["libra_version"], doc["config_digest"],
                   f"libra plan --set plan.min_tp_sizes=3 --export {fmt}"):
        assert needle in text, needle


def test_colocated_plans_go_to_frameworks_that_colocate():
    args = ["--mode", "colocated"]
    for fmt in ("sglang", "vllm", "slurm", "ray", "k8s"):
        r = run("plan", *args, "--export", fmt)
        assert r.returncode == 2 and r.stdout == "", fmt
        assert f"libra: plan: --export {fmt}: a colocated plan" in r.stderr
    doc, s = plan_doc(args), settings(export("verl", args), "=")
    assert int(s["trainer.nnodes"]) * int(s["trainer.n_gpus_per_node"]) == doc["gpus"]
    assert "rollout.nnodes" not in s
    assert "--tensor-model-parallel-size" in export("megatron", args)


def test_bad_export_requests():
    r = run("plan", "--export", "docker")
    assert r.returncode == 2
    assert "--export: unknown format 'docker' (one of " + ", ".join(FORMATS) + ")" in r.stderr
    r = run("plan", "--export", "sglang", "--json")
    assert r.returncode == 2 and "--export and --json exclude each other" in r.stderr
    r = run("plan", "--gpus", "8", "--export", "sglang")  # infeasible: nothing to export
    assert r.returncode == 1 and r.stdout == "" and "no feasible plan" in r.stderr


def test_the_documented_examples_are_the_default_plans_exports(tmp_path):
    """docs/export.md shows each format's export of the default plan whole: it must be what the
    command its header names writes today (a stale config digest there went unseen)."""
    path = os.path.join(os.environ["LIBRA_SOURCE_DIR"], "docs", "export.md")
    with open(path, encoding="utf-8") as f:
        blocks = re.findall(r"```\w*\n(.*?)```", f.read(), re.S)
    shown = {}
    for b in blocks:
        m = re.search(r'plan export \((\w+)\)|"command": "libra plan --export (\w+)', b)
        if m:
            shown[m.group(1) or m.group(2)] = b
    assert sorted(shown) == sorted(set(FORMATS) - {"vllm"}), sorted(shown)
    for fmt, text in shown.items():
        made_by = re.search(r'(?:# made by|"command"): "?libra (plan [^"\n]*)', text).group(1)
        argv = made_by.split()
        r = subprocess.run([LIBRA, *argv], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        out = (tmp_path / argv[argv.index("-o") + 1]).read_text() if "-o" in argv else r.stdout
        assert out == text, fmt
