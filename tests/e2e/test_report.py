"""End-to-end tests of `libra report` (docs/report.md).

A short `libra sim --json` run (and a plan, a route evaluation and a sweep beside it) goes
through `libra report`; the tests read the figures back as XML and map what is drawn to the
values it stands for — a point's position and a bar's height through the axis ticks, within
one pixel — so a figure that misdraws its data fails here, not in a reader's eyes.
"""

import json
import math
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
SVG = "{http://www.w3.org/2000/svg}"
QUICK = ["--steps", "6", "--set", "sim.tune_steps=2", "--set", "sim.warmup_steps=1"]
TIMELINE = ["--timeline", "1:4"]  # steps 1 to 4 of every mode as a GPU timeline


def libra(*args, check=True, cwd=None):
    p = subprocess.run([LIBRA, *args], capture_output=True, text=True, timeout=240, cwd=cwd)
    if check:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    run = d / "run.json"
    libra("sim", "--json", *QUICK, *TIMELINE, "-o", str(run))
    plan = d / "plan.json"
    libra("plan", "--gpus", "16", "--json", "-o", str(plan))
    route = d / "route.json"
    trace = os.path.join(SOURCE_DIR, "tests", "data", "trace", "small.jsonl")
    libra("route", "eval", trace, "--json", "-o", str(route))
    sweep = d / "sweep.json"
    libra("sim", "--json", "--steps", "3", "--set", "sim.tune_steps=1", "--set",
          "sim.warmup_steps=1", "--sweep", "rl.sync_interval=1,2", "--seeds", "2", "-o",
          str(sweep))
    return {"run": run, "plan": plan, "route": route, "sweep": sweep, "dir": d}


