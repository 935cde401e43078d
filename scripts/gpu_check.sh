#!/usr/bin/env bash
# The GPU check, in two halves so no device minute is spent building:
#   scripts/gpu_check.sh prepare   (here, no GPU needed) builds the CUDA backend, its
#                                  gpu-labelled test binaries, the trainer and bench_gpu, and copies
#                                  them (stripped) with the non-CUDA shared libraries they load into
#                                  .gpu/ (git-ignored), checking the size against the device tool's
#                                  64 MiB carry limit (60 MiB here, for headroom).
#   scripts/gpu_check.sh run [BENCH_OPTION...]
#                                  (on the GPU machine, from the repo root, with .gpu carried)
#                                  runs every GPU test binary, each under a time limit, then trains
#                                  the tiny model 20 steps on the CPU and on the GPU (fp32) and
#                                  compares the losses, then runs bench_gpu (the 1.3B model under
#                                  three recompute presets and the longest sequence per preset in
#                                  80 GiB; options such as --quick are passed on) in the time left
#                                  of GPU_CHECK_LIMIT_S (default 460 s), at most 240 s. Writes under
#                                  $OUT: device.txt, gpu_tests.log, train_cpu.log, train_gpu.log,
#                                  gpu_check.json (tests passed / failed / skipped per binary, both
#                                  loss curves, the largest relative loss difference),
#                                  bench_gpu.json (see bench/bench_gpu.cpp; rewritten after every
#                                  configuration, "complete": false when time ran out) and
#                                  bench_gpu.log (progress with timestamps, then the summary).
# A device call then is:
#   run(command="bash scripts/gpu_check.sh run", carry=[".gpu"], timeout_s=480)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry="$root/.gpu"

prepare() {
  source "$root/scripts/common.sh"
  "$root/scripts/setup.sh" >/dev/null
  local build="$root/build/gpu"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=ON \
    -DTRAINER_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  cmake --build "$build" --parallel "$(nproc)"
  rm -rf "$carry" && mkdir -p "$carry/bin" "$carry/lib"
  local binaries
  binaries=$(find "$build/tests/gpu" -maxdepth 1 -type f -name 'test_gpu_*' -perm -u+x)
  [ -n "$binaries" ] || { echo "gpu_check: no GPU test binaries were built"; exit 1; }
  [ -x "$build/bench/bench_gpu" ] || { echo "gpu_check: bench_gpu was not built"; exit 1; }
  for b in $binaries "$build/trainer/trainer" "$build/bench/bench_gpu"; do
    cp "$b" "$carry/bin/"
    strip --strip-unneeded "$carry/bin/$(basename "$b")"
    # Shared libraries outside the CUDA toolkit (the GPU machine has CUDA, cuBLASLt, NCCL).
    ldd "$b" | awk '/=> \// {print $3}' \
      | grep -vE 'libcuda|libcudart|libcublas|libnccl|/libc\.so|/libm\.so|ld-linux' \
      | grep -vE 'libpthread|libdl|librt' \
      | while read -r lib; do cp -L "$lib" "$carry/lib/" 2>/dev/null || true; done
  done
  local size
  size=$(du -sm "$carry" | cut -f1)
  echo "gpu_check: $(ls "$carry/bin" | wc -l) binaries and $(ls "$carry/lib" | wc -l)" \
    "libraries in .gpu (${size} MiB)"
  [ "$size" -lt 60 ] ||
    { echo "gpu_check: .gpu is ${size} MiB, over the device tool's carry limit"; exit 1; }
  grep -qx '/.gpu/' "$root/.git/info/exclude" 2>/dev/null || true
}

