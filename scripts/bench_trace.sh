#!/usr/bin/env bash
# What train.trace costs: the same run with the trace off and on (recording steps 2..STEPS),
# alternated PAIRS times, on one process (configs/tiny.yaml's model) and on 4 ranks (pp2 x tp2,
# interleaved, selective recompute); rank 0's median and minimum step_ms over steps 2..STEPS of
# all runs of each mode (on a shared machine the minimum is the steadier of the two), and the
# slices one traced step records on rank 0; first, the cost of one scope off and recording
# (bench/bench_trace_scope.cpp). Writes bench/trace.json.
# Usage: scripts/bench_trace.sh [STEPS] [PAIRS]   (BUILD_DIR overrides build/release)
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
build_dir=${BUILD_DIR:-$root/build/release}
configure_and_build "$build_dir" trainer bench_trace_scope >/dev/null
trainer="$build_dir/trainer/trainer"
steps=${1:-30}
pairs=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$trainer" prepare-data --synthetic --num-tokens 300000 --output-prefix "$work/data" >/dev/null
common="--config $root/configs/tiny.yaml --set data.path=$work/data --set train.steps=$steps \
  --set train.eval_interval=0 --set train.log_interval=1000 --set output.export=false"
layouts=(
  "1|single process|"
  "4|pp2 x tp2 interleaved, selective|--set parallel.pipeline=2 --set parallel.tensor=2 \
--set parallel.virtual_pipeline=2 --set recompute.granularity=selective \
--set recompute.modules=[core_attn] --set model.num_layers=8 --set train.micro_batch_size=2"
)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$build_dir/bench/bench_trace_scope"
for layout in "${layouts[@]}"; do
  IFS='|' read -r ranks name flags <<<"$layout"
  for pair in $(seq 1 "$pairs"); do
    for mode in off on; do
      trace=""
      [ "$mode" = on ] && trace="--set train.trace.start_step=2 --set train.trace.steps=$((steps - 1))"
      out="$work/$ranks-$mode-$pair"
      # shellcheck disable=SC2086
      OMP_NUM_THREADS=$((ranks == 1 ? 2 : 1)) mpirun $(mpirun_flags) -np "$ranks" "$trainer" \
        train $common $flags $trace --set output.dir="$out" >"$out.log" 2>&1 ||
        { cat "$out.log"; exit 1; }
    done
  done
done
python3 - "$work" "$steps" "$pairs" "$root/bench/trace.json" <<'EOF'
import glob, json, statistics, sys
work, steps, pairs, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = []
for ranks, name in ((1, "single process"), (4, "pp2 x tp2 interleaved, selective")):
    medians, minima = {}, {}
    for mode in ("off", "on"):
        times = []
        for pair in range(1, pairs + 1):
            for line in open(f"{work}/{ranks}-{mode}-{pair}/metrics.jsonl"):
                m = json.loads(line)
                if m["step"] >= 2:
                    times.append(m["step_ms"])
        medians[mode], minima[mode] = statistics.median(times), min(times)
    trace = json.load(open(f"{work}/{ranks}-on-1/trace_rank0.json"))
    slices = sum(1 for e in trace["traceEvents"] if e["ph"] == "X") / (steps - 1)
    row = {"layout": name, "ranks": ranks, "steps_per_run": steps, "runs_per_mode": pairs,
           "median_step_ms_off": medians["off"], "median_step_ms_on": medians["on"],
           "overhead": medians["on"] / medians["off"] - 1,
           "min_step_ms_off": minima["off"], "min_step_ms_on": minima["on"],
           "overhead_of_minima": minima["on"] / minima["off"] - 1,
           "slices_per_step_rank0": slices}
    rows.append(row)
    print(f"{name}, {ranks} ranks: median step {medians['off']:.2f} ms off, "
          f"{medians['on']:.2f} ms on ({100 * row['overhead']:+.1f}%); fastest step "
          f"{minima['off']:.2f} ms off, {minima['on']:.2f} ms on "
          f"({100 * row['overhead_of_minima']:+.1f}%); {slices:.0f} slices per step on rank 0")
json.dump(rows, open(out, "w"), indent=1)
EOF