@pytest.fixture(scope="module")
def report(inputs, tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    libra("report", str(inputs["run"]), "-o", str(d / "report.html"), "--svg", str(d / "svg"))
    return d


def svg_root(report, name):
    return ET.parse(report / "svg" / (name + ".svg")).getroot()


def y_scale(root):
    """The y axis as (pixel of 0, pixels per unit), from the ticks' data-value and position."""
    ticks = [(float(t.get("data-value")), float(t.get("y1")))
             for t in root.iter(SVG + "line") if t.get("class") == "tick-y"]
    assert len(ticks) >= 2
    (v0, y0), (v1, y1) = ticks[0], ticks[-1]
    per_unit = (y1 - y0) / (v1 - v0)
    return y0 - v0 * per_unit, per_unit


def x_scale(root):
    ticks = [(float(t.get("data-value")), float(t.get("x1")))
             for t in root.iter(SVG + "line") if t.get("class") == "tick-x"]
    (v0, x0), (v1, x1) = ticks[0], ticks[-1]
    per_unit = (x1 - x0) / (v1 - v0)
    return x0 - v0 * per_unit, per_unit


def test_every_figure_is_xml_with_its_data(report, inputs):
    doc = json.loads(inputs["run"].read_text())
    names = sorted(p.stem for p in (report / "svg").iterdir())
    modes = sorted(doc["modes"])
    expected = ["sim-attribution", "sim-duration-cdf", "sim-length-cdf", "sim-routing",
                "sim-step-time", "sim-tail-share", "sim-utilisation"] + \
        [f"sim-gpu-time-{m}" for m in modes] + \
        [f"sim-planner-{m}" for m in modes if doc["modes"][m]["planner"]] + \
        [f"sim-{kind}-{m}" for m in modes for kind in ("gantt", "load")]
    assert names == sorted(expected)
    html = (report / "report.html").read_text()
    for name in names:
        root = svg_root(report, name)
        assert root.tag == SVG + "svg" and root.get("id") == name
        data = json.loads(root.find(SVG + "desc").text)
        assert data["figure"] == name
        assert data["source"].startswith("libra sim CONFIG --steps 6 --json "
                                         "(config digest " + doc["config_digest"])
        assert root.find(SVG + "title").text
        captions = [t.text for t in root.iter(SVG + "text") if t.get("class") == "caption"]
        assert "Input: libra sim CONFIG" in " ".join(captions)
        # the page holds the very same figure inline
        assert (report / "svg" / (name + ".svg")).read_text() in html


def test_step_time_points_sit_on_their_values(report, inputs):
    doc = json.loads(inputs["run"].read_text())
    root = svg_root(report, "sim-step-time")
    zero, per_s = y_scale(root)
    x0, per_step = x_scale(root)
    points = [c for c in root.iter(SVG + "circle") if c.get("class") == "point"]
    assert len(points) == sum(len(m["steps"]) for m in doc["modes"].values())
    for c in points:
        step = doc["modes"][c.get("data-series")]["steps"][int(float(c.get("data-x")))]
        value = float(c.get("data-value"))
        assert value == pytest.approx(step["step_s"], rel=1e-9)
        assert abs(float(c.get("cy")) - (zero + value * per_s)) <= 1
        assert abs(float(c.get("cx")) - (x0 + step["step"] * per_step)) <= 1


def test_attribution_bars_are_their_values(report, inputs):
    doc = json.loads(inputs["run"].read_text())
    root = svg_root(report, "sim-attribution")
    zero, per_unit = y_scale(root)
    bars = [r for r in root.iter(SVG + "rect") if r.get("class") == "bar"]
    order = [m for m in ("colocated", "async", "libra") if m in doc["modes"]]
    assert [b.get("data-x") for b in bars] == order
    labels = [t.text for t in root.iter(SVG + "text") if t.get("class") == "bar-label"]
    for i, (bar, mode) in enumerate(zip(bars, order)):
        value = float(bar.get("data-value"))
        assert value == pytest.approx(doc["modes"][mode]["run"]["trained_tokens_per_s"],
                                      rel=1e-9)
        assert abs(float(bar.get("height")) - value * -per_unit) <= 1
        assert abs(float(bar.get("y")) - (zero + value * per_unit)) <= 1
        assert labels[i].startswith(f"{value:.0f}")
        if i:  # each bar's ratio to the one before
            before = doc["modes"][order[i - 1]]["run"]["trained_tokens_per_s"]
            assert f"({value / before:.2f}x {order[i - 1]})" in labels[i]


@pytest.mark.parametrize("figure,member", [("sim-length-cdf", "generated_tokens"),
                                            ("sim-duration-cdf", "duration_s")])
def test_length_cdf_points_are_the_histograms_shares(report, inputs, figure, member):
    doc = json.loads(inputs["run"].read_text())
    root = svg_root(report, figure)
    zero, per_unit = y_scale(root)
    ticks = [(float(t.get("data-value")), float(t.get("x1")))
             for t in root.iter(SVG + "line") if t.get("class") == "tick-x"]
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]  # x is log10: px = p0 + log10(v / v0) * per_decade
    assert all(math.log10(v).is_integer() for v, _ in ticks)
    per_decade = (p1 - p0) / math.log10(v1 / v0)
    points = [c for c in root.iter(SVG + "circle") if c.get("class") == "point"]
    assert {c.get("data-series") for c in points} == set(doc["modes"])
    for mode, m in doc["modes"].items():
        h = m["run"]["trajectory_lengths"][member]
        assert sum(h["counts"]) == m["run"]["trajectories"] > 0
        assert len(h["bin_edges"]) == len(h["counts"]) + 1
        mine = [c for c in points if c.get("data-series") == mode]
        for c in mine:
            x = float(c.get("data-x"))
            below = sum(n for e, n in zip(h["bin_edges"][1:], h["counts"]) if e <= x * (1 + 1e-9))
            assert float(c.get("data-value")) == pytest.approx(100 * below / sum(h["counts"]))
            assert abs(float(c.get("cy")) - (zero + float(c.get("data-value")) * per_unit)) <= 1
            assert abs(float(c.get("cx")) - (p0 + math.log10(x / v0) * per_decade)) <= 1
        # every bin's upper edge is a point, and the last reaches 100 %
        xs = [float(c.get("data-x")) for c in mine]
        for e in h["bin_edges"][1:]:
            assert any(abs(e - x) <= 1e-9 * e for x in xs)
        assert max(float(c.get("data-value")) for c in mine) == pytest.approx(100)


