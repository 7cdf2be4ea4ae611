"""A turn silent for longer than 60 s is not cut by the gateway (libevent's default timeout is
50 s, curl's none here; RL turns of 10-30 minutes are normal). Labelled slow: about 70 s."""

import time

from emu_util import Emu, Serve, generate, tokens_lasting

PROMPT = list(range(64))


def test_a_turn_silent_for_70_s_passes_the_gateway():
    tokens = tokens_lasting(70, PROMPT)
    with Emu(scale="1") as emu, Serve(emu.instances[0]["url"],
                                      args=["--set", "sched.buckets=tp1:40960"]) as gw:
        t0 = time.monotonic()
        status, out = generate(gw.port, PROMPT, tokens, timeout=300,
                               libra={"trajectory": 1, "emu": {"gen_tokens": tokens}})
        elapsed = time.monotonic() - t0
    assert status == 200 and out["meta_info"]["completion_tokens"] == tokens
    assert elapsed > 60, elapsed
