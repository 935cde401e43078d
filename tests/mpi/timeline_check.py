#!/usr/bin/env python3
"""Checks the memory timelines of a run against `trainer plan --timeline`'s, per rank.

  timeline_check.py RUN_DIR PLAN_PREFIX RANKS STEP
For each rank: RUN_DIR/memory_timeline_measured_rank<R>.json (step STEP) has the same events,
in order, as RUN_DIR/memory_timeline_predicted_rank<R>.json and PLAN_PREFIX_rank<R>.json; the
bytes live per category never go negative and end where they started; every alloc is named;
and each .trace.json is a Chrome trace (traceEvents with ph/ts/pid; a counter track per
category; an X slice per phase). Prints the first difference and exits 1 on failure.
"""

import json
import sys

CATEGORIES = ["param", "grad", "optimizer", "activation", "workspace", "comm"]


def fail(message):
    print(f"timeline_check.py: {message}")
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        fail(f"{path}: {error}")


def check_compact(path, timeline):
    live = dict(timeline["start_bytes"])
    for event in timeline["events"]:
        if event["op"] in ("alloc", "free"):
            if not event["name"] or event["name"] == "unnamed":
                fail(f"{path}: event {event['seq']} has no name")
            sign = 1 if event["op"] == "alloc" else -1
            live[event["category"]] += sign * event["bytes"]
            if live[event["category"]] < 0:
                fail(f"{path}: {event['category']} below 0 at event {event['seq']}")
    if live != timeline["start_bytes"]:
        fail(f"{path}: a step ends with {live}, started with {timeline['start_bytes']}")


def check_chrome(path):
    trace = load(path)
    events = trace.get("traceEvents")
    if not isinstance(events, list) or not events:
        fail(f"{path}: no traceEvents")
    counters, phases = set(), 0
    for event in events:
        for key in ("name", "ph", "ts", "pid"):
            if key not in event:
                fail(f"{path}: an event without {key}: {event}")
        if event["ph"] == "C":
            counters.add(event["name"])
        if event["ph"] == "X":
            phases += 1
            if event["dur"] < 0:
                fail(f"{path}: negative dur in {event}")
    if counters != {f"{c} bytes" for c in CATEGORIES}:
        fail(f"{path}: counter tracks {sorted(counters)}")
    if phases == 0:
        fail(f"{path}: no phase slices")


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"event {i}: {x} against {y}"
    return None if len(a) == len(b) else f"{len(a)} events against {len(b)}"


def main():
    if len(sys.argv) != 5:
        fail("usage: timeline_check.py RUN_DIR PLAN_PREFIX RANKS STEP")
    run_dir, plan_prefix, ranks, step = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for rank in range(ranks):
        measured_path = f"{run_dir}/memory_timeline_measured_rank{rank}.json"
        measured = load(measured_path)
        if measured.get("step") != step or measured.get("source") != "measured":
            fail(f"{measured_path}: not step {step} measured")
        check_compact(measured_path, measured)
        for path in (f"{run_dir}/memory_timeline_predicted_rank{rank}.json",
                     f"{plan_prefix}_rank{rank}.json"):
            predicted = load(path)
            if predicted.get("source") != "predicted":
                fail(f"{path}: source {predicted.get('source')}")
            if predicted["start_bytes"] != measured["start_bytes"]:
                fail(f"{path}: start bytes {predicted['start_bytes']}, measured {measured['start_bytes']}")
            difference = first_difference(predicted["events"], measured["events"])
            if difference:
                fail(f"rank {rank}: {path} against {measured_path}: {difference}")
        for prefix in ("measured", "predicted"):
            check_chrome(f"{run_dir}/memory_timeline_{prefix}_rank{rank}.trace.json")
        check_chrome(f"{plan_prefix}_rank{rank}.trace.json")
        print(f"rank {rank}: {len(measured['events'])} events, predicted == measured")


if __name__ == "__main__":
    main()