def test_gpu_time_stacks_are_gpus_times_step_time(report, inputs):
    doc = json.loads(inputs["run"].read_text())
    for mode, m in doc["modes"].items():
        root = svg_root(report, f"sim-gpu-time-{mode}")
        zero, per_unit = y_scale(root)
        gpus = m["layout"]["rollout_gpus"] if m["layout"]["colocated"] else \
            m["layout"]["train_gpus"] + m["layout"]["rollout_gpus"]
        tops = {}
        for bar in root.iter(SVG + "rect"):
            if bar.get("class") == "bar":
                top = float(bar.get("data-base")) + float(bar.get("data-value"))
                step = int(bar.get("data-x"))
                tops[step] = max(tops.get(step, 0), top)
                assert abs(float(bar.get("y")) - (zero + top * per_unit)) <= 1
        for s in m["steps"]:
            assert tops[s["step"]] == pytest.approx(gpus * s["step_s"], rel=1e-6)


def timeline_rows(tl):
    """The rows a Gantt chart draws, as (label, row) in order: the trainer, then instances."""
    rows = [(f"trainer ({tl['trainer']['gpus']} GPUs)", tl["trainer"])] if tl["trainer"] else []
    return rows + [(f"instance {i['instance']} (TP{i['tp']})", i) for i in tl["instances"]]


def drawn_intervals(root):
    """{row label: [(from, to, use)]} of the Gantt chart root, each rectangle checked against
    the time axis: its left and right edges sit on its data-from and data-to within a pixel."""
    x0, per_s = x_scale(root)
    drawn = {}
    for r in root.iter(SVG + "rect"):
        if r.get("class") != "interval":
            continue
        a, b = float(r.get("data-from")), float(r.get("data-to"))
        assert abs(float(r.get("x")) - (x0 + a * per_s)) <= 1
        assert abs(float(r.get("x")) + float(r.get("width")) - (x0 + b * per_s)) <= 1
        drawn.setdefault(r.get("data-row"), []).append((a, b, r.get("data-use")))
    return drawn


def assert_intervals(got, want):
    assert len(got) == len(want)
    for (a, b, use), (wa, wb, wuse) in zip(got, want):
        assert use == wuse
        assert a == pytest.approx(wa, rel=1e-9) and b == pytest.approx(wb, rel=1e-9)


def test_gantt_intervals_sit_on_their_times(report, inputs):
    doc = json.loads(inputs["run"].read_text())
    for mode, m in doc["modes"].items():
        tl = m["timeline"]
        assert tl["steps"] == {"first": 1, "last": 4} and not tl["truncated"]
        root = svg_root(report, f"sim-gantt-{mode}")
        drawn = drawn_intervals(root)
        rows = timeline_rows(tl)
        labels = [t.text for t in root.iter(SVG + "text") if t.get("class") == "row-label"]
        assert labels == [label for label, _ in rows]
        for label, row in rows:
            assert_intervals(drawn.get(label, []), [tuple(iv) for iv in row["intervals"]])
        for label, row in rows[1 if tl["trainer"] else 0:]:  # an instance's busy time
            busy = sum(b - a for a, b, use in row["intervals"] if use == "rollout")
            assert busy == pytest.approx(row["rollout_s"], rel=1e-6)
        # the desc holds what is drawn
        data = json.loads(root.find(SVG + "desc").text)["data"]
        assert [r["row"] for r in data["rows"]] == labels
        assert data["view_s"] == pytest.approx([tl["from_s"], tl["to_s"]], rel=1e-12)
        # a dashed line where each step of the window ends
        ends = {int(float(line.get("data-step"))): float(line.get("data-value"))
                for line in root.iter(SVG + "line") if line.get("class") == "step-end"}
        assert sorted(ends) == [1, 2, 3, 4]
        for s in m["steps"]:
            if s["step"] in ends:
                assert ends[s["step"]] == pytest.approx(s["end_s"], rel=1e-9)


