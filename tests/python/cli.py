"""Running the `libra` binary from the Python tests.

Under ASan the tests' interpreter runs with the sanitizer's runtime preloaded (LD_PRELOAD, for
liblibra.so); the binary links its own copy statically and refuses a second one, so it runs
without the preload.
"""

import os
import subprocess

LIBRA = os.environ["LIBRA_BIN"]


def env():
    """The environment for the binary: this one without LD_PRELOAD."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def run(*args, ok=(0,)):
    """Runs `libra ARGS`, asserting its exit status is in ok; returns the CompletedProcess."""
    r = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=240, env=env())
    assert r.returncode in ok, r.stderr
    return r
