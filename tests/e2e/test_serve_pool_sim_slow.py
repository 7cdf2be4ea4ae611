"""The elastic pool live against the simulator's (docs/serve.md "The simulator's decisions,
live"): the experiment of pool_sim.py run by `libra sim`'s libra mode with the pool, and live on
`libra emu` engines, `libra serve --pool-steer` and `libra load --trainer`."""

import pytest

from emu_util import assert_weights_never_go_back
from pool_sim import BATCH, DRIFT_STEPS, drift_experiment, live, simulated


@pytest.mark.parametrize("rule", ["balance", "reference"])
def test_the_live_pool_lends_and_reclaims_as_the_simulator_does(tmp_path, rule):
    """`libra sim`'s libra mode with the elastic pool and the same experiment run live — `libra
    emu` engines as the simulator's fleet, `libra serve --pool-steer`, `libra load --trainer` —
    make the same requests at the same steps' ends, train each step with the same hybrids and
    for the same time, lose no trajectory and never send a turn to older weights. With libra's
    balance rule one hybrid joins for good; the reference's rule borrows both and gives both
    back, step after step."""
    experiment = drift_experiment(tmp_path, 2)
    sim, sim_requests, sim_hybrids = simulated(experiment, rule)
    split = sim["layout"]["pool"]
    assert (split["core_replicas"], split["hybrid_replicas"], split["replica_gpus"]) == (1, 2, 2)
    assert sim["layout"]["instances"] == "tp2x3"  # the core's engine and one per hybrid
    decisions = tmp_path / "decisions.jsonl"
    doc, live_requests = live(experiment, rule, decisions)
    assert live_requests == sim_requests, (live_requests, sim_requests)
    lends = 2 if rule == "reference" else 0  # step 1's end gives both hybrids back
    assert len(sim_requests) - lends >= 1 and [op for op, _ in sim_requests].count("lend") == lends
    trained = doc["steps"][:-1]  # the last batch ends the run untrained
    assert [s["active_hybrids"] for s in trained] == sim_hybrids[:-1]
    for s, st in zip(trained, sim["steps"]):
        assert abs(s["train_s"] - st["train_s"]) <= 1e-9 * st["train_s"], (s, st["train_s"])
    # no trajectory lost: every batch whole, none dropped as stale or filtered
    assert [s["trajectories"] for s in doc["steps"]] == [BATCH] * DRIFT_STEPS
    assert sum(s["stale_groups"] + s["filtered_groups"] for s in doc["steps"]) == 0
    assert_weights_never_go_back(decisions)
