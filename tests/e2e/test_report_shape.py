"""End-to-end tests of what `libra report` refuses in a result's members (docs/report.md
"Errors"): a member a figure reads whose type is wrong or whose value libra never writes is
refused, exit 2, naming FILE:LINE:COL and the member, with nothing written. It never reads as
if the member were missing, leaving a figure's part out or drawing it wrong.

The general test spoils, one at a time, the first occurrence of every member of real results
of each kind (elements of an array alike, modes and policies alike) with a value of another
type or range, and asks that `libra report` either refuses it where it stands or draws the very
page it draws from the unspoilt result (a member no figure reads). A figure that reads a member
the shape check (src/report/shape.c) does not list fails here.
"""

import concurrent.futures
import json
import os
import re
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
SHORT = ["--steps", "4", "--set", "sim.tune_steps=1", "--set", "sim.warmup_steps=1"]
POOL = os.path.join(SOURCE_DIR, "examples", "sim-search-r1-qwen3-14b.json")

# Members libra writes with a sign (regret over a baseline may be negative).
SIGNED = re.compile(r"/regret/(\w+/)?per_decision_gpu_s$")


def libra(*args, check=True):
    p = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=240)
    if check:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("results")
    made = {
        "run": ["sim", *SHORT, "--timeline", "1:3"],
        "pool": ["sim", POOL, "--set", "sim.modes=libra", "--set", "ehp.enabled=true", "--steps",
                 "6", "--timeline", "0:5"],
        "route": ["route", "eval", os.path.join(SOURCE_DIR, "tests", "data", "trace",
                                                "small.jsonl")],
        "sweep": ["sim", *SHORT, "--sweep", "cluster.gpus=32,48", "--seeds", "2"],
        "attribution": ["sim", *SHORT, "--attribution", "--seeds", "2"],
        "plan": ["plan", "--gpus", "16"],
    }
    out = {}
    for name, args in made.items():
        out[name] = d / f"{name}.json"
        libra(*args, "--json", "-o", str(out[name]))
    out["load"] = d / "load.json"  # `libra load --json` against `libra emu` (test_load.py)
    out["load"].write_text(open(os.path.join(SOURCE_DIR, "tests", "data", "report",
                                             "load.json")).read())
    return out


def members(v, path=(), pattern=()):
    """(path, pattern, value) of every member below v. The pattern has '*' for a mode, a
    policy and an element of an array, except in a tuple (an interval's [from, to, use]: a
    short array of scalars), whose elements are each their own."""
    if isinstance(v, dict):
        alike = path and path[-1] in ("modes", "policies")
        items = v.items()
    else:
        alike = len(v) > 3 or any(isinstance(c, (dict, list)) for c in v)
        items = enumerate(v)
    for k, c in items:
        at = pattern + ("*" if alike else k,)
        yield path + (k,), at, c
        if isinstance(c, (dict, list)):
            yield from members(c, path + (k,), at)


def spoilt(path, value):
    """Values of another type or range than value, as libra never writes them at path: for a
    number a string, and below 0 (where libra writes no sign), and no integer (for a count)."""
    if value is None:
        return []
    if isinstance(value, bool):
        return ["x"]
    if isinstance(value, (int, float)):
        out = ["x"] + ([] if SIGNED.search("/" + "/".join(map(str, path))) else [-1])
        return out + ([0.5] if isinstance(value, int) else [])
    return [7]  # a string, an object or an array


