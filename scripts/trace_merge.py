#!/usr/bin/env python3
"""Merges the per-rank schedule traces of a run (train.trace writes
<output.dir>/trace_rank<R>.json) into one Chrome trace event file with a row per rank: each
rank keeps its pid (= its world rank) and its process_name metadata ("rank 3 (pp 1, tp 1, ...)"),
and its timestamps (microseconds since its otherData.time_origin_ns, the system clock when it
started recording) are moved onto the earliest rank's origin, so the ranks stay aligned.

Usage: scripts/trace_merge.py RUN_DIR_OR_FILES... [--out merged.json]
Open the result in https://ui.perfetto.dev or chrome://tracing.
"""
import argparse
import glob
import json
import os
import sys


def trace_files(inputs):
    files = []
    for item in inputs:
        if os.path.isdir(item):
            found = sorted(glob.glob(os.path.join(item, "trace_rank*.json")))
            if not found:
                sys.exit(f"trace_merge: no trace_rank*.json under {item}")
            files += found
        elif os.path.isfile(item):
            files.append(item)
        else:
            sys.exit(f"trace_merge: {item} is neither a run directory nor a trace file")
    return files


def merge(files):
    traces, ranks, events = [], {}, []
    for path in files:
        try:
            with open(path) as f:
                traces.append((path, json.load(f)))
        except (OSError, ValueError) as error:
            sys.exit(f"trace_merge: {path}: {error}")
    origins = [t.get("otherData", {}).get("time_origin_ns", 0) for _, t in traces]
    first_origin = min(origins, default=0)
    for (path, trace), origin in zip(traces, origins):
        rank_events = trace.get("traceEvents")
        if not isinstance(rank_events, list):
            sys.exit(f"trace_merge: {path} has no traceEvents list")
        pids = {e["pid"] for e in rank_events if "pid" in e}
        for pid in pids:
            if pid in ranks:
                sys.exit(f"trace_merge: pid {pid} is in both {ranks[pid]} and {path}")
            ranks[pid] = path
        named = {e["pid"] for e in rank_events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
        for pid in sorted(pids - named):  # a row title for a file that lacks one
            rank_events.append({"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
                                "args": {"name": f"rank {pid}"}})
        shift_us = (origin - first_origin) / 1000  # integers: exact
        for e in rank_events:
            if e.get("ph") != "M":
                e["ts"] = round(e["ts"] + shift_us, 3)
        events += rank_events
    return {"displayTimeUnit": "ms",
            "otherData": {"ranks": sorted(ranks), "time_origin_ns": first_origin},
            "traceEvents": events}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", help="a run directory or trace_rank*.json files")
    parser.add_argument("--out", default=None, help="default: <first input's folder>/trace.json")
    args = parser.parse_args()
    files = trace_files(args.inputs)
    out = args.out or os.path.join(
        args.inputs[0] if os.path.isdir(args.inputs[0]) else os.path.dirname(files[0]),
        "trace.json")
    merged = merge(files)
    temporary = out + ".tmp"
    with open(temporary, "w") as f:
        json.dump(merged, f)
    os.replace(temporary, out)
    print(f"trace_merge: {len(files)} ranks, {len(merged['traceEvents'])} events -> {out}")


if __name__ == "__main__":
    main()
