#!/usr/bin/env bash
# bench_gpu's whole flow on host CUDA (docs/gpu.md, "Host CUDA"): `--smoke` (a 1-layer model of
# hidden 64), for the GPT and for the Llama block (`--model llama`: GQA, RoPE, SwiGLU, RMSNorm,
# untied head), runs the roofline, the six-preset throughput table and the sequence sweep, and
# the JSON it writes is complete: every run ran, every measured activation peak equals the
# prediction, every preset's sweep found a length that fits, every roofline line was timed.
set -u
bench=$1
trainer=unused
source "$(dirname "$0")/../script_test_util.sh"
for model in gpt llama; do
  (cd "$dir" && "$bench" "$dir/$model.json" --smoke --model "$model" --warmup 1 --steps 1 \
    --sweep-warmup 0 > "$dir/$model.log" 2>&1) ||
    fail "bench_gpu --smoke --model $model: $(tail -5 "$dir/$model.log")"
  python3 - "$dir/$model.json" "$model" <<'PY' ||
import json
import sys

report = json.load(open(sys.argv[1]))
architecture = {"gpt": "gpt2", "llama": "llama"}[sys.argv[2]]
problems = []
if not report.get("complete"):
    problems.append("not complete")
if report["model"]["architecture"] != architecture:
    problems.append("model %s, expected %s" % (report["model"]["architecture"], architecture))
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
    fail "$model.json (log: $(tail -3 "$dir/$model.log"))"
done
echo PASS