run_on_device() {
  : "${OUT:?run on the device machine, where OUT is set}"
  export LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" OMP_WAIT_POLICY=passive
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
    > "$OUT/device.txt" 2>&1 || true
  local summary="$OUT/gpu_check.json" first=1 log="$OUT/gpu_tests.log"
  : > "$log"
  echo "{\"device\": \"$(head -1 "$OUT/device.txt" | tr -d '"')\", \"binaries\": [" > "$summary"
  for b in "$carry"/bin/test_gpu_*; do
    local name code part
    name=$(basename "$b")
    part=$(mktemp)
    set +e
    timeout 120 "$b" > "$part" 2>&1
    code=$?
    set -e
    { echo "=== $name (exit $code)"; cat "$part"; } >> "$log"
    [ $first -eq 1 ] || echo "," >> "$summary"
    first=0
    printf '{"binary": "%s", "exit_code": %d, "passed": %d, "failed": %d, "skipped": %d}' \
      "$name" "$code" "$(grep -c '^\[       OK \].* ms)$' "$part")" \
      "$(grep -c '^\[  FAILED  \].* ms)$' "$part")" \
      "$(grep -c '^\[  SKIPPED \].* ms)$' "$part")" >> "$summary"
    echo "$name: exit $code"
  done
  echo "]," >> "$summary"
  # The tiny model, 20 steps, on the CPU and on the GPU (fp32, dropout on).
  local trainer="$carry/bin/trainer" work
  work=$(mktemp -d)
  "$trainer" prepare-data --synthetic --num-tokens 200000 --output-prefix "$work/data" > /dev/null
  local flags=(--config "$root/configs/tiny.yaml" --set data.path="$work/data"
               --set train.steps=20 --set optimizer.lr_warmup_steps=5 --set train.eval_interval=0
               --set output.export=false --set model.hidden_dropout=0.1
               --set model.attention_dropout=0.1 --set train.log_interval=1
               --set train.precision=fp32)
  set +e
  timeout 120 "$trainer" train "${flags[@]}" --set output.dir="$work/cpu" \
    > "$OUT/train_cpu.log" 2>&1
  timeout 120 "$trainer" train "${flags[@]}" --set output.dir="$work/gpu" --set train.device=cuda \
    > "$OUT/train_gpu.log" 2>&1
  set -e
  python3 - "$work/cpu/metrics.jsonl" "$work/gpu/metrics.jsonl" >> "$summary" <<'PY'
import json, sys
def losses(path):
    try:
        return [json.loads(line)["loss"] for line in open(path)]
    except OSError:
        return []
cpu, gpu = losses(sys.argv[1]), losses(sys.argv[2])
worst = max((abs(a - b) / abs(a) for a, b in zip(cpu, gpu)), default=None)
train = {"cpu_losses": cpu, "gpu_losses": gpu, "max_relative_loss_difference": worst}
print('"train": ' + json.dumps(train) + "}")
PY
  python3 -m json.tool "$summary" > /dev/null || echo "gpu_check: $summary is not valid JSON"
  cat "$summary"
  # The benchmark gets what is left of the call's limit (at most 240 s): it rewrites its JSON
  # after every configuration, so running out of time only shortens the report.
  local bench_limit=$(( ${GPU_CHECK_LIMIT_S:-460} - SECONDS ))
  [ "$bench_limit" -le 240 ] || bench_limit=240
  if [ "$bench_limit" -lt 30 ]; then
    echo "bench_gpu: skipped, ${bench_limit} s left of GPU_CHECK_LIMIT_S" | tee "$OUT/bench_gpu.log"
    return
  fi
  set +e
  timeout -k 10 "$bench_limit" "$carry/bin/bench_gpu" "$OUT/bench_gpu.json" \
    --time-limit-s $((bench_limit - 10)) "$@" > "$OUT/bench_gpu.log" 2>&1
  local code=$?
  set -e
  echo "bench_gpu: exit $code (limit ${bench_limit} s;" \
    "124: timed out, the JSON holds what was measured)"
  if grep -q '^throughput:' "$OUT/bench_gpu.log"; then
    sed -n '/^throughput:/,$p' "$OUT/bench_gpu.log"
  else
    tail -n 5 "$OUT/bench_gpu.log"
  fi
}

case "${1:-}" in
  prepare) prepare ;;
  run) shift; run_on_device "$@" ;;
  *) echo "usage: scripts/gpu_check.sh prepare | run [BENCH_OPTION...]"; exit 2 ;;
esac
