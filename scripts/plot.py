#!/usr/bin/env python3
"""Pictures of a run (metrics.jsonl + events.jsonl) and of a planner sweep, as PNG files.

  plot.py run RUN_DIR --out DIR      loss, throughput, memory, recompute; events as lines
  plot.py sweep SWEEP.json --out DIR memory per plan vs the swept value; the frontier
  plot.py timeline [RUN_DIR] --out DIR [--predicted PREFIX] [--measured PREFIX]
                                     a step's memory per rank, stacked by category (measured),
                                     against the predicted total, its phases marked
`run` also draws the timeline when RUN_DIR has one (train.memory_timeline_step).
Needs matplotlib (Debian: python3-matplotlib). Prints each file it writes; bad input exits 1
with the file and line.
"""

import argparse
import json
import math
import os
import re
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.patches
    import matplotlib.ticker
except ImportError:
    sys.exit("plot.py: error: matplotlib is missing (Debian: apt-get install python3-matplotlib)")

CATEGORIES = ["param", "grad", "optimizer", "activation", "workspace", "comm"]
CATEGORY_COLORS = dict(zip(CATEGORIES, plt.get_cmap("tab10").colors))
# Events drawn on the curves: colour and line style; start and end only bound the run.
EVENT_STYLES = {
    "resume": ("tab:blue", "--"),
    "checkpoint": ("tab:gray", ":"),
    "signal": ("tab:purple", "-."),
    "rewind": ("tab:red", "-"),
    "skip_step": ("tab:orange", "--"),
    "target_miss": ("magenta", "-."),
    "throughput_drift": ("tab:olive", ":"),
    "memory_drift": ("tab:brown", ":"),
    "non_finite": ("black", "-"),
}
PLAN_STYLES = {  # sweep plans: colour, marker
    "none": ("tab:red", "o"),
    "selective": ("tab:orange", "s"),
    "full": ("tab:blue", "^"),
    "planned": ("tab:green", "D"),
}
DPI = 110
# Timeline phases (the schedule's ops): fill per (kind, chunk parity); the step's tail in gray.
PHASE_COLORS = {
    ("forward", 0): "#d6e6f5", ("forward", 1): "#a9cbe8",
    ("backward", 0): "#fde3c8", ("backward", 1): "#f9bf8a",
}
OP_PHASE = re.compile(r"^(forward|backward) chunk(\d+) mb(\d+)$")
TAIL_PHASES = ("reduce_gradients", "optimizer")


class InputError(Exception):
    pass