def test_gantt_draws_lent_replicas(tmp_path):
    """With the elastic pool, a training replica's instances roll out as lent GPUs (purple)
    and hold training from the trainer's request to have them back until they return."""
    run = tmp_path / "pool.json"
    libra("sim", os.path.join(SOURCE_DIR, "examples", "sim-search-r1-qwen3-14b.json"), "--set",
          "sim.modes=libra", "--set", "ehp.enabled=true", "--steps", "16", "--timeline", "0:15",
          "--json", "-o", str(run))
    libra("report", str(run), "-o", str(tmp_path / "r.html"), "--svg", str(tmp_path / "svg"))
    m = json.loads(run.read_text())["modes"]["libra"]
    tl = m["timeline"]
    hybrid = [i for i in tl["instances"] if "hybrid_replica" in i]
    assert len(hybrid) == m["layout"]["pool"]["hybrid_replicas"] > 0
    joins = sum(s["pool"]["decisions"]["joins"] for s in m["steps"])
    assert joins > 0
    for i in hybrid:  # each was lent (rolled out) and borrowed back (trained) in the window
        uses = {u for _, _, u in i["intervals"]}
        assert uses == {"rollout", "train"}, i["instance"]
        assert i["train_s"] == pytest.approx(
            sum(b - a for a, b, u in i["intervals"] if u == "train"), rel=1e-9)
    root = ET.parse(tmp_path / "svg" / "sim-gantt-libra.svg").getroot()
    drawn = drawn_intervals(root)
    for i in tl["instances"]:
        lent = "hybrid_replica" in i
        label = (f"inst. {i['instance']} (TP{i['tp']}, lent {i['hybrid_replica']})" if lent
                 else f"instance {i['instance']} (TP{i['tp']})")
        want = [(a, b, "lent" if lent and u == "rollout" else u) for a, b, u in i["intervals"]]
        assert_intervals(drawn.get(label, []), want)
    legend = [t.text for t in root.iter(SVG + "text") if t.get("class") == "legend"]
    assert "rollout on a lent training replica" in legend
    assert_renders(tmp_path / "svg", tmp_path)


def test_load_bars_are_the_instances_shares(report, inputs):
    doc = json.loads(inputs["run"].read_text())
    for mode, m in doc["modes"].items():
        inst = m["timeline"]["instances"]
        root = svg_root(report, f"sim-load-{mode}")
        zero, per_unit = y_scale(root)
        totals = {k: sum(i[k] for i in inst) for k in ("requests", "generated_tokens", "tp")}
        want = {
            "busy share of the window": [100 * i["busy_share"] for i in inst],
            "share of the fleet's requests": [100 * i["requests"] / totals["requests"]
                                              for i in inst],
            "share of the fleet's generated tokens":
                [100 * i["generated_tokens"] / totals["generated_tokens"] for i in inst],
            "share of the rollout GPUs": [100 * i["tp"] / totals["tp"] for i in inst],
        }
        categories = [f"{i['instance']} (TP{i['tp']})" for i in inst]
        bars = [r for r in root.iter(SVG + "rect") if r.get("class") == "bar"]
        assert len(bars) == 4 * len(inst)
        for bar in bars:
            value = float(bar.get("data-value"))
            k = categories.index(bar.get("data-x"))
            assert value == pytest.approx(want[bar.get("data-series")][k], rel=1e-9)
            assert abs(float(bar.get("height")) - value * -per_unit) <= 1
            assert abs(float(bar.get("y")) - (zero + value * per_unit)) <= 1


def test_gantt_without_a_timeline_and_cut_by_the_cap(inputs, tmp_path):
    doc = json.loads(inputs["run"].read_text())
    bare = json.loads(inputs["run"].read_text())
    for m in bare["modes"].values():
        del m["timeline"]
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    libra("report", str(tmp_path / "bare.json"), "-o", str(tmp_path / "bare.html"))
    assert "<code>gantt</code>: the result has no GPU timeline" in \
        (tmp_path / "bare.html").read_text()
    # a recording cut by its cap: nothing drawn past complete_to_s, which is marked
    mode, m = next(iter(doc["modes"].items()))
    tl = m["timeline"]
    cut = (tl["from_s"] + tl["to_s"]) / 2
    tl.update(truncated=True, complete_to_s=cut)
    for _, row in timeline_rows(tl):
        row["intervals"] = [[a, min(b, cut), u] for a, b, u in row["intervals"] if a < cut]
    (tmp_path / "cut.json").write_text(json.dumps(doc))
    libra("report", str(tmp_path / "cut.json"), "--svg", str(tmp_path / "svg"), "-o",
          str(tmp_path / "cut.html"))
    root = ET.parse(tmp_path / "svg" / f"sim-gantt-{mode}.svg").getroot()
    x0, per_s = x_scale(root)
    for label, row in timeline_rows(tl):
        assert_intervals(drawn_intervals(root).get(label, []),
                         [tuple(iv) for iv in row["intervals"]])
    unrecorded = [r for r in root.iter(SVG + "rect") if r.get("class") == "unrecorded"]
    assert len(unrecorded) == len(timeline_rows(tl))
    for r in unrecorded:
        assert abs(float(r.get("x")) - (x0 + cut * per_s)) <= 1


