"""The verl recipe (docs/recipes/verl.md): its libra_verl.py module, taken from the page as
printed, imported over stand-ins of the verl classes it subclasses and of Ray, then driven
with the calls verl's agent loop makes, checking every call it makes on libra.Router.

The stand-ins have the constructors, attributes and hooks of verl-project/verl
verl/experimental/agent_loop/agent_loop.py @2994fde4 (GlobalRequestLoadBalancer,
AsyncLLMServerManager, AgentLoopWorker, AgentLoopManager): a manager that makes the replicas,
then the balancer (_init_global_load_balancer), then the workers (agent_loop_workers_class),
each worker's server manager unless a subclass set one; a worker that runs every sample of its
chunk as an asyncio task with the trajectory info get_trajectory_info makes (step, validate).
The agent loop plays ToolAgentLoop's sequence (tool_agent_loop.py @f60d13d4): one
request_id = uuid4().hex per trajectory, server_manager.generate(request_id=..., prompt_ids=
<the whole context>, sampling_params=..., image_data=None, video_data=None) per turn, the
answer's token_ids and the tool result's tokens appended. Ray's remote calls run in process;
replicas yield to the event loop once per turn, so a batch's trajectories interleave.
"""

import asyncio
import json
import re
import subprocess
import sys
import time
import types
import urllib.request
import uuid
from pathlib import Path

import pytest

import libra
from cli import LIBRA, env

PAGE = Path(__file__).resolve().parents[2] / "docs" / "recipes" / "verl.md"
BUCKETS = "tp2:100000"
RESPONSE_LENGTH = 3000


def recipe_module_source():
    """The page's ```python block that starts with '# libra_verl.py'."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    found = [b for b in blocks if b.startswith("# libra_verl.py")]
    assert len(found) == 1, "docs/recipes/verl.md has one libra_verl.py block"
    return found[0]


# ---- Ray, in process ---------------------------------------------------------------------------

class Ref:
    """An ObjectRef: awaiting it gives the call's value (awaiting the call when it is async)."""

    def __init__(self, value):
        self.value = value

    def __await__(self):
        if asyncio.iscoroutine(self.value):
            return (yield from self.value.__await__())
        return self.value
        yield  # a generator, so that __await__ returns an iterator


class Method:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args, **kwargs):
        return Ref(self.fn(*args, **kwargs))  # runs now: calls keep their order, as Ray's do


class Handle:
    def __init__(self, obj):
        self.obj = obj

    def __getattr__(self, name):
        return Method(getattr(self.obj, name))


class ActorClass:
    def __init__(self, cls, ray):
        self.cls, self.ray, self.name = cls, ray, None

    def options(self, name=None, **kwargs):
        self.name = name
        return self

    def remote(self, *args, **kwargs):
        handle = Handle(self.cls(*args, **kwargs))
        if self.name:
            self.ray.actors[self.name] = handle
        return handle


def fake_ray():
    ray = types.ModuleType("ray")
    ray.actors = {}
    ray.remote = lambda cls: ActorClass(cls, ray)
    ray.get_actor = lambda name: ray.actors[name]
    return ray


# ---- verl's agent loop, its shape at @2994fde4 ----------------------------------------------------

class Config(dict):
    """A DictConfig's reads: attributes and get()."""

    def __getattr__(self, name):
        return self.get(name)

    def get(self, name, default=None):
        value = dict.get(self, name, default)
        return Config(value) if isinstance(value, dict) else value