# JSON has no NaN or infinity: the trainer writes non-finite doubles as the strings "nan",
# "inf", "-inf" (older runs wrote them bare).
BARE_NON_FINITE = re.compile(r"(?<=[:\[,\s])(-?)(nan|inf)(?=[,\]}\s])")
NON_FINITE_STRINGS = {"nan": math.nan, "-nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def non_finite_as_floats(value):
    if isinstance(value, dict):
        return {k: non_finite_as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [non_finite_as_floats(v) for v in value]
    if isinstance(value, str) and value in NON_FINITE_STRINGS:
        return NON_FINITE_STRINGS[value]
    return value


def parse_json(text, where):
    """One JSON value; "nan"/"inf" strings and bare nan/inf/-inf read as floats."""
    try:
        return non_finite_as_floats(json.loads(text))
    except json.JSONDecodeError:
        fixed = BARE_NON_FINITE.sub(lambda m: m.group(1) + ("NaN" if m.group(2) == "nan"
                                                            else "Infinity"), text)
        fixed = fixed.replace("-NaN", "NaN")
        try:
            return json.loads(fixed)
        except json.JSONDecodeError as error:
            raise InputError(f"{where}: not JSON: {error}") from None


def read_jsonl(path, required_keys):
    """The objects of a JSON-lines file; every line must hold `required_keys`."""
    rows = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            row = parse_json(line, f"{path}:{number}")
            if not isinstance(row, dict):
                raise InputError(f"{path}:{number}: not a JSON object")
            missing = [key for key in required_keys if key not in row]
            if missing:
                raise InputError(f"{path}:{number}: no {', '.join(missing)}")
            rows.append(row)
    return rows


def series(rows, key):
    """(steps, values) of the rows that hold `key`."""
    pairs = [(row["step"], row[key]) for row in rows if row.get(key) is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def byte_unit(largest):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if largest >= size:
            return unit, size
    return "B", 1


def mark_events(ax, events, labelled=True):
    """A vertical line per (kind, step); with `labelled`, one legend entry per kind."""
    seen = set()
    for event in events:
        kind, step = event["event"], event["step"]
        if kind not in EVENT_STYLES or (kind, step) in seen:
            continue
        label = kind if labelled and kind not in {k for k, _ in seen} else None
        seen.add((kind, step))
        color, style = EVENT_STYLES[kind]
        ax.axvline(step, color=color, linestyle=style, linewidth=1.1, label=label)


def finish(fig, ax_list, out_dir, name):
    for ax in ax_list:
        ax.grid(True, alpha=0.3)
        if ax.get_legend() is None and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(path)


def plot_loss(metrics, events, out_dir):
    """The train loss, the validation loss and each blended dataset's; returns the legend's
    labels."""
    fig, ax = plt.subplots(figsize=(7, 4))
    steps, loss = series(metrics, "loss")
    ax.plot(steps, loss, color="tab:blue", linewidth=1, label="train loss")
    val_steps, val_loss = series(metrics, "val_loss")
    if val_steps:
        ax.plot(val_steps, val_loss, color="tab:orange", marker="o", markersize=4,
                label="validation loss")
    # A blend's datasets, each on its own validation range (val_loss/<name>).
    dataset_keys = []
    for row in metrics:
        dataset_keys += [k for k in row if k.startswith("val_loss/") and k not in dataset_keys]
    colors = plt.get_cmap("Dark2").colors
    for index, key in enumerate(dataset_keys):
        steps_k, loss_k = series(metrics, key)
        ax.plot(steps_k, loss_k, color=colors[index % len(colors)], linestyle="--", marker="s",
                markersize=3, linewidth=1, label=f"validation loss, {key[len('val_loss/'):]}")
    mark_events(ax, events)
    ax.set(title="Loss", xlabel="step", ylabel="loss (nats per token)")
    labels = ax.get_legend_handles_labels()[1]
    finish(fig, [ax], out_dir, "loss.png")
    return labels


def running_median(values, window):
    """The median of the last `window` values at each point (fewer at the start)."""
    medians = []
    for i in range(len(values)):
        recent = sorted(values[max(0, i - window + 1): i + 1])
        middle = len(recent) // 2
        medians.append(recent[middle] if len(recent) % 2 else
                       (recent[middle - 1] + recent[middle]) / 2)
    return medians


def plot_throughput(metrics, events, out_dir):
    """Each step thin and pale, a running median over ~1/30 of the run on top (a shared
    machine's timings are noisy)."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    window = max(3, len(metrics) // 30)
    steps, tokens = series(metrics, "tokens_per_s")
    top.plot(steps, tokens, color="tab:green", linewidth=0.8, alpha=0.35, label="each step")
    top.plot(steps, running_median(tokens, window), color="tab:green", linewidth=1.8,
             label=f"median of {window} steps")
    top.set(title="Throughput", ylabel="tokens/s")
    top.set_ylim(bottom=0)
    if any("mfu" in row for row in metrics):
        rates = (("hfu", "HFU", "tab:red", 100), ("mfu", "MFU", "tab:blue", 100))
        bottom.set(ylabel=f"% of peak (median of {window} steps)")
    else:
        rates = (("hardware_tflops", "hardware (HFU numerator)", "tab:red", 1),
                 ("model_tflops", "model (MFU numerator)", "tab:blue", 1))
        bottom.set(ylabel=f"TFLOP/s per rank\n(median of {window} steps)")
    for key, label, color, scale in rates:
        s, v = series(metrics, key)
        bottom.plot(s, [scale * x for x in running_median(v, window)], color=color,
                    linewidth=1.8, label=label)
    bottom.set_ylim(bottom=0)
    bottom.set(xlabel="step")
    mark_events(top, events)
    mark_events(bottom, events, labelled=False)
    finish(fig, [top, bottom], out_dir, "throughput.png")


def run_peak(metrics, key):
    """The largest value of `key` over the run, or None when no line holds it."""
    values = [row[key] for row in metrics if row.get(key) is not None]
    return max(values) if values else None


def plot_memory(metrics, events, out_dir):
    """Left: each category's peak over the run against its prediction. Right: per step."""
    # Predictions are logged as predicted_<category>_peak_bytes.
    measured = {c: run_peak(metrics, f"peak_{c}_bytes") or 0 for c in CATEGORIES}
    predicted = {c: run_peak(metrics, f"predicted_{c}_peak_bytes") for c in CATEGORIES}
    drawn = [c for c in CATEGORIES if measured[c] > 0 or predicted[c]]
    unit, size = byte_unit(max([measured[c] for c in drawn] + [1]))
    fig, (bars, lines) = plt.subplots(1, 2, figsize=(12, 4.5), width_ratios=[1, 1.4])
    x = range(len(drawn))
    bars.bar([i - 0.2 for i in x], [measured[c] / size for c in drawn], width=0.4,
             color=[CATEGORY_COLORS[c] for c in drawn])
    bars.bar([i + 0.2 for i in x], [(predicted[c] or 0) / size for c in drawn], width=0.4,
             color="white", edgecolor=[CATEGORY_COLORS[c] for c in drawn], hatch="///")
    for i, c in enumerate(drawn):
        if predicted[c] is None:
            bars.annotate("not\nlogged", (i + 0.2, 0), ha="center", va="bottom", fontsize=6.5)
    bars.set_xticks(list(x), drawn, rotation=20)
    bars.legend(handles=[matplotlib.patches.Patch(color="gray", label="measured"),
                         matplotlib.patches.Patch(facecolor="white", edgecolor="gray",
                                                  hatch="///", label="predicted")], fontsize=8)
    bars.set(title="Peak over the run (logging rank)", ylabel=unit)
    for c in drawn:
        steps, peak = series(metrics, f"peak_{c}_bytes")
        lines.plot(steps, [b / size for b in peak], color=CATEGORY_COLORS[c], linewidth=4,
                   alpha=0.4, label=f"{c} measured")
        steps, peak = series(metrics, f"predicted_{c}_peak_bytes")
        if steps:
            lines.plot(steps, [b / size for b in peak], color=CATEGORY_COLORS[c], linewidth=1,
                       linestyle="--", label=f"{c} predicted")
    mark_events(lines, events)
    lines.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    lines.set(title="Peak of each step", xlabel="step", ylabel=unit)
    lines.set_ylim(bottom=0)
    finish(fig, [bars, lines], out_dir, "memory.png")


def recompute_share(row):
    """Recompute FLOPs / model FLOPs of a step: the trainer's recompute_share, or (older
    metrics.jsonl files) from the two rates, which share the step's time."""
    if row.get("recompute_share") is not None:
        return row["recompute_share"]
    model, hardware = row.get("model_tflops"), row.get("hardware_tflops")
    if not model or hardware is None:
        return None
    return hardware / model - 1


def plot_recompute(metrics, events, out_dir):
    fig, ax = plt.subplots(figsize=(7, 3))
    pairs = [(row["step"], recompute_share(row)) for row in metrics]
    pairs = [(s, 100 * v) for s, v in pairs if v is not None and math.isfinite(v)]
    ax.plot([p[0] for p in pairs], [p[1] for p in pairs], color="tab:purple", linewidth=1.5,
            label="recompute FLOPs / model FLOPs")
    ax.set_ylim(bottom=0, top=max([p[1] for p in pairs] + [1]) * 1.25)
    mark_events(ax, events)
    ax.set(title="Recompute share", xlabel="step", ylabel="%")
    finish(fig, [ax], out_dir, "recompute.png")


def read_timeline(path):
    with open(path) as f:
        timeline = parse_json(f.read(), path)
    for key in ("rank", "label", "start_bytes", "events"):
        if key not in timeline:
            raise InputError(f"{path}: no '{key}'")
    return timeline


def timeline_files(prefix):
    """{rank: path} of PREFIX_rank<R>.json."""
    folder, stem = os.path.split(prefix)
    pattern = re.compile(re.escape(stem) + r"_rank(\d+)\.json$")
    files = {}
    for name in os.listdir(folder or "."):
        match = pattern.match(name)
        if match:
            files[int(match.group(1))] = os.path.join(folder, name)
    return files


def live_bytes(timeline):
    """Per category, the bytes live before event 0 and after each event."""
    live = {c: [timeline["start_bytes"].get(c, 0)] for c in CATEGORIES}
    for event in timeline["events"]:
        for c in CATEGORIES:
            live[c].append(live[c][-1])
        if event["op"] in ("alloc", "free"):
            live[event["category"]][-1] += event["bytes"] * (1 if event["op"] == "alloc" else -1)
    return live


def timeline_phases(timeline):
    """(name, first event, last event) of every phase, from its begin and end markers."""
    open_phases, phases = [], []
    for i, event in enumerate(timeline["events"]):
        if event["op"] == "begin":
            open_phases.append((event["name"], i))
        elif event["op"] == "end" and open_phases:
            name, begin = open_phases.pop()
            phases.append((name, begin, i))
    return phases


def first_difference(predicted, measured):
    pairs = zip(predicted["events"], measured["events"])
    for i, (p, m) in enumerate(pairs):
        if p != m:
            return i
    if len(predicted["events"]) != len(measured["events"]):
        return min(len(predicted["events"]), len(measured["events"]))
    return None


def draw_timeline(ax, measured, predicted, unit, size):
    drawn = measured or predicted
    live = live_bytes(drawn)
    x = list(range(len(drawn["events"]) + 1))
    top = max(map(sum, zip(*live.values()))) / size
    # The phases: a strip above the stack (the schedule's ops labelled by microbatch), the
    # step's tail in gray, recompute as black ticks on the axis.
    strip = (top * 1.03, top * 0.15)
    for name, begin, end in timeline_phases(drawn):
        match = OP_PHASE.match(name)
        if match:
            kind, chunk, mb = match.group(1), int(match.group(2)), match.group(3)
            ax.broken_barh([(begin, end - begin)], strip, color=PHASE_COLORS[(kind, chunk % 2)],
                           edgecolor="white", linewidth=0.6)
            ax.axvline(begin, color="#bbbbbb", linewidth=0.4, zorder=0)
            if end - begin > len(x) / 90:
                ax.text((begin + end) / 2, strip[0] + strip[1] / 2,
                        ("F" if kind == "forward" else "B") + mb, ha="center", va="center",
                        fontsize=6.5, color="#333333")
        elif name in TAIL_PHASES:
            ax.broken_barh([(begin, max(end - begin, 1))], strip, color="#bbbbbb")
        elif name.startswith("recompute"):
            ax.axvspan(begin, end, ymin=0.0, ymax=0.04, color="black", zorder=3, linewidth=0)
    below = [0.0] * len(x)
    for c in CATEGORIES:
        above = [b + v / size for b, v in zip(below, live[c])]
        if any(v for v in live[c]):
            ax.fill_between(x, below, above, step="post", color=CATEGORY_COLORS[c],
                            linewidth=0, label=f"{c} (measured)" if measured else c, zorder=1)
        below = above
    title = drawn["label"]
    if measured and predicted:
        p_live = live_bytes(predicted)
        px = list(range(len(predicted["events"]) + 1))
        total = [t / size for t in map(sum, zip(*p_live.values()))]
        ax.step(px, total, where="post", color="black", linestyle="--", linewidth=1.0,
                label="predicted total", zorder=4)
        differ = first_difference(predicted, measured)
        if differ is None:
            title += f": predicted == measured, all {len(measured['events'])} events"
        else:
            ax.axvline(differ, color="red", linewidth=1.5, zorder=5)
            title += f": predicted and measured differ from event {differ}"
    ax.set_title(title, fontsize=9, loc="left")
    ax.set_xlim(0, len(x) - 1)
    ax.set_ylim(0, top * 1.2)
    ax.set_ylabel(unit)


def plot_timeline(measured_prefix, predicted_prefix, out_dir):
    measured = timeline_files(measured_prefix) if measured_prefix else {}
    predicted = timeline_files(predicted_prefix) if predicted_prefix else {}
    ranks = sorted(set(measured) | set(predicted))
    if not ranks:
        raise InputError(f"no timeline files {measured_prefix or predicted_prefix}_rank<R>.json")
    timelines = [(read_timeline(measured[r]) if r in measured else None,
                  read_timeline(predicted[r]) if r in predicted else None) for r in ranks]
    largest = max(max(map(sum, zip(*live_bytes(m or p).values()))) for m, p in timelines)
    unit, size = byte_unit(largest)
    fig, axes = plt.subplots(len(ranks), 1, figsize=(14, 2.5 * len(ranks) + 1.1), squeeze=False)
    axes = [row[0] for row in axes]
    for ax, (m, p) in zip(axes, timelines):
        draw_timeline(ax, m, p, unit, size)
    axes[-1].set_xlabel("allocator events of the step, in order")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [matplotlib.patches.Patch(color=PHASE_COLORS[("forward", 0)], label="forward (chunk 0)"),
                matplotlib.patches.Patch(color=PHASE_COLORS[("forward", 1)], label="forward (chunk 1)"),
                matplotlib.patches.Patch(color=PHASE_COLORS[("backward", 0)], label="backward (chunk 0)"),
                matplotlib.patches.Patch(color=PHASE_COLORS[("backward", 1)], label="backward (chunk 1)"),
                matplotlib.patches.Patch(color="#bbbbbb", label="grad reduce, optimizer"),
                matplotlib.patches.Patch(color="black", label="recompute")]
    height = fig.get_figheight()
    fig.suptitle("Memory of one training step per rank, stacked by category; top strip: the "
                 "schedule (F<m>/B<m>: forward/backward of microbatch m)", fontsize=10,
                 y=1 - 0.08 / height, va="top")
    fig.legend(handles=handles, loc="upper center", ncol=6, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.35 / height))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.8 / height))
    for ax in axes:
        ax.grid(True, axis="y", alpha=0.3)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "timeline.png")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(path)


