#!/usr/bin/env bash
# Context parallelism: under one per-rank activation budget (MiB, default 16), the longest
# sequence that trains with flash attention and full recompute at cp = 1, 2, 4, 8. The exact
# per-rank replay (bench_context) finds each length; one training step under mpirun confirms it,
# measured peak per rank against the budget. Ranks are oversubscribed on this machine: a memory
# result, not a speed claim. Writes bench/context.json.
# Usage: scripts/bench_context.sh [BUDGET_MIB]   (BUILD_DIR overrides the Release build folder)
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
"$root/scripts/setup.sh" >/dev/null
build_dir=${BUILD_DIR:-$root/build/release}
configure_and_build "$build_dir" trainer bench_context >/dev/null
trainer="$build_dir/trainer/trainer"
budget=${1:-16}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$trainer" prepare-data --synthetic --num-tokens 1000000 --output-prefix "$work/data" >/dev/null
model=(model.num_layers=2 model.hidden_size=64 model.num_attention_heads=2 model.vocab_size=256
  model.attention_backend=flash recompute.granularity=full recompute.method=uniform
  recompute.num_layers=1 train.micro_batch_size=1 train.global_batch_size=1 train.steps=1
  train.eval_interval=0 optimizer.lr_warmup_steps=0 output.export=false "data.path=$work/data")
echo "machine: $(nproc) cores; model 2 layers, hidden 64, 2 heads, vocab 256, micro batch 1,"
echo "flash attention, full recompute (uniform 1), fp32; activation budget $budget MiB per rank"
printf '| %3s | %8s | %9s | %-12s | %-9s | %-44s |\n' cp seq "x of cp1" "predicted" \
  "measured" "measured activation peak per rank (MiB)"
echo "[" > "$root/bench/context.json"
first=1
base=0
while read -r cp seq predicted; do
  out="$work/cp$cp"
  sets=()
  for kv in "${model[@]}"; do sets+=(--set "$kv"); done
  # shellcheck disable=SC2046
  mpirun $(mpirun_flags) -np "$cp" "$trainer" train --config "$root/configs/tiny.yaml" \
    "${sets[@]}" --set parallel.context="$cp" --set model.seq_length="$seq" \
    --set output.dir="$out" >/dev/null </dev/null
  [ "$base" -gt 0 ] || base=$seq
  last=$(tail -n 1 "$out/metrics.jsonl")
  line=$(python3 - "$cp" "$seq" "$base" "$predicted" "$budget" "$last" <<'PY'
import json, sys
cp, seq, base, predicted, budget = (int(v) for v in sys.argv[1:6])
m = json.loads(sys.argv[6])
peaks = m.get("rank_peak_activation_bytes", [m["peak_activation_bytes"]])
mib = lambda b: b / 2**20
text = " ".join("%.2f%s" % (mib(p), "" if p <= budget << 20 else "!") for p in peaks)
exact = "= pred." if all(p == predicted for p in peaks) else "differs"
print("| %3d | %8d | %8.2fx | %8.2f MiB | %-9s | %-44s |"
      % (cp, seq, seq / base, mib(predicted), exact, text))
print(json.dumps({"cp": cp, "seq_length": seq, "x_of_cp1": seq / base,
                  "predicted_activation_peak_bytes": predicted,
                  "measured_activation_peak_bytes": peaks, "budget_bytes": budget << 20}))
PY
)
  echo "$line" | head -n 1
  [ $first -eq 1 ] || echo "," >> "$root/bench/context.json"
  first=0
  echo "$line" | tail -n 1 >> "$root/bench/context.json"
done < <("$build_dir/bench/bench_context" "$budget" "$root/configs/tiny.yaml" "${model[@]}")
echo "]" >> "$root/bench/context.json"
echo "('= pred.': every rank's measured peak equals the replay's prediction to the byte;"
echo " '!' marks a rank whose measured peak exceeds the budget)"