def fake_verl(ray, replicas, agent_loops):
    class AsyncLLMServerManager:
        def __init__(self, config, server_handles, load_balancer_handle=None):
            self.config = config
            self.server_handles = server_handles
            self._load_balancer = load_balancer_handle

    class AgentLoopWorker:
        def __init__(self, config, server_handles, reward_loop_worker_handles=None,
                     load_balancer_handle=None):
            self.config = config
            if not hasattr(self, "server_manager"):  # "for recipe to change"
                self.server_manager = AsyncLLMServerManager(
                    config, server_handles, load_balancer_handle=load_balancer_handle)

        async def generate_sequences(self, batch):
            step, validate = batch["global_steps"], batch["validate"]
            tasks = [asyncio.create_task(self._run_agent_loop(
                {"temperature": 1.0}, {"step": step, "sample_index": i, "rollout_n": 0,
                                       "validate": validate},
                agent_name="tool_agent", trace=True, **sample))
                for i, sample in enumerate(batch["samples"])]
            return await asyncio.gather(*tasks)

        async def _run_agent_loop(self, sampling_params, trajectory, *, agent_name, trace=True,
                                  **kwargs):
            loop = agent_loops[agent_name](self.server_manager)
            return await loop.run(sampling_params, **kwargs)

    class AgentLoopManager:
        def __init__(self, config, worker_group=None, rollout_resource_pool=None,
                     reward_loop_worker_handles=None):
            self.config = config
            self.rollout_config = config.actor_rollout_ref.rollout
            if not hasattr(self, "agent_loop_workers_class"):  # "for recipe to change"
                self.agent_loop_workers_class = ray.remote(AgentLoopWorker)

        @classmethod
        def create(cls, config, worker_group=None, rollout_resource_pool=None,
                   reward_loop_worker_handles=None):
            instance = cls(config, worker_group, rollout_resource_pool, reward_loop_worker_handles)
            instance._initialize_llm_servers()
            instance._init_global_load_balancer()
            instance._init_agent_loop_workers()
            return instance

        def _initialize_llm_servers(self):
            self.server_handles = [Handle(r) for r in replicas]

        def _init_global_load_balancer(self):
            raise AssertionError("the recipe starts its own balancer")

        def _init_agent_loop_workers(self):
            lb = getattr(self, "global_load_balancer", None)
            self.agent_loop_workers = [
                self.agent_loop_workers_class.options(name=f"agent_loop_worker_{i}").remote(
                    self.config, self.server_handles, None, lb)
                for i in range(self.rollout_config.agent.num_workers)]

        def generate_sequences(self, batch):
            """Splits the batch over the workers, as verl's does, and runs them at once."""
            n = len(self.agent_loop_workers)
            chunks = [dict(batch, samples=batch["samples"][i::n]) for i in range(n)]

            async def run():
                return await asyncio.gather(*[w.generate_sequences.remote(c) for w, c in
                                              zip(self.agent_loop_workers, chunks)])
            return asyncio.run(run())

    module = types.ModuleType("verl.experimental.agent_loop.agent_loop")
    module.AsyncLLMServerManager = AsyncLLMServerManager
    module.AgentLoopWorker = AgentLoopWorker
    module.AgentLoopManager = AgentLoopManager
    return module


class TokenOutput:
    def __init__(self, token_ids, server):
        self.token_ids, self.server = token_ids, server


class Replica:
    """A rollout server: generates sampling_params["script"] tokens, yielding once."""

    def __init__(self, index, fail=0):
        self.index, self.request_ids, self.fail = index, [], fail

    async def generate(self, *, request_id, prompt_ids, sampling_params, image_data=None,
                       video_data=None):
        await asyncio.sleep(0)
        self.request_ids.append(request_id)
        if self.fail:
            self.fail -= 1
            raise RuntimeError("replica %d failed" % self.index)
        return TokenOutput([11] * sampling_params["script"], self.index)


class ToolLoop:
    """ToolAgentLoop's calls over a scripted trajectory: turns of (generated, tool result)
    tokens. Records (request_id, server of each turn)."""

    log = []

    def __init__(self, server_manager):
        self.server_manager = server_manager

    async def run(self, sampling_params, *, prompt_ids, turns, **kwargs):
        request_id = uuid.uuid4().hex
        ids, served = list(prompt_ids), []
        for generated, tool in turns:
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=list(ids),
                sampling_params=dict(sampling_params, script=generated), image_data=None,
                video_data=None)
            served.append(out.server)
            ids += out.token_ids + [5] * tool
        ToolLoop.log.append((request_id, served))
        return served


class Recorder(libra.Router):
    """libra.Router, recording every call and decision."""

    calls = []

    def _log(self, *call):
        Recorder.calls.append(call)

    def start(self, trajectory, prompt):
        self._log("start", trajectory, prompt)
        return super().start(trajectory, prompt)

    def route(self, trajectory, context_tokens=None, now_s=None):
        d = super().route(trajectory, context_tokens, now_s)
        self._log("route", trajectory, context_tokens, d)
        return d

    def turn_done(self, trajectory, generated_tokens):
        self._log("turn_done", trajectory, generated_tokens)
        return super().turn_done(trajectory, generated_tokens)

    def tool_return(self, *args, **kwargs):
        raise AssertionError("the recipe reports no tool returns")

    def finish(self, trajectory, status="completed"):
        self._log("finish", trajectory, status)
        return super().finish(trajectory, status)

    def step(self, now_s=None):
        self._log("step")
        return super().step(now_s)