def plot_run(run_dir, out_dir):
    metrics_path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(metrics_path):
        raise InputError(f"{metrics_path}: no such file")
    metrics = read_jsonl(metrics_path, ["step", "loss"])
    if not metrics:
        raise InputError(f"{metrics_path}: no steps")
    events_path = os.path.join(run_dir, "events.jsonl")
    events = read_jsonl(events_path, ["step", "event"]) if os.path.isfile(events_path) else []
    os.makedirs(out_dir, exist_ok=True)
    for plot in (plot_loss, plot_throughput, plot_memory, plot_recompute):
        plot(metrics, events, out_dir)
    measured = os.path.join(run_dir, "memory_timeline_measured")
    if timeline_files(measured):
        plot_timeline(measured, os.path.join(run_dir, "memory_timeline_predicted"), out_dir)


def plot_sweep_memory(sweep, out_dir):
    rows = sweep["rows"]
    values = [row["value"] for row in rows]
    largest = max([b for row in rows for b in row["peak_bytes"].values() if b] + [1])
    if sweep.get("budget_bytes"):
        largest = max(largest, sweep["budget_bytes"])
    unit, size = byte_unit(largest)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    x = list(range(len(values)))
    misses = []
    for plan, (color, marker) in PLAN_STYLES.items():
        points = [(i, row["peak_bytes"].get(plan), row["fits"].get(plan))
                  for i, row in zip(x, rows)]
        points = [p for p in points if p[1] is not None]
        if not points:
            continue
        # The planner's line is wide and pale: where it equals a preset, both stay visible.
        planned = plan == "planned"
        ax.plot([p[0] for p in points], [p[1] / size for p in points], color=color,
                marker=marker, label="planned (its recompute share)" if planned else plan,
                linewidth=5 if planned else 1.5,
                alpha=0.45 if planned else 1, zorder=1 if planned else 2)
        misses += [p for p in points if not p[2]]
    for i, row in zip(x, rows):  # the planner's recompute share next to its point
        share = (row.get("recompute_share") or {}).get("planned")
        if share is not None and row["peak_bytes"].get("planned") is not None:
            ax.annotate(f"{100 * share:.0f}%", (i, row["peak_bytes"]["planned"] / size),
                        textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8,
                        color="darkgreen")
    ax.scatter([p[0] for p in misses], [p[1] / size for p in misses], s=110,
               facecolors="none", edgecolors="black", zorder=3, label="does not fit")
    if sweep.get("budget_bytes"):
        ax.axhline(sweep["budget_bytes"] / size, color="black", linestyle="--",
                   label=f"budget {sweep['budget_bytes'] / size:.3g} {unit}")
    ax.set_xticks(x, values)
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set(title=f"Predicted peak per rank ({os.path.basename(sweep['config'])})",
           xlabel=sweep["key"], ylabel=f"{unit} (log scale)")
    finish(fig, [ax], out_dir, "sweep_memory.png")


