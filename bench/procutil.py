"""What the Python benches share: a process's resident memory and the figure line of
bench/README.md's format (one JSON object; `instructions` null: these figures span
processes)."""

import json
import statistics


def proc_rss_kib(pid):
    """Resident memory of process pid, KiB (0 when it has none or is gone)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def figure(name, unit, value, n, inp):
    """Prints one figure, four significant digits."""
    print(json.dumps({"input": inp, "instructions": None, "n": n, "name": name, "unit": unit,
                      "value": float("%.4g" % value)}, sort_keys=True), flush=True)


def quartiles(xs):
    """(first quartile, median, third quartile) of xs, inclusive method; xs non-empty."""
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]
