"""/metrics of `libra serve` and `libra emu` read by a real Prometheus parser (Debian's
python3-prometheus-client): the text format is what a scraper accepts, every family has its
type, and the figures agree with the traffic the test sent."""

from prometheus_client.parser import text_string_to_metric_families

from emu_util import Emu, Serve, get, post

PROMPT = list(range(100, 140))


def families(port):
    status, text = get(port, "/metrics")
    assert status == 200
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(fam, name=None):
    return [s for s in fam.samples if name is None or s.name == name]


def turn(port, traj, gen, finish=False):
    libra = {"trajectory": traj, "emu": {"gen_tokens": gen}}
    if finish:
        libra["events"] = [{"kind": "finish", "status": "completed"}]
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": gen}, "libra": libra}
    return post(port, "/generate", body)


def test_gateway_metrics_parse_and_count_the_traffic():
    with Emu("--instances", "tp1x2") as emu, Serve(*[i["url"] for i in emu.instances],
                                                   args=["--set", "sched.buckets=tp1:40960"]) as gw:
        for traj in range(3):
            for _ in range(2):
                assert turn(gw.port, "t%d" % traj, 4)[0] == 200
        post(gw.port, "/generate", {"input_ids": PROMPT, "sampling_params":
                                    {"max_new_tokens": 2}})  # no identity: a single turn
        fam = families(gw.port)
        assert fam["libra_requests"].type == "counter"
        by_api = {s.labels["api"]: s.value for s in samples(fam["libra_requests"],
                                                            "libra_requests_total")}
        assert by_api["sglang_generate"] == 7 and by_api["chat"] == 0
        assert samples(fam["libra_single_turn_requests"])[0].value == 1
        assert sum(s.value for s in samples(fam["libra_decisions"], "libra_decisions_total")) == 7
        assert samples(fam["libra_trajectories_live"])[0].value == 3
        assert fam["libra_engine_up"].type == "gauge"
        assert [s.value for s in samples(fam["libra_engine_up"])] == [1, 1]
        hist = fam["libra_upstream_seconds"]
        assert hist.type == "histogram"
        for inst in ("0", "1"):
            mine = [s for s in hist.samples if s.labels["instance"] == inst]
            buckets = [s.value for s in mine if s.name.endswith("_bucket")]
            count = [s.value for s in mine if s.name.endswith("_count")][0]
            assert buckets == sorted(buckets) and buckets[-1] == count  # cumulative, +Inf last
        total = sum(s.value for s in hist.samples if s.name.endswith("_count"))
        assert total == 7


def test_emulator_metrics_parse():
    with Emu() as emu:
        p = emu.port()
        body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 3},
                "libra": {"emu": {"gen_tokens": 3}}}
        assert post(p, "/generate", body)[0] == 200
        fam = families(p)
        for f in fam.values():
            assert f.type in ("counter", "gauge"), (f.name, f.type)
            assert len(f.samples) == 1, f.name
        assert fam["libra_emu_requests"].samples[0].value == 1
        assert fam["libra_emu_generation_tokens"].samples[0].value == 3
        assert fam["libra_emu_prompt_tokens"].samples[0].value == len(PROMPT)
        assert fam["libra_emu_running_requests"].type == "gauge"
