#!/usr/bin/env python3
"""Checks a merged schedule trace (scripts/trace_merge.py) of the run trace_mpirun.sh makes:
pp 2 x tp 2, virtual_pipeline 2, 8 layers (2 per model chunk), 4 microbatches per step, steps
2-3 traced, recompute selective core_attn except layers 2-3 (full) and 6-7 (none).

Schema: every event has ph/ts/pid/tid/name, X events have dur >= 0, the slices of one lane
nest or are disjoint, and every rank has a process_name. Content, per rank and traced step: a
forward and a backward slice for every (layer of the rank, microbatch) with their args, a
recompute slice for each where the plan recomputes and none where it does not, inside that
layer's backward; an optimizer slice; communication on the tp and pp groups with bytes, and
waits. Exit 0 when all hold, 1 with the failures listed.

  trace_check.py MERGED.json                  schema and content (the run above)
  trace_check.py MERGED.json --schema-only    the schema alone, for a trace of any run
"""
import collections
import json
import sys

PIPELINE, TENSOR, CHUNKS, LAYERS_PER_CHUNK = 2, 2, 2, 2
MICROBATCHES, STEPS = 4, (2, 3)
RECOMPUTED = {0, 1, 2, 3, 4, 5}  # selective core_attn (0, 1, 4, 5) and full (2, 3); not 6, 7


def layers_of(stage):
    """(layer, chunk) of a pipeline stage: chunk c holds virtual stage c * PIPELINE + stage."""
    return [(layers_first + i, chunk)
            for chunk in range(CHUNKS)
            for layers_first in [(chunk * PIPELINE + stage) * LAYERS_PER_CHUNK]
            for i in range(LAYERS_PER_CHUNK)]


def ns(microseconds):
    return round(microseconds * 1000)


def main():
    schema_only = sys.argv[2:] == ["--schema-only"]
    trace = json.load(open(sys.argv[1]))
    events = trace["traceEvents"]
    failures = []
    for i, e in enumerate(events):
        missing = [k for k in ("ph", "ts", "pid", "tid", "name") if k not in e]
        if missing:
            failures.append(f"event {i} lacks {missing}: {e}")
        if e.get("ph") == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            failures.append(f"event {i} is X without a dur >= 0: {e}")
    slices = [e for e in events if e.get("ph") == "X"]
    ranks = sorted({e["pid"] for e in slices})
    if not schema_only and ranks != list(range(PIPELINE * TENSOR)):
        failures.append(f"ranks {ranks}, expected 0..{PIPELINE * TENSOR - 1}")
    named = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    if named != set(ranks):
        failures.append(f"process_name for ranks {sorted(named)}, slices of {ranks}")

    lanes = collections.defaultdict(list)
    for e in slices:
        lanes[(e["pid"], e["tid"])].append(e)
    for (pid, tid), lane in lanes.items():  # nest or disjoint: a stack of open ends
        open_ends = []
        for e in sorted(lane, key=lambda s: (ns(s["ts"]), -ns(s["dur"]))):
            start, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
            while open_ends and open_ends[-1][0] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1][0]:
                failures.append(f"rank {pid} lane {tid}: '{e['name']}' overlaps "
                                f"'{open_ends[-1][1]}' without nesting")
            open_ends.append((end, e["name"]))

    if schema_only and ranks != list(range(len(ranks))):
        failures.append(f"ranks {ranks}, expected 0..{len(ranks) - 1}")
    for rank in [] if schema_only else ranks:
        stage = rank // TENSOR  # tp fastest, then cp, dp (1 each), then pp
        mine = [e for e in slices if e["pid"] == rank]
        compute = [e for e in mine if e["tid"] == 1]
        comm = [e for e in mine if e["tid"] == 2]
        count = collections.Counter()
        for e in compute:
            a = e.get("args", {})
            count[(e["name"], a.get("step"), a.get("layer"), a.get("microbatch"),
                   a.get("chunk"))] += 1
        for step in STEPS:
            for layer, chunk in layers_of(stage):
                for mb in range(MICROBATCHES):
                    for kind in ("forward", "backward", "recompute"):
                        want = 0 if kind == "recompute" and layer not in RECOMPUTED else 1
                        key = (f"{kind} L{layer} mb{mb}", step, layer, mb, chunk)
                        if count[key] != want:
                            failures.append(f"rank {rank}: {count[key]} slices {key}, "
                                            f"expected {want}")
            if count[("optimizer", step, None, None, None)] != 1:
                failures.append(f"rank {rank}: no single optimizer slice in step {step}")
        foreign = {e["args"].get("layer") for e in compute if "layer" in e.get("args", {})} - \
            {layer for layer, _ in layers_of(stage)}
        if foreign:
            failures.append(f"rank {rank}: slices of layers {sorted(foreign)} it does not hold")
        for e in compute:  # a recompute runs inside its layer's backward, not its forward
            if not e["name"].startswith("recompute"):
                continue
            a, start = e["args"], ns(e["ts"])
            inside = [b for b in compute if b["name"] == f"backward chunk{a['chunk']} "
                      f"mb{a['microbatch']}" and b["args"].get("step") == a["step"]
                      and ns(b["ts"]) <= start and start + ns(e["dur"]) <= ns(b["ts"]) + ns(b["dur"])]
            if not inside:
                failures.append(f"rank {rank}: '{e['name']}' (step {a['step']}) is outside the "
                                f"backward of its microbatch")
        for group, operation in (("tp", "all_reduce"), ("pp", "send"), ("pp", "recv")):
            found = [e for e in comm if e["name"] == f"{operation} {group}"
                     and e["args"].get("group") == group and e["args"].get("bytes", 0) > 0]
            if not found:
                failures.append(f"rank {rank}: no '{operation} {group}' slice with bytes")
        if not any(e["name"].startswith("wait ") and e["args"].get("bytes", 0) > 0 for e in comm):
            failures.append(f"rank {rank}: no wait slice")
        if any("bytes" not in e.get("args", {}) or "group" not in e["args"] for e in comm):
            failures.append(f"rank {rank}: a comm slice without group or bytes")

    if failures:
        print("\n".join("FAIL: " + f for f in failures[:50]))
        if len(failures) > 50:
            print(f"... and {len(failures) - 50} more")
        return 1
    if schema_only:
        print(f"{len(events)} events, {len(slices)} slices on {len(ranks)} ranks: schema and "
              f"nesting hold")
        return 0
    print(f"{len(slices)} slices on {len(ranks)} ranks: schema, nesting, forward/backward/"
          f"recompute per layer and microbatch, optimizer, tp and pp communication all present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