@pytest.fixture
def recipe(monkeypatch, tmp_path):
    """(libra_verl module, fake ray, replicas): the page's module imported over the stand-ins;
    the experiment file its manager reads through LIBRA_CONFIG."""
    replicas = [Replica(i) for i in range(4)]
    ray = fake_ray()
    names = ["verl", "verl.experimental", "verl.experimental.agent_loop"]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop.agent_loop",
                        fake_verl(ray, replicas, {"tool_agent": ToolLoop}))
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(libra, "Router", Recorder)
    Recorder.calls, ToolLoop.log = [], []
    experiment = tmp_path / "libra.json"
    experiment.write_text(json.dumps({"sched": {"buckets": BUCKETS}}))
    monkeypatch.setenv("LIBRA_CONFIG", str(experiment))
    module = types.ModuleType("libra_verl")
    exec(compile(recipe_module_source(), str(PAGE) + ":libra_verl.py", "exec"), module.__dict__)
    return module, ray, replicas


CONFIG = Config({"actor_rollout_ref": {"rollout": {
    "response_length": RESPONSE_LENGTH, "tensor_model_parallel_size": 2,
    "agent": {"num_workers": 2}}}})


def batch(step, prompts, validate=False):
    """Samples of GRPO groups: per prompt (its ids, [turns of each sample])."""
    samples = [{"prompt_ids": ids, "turns": turns} for ids, group in prompts for turns in group]
    return {"global_steps": step, "validate": validate, "samples": samples}


def group(base, n=4):
    """n samples of one prompt: the k-th takes k + 1 turns of 100 (k + 1) tokens each."""
    ids = [base + i for i in range(200)]
    return ids, [[(100 * (k + 1), 40)] * (k + 1) for k in range(n)]


def by_trajectory(calls):
    out = {}
    for call in calls:
        if call[0] != "step":
            out.setdefault(call[1], []).append(call)
    return out


def test_the_page_holds_one_module_that_compiles():
    compile(recipe_module_source(), "libra_verl.py", "exec")


def test_a_training_run_is_routed_turn_by_turn(recipe):
    libra_verl, ray, replicas = recipe
    manager = libra_verl.LibraAgentLoopManager.create(CONFIG)
    balancer = ray.get_actor("libra-balancer")
    long_one = ([9] * 200, [[(1500, 0), (1600, 0)]])  # 3100 tokens of response: truncated
    for step in (1, 2, 3):
        manager.generate_sequences(batch(step, [group(1000 * step), group(1000 * step + 500),
                                                long_one]))
    # every router call, per trajectory, is the one the page names
    trajectories = by_trajectory(Recorder.calls)
    assert len(trajectories) == 3 * 9
    statuses = {}
    for rid, calls in trajectories.items():
        kinds = [c[0] for c in calls]
        turns = (len(kinds) - 2) // 2
        assert kinds == ["start"] + ["route", "turn_done"] * turns + ["finish"], kinds
        routes = [c for c in calls if c[0] == "route"]
        dones = [c for c in calls if c[0] == "turn_done"]
        served = dict(ToolLoop.log)[rid]
        assert [c[3].instance for c in routes] == served  # each turn went where libra said
        # the context of each turn: the prompt, then every answer and tool result before it
        context = 200
        for route, done in zip(routes, dones):
            assert route[2] == context
            context += done[2] + (40 if done[2] < 1500 else 0)
        statuses[rid] = calls[-1][2]
    assert sorted(statuses.values()).count("truncated") == 3  # one long trajectory per step
    assert set(statuses.values()) == {"completed", "truncated"}
    # the samples of a prompt share its key; two prompts, two keys
    keys = {}
    for call in Recorder.calls:
        if call[0] == "start":
            keys.setdefault(call[2], set()).add(call[1])
    assert sorted(len(v) for v in keys.values()) == [3] + [4] * 6
    # a step at each later training batch, before its first trajectory starts
    kinds = [c[0] for c in Recorder.calls]
    assert kinds.count("step") == 2
    starts = [i for i, k in enumerate(kinds) if k == "start"]
    steps = [i for i, k in enumerate(kinds) if k == "step"]
    assert steps == [starts[9] - 1, starts[18] - 1]
    # the replicas saw a new request id every turn, never the trajectory's
    seen = [r for replica in replicas for r in replica.request_ids]
    assert len(seen) == len(set(seen)) == kinds.count("route")
    assert not set(seen) & set(trajectories)
    stats = balancer.stats.remote().value
    assert stats == {"buckets": BUCKETS, "live": 0, "global_step": 3,
                     "finished": {"completed": 24, "truncated": 3}}


