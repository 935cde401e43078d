#!/usr/bin/env bash
# bench_gpu's whole flow on host CUDA (docs/gpu.md, "Host CUDA"): `--smoke` (a 1-layer model of
# hidden 64) runs the roofline, the six-preset throughput table and the sequence sweep, and the
# JSON it writes is complete: every run ran, every measured activation peak equals the
# prediction, every preset's sweep found a length that fits, every roofline line was timed.
set -u
bench=$1
trainer=unused
source "$(dirname "$0")/../script_test_util.sh"
(cd "$dir" && "$bench" "$dir/bench_gpu.json" --smoke --warmup 1 --steps 1 \
  --sweep-warmup 0 > "$dir/bench.log" 2>&1) || fail "bench_gpu --smoke: $(tail -5 "$dir/bench.log")"
python3 - "$dir/bench_gpu.json" <<'PY' || fail "bench_gpu.json (log: $(tail -3 "$dir/bench.log"))"
import json
import sys

report = json.load(open(sys.argv[1]))
problems = []
if not report.get("complete"):
    problems.append("not complete")
roofline = report.get("roofline", {})
if roofline.get("error") or not roofline.get("ops"):
    problems.append("roofline: %s" % roofline.get("error", "no ops"))
problems += ["roofline %s: not timed" % op["op"] for op in roofline.get("ops", [])
             if not op["measured_ms"] > 0]
runs = report["throughput"]["runs"]
if len(runs) != 6:
    problems.append("%d throughput runs, expected 6" % len(runs))
for run in runs:
    name = run["preset"] + " (" + run["attention_backend"] + ")"
    if run["outcome"] != "ok":
        problems.append("%s: %s" % (name, run["outcome"]))
    elif run["measured_activation_peak_bytes"] != run["predicted_activation_peak_bytes"]:
        problems.append("%s: activation peak %d measured, %d predicted" % (
            name, run["measured_activation_peak_bytes"], run["predicted_activation_peak_bytes"]))
for preset in report["sequence_sweep"]["presets"]:
    if not preset.get("longest_fitting_seq_length"):
        problems.append("sweep %s: no length fits" % preset["preset"])
if problems:
    print("\n".join(problems))
    sys.exit(1)
PY
echo PASS