def plot_frontier(sweep, out_dir):
    frontier = sweep.get("frontier") or []
    if not frontier:
        return
    columns = min(len(frontier), 3)
    grid_rows = (len(frontier) + columns - 1) // columns
    fig, axes = plt.subplots(grid_rows, columns, figsize=(4.5 * columns, 4 * grid_rows),
                             squeeze=False)
    for ax, entry in zip(axes.flat, frontier):
        sizes = [p["peak_bytes"] for p in entry["points"]]
        sizes += [p["peak_bytes"] for p in entry.get("presets", [])]
        unit, size = byte_unit(max(sizes + [1]))
        points = sorted(entry["points"], key=lambda p: p["peak_bytes"])
        ax.plot([p["peak_bytes"] / size for p in points],
                [100 * p["recompute_share"] for p in points], color="tab:green", marker=".",
                drawstyle="steps-post", label="planner")
        for number, preset in enumerate(entry.get("presets", [])):
            px, py = preset["peak_bytes"] / size, 100 * preset["recompute_share"]
            ax.scatter([px], [py], color="tab:red", marker="x", zorder=3,
                       label="preset" if number == 0 else None)
            ax.annotate(preset["name"], (px, py), textcoords="offset points", xytext=(4, 4),
                        fontsize=7)
        ax.set(title=f"{sweep['key']} = {entry['value']}", xlabel=f"predicted peak ({unit})",
               ylabel="recompute FLOPs (% of model)")
        ax.set_ylim(bottom=0)
    for ax in list(axes.flat)[len(frontier):]:
        ax.set_visible(False)
    finish(fig, list(axes.flat)[: len(frontier)], out_dir, "sweep_frontier.png")