def test_the_batches_trajectories_interleave_and_spread_over_the_replicas(recipe):
    libra_verl, ray, replicas = recipe
    manager = libra_verl.LibraAgentLoopManager.create(CONFIG)
    manager.generate_sequences(batch(1, [group(0, n=8)]))
    routes = [c for c in Recorder.calls if c[0] == "route"]
    first = [c[3] for c in routes if c[3].reason == "first"]
    assert len(first) == 8 and {d.instance for d in first} == {0, 1, 2, 3}  # least loaded
    # a trajectory's later turns stay on its replica
    for rid, served in ToolLoop.log:
        assert len(set(served)) == 1, served
    # the first turns of all eight were in flight at once
    kinds = [c[0] for c in Recorder.calls]
    assert kinds[:kinds.index("turn_done")].count("route") == 8


def test_validation_batches_are_routed_and_start_no_step(recipe):
    libra_verl, ray, replicas = recipe
    manager = libra_verl.LibraAgentLoopManager.create(CONFIG)
    manager.generate_sequences(batch(1, [group(0)]))
    manager.generate_sequences(batch(1, [group(50)], validate=True))
    manager.generate_sequences(batch(2, [group(100)]))
    kinds = [c[0] for c in Recorder.calls]
    assert kinds.count("start") == 12 and kinds.count("finish") == 12
    assert kinds.count("step") == 1
    assert ray.get_actor("libra-balancer").stats.remote().value["global_step"] == 2


def test_a_failed_turn_is_released_and_its_trajectory_ends_aborted(recipe):
    libra_verl, ray, replicas = recipe
    manager = libra_verl.LibraAgentLoopManager.create(CONFIG)
    replicas[0].fail = 1
    with pytest.raises(RuntimeError, match="replica 0 failed"):
        manager.generate_sequences(batch(1, [([1] * 200, [[(100, 10), (100, 10)]])]))
    kinds = [(c[0], c[2]) for c in Recorder.calls if c[0] != "start"]
    assert kinds == [("route", 200), ("turn_done", None), ("finish", "aborted")]
    stats = ray.get_actor("libra-balancer").stats.remote().value
    assert stats["live"] == 0 and stats["finished"] == {"aborted": 1}


def test_a_layout_without_the_rollout_tp_is_refused_at_start(recipe, tmp_path, monkeypatch):
    libra_verl, ray, replicas = recipe
    experiment = tmp_path / "tp1.json"
    experiment.write_text(json.dumps({"sched": {"buckets": "tp1:4000,tp4:30000"}}))
    monkeypatch.setenv("LIBRA_CONFIG", str(experiment))
    with pytest.raises(libra.Error, match="TP2"):
        libra_verl.LibraAgentLoopManager.create(CONFIG)


def post(url, doc):
    req = urllib.request.Request(url, json.dumps(doc).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


def gateway_prompt_id(ids, tmp_path):
    """The prompt_id `libra serve --capture` records for a trajectory whose first turn sends ids
    as SGLang's input_ids (to one `libra emu` engine)."""
    capture = tmp_path / "capture.jsonl"
    procs = []
    try:
        procs.append(subprocess.Popen([LIBRA, "emu", "--time-scale", "0.005"], env=env(),
                                      stdout=subprocess.PIPE, text=True))
        engine = json.loads(procs[0].stdout.readline())["url"]
        procs.append(subprocess.Popen(
            [LIBRA, "serve", "--listen", "127.0.0.1:0", "--engine", engine, "--set",
             "sched.buckets=tp1:40960", "--capture", str(capture)],
            env=env(), stdout=subprocess.PIPE, text=True))
        url = json.loads(procs[1].stdout.readline())["url"]
        post(url + "/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 2},
                                 "libra": {"trajectory": "K"}})
        post(url + "/libra/v1/trajectories/K/events", {"kind": "finish"})
        for _ in range(500):  # a header line, then the trajectory's
            text = capture.read_text() if capture.exists() else ""
            lines = text.splitlines()
            if len(lines) > 1 and text.endswith("\n"):
                return json.loads(lines[1])["prompt_id"]
            time.sleep(0.01)
        raise AssertionError("the gateway captured nothing")
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


def test_the_prompt_key_is_the_gateways(recipe, tmp_path):
    """The balancer keys a trajectory's prompt as `libra serve` keys the same token ids
    (docs/serve.md "Identity"), so routers fed by either share per-prompt history."""
    libra_verl, ray, replicas = recipe
    manager = libra_verl.LibraAgentLoopManager.create(CONFIG)
    ids, turns = group(1000)
    manager.generate_sequences(batch(1, [(ids, turns)]))
    keys = {libra.prompt_key(c[2]) for c in Recorder.calls if c[0] == "start"}
    assert keys == {gateway_prompt_id(ids, tmp_path)}
