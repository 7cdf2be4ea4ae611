"""Running the libra binary from end-to-end tests (LIBRA_BIN): the caller's LIBRA_PRESETS
removed, output captured, and what a refusal looks like (docs/cli.md: an exit code and nothing
on stdout)."""

import os
import subprocess

LIBRA = os.environ["LIBRA_BIN"]


def run(*args, env=None, timeout=120):
    """libra with args; env adds to the environment, from which LIBRA_PRESETS is removed."""
    full_env = dict(os.environ)
    full_env.pop("LIBRA_PRESETS", None)
    full_env.update(env or {})
    return subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env)


def refused(r, code=2):
    """Checks that r was refused with code and printed nothing on stdout; returns its stderr."""
    assert r.returncode == code and r.stdout == "", (r.returncode, r.stderr)
    return r.stderr