def plot_sweep(path, out_dir):
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    with open(path, encoding="utf-8") as text:
        sweep = parse_json(text.read(), path)
    for key in ("config", "key", "rows"):
        if key not in sweep:
            raise InputError(f"{path}: no '{key}'")
    for number, row in enumerate(sweep["rows"]):
        for key in ("value", "peak_bytes", "fits"):
            if key not in row:
                raise InputError(f"{path}: rows[{number}]: no '{key}'")
    os.makedirs(out_dir, exist_ok=True)
    plot_sweep_memory(sweep, out_dir)
    plot_frontier(sweep, out_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="plots of a run directory")
    run.add_argument("run_dir")
    run.add_argument("--out", required=True, help="folder for the PNG files")
    sweep = commands.add_parser("sweep", help="plots of a planner sweep (JSON)")
    sweep.add_argument("sweep_json")
    sweep.add_argument("--out", required=True, help="folder for the PNG files")
    timeline = commands.add_parser("timeline", help="a step's memory timeline per rank")
    timeline.add_argument("run_dir", nargs="?", help="a run with train.memory_timeline_step")
    timeline.add_argument("--predicted", help="PREFIX of PREFIX_rank<R>.json (trainer plan "
                          "--timeline); default RUN_DIR/memory_timeline_predicted")
    timeline.add_argument("--measured", help="default RUN_DIR/memory_timeline_measured")
    timeline.add_argument("--out", required=True, help="folder for timeline.png")
    args = parser.parse_args()
    try:
        if args.command == "run":
            plot_run(args.run_dir, args.out)
        elif args.command == "timeline":
            run = args.run_dir
            measured = args.measured or (run and os.path.join(run, "memory_timeline_measured"))
            predicted = args.predicted or (run and os.path.join(run, "memory_timeline_predicted"))
            if not measured and not predicted:
                raise InputError("timeline needs RUN_DIR, --predicted or --measured")
            plot_timeline(measured, predicted, args.out)
        else:
            plot_sweep(args.sweep_json, args.out)
    except (InputError, OSError) as error:
        sys.exit(f"plot.py: error: {error}")
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        source = args.sweep_json if args.command == "sweep" else args.run_dir
        sys.exit(f"plot.py: error: {source}: unexpected content ({type(error).__name__}: {error})")


if __name__ == "__main__":
    main()
