"""A request silent for longer than 60 s is not cut (libevent's default timeout is 50 s; RL turns
of 10-30 minutes are normal). Labelled slow: it takes about 70 s of wall time."""

import time

from emu_util import Emu, generate, tokens_lasting

PROMPT = list(range(64))


def test_a_request_silent_for_70_s_is_answered():
    tokens = tokens_lasting(70, PROMPT)
    with Emu(scale="1") as emu:
        t0 = time.monotonic()
        status, out = generate(emu.port(), PROMPT, tokens, timeout=300)
        elapsed = time.monotonic() - t0
    assert status == 200 and out["meta_info"]["completion_tokens"] == tokens
    assert elapsed > 60, elapsed