def test_same_json_same_bytes(inputs, tmp_path):
    outs = []
    for k in range(2):
        out = tmp_path / f"r{k}.html"
        libra("report", str(inputs["run"]), str(inputs["plan"]), str(inputs["route"]),
              "-o", str(out), "--svg", str(tmp_path / f"svg{k}"))
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    for f in (tmp_path / "svg0").iterdir():
        assert f.read_bytes() == (tmp_path / "svg1" / f.name).read_bytes()


def test_no_network_reference(inputs, tmp_path):
    out = tmp_path / "all.html"
    libra("report", str(inputs["run"]), str(inputs["sweep"]), str(inputs["plan"]),
          str(inputs["route"]), "-o", str(out), "--svg", str(tmp_path / "svg"))
    for f in [out, *(tmp_path / "svg").iterdir()]:
        text = f.read_text()
        refs = set(re.findall(r"https?://[^\s\"'<>]*", text))
        assert refs == {"http://www.w3.org/2000/svg"}, f
        assert "<script" not in text and "<link" not in text and " src=" not in text


def test_plan_route_and_sweep_figures(inputs, tmp_path):
    libra("report", str(inputs["run"]), str(inputs["sweep"]), str(inputs["plan"]),
          str(inputs["route"]), "-o", str(tmp_path / "all.html"), "--svg", str(tmp_path / "svg"))
    names = {p.stem for p in (tmp_path / "svg").iterdir()}
    assert {"plan-layout", "route-accuracy", "route-regret", "route-moves",
            "sweep-trained-tokens-per-s", "sweep-ratios"} <= names
    route = json.loads(inputs["route"].read_text())
    root = ET.parse(tmp_path / "svg" / "route-moves.svg").getroot()
    bars = {b.get("data-x"): float(b.get("data-value"))
            for b in root.iter(SVG + "rect") if b.get("class") == "bar"}
    assert bars == {p: v["all"]["moves_per_trajectory"] for p, v in route["policies"].items()
                    if v["all"]["moves_per_trajectory"] is not None}
    assert any(n.startswith("route-confusion-cmlfq") for n in names)
    # the plan's GPUs: one cell per GPU of the placement, with its role
    plan = json.loads(inputs["plan"].read_text())
    root = ET.parse(tmp_path / "svg" / "plan-layout.svg").getroot()
    cells = [(int(r.get("data-node")), int(r.get("data-gpu")), r.get("data-role"))
             for r in root.iter(SVG + "rect") if r.get("class") == "gpu"]
    want = [(n["node"], g["gpu"], g["role"]) for n in plan["placement"] for g in n["gpus"]]
    assert cells == want
    # the sweep's medians are the summary's
    sweep = json.loads(inputs["sweep"].read_text())
    root = ET.parse(tmp_path / "svg" / "sweep-trained-tokens-per-s.svg").getroot()
    for c in root.iter(SVG + "circle"):
        point = sweep["summary"][[p["set"]["rl.sync_interval"] for p in sweep["summary"]]
                                 .index(c.get("data-x"))]
        want = point["modes"][c.get("data-series")]["trained_tokens_per_s"]["median"]
        assert float(c.get("data-value")) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("spoil,why", [
    (lambda p: p["train"].pop("tp"), "train/tp: missing or not a number"),
    (lambda p: p["objective"].pop("step_s"), "objective/step_s: missing or not a number"),
    (lambda p: p["placement"][0].pop("node"), "placement[0].node: missing or not a number"),
    (lambda p: p["placement"][0]["gpus"][1].pop("role"),
     "placement[0].gpus[1]: no gpu number below 8, or no role"),
])
def test_a_plan_missing_what_its_layout_needs_is_not_drawn(inputs, tmp_path, spoil, why):
    """A plan of the known schema with a member its figure reads spoilt: the layout is left out
    with a note naming the member, never drawn with "TPnan" or a GPU left out."""
    plan = json.loads(inputs["plan"].read_text())
    spoil(plan)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    html = libra("report", str(path)).stdout
    assert "<h3>Not drawn</h3>" in html and "<code>layout</code>: " + why in html, html[-600:]
    assert "nan" not in html and 'class="gpu"' not in html