def put(doc, path, value):
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def page(path):
    p = subprocess.run([LIBRA, "report", str(path)], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def verdict(path, member, spoil, want):
    """None when the report of the spoilt result at path refuses member, or draws want."""
    rc, out, err = page(path)
    dotted = ".".join(map(str, member))
    if rc == 2 and out == "" and re.match(rf"libra: {re.escape(str(path))}:\d+:\d+: "
                                          rf"{re.escape(dotted)}: ", err):
        return None
    if rc == 0 and out == want:
        return None
    return f"{dotted} = {spoil!r}: exit {rc}, " + (err.strip() or "a different page")


def trimmed(src, tmp_path):
    """The result at src, a sweep's cells without their per-step records (no sweep figure
    reads them; the shape check reads them as a run's, spoilt in the run's test)."""
    doc = json.loads(src.read_text())
    for cell in doc.get("cells", []):
        for mode in cell.get("result", {}).get("modes", {}).values():
            mode.pop("steps", None)
    path = tmp_path / src.name
    path.write_text(json.dumps(doc))
    return doc, path


@pytest.mark.parametrize("kind", ["run", "pool", "route", "sweep", "attribution", "plan",
                                  "load"])
def test_every_member_a_figure_reads_is_checked(results, tmp_path, kind):
    doc, src = trimmed(results[kind], tmp_path)
    rc, want, err = page(src)
    assert rc == 0, err
    first = {}
    for path, pattern, value in members(doc):
        first.setdefault(pattern, (path, value))
    jobs = []
    for path, value in first.values():
        for spoil in spoilt(path, value):
            put(doc, path, spoil)
            d = tmp_path / str(len(jobs))
            d.mkdir()
            (d / src.name).write_text(json.dumps(doc, indent=0))
            put(doc, path, value)
            jobs.append((d / src.name, path, spoil))
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        bad = [v for v in pool.map(lambda j: verdict(*j, want), jobs) if v]
    assert not bad, f"{len(bad)} of {len(jobs)} spoilt members read as data:\n" + \
        "\n".join(bad[:60])


# ---- each kind's members, spoilt as a hand or another program would ------------------------

def refused(src, tmp_path, edit, member, says):
    """The result at src edited: refused, exit 2, naming FILE:LINE:COL and member (the line
    of its member), nothing written."""
    doc = json.loads(src.read_text())
    edit(doc)
    path = tmp_path / src.name
    path.write_text(json.dumps(doc, indent=1))
    out = tmp_path / "page.html"
    p = libra("report", str(path), "-o", str(out), check=False)
    assert p.returncode == 2 and p.stdout == "" and not out.exists(), p.stderr
    m = re.match(rf"libra: {re.escape(str(path))}:(\d+):\d+: (.*)\n$", p.stderr)
    assert m and m.group(2) == f"{member}: {says}", p.stderr
    key = member.split(".")[-1]
    if not key.isdigit():
        line = path.read_text().splitlines()[int(m.group(1)) - 1]
        assert line.lstrip().startswith(f'"{key}"'), line


def mode(doc):
    return doc["modes"]["libra"]


def timeline(doc):
    return mode(doc)["timeline"]


def interval(doc, row=0):
    return timeline(doc)["instances"][row]["intervals"][0]


TL = "modes.libra.timeline"
INT = "an integer from 0 to 2^53 - 1"
QTY = "a number from 0 to 2^53"


@pytest.mark.parametrize("edit,member,says", [
    (lambda d: timeline(d)["trainer"].update(gpus=-1), f"{TL}.trainer.gpus",
     f"must be {INT}, not -1"),
    (lambda d: timeline(d)["trainer"].update(gpus=1.5), f"{TL}.trainer.gpus",
     f"must be {INT}, not 1.5"),
    (lambda d: timeline(d)["instances"][0].update(instance="x"), f"{TL}.instances.0.instance",
     f"must be {INT}, not a string"),
    (lambda d: timeline(d)["instances"][0].update(hybrid_replica=-2),
     f"{TL}.instances.0.hybrid_replica", f"must be {INT}, not -2"),
    (lambda d: interval(d).__setitem__(1, 1e300), f"{TL}.instances.0.intervals.0.1",
     f"must be {QTY}, not 1e+300"),
    (lambda d: interval(d).__setitem__(1, -1), f"{TL}.instances.0.intervals.0.1",
     f"must be {QTY}, not -1"),
    (lambda d: interval(d).__setitem__(1, True), f"{TL}.instances.0.intervals.0.1",
     f"must be {QTY}, not true or false"),
    (lambda d: interval(d).__setitem__(1, []), f"{TL}.instances.0.intervals.0.1",
     f"must be {QTY}, not an array"),
    (lambda d: interval(d).__setitem__(1, {}), f"{TL}.instances.0.intervals.0.1",
     f"must be {QTY}, not an object"),
    (lambda d: interval(d).__setitem__(0, None), f"{TL}.instances.0.intervals.0.0",
     f"must be {QTY}, not null"),
    (lambda d: interval(d).__setitem__(2, "bogus"), f"{TL}.instances.0.intervals.0.2",
     "must be one of rollout, train, sync, not 'bogus'"),
    (lambda d: interval(d).__setitem__(2, "lent"), f"{TL}.instances.0.intervals.0.2",
     "must be one of rollout, train, sync, not 'lent'"),
    (lambda d: interval(d).pop(), f"{TL}.instances.0.intervals.0", "2: missing"),
    (lambda d: timeline(d)["trainer"]["intervals"][0].__setitem__(0, 1e9),
     f"{TL}.trainer.intervals.0.1", "must be at least the interval's start, 1000000000, not "),
])
def test_a_timeline_member_libra_never_writes_is_refused(results, tmp_path, edit, member, says):
    """Each member the Gantt and load charts read: an interval that reads wrong is refused,
    never left off its row; a row's label never reads "trainer (-1 GPUs)" or "instance ?"."""
    if says.endswith("not "):  # a reversed interval: its end is the run's own
        end = timeline(json.loads(results["run"].read_text()))["trainer"]["intervals"][0][1]
        says += f"{end:.10g}"
    refused(results["run"], tmp_path, edit, member, says)


def lengths(doc, member="generated_tokens"):
    return mode(doc)["run"]["trajectory_lengths"][member]


LEN = "modes.libra.run.trajectory_lengths"


def swapped(edges):
    edges[1], edges[2] = edges[2], edges[1]


@pytest.mark.parametrize("member", ["generated_tokens", "duration_s"])
@pytest.mark.parametrize("edit,at,says", [
    (lambda h: h.update(counts=[1, 2]), "counts",
     "must hold one count fewer than bin_edges ({edges}), not 2"),
    (lambda h: h["counts"].append(1), "counts",
     "must hold one count fewer than bin_edges ({edges}), not {edges}"),
    (lambda h: h.update(counts=[]), "counts",
     "must hold one count fewer than bin_edges ({edges}), not 0"),
    (lambda h: h.update(bin_edges=[]), "counts",
     "must hold one count fewer than bin_edges (0), not {counts}"),
    (lambda h: h["bin_edges"].reverse(), "bin_edges.1",
     "must be more than the edge before it, {last:.10g}, not {before_last:.10g}"),
    (lambda h: swapped(h["bin_edges"]), "bin_edges.2",
     "must be more than the edge before it, {2:.10g}, not {1:.10g}"),
    (lambda h: h["bin_edges"].__setitem__(1, h["bin_edges"][0]), "bin_edges.1",
     "must be more than the edge before it, {0:.10g}, not {0:.10g}"),
    (lambda h: h["bin_edges"].__setitem__(0, 0), "bin_edges.0",
     "must be more than 0, not 0"),
])
def test_a_histogram_libra_never_writes_is_refused(results, tmp_path, member, edit, at, says):
    """A length CDF reads each mode's histogram: counts that do not fit its edges, or edges
    out of order, are refused, never a mode's line left out of the figure."""
    h = lengths(json.loads(results["run"].read_text()), member)
    e = h["bin_edges"]
    assert len(e) >= 3 and len(h["counts"]) == len(e) - 1
    says = says.format(*e, edges=len(e), counts=len(h["counts"]), last=e[-1],
                       before_last=e[-2])
    refused(results["run"], tmp_path, lambda d: edit(lengths(d, member)),
            f"{LEN}.{member}.{at}", says)


def test_an_empty_histogram_draws(results, tmp_path):
    """A mode with no trajectory trained after warm-up writes empty arrays: no refusal."""
    doc = json.loads(results["run"].read_text())
    lengths(doc).update(bin_edges=[], counts=[])
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    assert page(path)[0] == 0


def test_a_sweep_cells_histogram_is_checked(results, tmp_path):
    """Each cell's result is a run's: the same check."""
    def edit(d):
        lengths(d["cells"][1]["result"]).update(counts=[1, 2])
    n = len(lengths(json.loads(results["sweep"].read_text())["cells"][1]["result"])["bin_edges"])
    refused(results["sweep"], tmp_path, edit, f"cells.1.result.{LEN}.generated_tokens.counts",
            f"must hold one count fewer than bin_edges ({n}), not 2")


@pytest.mark.parametrize("kind,edit,member,says", [
    ("load", lambda d: d["steps"][0].pop("wall_s"), "steps.0", "wall_s: missing"),
    ("load", lambda d: d["steps"][1].pop("step"), "steps.1", "step: missing"),
    ("load", lambda d: d["steps"][1].update(step=0), "steps.1.step",
     "must be more than the step before it, 0, not 0"),
    ("load", lambda d: d["steps"][2].update(step=0), "steps.2.step",
     "must be more than the step before it, 1, not 0"),
    ("route", lambda d: d["policies"]["cmlfq"].pop("all"), "policies.cmlfq", "all: missing"),
    ("run", lambda d: timeline(d)["steps"].update(first=2, last=1), f"{TL}.steps.last",
     "must be at least steps.first, 2, not 1"),
])
def test_a_member_libra_always_writes_is_refused_when_missing_or_out_of_order(
        results, tmp_path, kind, edit, member, says):
    """A load step's wall time, a policy's totals and a step's number are always written, in
    order: one missing would leave a hole or a policy's bars out, two steps of one number draw
    on top of each other, a timeline's steps 2 to 1 are no range."""
    refused(results[kind], tmp_path, edit, member, says)


@pytest.mark.parametrize("gone", ["first", "last"])
def test_a_timeline_missing_an_end_of_its_steps_is_drawn_without_them(results, tmp_path, gone):
    """Only two steps that are there make a range to check: without one of them the timeline
    says it has no usable steps, as it does for a missing from_s."""
    doc = json.loads(results["run"].read_text())
    timeline(doc)["steps"].pop(gone)
    path = tmp_path / "no_end.json"
    path.write_text(json.dumps(doc))
    rc, html, err = page(path)
    assert (rc, err) == (0, "")
    assert "the timeline has no usable steps" in html


def regret(doc, baseline):
    return doc["policies"]["cmlfq"]["all"]["regret"][baseline]


@pytest.mark.parametrize("baseline", ["majority_class", "best_constant"])
@pytest.mark.parametrize("value,says", [
    ("str", "per_decision_gpu_s: must be a number from 0 to 2^53, not a string"),
    (True, "per_decision_gpu_s: must be a number from 0 to 2^53, not true or false"),
    ([], "per_decision_gpu_s: must be a number from 0 to 2^53, not an array"),
    (-0.5, "per_decision_gpu_s: must be a number from 0 to 2^53, not -0.5"),
    (None, None),  # the baseline an object no longer: a number in its place
])
def test_a_regret_baseline_of_another_type_is_refused(results, tmp_path, baseline, value, says):
    """The regret chart's baseline bars (majority class, best constant bucket), never left
    out silently."""
    member = f"policies.cmlfq.all.regret.{baseline}"
    if says is None:
        refused(results["route"], tmp_path, lambda d: d["policies"]["cmlfq"]["all"]["regret"]
                .update({baseline: 3}), member, "must be an object, not a number")
        return
    key, says = says.split(": ", 1)
    refused(results["route"], tmp_path, lambda d: regret(d, baseline).update({key: value}),
            f"{member}.{key}", says)


def bar(doc, view, i=0):
    return doc["attribution"][0][view][i]


@pytest.mark.parametrize("view,member,value,says", [
    ("ladder", "trained_tokens_per_s.median", -1000, "not -1000"),
    ("ladder", "trained_tokens_per_s.median", "str", "not a string"),
    ("ladder", "trained_tokens_per_s.q1", -1, "not -1"),
    ("ladder", "trained_tokens_per_s.q3", 1e300, "not 1e+300"),
    ("ladder", "over_previous.median", -1, "not -1"),
    ("leave_one_out", "trained_tokens_per_s.median", "str", "not a string"),
    ("leave_one_out", "trained_tokens_per_s.q3", -1, "not -1"),
    ("leave_one_out", "over_libra.median", [], "not an array"),
    ("ladder", "trained_tokens_per_s", 5, None),
])
def test_an_attribution_spread_libra_never_writes_is_refused(results, tmp_path, view, member,
                                                            value, says):
    """The ladder's and the leave-one-out's bars, whiskers and ratios: never a negative bar, a
    bar left out or a whisker off the axis."""
    *parents, key = member.split(".")

    def edit(d):
        at = bar(d, view, 1)
        for p in parents:
            at = at[p]
        at[key] = value

    says = "must be an object, not a number" if says is None else f"must be {QTY}, {says}"
    refused(results["attribution"], tmp_path, edit, f"attribution.0.{view}.1.{member}", says)


@pytest.mark.parametrize("value,says", [
    ("str", f"must be {INT}, not a string"),
    (-1, f"must be {INT}, not -1"),
    (1.5, f"must be {INT}, not 1.5"),
])
def test_a_load_step_that_is_no_count_is_refused(results, tmp_path, value, says):
    """A load run's step numbers place its points: never dropped, never plotted at -1."""
    refused(results["load"], tmp_path, lambda d: d["steps"][1].update(step=value),
            "steps.1.step", says)


@pytest.mark.parametrize("edit,says", [
    (lambda d: d["cells"][1].update(seed=d["cells"][0]["seed"]),
     "grid point 0 runs seed 1 twice (cells 0 and 1): the sweep is edited"),
    (lambda d: d["cells"][1].update(seed=999), "999 is no seed of the sweep (seeds)"),
    (lambda d: d["cells"][1].update(seed="x"), f"must be {INT}, not a string"),
    (lambda d: d["cells"][1].update(seed=2.5), f"must be {INT}, not 2.5"),
])
def test_a_sweep_whose_cells_repeat_a_seed_is_refused(results, tmp_path, edit, says):
    """One run per seed at each grid point: as many cells as seeds is not enough when one
    seed runs twice (its medians would weigh it double, the caption would say N seeds)."""
    doc = json.loads(results["sweep"].read_text())
    assert doc["seeds"] == [1, 2] and [(c["point"], c["seed"]) for c in doc["cells"]] == \
        [(0, 1), (0, 2), (1, 1), (1, 2)]
    refused(results["sweep"], tmp_path, edit, "cells.1.seed", says)


def test_a_document_without_a_schema_names_every_result_report_reads(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("{}\n")
    p = libra("report", str(path), check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (
        f"libra: {path}:1:1: no schema string: not a result of libra sim (a run, a sweep or an "
        "attribution), libra load, libra plan or libra route eval, those libra report reads\n")


@pytest.mark.parametrize("kind,edit,member,says", [
    ("plan", lambda d: d["placement"][0]["gpus"][0].update(role="bogus"),
     "placement.0.gpus.0.role", "must be one of train, rollout, idle, not 'bogus'"),
    ("route", lambda d: d.update(truncated="exactly"), "truncated",
     "must be one of exact, censored, not 'exactly'"),
])
def test_a_string_libra_writes_from_a_few_is_refused_when_another(results, tmp_path, kind,
                                                                  edit, member, says):
    """A GPU's role colours its cell and route eval's truncated names a flag in the caption:
    a word libra never writes there would draw a rollout cell or drop the flag."""
    refused(results[kind], tmp_path, edit, member, says)
