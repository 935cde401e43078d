#!/usr/bin/env bash
# Parallel layouts on one machine: tokens/s, and per rank the activation peak
# (measured and predicted) and the bytes handed to communicators per step, for
# a model sized for 2 cores; then the optimizer and gradient memory per rank at
# dp 1, 2, 4, 8 with and without optimizer.distributed; then the share of the
# gradient reduction that backward hides with optimizer.overlap_grad_reduce at
# dp 2 and 4 (the time rank 0 spends in gradient-reduction calls after backward,
# overlap on against off, and during backward with it on). Ranks are
# oversubscribed: a correctness-scale run, not a speed claim. Writes
# bench/parallel.json (one object per layout), bench/parallel_optimizer.json and
# bench/parallel_overlap.json.
# Usage: scripts/bench_parallel.sh [STEPS] [SECTIONS: layouts,optimizer,overlap]
# (BUILD_DIR overrides the Release build folder; OVERLAP_STEPS, default 20, the
# steps of each overlap run, whose first step is left out of the medians.)
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
"$root/scripts/setup.sh" >/dev/null
build_dir=${BUILD_DIR:-$root/build/release}
configure_and_build "$build_dir" trainer >/dev/null
trainer="$build_dir/trainer/trainer"
steps=${1:-4}
sections=${2:-layouts,optimizer,overlap}
overlap_steps=${OVERLAP_STEPS:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$trainer" prepare-data --synthetic --num-tokens 200000 --output-prefix "$work/data" >/dev/null
model="--set model.num_layers=4 --set model.hidden_size=128 --set model.num_attention_heads=4 \
  --set model.seq_length=128 --set train.micro_batch_size=4 --set train.global_batch_size=16 \
  --set train.steps=$steps --set train.eval_interval=0 --set optimizer.lr_warmup_steps=0 \
  --set output.export=false --set data.path=$work/data --set train.log_interval=1000"
layouts=(
  "1|single|"
  "2|tp2|--set parallel.tensor=2"
  "2|tp2 sp|--set parallel.tensor=2 --set parallel.sequence_parallel=true"
  "2|pp2 1f1b|--set parallel.pipeline=2"
  "2|pp2 interleaved|--set parallel.pipeline=2 --set parallel.virtual_pipeline=2"
  "2|dp2|--set parallel.data=2"
  "4|tp2 pp2|--set parallel.tensor=2 --set parallel.pipeline=2"
  "8|tp2 pp2 dp2|--set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=2"
)
echo "machine: $(nproc) cores; model 4 layers, hidden 128, seq 128, global batch 16 x 128 tokens"
if [[ ,$sections, == *,layouts,* ]]; then
printf '| %-16s | %5s | %9s | %-40s | %-40s |\n' layout ranks tokens/s \
  "activation peak per rank (MiB)" "comm MiB per step per rank"
echo "[" > "$root/bench/parallel.json"
first=1
for entry in "${layouts[@]}"; do
  IFS='|' read -r ranks name flags <<< "$entry"
  out="$work/run-${name// /-}"
  # shellcheck disable=SC2086
  mpirun $(mpirun_flags) -np "$ranks" "$trainer" train --config "$root/configs/tiny.yaml" \
    $model $flags --set output.dir="$out" >/dev/null
  last=$(tail -n 1 "$out/metrics.jsonl")
  python3 - "$name" "$ranks" "$last" <<'PY'
import json, sys
name, ranks, m = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
peaks = m.get("rank_peak_activation_bytes", [m["peak_activation_bytes"]])
pred = m.get("rank_predicted_activation_peak_bytes", [m["predicted_activation_peak_bytes"]])
comm = m.get("rank_comm_bytes", [m["comm_bytes"]])
comm_pred = m.get("rank_predicted_comm_bytes", [m["predicted_comm_bytes"]])
mib = lambda b: b / 2**20
peak_text = " ".join("%.1f%s" % (mib(a), "" if a == b else "!") for a, b in zip(peaks, pred))
comm_text = " ".join("%.2f%s" % (mib(a), "" if a == b else "!") for a, b in zip(comm, comm_pred))
print("| %-16s | %5d | %9.0f | %-40s | %-40s |"
      % (name, ranks, m["tokens_per_s"], peak_text, comm_text))
PY
  [ $first -eq 1 ] || echo "," >> "$root/bench/parallel.json"
  first=0
  printf '{"layout": "%s", "ranks": %s, "last_step": %s}' "$name" "$ranks" "$last" \
    >> "$root/bench/parallel.json"
done
echo "]" >> "$root/bench/parallel.json"
echo "('!' marks a rank whose measured value differs from the prediction)"
fi

# Optimizer state per rank: rank 0's peaks of the step (every dp rank holds the same sizes).
if [[ ,$sections, == *,optimizer,* ]]; then
echo
printf '| %4s | %-11s | %14s | %9s | %9s | %12s | %9s |\n' dp optimizer "optimizer MiB" \
  "x of dp1" "grad MiB" "comm MiB/step" tokens/s
echo "[" > "$root/bench/parallel_optimizer.json"
first=1
for dp in 1 2 4 8; do
  for distributed in false true; do
    out="$work/optimizer-dp$dp-$distributed"
    # shellcheck disable=SC2086
    mpirun $(mpirun_flags) -np "$dp" "$trainer" train --config "$root/configs/tiny.yaml" \
      $model --set train.micro_batch_size=2 --set parallel.data="$dp" \
      --set optimizer.distributed="$distributed" --set output.dir="$out" >/dev/null
    last=$(tail -n 1 "$out/metrics.jsonl")
    python3 - "$dp" "$distributed" "$last" "$work/optimizer-dp1" <<'PY'
import json, sys, os
dp, distributed, m = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
base_file = sys.argv[4]
if dp == 1 and distributed == "false":
    open(base_file, "w").write(str(m["peak_optimizer_bytes"]))
base = int(open(base_file).read())
mib = lambda b: b / 2**20
print("| %4d | %-11s | %14.3f | %9.3f | %9.3f | %12.3f | %9.0f |"
      % (dp, "distributed" if distributed == "true" else "replicated",
         mib(m["peak_optimizer_bytes"]), m["peak_optimizer_bytes"] / base,
         mib(m["peak_grad_bytes"]), mib(m["comm_bytes"]), m["tokens_per_s"]))
PY
    [ $first -eq 1 ] || echo "," >> "$root/bench/parallel_optimizer.json"
    first=0
    printf '{"dp": %s, "distributed": %s, "last_step": %s}' "$dp" "$distributed" "$last" \
      >> "$root/bench/parallel_optimizer.json"
  done
done
echo "]" >> "$root/bench/parallel_optimizer.json"
echo "(rank 0's step peaks; every dp rank holds the same sizes)"
fi

# Gradient reduction hidden behind backward: rank 0's medians (steps 2..N) of the time inside
# the reduction's calls after backward (grad_reduce_wait_ms: all of the reduction with overlap
# off, what backward left with it on) and, with overlap on, during backward
# (grad_reduce_in_backward_ms: reports, the waits they make, progress tests).
if [[ ,$sections, == *,overlap,* ]]; then
echo
printf '| %4s | %-11s | %7s | %14s | %13s | %6s | %15s | %8s | %7s |\n' dp optimizer buckets \
  "wait off (ms)" "wait on (ms)" hidden "in backward (ms)" "step off" "step on"
echo "[" > "$root/bench/parallel_overlap.json"
first=1
for dp in 2 4; do
  for distributed in false true; do
    for overlap in false true; do
      out="$work/overlap-dp$dp-$distributed-$overlap"
      # shellcheck disable=SC2086
      mpirun $(mpirun_flags) -np "$dp" "$trainer" train --config "$root/configs/tiny.yaml" \
        $model --set train.steps="$overlap_steps" --set train.micro_batch_size=2 \
        --set parallel.data="$dp" --set optimizer.distributed="$distributed" \
        --set optimizer.bucket_mb=0.5 --set optimizer.overlap_grad_reduce="$overlap" \
        --set output.dir="$out" >/dev/null
    done
    python3 - "$dp" "$distributed" "$work/overlap-dp$dp-$distributed" \
      "$root/bench/parallel_overlap.json" "$first" <<'PY'
import json, statistics, sys
dp, distributed, prefix, json_path, first = sys.argv[1:6]
def run(overlap):
    lines = [json.loads(l) for l in open("%s-%s/metrics.jsonl" % (prefix, overlap))][1:]
    median = lambda key: statistics.median(m[key] for m in lines)
    return {"wait_ms": median("grad_reduce_wait_ms"),
            "in_backward_ms": median("grad_reduce_in_backward_ms"),
            "step_ms": median("step_ms"), "grad_bytes": lines[-1]["peak_grad_bytes"]}
off, on = run("false"), run("true")
hidden = 1 - on["wait_ms"] / off["wait_ms"]
buckets = -(-off["grad_bytes"] // (2**20 // 2))  # 0.5 MiB of fp32 gradient each
name = "distributed" if distributed == "true" else "replicated"
print("| %4s | %-11s | %7d | %14.2f | %13.2f | %5.0f%% | %16.2f | %8.1f | %7.1f |"
      % (dp, name, buckets, off["wait_ms"], on["wait_ms"], 100 * hidden, on["in_backward_ms"],
         off["step_ms"], on["step_ms"]))
with open(json_path, "a") as out:
    out.write(("" if first == "1" else ",\n") + json.dumps(
        {"dp": int(dp), "optimizer": name, "buckets": buckets, "overlap_off": off,
         "overlap_on": on, "hidden": hidden}))
PY
    first=0
  done
done
echo "]" >> "$root/bench/parallel_overlap.json"
echo "(rank 0, medians of steps 2..$overlap_steps, step times in ms;"
echo " hidden = 1 - wait on / wait off)"
fi