def test_a_member_of_another_type_is_refused_where_it_stands(inputs, tmp_path):
    """The same plan with its train layout an array: not a missing member but a wrong one,
    refused with its position, nothing written."""
    plan = json.loads(inputs["plan"].read_text())
    plan["train"] = []
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan, indent=1))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if text.startswith(' "train"'))
    out = tmp_path / "page.html"
    proc = subprocess.run([LIBRA, "report", str(path), "-o", str(out)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr == f"libra: {path}:{line}:2: train: must be an object, not an array\n"


def test_attribution_bars_and_whiskers_are_the_medians_and_quartiles(tmp_path):
    run = tmp_path / "attribution.json"
    libra("sim", "--json", "--steps", "3", "--set", "sim.tune_steps=1", "--set",
          "sim.warmup_steps=1", "--sweep", "rl.sync_interval=1,2", "--attribution", "--seeds",
          "2", "-o", str(run))
    libra("report", str(run), "-o", str(tmp_path / "r.html"), "--svg", str(tmp_path / "svg"))
    doc = json.loads(run.read_text())
    names = sorted(p.stem for p in (tmp_path / "svg").iterdir())
    assert names == ["sweep-attribution-1", "sweep-attribution-2", "sweep-attribution-across",
                     "sweep-leave-one-out-1", "sweep-leave-one-out-2"]
    for q, point in enumerate(doc["attribution"]):
        for view, over in (("ladder", "over_previous"), ("leave_one_out", "over_libra")):
            name = ("sweep-attribution-" if view == "ladder" else "sweep-leave-one-out-") + \
                str(q + 1)
            root = ET.parse(tmp_path / "svg" / (name + ".svg")).getroot()
            assert f"rl.sync_interval={point['set']['rl.sync_interval']}" in \
                root.find(SVG + "title").text
            zero, per_unit = y_scale(root)
            bars = [r for r in root.iter(SVG + "rect") if r.get("class") == "bar"]
            whiskers = [w for w in root.iter(SVG + "line") if w.get("class") == "whisker"]
            labels = [t.text for t in root.iter(SVG + "text") if t.get("class") == "bar-label"]
            assert [b.get("data-x") for b in bars] == [e["label"] for e in point[view]]
            for i, (bar, entry) in enumerate(zip(bars, point[view])):
                spread = entry["trained_tokens_per_s"]
                value = float(bar.get("data-value"))
                assert value == pytest.approx(spread["median"], rel=1e-9)
                assert abs(float(bar.get("y")) - (zero + value * per_unit)) <= 1
                assert abs(float(bar.get("height")) - value * -per_unit) <= 1
                w = whiskers[i]
                assert abs(float(w.get("y1")) - (zero + spread["q1"] * per_unit)) <= 1
                assert abs(float(w.get("y2")) - (zero + spread["q3"] * per_unit)) <= 1
                ratio = entry[over]["median"]
                assert labels[i] == (f"{value:.0f} ({ratio:.2f}x)" if ratio is not None
                                     else f"{value:.0f}")
    caption = " ".join(t.text for t in ET.parse(tmp_path / "svg" / "sweep-attribution-1.svg")
                       .getroot().iter(SVG + "text") if t.get("class") == "caption")
    assert "--sweep rl.sync_interval=1,2 --attribution --seeds 2" in caption
    # across the sweep: each ladder bar's median at each sync interval
    root = ET.parse(tmp_path / "svg" / "sweep-attribution-across.svg").getroot()
    points = [c for c in root.iter(SVG + "circle") if c.get("class") == "point"]
    assert len(points) == 2 * 6
    for c in points:
        q = ["1", "2"].index(c.get("data-x"))
        entry = next(e for e in doc["attribution"][q]["ladder"]
                     if e["label"] == c.get("data-series"))
        assert float(c.get("data-value")) == pytest.approx(
            entry["trained_tokens_per_s"]["median"], rel=1e-9)
    assert_renders(tmp_path / "svg", tmp_path)


def test_load_figures_are_the_steps_and_engines(tmp_path):
    """A `libra load --json` result (tests/data/report/load.json: `libra load` of test_load.py
    against `libra emu`, 3 steps of batch 8 at --time-scale 0.005) as figures."""
    run = os.path.join(SOURCE_DIR, "tests", "data", "report", "load.json")
    libra("report", run, "-o", str(tmp_path / "r.html"), "--svg", str(tmp_path / "svg"))
    doc = json.loads(open(run).read())
    assert sorted(p.stem for p in (tmp_path / "svg").iterdir()) == \
        ["load-engines", "load-step-time", "load-tokens"]
    for name, series in (("load-step-time", {"wall time": "wall_s"}),
                         ("load-tokens", {"prompt tokens sent": "prompt_tokens",
                                          "of them cached by the engines": "cached_tokens",
                                          "generated tokens": "generated_tokens"})):
        root = ET.parse(tmp_path / "svg" / (name + ".svg")).getroot()
        zero, per_unit = y_scale(root)
        x0, per_step = x_scale(root)
        points = [c for c in root.iter(SVG + "circle") if c.get("class") == "point"]
        assert len(points) == len(series) * len(doc["steps"])
        for c in points:
            step = doc["steps"][int(float(c.get("data-x")))]
            want = step[series[c.get("data-series")]]
            assert float(c.get("data-value")) == pytest.approx(want, rel=1e-9)
            assert abs(float(c.get("cy")) - (zero + want * per_unit)) <= 1
            assert abs(float(c.get("cx")) - (x0 + step["step"] * per_step)) <= 1
    root = ET.parse(tmp_path / "svg" / "load-engines.svg").getroot()
    zero, per_unit = y_scale(root)
    bars = [b for b in root.iter(SVG + "rect") if b.get("class") == "bar"]
    assert [float(b.get("data-value")) for b in bars] == [e["turns"] for e in doc["engines"]]
    for b in bars:
        assert abs(float(b.get("height")) - float(b.get("data-value")) * -per_unit) <= 1
    caption = " ".join(t.text for t in root.iter(SVG + "text") if t.get("class") == "caption")
    assert "Input: libra load CONFIG --engines URLS --style plain --json" in caption
    assert_renders(tmp_path / "svg", tmp_path)


def test_step_range(inputs, tmp_path):
    libra("report", str(inputs["run"]), "--steps", "2:4", "--svg", str(tmp_path / "svg"),
          "-o", str(tmp_path / "r.html"))
    root = ET.parse(tmp_path / "svg" / "sim-step-time.svg").getroot()
    steps = {float(c.get("data-x")) for c in root.iter(SVG + "circle")}
    assert steps == {2.0, 3.0, 4.0}
    # the Gantt charts show the end of step 1 to the end of step 4, the timeline clipped to it
    doc = json.loads(inputs["run"].read_text())
    for mode, m in doc["modes"].items():
        ends = {s["step"]: s["end_s"] for s in m["steps"]}
        a, b = ends[1], ends[4]
        root = ET.parse(tmp_path / "svg" / f"sim-gantt-{mode}.svg").getroot()
        data = json.loads(root.find(SVG + "desc").text)["data"]
        assert data["view_s"] == pytest.approx([a, b], rel=1e-12)
        drawn = drawn_intervals(root)
        for label, row in timeline_rows(m["timeline"]):
            want = [(max(x, a), min(y, b), u) for x, y, u in row["intervals"] if x < b and y > a]
            assert_intervals(drawn.get(label, []), want)
        ends_drawn = {int(float(line.get("data-step"))) for line in root.iter(SVG + "line")
                      if line.get("class") == "step-end"}
        assert ends_drawn == {2, 3, 4}
    p = libra("report", str(inputs["run"]), "--steps", "7:9", check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert "run.json: no step in 7:9 (the result holds steps 0 to 5)" in p.stderr
    p = libra("report", str(inputs["run"]), "--steps", "4:2", check=False)
    assert p.returncode == 2 and p.stderr == (  # a bad value: no usage line
        "libra: report: --steps: expected A:B with B at least A, not '4:2'\n"), p.stderr


def test_svg_creates_the_missing_parents_of_its_directory(inputs, tmp_path):
    deep = tmp_path / "deep" / "a" / "b"
    libra("report", str(inputs["plan"]), "-o", str(tmp_path / "p.html"), "--svg", str(deep))
    assert [p.stem for p in deep.iterdir()] == ["plan-layout"]
    blocked = tmp_path / "p.html" / "figures"  # a parent that is a file: nothing written
    p = libra("report", str(inputs["plan"]), "--svg", str(blocked), check=False)
    assert p.returncode == 3 and p.stdout == ""
    assert p.stderr == f"libra: report: cannot create '{blocked}': not a directory\n"


def test_steps_without_a_sim_result_is_refused(inputs):
    """--steps narrows only a libra sim result's figures: with none, it would do nothing."""
    p = libra("report", str(inputs["plan"]), str(inputs["route"]), "--steps", "1:2", check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert "--steps: no libra sim result among the inputs" in p.stderr, p.stderr


def test_an_input_given_twice_is_refused(inputs, tmp_path):
    """One result named twice (by any spelling of its path) would draw its runs twice."""
    run = inputs["run"]
    link = tmp_path / "link.json"
    link.symlink_to(run)
    for again in (str(run), str(link)):
        p = libra("report", str(run), again, "-o", str(tmp_path / "out.html"), check=False)
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr == (f"libra: report: '{again}' is the file of '{run}' again: its runs "
                            "would be drawn twice\n"), p.stderr
    assert not (tmp_path / "out.html").exists()


def test_bad_input_is_refused_with_its_position(inputs, tmp_path):
    out = tmp_path / "out.html"
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "libra.sim/1",\n  "modes": {"libra": [1, 2,]}}\n')
    p = libra("report", str(inputs["run"]), str(bad), "-o", str(out), check=False)
    assert p.returncode == 2
    assert re.search(r"^libra: .*bad\.json:2:\d+: ", p.stderr, re.M), p.stderr
    assert not out.exists() and not (tmp_path / "out.html.tmp").exists()
    unknown = tmp_path / "other.json"
    unknown.write_text('{\n  "schema": "libra.trace-stats/1"\n}\n')
    p = libra("report", str(unknown), "-o", str(out), check=False)
    assert p.returncode == 2 and not out.exists()
    assert "other.json:2:3: schema: 'libra.trace-stats/1' is not one libra report reads" in p.stderr
    alone = tmp_path / "plan-alone"  # a plan (or a route evaluation) alone is a page too
    libra("report", str(inputs["plan"]), "-o", str(tmp_path / "plan.html"), "--svg", str(alone))
    assert [p.stem for p in alone.iterdir()] == ["plan-layout"]
    p = libra("report", str(tmp_path / "missing.json"), check=False)
    assert p.returncode == 3 and "cannot read" in p.stderr
    lines = tmp_path / "sim.jsonl"  # JSON Lines: report says what it reads instead
    lines.write_text(json.dumps({"schema": "libra.sim/1"}) + "\n" + json.dumps({"step": 0}) + "\n")
    p = libra("report", str(lines), check=False)
    assert p.returncode == 2 and p.stderr.endswith(
        "(JSON Lines, as --jsonl writes: libra report reads the one JSON document --json "
        "writes)\n"), p.stderr
    # a failed write leaves the old file whole
    out.write_text("old")
    p = libra("report", str(inputs["run"]), "-o", str(out), "--svg", str(out), check=False)
    assert p.returncode == 3 and out.read_text() == "old"


@pytest.mark.skipif(not shutil.which("rsvg-convert"),
                    reason="rsvg-convert not installed (Debian librsvg2-bin)")
def assert_renders(svg_dir, tmp_path):
    """Every SVG of svg_dir renders with rsvg-convert, silently, to a PNG."""
    for f in sorted(svg_dir.iterdir()):
        png = tmp_path / (f.stem + ".png")
        p = subprocess.run(["rsvg-convert", "-o", str(png), str(f)], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0 and p.stderr == "", (f.name, p.stderr)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rsvg_renders_every_figure(inputs, tmp_path):
    libra("report", str(inputs["run"]), str(inputs["sweep"]), str(inputs["plan"]),
          str(inputs["route"]), "-o", str(tmp_path / "all.html"), "--svg", str(tmp_path / "svg"))
    assert_renders(tmp_path / "svg", tmp_path)
