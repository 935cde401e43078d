#!/usr/bin/env bash
# The GPU check, in two halves so no device minute is spent building (docs/gpu.md):
#   scripts/gpu_check.sh prepare   (here, no GPU needed) builds the CUDA backend for sm_90 as
#       shared libraries (the CUDA code once, in libruntime_cuda.so), the gpu-labelled test
#       binaries, the trainer and bench_gpu, and packs them, stripped, with the shared libraries
#       they load that a GPU machine may lack (not glibc, libstdc++, CUDA or NCCL) into
#       .gpu/bundle.tar.xz (git-ignored), failing when .gpu reaches 60 MiB (the device tool
#       carries 64 MiB, the working tree included).
#   scripts/gpu_check.sh run [BENCH_OPTION...]
#       (on the GPU machine, from the repo root, with .gpu carried) unpacks the bundle, finds the
#       CUDA runtime, cuBLAS(Lt) and NCCL (CUDA folders, then Python's nvidia/*/lib wheels) and
#       writes `ldd` of every binary before running any, stopping when a library is missing; then
#       runs every GPU test binary, trains the tiny model 20 steps in fp32 on the CPU and on the
#       GPU, runs bench_gpu (options such as --quick and --model llama are passed on) and the
#       PyTorch peer on the same model (bench/peers/gpt_torch.py; llama_torch.py with --model
#       llama, configs/llama_1b_gpu.yaml's shape). Each step gets at most its own limit and
#       never more than is left of GPU_CHECK_LIMIT_S (default 460 s); a failing or cut step is
#       recorded and the next one runs. Files under $OUT (8 at most come back):
#       gpu_check.json (the summary: device, libraries, every step's status, tests per binary,
#       both loss curves, bench_gpu beside PyTorch with our/PyTorch ratios; rewritten after every
#       step), gpu_check.log, ldd.txt, tests.log (test binaries and both training runs),
#       bench_gpu.json, bench_gpu.log, bench_peers.json, bench_peers.log.
#   scripts/gpu_check.sh predict
#       (there, as run, when device time is left) the step-time model against the GPU: `trainer
#       calibrate` on configs/gpt_1p3b_gpu.yaml (global batch 16), then 6 steps of each preset
#       (none, selective core_attn, full uniform 1) and of recompute.auto under 40 GiB with that
#       profile; predict.json lists each one's predicted and measured median step_ms.
#   scripts/gpu_check.sh sanitize
#       (there, as run, in a second call when device time is left) compute-sanitizer's memcheck,
#       racecheck, initcheck and synccheck over test_gpu_kernel_paths and test_gpu_op_twins, each
#       a step as above, into sanitize.log; gpu_check.json lists their status (a tool that finds
#       an error exits 1). Where the machine refuses the sanitizer (some sandboxed GPU machines
#       do), the steps fail at once and the log says why.
# A device call then is (the Llama benchmark: `run --model llama`):
#   run(command="bash scripts/gpu_check.sh run", carry=[".gpu"], timeout_s=480)
# Knobs for a dry run (tests/system/gpu_check_dry_run.sh): GPU_CHECK_CARRY (the carried
# folder), GPU_CHECK_LIB_DIRS (more library folders, ':'-separated), GPU_CHECK_TEST_LIMIT_S,
# GPU_CHECK_PEER and GPU_CHECK_LLAMA_PEER (the peers' commands), GPU_CHECK_SANITIZER
# (compute-sanitizer's path), GPU_CHECK_SANITIZE_BINARIES (the binaries sanitize runs) and
# GPU_CHECK_NO_DEVICE=1 (skip nvidia-smi); for prepare's (tests/system/gpu_check_configure.sh):
# GPU_CHECK_BUILD (the build folder) and GPU_CHECK_CONFIGURE_ONLY=1 (stop after the configure).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry=${GPU_CHECK_CARRY:-$root/.gpu}
carry_limit_mib=60
# Libraries found on a GPU machine, never carried: glibc's, the C++ runtime, the CUDA toolkit's
# (anything under /usr/local/cuda*), NCCL.
system_libs='/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so'
cuda_libs='^/usr/local/cuda|/lib(cuda|cudart|cublas|cublasLt|nccl)\.so'

# --- prepare (here) ---------------------------------------------------------------------------

# prepare_build BUILD: configures the CUDA build (ccache as the launcher only where it is
# installed: setup.sh does not install it) and builds what the bundle holds.
prepare_build() {
  local build=$1 launcher=()
  "$root/scripts/setup.sh" >/dev/null || return
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=ON \
    -DTRAINER_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=90-real -DBUILD_SHARED_LIBS=ON \
    "${launcher[@]}" > "$build.configure.log" 2>&1 ||
    { tail -n 20 "$build.configure.log"; return 1; }
  local targets
  targets=$(ninja -C "$build" -t targets all | sed -n 's/^\(test_gpu_[a-z_]*\): phony$/\1/p')
  [ -n "$targets" ] || { echo "gpu_check: the build defines no GPU test binaries"; return 1; }
  if [ "${GPU_CHECK_CONFIGURE_ONLY:-0}" = 1 ]; then
    echo "gpu_check: configured $build with GPU test binaries" $targets
    return
  fi
  # shellcheck disable=SC2086 # one target per word
  nice -n 10 ninja -C "$build" -j "$(nproc)" trainer bench_gpu $targets
}

# prepare_stage BUILD STAGE: the binaries into STAGE/bin, the libraries they load into STAGE/lib.
prepare_stage() {
  local build=$1 stage=$2 b lib
  mkdir -p "$stage/bin" "$stage/lib"
  for b in "$build/trainer/trainer" "$build/bench/bench_gpu"; do
    [ -x "$b" ] || { echo "gpu_check: $b was not built"; return 1; }
  done
  for b in "$build"/tests/gpu/test_gpu_* "$build/trainer/trainer" "$build/bench/bench_gpu"; do
    [ -f "$b" ] && [ -x "$b" ] || continue  # not gtest's generated .cmake files
    cp "$b" "$stage/bin/" && strip --strip-unneeded "$stage/bin/$(basename "$b")" || return
    ldd "$b" | awk '/=> \// {print $3}' | grep -vE "$system_libs|$cuda_libs" >> "$stage/libs"
  done
  for lib in $(sort -u "$stage/libs"); do
    cp -L "$lib" "$stage/lib/" && strip --strip-unneeded "$stage/lib/$(basename "$lib")" ||
      return
  done
  rm "$stage/libs"
}

prepare() {
  local build=${GPU_CHECK_BUILD:-$root/build/gpu} size
  mkdir -p "$(dirname "$build")" || exit 1
  prepare_build "$build" || { echo "gpu_check: the CUDA build failed"; exit 1; }
  [ "${GPU_CHECK_CONFIGURE_ONLY:-0}" = 1 ] && exit 0
  stage=$(mktemp -d) && trap 'rm -rf "$stage"' EXIT  # global: the trap runs after prepare
  prepare_stage "$build" "$stage" || exit 1
  rm -rf "$carry" && mkdir -p "$carry" || exit 1
  tar -C "$stage" -cf - bin lib | xz -T2 -6 > "$carry/bundle.tar.xz" || exit 1
  (cd "$stage" && du -b bin/* lib/* | sort -k2) > "$carry/contents.txt"
  size=$(du -sm "$carry" | cut -f1)
  echo "gpu_check: $(ls "$stage/bin" | wc -l) binaries and $(ls "$stage/lib" | wc -l)" \
    "libraries ($(du -sh "$stage" | cut -f1) unpacked) in $carry: $(du -sh "$carry" | cut -f1)"
  [ "$size" -lt "$carry_limit_mib" ] ||
    { echo "gpu_check: $carry is ${size} MiB, over ${carry_limit_mib} MiB"; exit 1; }
}

# --- run (on the GPU machine) -----------------------------------------------------------------

# say MESSAGE...: on stdout and in gpu_check.log.
say() { echo "$*" | tee -a "$OUT/gpu_check.log"; }

# step_limit MAX_S RESERVE_S: the seconds a step may take: at most MAX_S, leaving RESERVE_S of
# GPU_CHECK_LIMIT_S to the steps after it.
step_limit() {
  local limit=$((deadline - SECONDS - $2))
  echo $((limit < $1 ? limit : $1))
}

# run_step NAME MAX_S RESERVE_S LOG COMMAND...: COMMAND under `step_limit MAX_S RESERVE_S` (its
# stdout and stderr appended to LOG after a "=== NAME" line); records NAME's status (ok, failed,
# timed_out, or skipped when it would get under 5 s and under MAX_S) in $work/steps.tsv and
# rewrites the summary. Returns COMMAND's exit status (124 when skipped or cut).
run_step() {
  local name=$1 max_s=$2 limit start code status
  limit=$(step_limit "$2" "$3")
  local log=$4
  shift 4
  echo "=== $name" >> "$log"
  if [ "$limit" -lt 5 ] && [ "$limit" -lt "$max_s" ]; then
    printf '%s\tskipped\t\t0\t%s\n' "$name" "$limit" >> "$work/steps.tsv"
    say "$name: skipped, $((deadline - SECONDS)) s left of GPU_CHECK_LIMIT_S"
    summarize
    return 124
  fi
  start=$SECONDS
  timeout -k 5 "$limit" "$@" >> "$log" 2>&1
  code=$?
  case $code in
    0) status=ok ;;
    124 | 137) status=timed_out ;;
    *) status=failed ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$code" $((SECONDS - start)) "$limit" \
    >> "$work/steps.tsv"
  say "$name: $status (exit $code, $((SECONDS - start)) s of ${limit} s)"
  summarize
  return "$code"
}

# The summary from what the steps left (scripts/gpu_check_summary.py writes it whole, then
# renames it, so gpu_check.json is always the last complete one).
summarize() {
  python3 "$root/scripts/gpu_check_summary.py" "$work" "$OUT" "$limit_s" "$SECONDS" ||
    say "gpu_check: the summary could not be written"
}

# Folders that may hold the CUDA runtime, cuBLAS(Lt) and NCCL: GPU_CHECK_LIB_DIRS, the CUDA
# toolkit's, then the nvidia-* wheels' (nvidia/cu13/lib, nvidia/nccl/lib, ...) of every Python
# path python3 knows and of the usual Python prefixes. Existing ones, once each, in that order.
library_dirs() {
  {
    tr ':' '\n' <<< "${GPU_CHECK_LIB_DIRS:-}"
    [ -z "${CUDA_HOME:-}" ] || printf '%s\n' "$CUDA_HOME/lib64" "$CUDA_HOME/lib"
    printf '%s\n' /usr/local/cuda/lib64 /usr/local/cuda/lib \
      /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib \
      /usr/local/cuda-*/targets/x86_64-linux/lib
    python3 -c '
import glob, os, site, sys
roots = sys.path + site.getsitepackages() + [site.getusersitepackages()]
for root in roots:
    for pattern in ("nvidia/*/lib", "nvidia/*/*/lib"):
        print("\n".join(sorted(glob.glob(os.path.join(root, pattern)))))' 2>/dev/null
    printf '%s\n' /usr/lib/python3*/*-packages/nvidia/*/lib \
      /usr/local/lib/python3*/*-packages/nvidia/*/lib \
      /opt/*/.venv/lib/python3*/*-packages/nvidia/*/lib
  } | awk 'NF && !seen[$0]++' | while read -r d; do [ -d "$d" ] && echo "$d"; done
}

# missing_libraries: "LIBRARY BINARY" for every library a binary needs that the loader does not
# find with LD_LIBRARY_PATH=$lib_path.
missing_libraries() {
  local b
  for b in "$bin"/*; do
    LD_LIBRARY_PATH=$lib_path ldd "$b" 2>&1 |
      awk -v b="$(basename "$b")" '/=> not found/ {print $1, b}'
  done | sort -u
}

# find_libraries: sets lib_path (the LD_LIBRARY_PATH our binaries run with) to the carried
# libraries and each folder of library_dirs that holds a library the loader lacks, until none is
# missing; writes `ldd` of every binary to $OUT/ldd.txt. Fails, naming what is missing.
find_libraries() {
  local dirs lib d added=1 missing
  mapfile -t dirs < <(library_dirs)
  lib_path=$libdir
  while [ $added -eq 1 ]; do  # a library found can need another (cuBLAS needs cuBLASLt)
    added=0
    for lib in $(missing_libraries | cut -d' ' -f1 | sort -u); do
      for d in "${dirs[@]}"; do
        [ -e "$d/$lib" ] && [[ ":$lib_path:" != *":$d:"* ]] || continue
        lib_path+=":$d" && added=1 && break
      done
    done
  done
  for b in "$bin"/*; do
    echo "=== $(basename "$b") (LD_LIBRARY_PATH=$lib_path)"
    LD_LIBRARY_PATH=$lib_path ldd "$b" 2>&1
  done > "$OUT/ldd.txt"
  printf '%s\n' "${dirs[@]}" > "$work/library_dirs.txt"
  tr ':' '\n' <<< "$lib_path" > "$work/library_path.txt"
  missing_libraries > "$work/missing.txt"
  [ -s "$work/missing.txt" ] || return 0
  say "gpu_check: stopped before running anything: these libraries were found nowhere"
  awk '{need[$1] = need[$1] (need[$1] ? ", " : "") $2}
       END {for (l in need) print "  " l " (needed by " need[l] ")"}' "$work/missing.txt" |
    sort | tee -a "$OUT/gpu_check.log"
  say "searched: the loader's default folders, ${dirs[*]:-no other folder}" \
    "(add folders with GPU_CHECK_LIB_DIRS=dir1:dir2; ldd.txt has the details)"
  return 1
}

# unpack: the carried binaries and libraries into $work (bin, libdir). A carried folder with bin/
# and lib/ instead of the bundle is used as it is.
unpack() {
  if [ -f "$carry/bundle.tar.xz" ]; then
    mkdir -p "$work/carry" && xz -dc "$carry/bundle.tar.xz" | tar -C "$work/carry" -xf - ||
      { say "gpu_check: could not unpack $carry/bundle.tar.xz"; return 1; }
    bin=$work/carry/bin libdir=$work/carry/lib
  elif [ -d "$carry/bin" ]; then
    bin=$carry/bin libdir=$carry/lib
  else
    say "gpu_check: no $carry/bundle.tar.xz: run scripts/gpu_check.sh prepare and carry .gpu"
    return 1
  fi
}

run_tests() {
  local b
  for b in "$bin"/test_gpu_*; do
    run_step "test $(basename "$b")" "${GPU_CHECK_TEST_LIMIT_S:-120}" 200 "$OUT/tests.log" \
      env LD_LIBRARY_PATH="$lib_path" "$b"
  done
}

# The tiny model, 20 steps, on the CPU and on the GPU, both fp32 with dropout on.
run_training() {
  local run=(env LD_LIBRARY_PATH="$lib_path" "$bin/trainer")
  run_step "train data" 60 150 "$OUT/tests.log" "${run[@]}" prepare-data --synthetic \
    --num-tokens 200000 --output-prefix "$work/data" || return
  local flags=(--config "$root/configs/tiny.yaml" --set data.path="$work/data"
               --set train.steps=20 --set optimizer.lr_warmup_steps=5 --set train.eval_interval=0
               --set output.export=false --set model.hidden_dropout=0.1
               --set model.attention_dropout=0.1 --set train.log_interval=1
               --set train.precision=fp32)
  run_step "train cpu" 120 150 "$OUT/tests.log" "${run[@]}" train "${flags[@]}" \
    --set output.dir="$work/cpu"
  run_step "train gpu" 120 150 "$OUT/tests.log" "${run[@]}" train "${flags[@]}" \
    --set output.dir="$work/gpu" --set train.device=cuda
}

# bench_gpu (at most 240 s, leaving 90 s), then the PyTorch peer on the same model in what is
# left (at most 150 s): gpt_torch.py, or with --model llama llama_torch.py (configs/
# llama_1b_gpu.yaml's shape). Both rewrite their JSON as they go, so a cut only shortens them.
run_benchmarks() {
  local limit preset=1.3b peer
  limit=$(step_limit 240 90)
  run_step bench_gpu 240 90 "$OUT/bench_gpu.log" env LD_LIBRARY_PATH="$lib_path" \
    "$bin/bench_gpu" "$OUT/bench_gpu.json" --time-limit-s $((limit > 25 ? limit - 15 : 10)) "$@"
  if [[ " $* " == *" --model llama "* ]]; then
    preset=1b
    read -ra peer <<< "${GPU_CHECK_LLAMA_PEER:-python3 $root/bench/peers/llama_torch.py}"
  else
    read -ra peer <<< "${GPU_CHECK_PEER:-python3 $root/bench/peers/gpt_torch.py}"
  fi
  [[ " $* " != *" --quick "* ]] || preset=quick
  limit=$(step_limit 150 0)
  run_step "bench pytorch" 150 0 "$OUT/bench_peers.log" "${peer[@]}" "$OUT/bench_peers.json" \
    --preset "$preset" --time-limit-s $((limit > 25 ? limit - 15 : 10))
}

# compute-sanitizer's tools over the kernel tests, each run a step (at most 150 s).
run_sanitizer() {
  local sanitizer tool b
  sanitizer=${GPU_CHECK_SANITIZER:-$(command -v compute-sanitizer ||
    ls /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
      2>/dev/null | head -1)}
  [ -n "$sanitizer" ] || { say "gpu_check: no compute-sanitizer on this machine"; return 1; }
  for tool in memcheck racecheck initcheck synccheck; do
    for b in ${GPU_CHECK_SANITIZE_BINARIES:-test_gpu_kernel_paths test_gpu_op_twins}; do
      run_step "sanitize $tool $b" 150 0 "$OUT/sanitize.log" env LD_LIBRARY_PATH="$lib_path" \
        "$sanitizer" --tool "$tool" --error-exitcode 1 "$bin/$b"
    done
  done
}

# The step-time model on the 1.3B config: one calibration, then each preset and the planner with
# its profile, a step (at most 120 s) each; predict.json: predicted against measured step_ms.
run_predictions() {
  local run=(env LD_LIBRARY_PATH="$lib_path" "$bin/trainer") name
  local flags=(--config "$root/configs/gpt_1p3b_gpu.yaml" --set data.path="$work/data"
               --set train.global_batch_size=16 --set train.steps=6 --set train.eval_interval=0
               --set train.log_interval=1 --set output.export=false --set 'checkpoint.dir=""'
               --set checkpoint.interval=0 --set optimizer.lr_warmup_steps=0)
  run_step "predict data" 60 0 "$OUT/predict.log" "${run[@]}" prepare-data --synthetic \
    --num-tokens 2000000 --output-prefix "$work/data" || return
  run_step "predict calibrate" 120 0 "$OUT/predict.log" "${run[@]}" calibrate "${flags[@]}" \
    --out "$OUT/time_profile.json" || return
  declare -A presets=(
    [none]="--set recompute.granularity=none"
    [selective]="--set recompute.granularity=selective"
    [full]="--set recompute.granularity=full --set recompute.method=uniform --set recompute.num_layers=1"
    [auto40]="--set recompute.auto=true --set train.memory_budget_gib=40")
  for name in none selective full auto40; do
    # shellcheck disable=SC2086
    run_step "predict $name" 120 0 "$OUT/predict.log" "${run[@]}" train "${flags[@]}" \
      --set train.time_profile="$OUT/time_profile.json" --set output.dir="$work/predict-$name" \
      ${presets[$name]}
  done
  python3 - "$work" "$OUT/predict.json" <<'PY' | tee -a "$OUT/predict.log"
import glob, json, os, statistics, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "predict-*", "metrics.jsonl"))):
    lines = [json.loads(l) for l in open(path)][1:]
    if not lines:
        continue
    measured = statistics.median(l["step_ms"] for l in lines)
    predicted = lines[0]["predicted_step_ms"]
    name = os.path.basename(os.path.dirname(path))[len("predict-"):]
    rows[name] = {"predicted_step_ms": predicted, "step_ms": measured,
                  "error": predicted / measured - 1, "mfu_percent": lines[-1]["mfu_percent"]}
    print(f"{name}: predicted {predicted:.1f} ms, measured {measured:.1f} ms "
          f"({100 * (predicted / measured - 1):+.1f}%)")
json.dump(rows, open(sys.argv[2], "w"), indent=1)
PY
}

# run_on_device MODE [BENCH_OPTION...]: MODE run (tests, training, benchmarks) or sanitize.
run_on_device() {
  : "${OUT:?run on the device machine, where OUT is set}"
  local mode=$1
  shift
  limit_s=${GPU_CHECK_LIMIT_S:-460} deadline=$((SECONDS + ${GPU_CHECK_LIMIT_S:-460}))
  work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
  : > "$OUT/gpu_check.log" && : > "$work/steps.tsv"
  if [ "${GPU_CHECK_NO_DEVICE:-0}" = 1 ]; then
    echo "none (GPU_CHECK_NO_DEVICE=1)" > "$work/device.txt"
  else
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
      > "$work/device.txt" 2>&1
  fi
  say "device: $(head -1 "$work/device.txt")"
  unpack && find_libraries || { summarize; return 3; }
  say "libraries: LD_LIBRARY_PATH=$lib_path (ldd.txt)"
  if [ "$mode" = sanitize ]; then
    run_sanitizer || { summarize; return 1; }
  elif [ "$mode" = predict ]; then
    run_predictions
  else
    run_tests
    run_training
    run_benchmarks "$@"
  fi
  summarize
  python3 -m json.tool "$OUT/gpu_check.json" > /dev/null ||
    say "gpu_check: $OUT/gpu_check.json is not valid JSON"
  python3 "$root/scripts/gpu_check_summary.py" --brief "$OUT/gpu_check.json"
  awk -F"\t" '$2 != "ok" {bad = 1} END {exit bad}' "$work/steps.tsv"
}

case "${1:-}" in
  prepare) prepare ;;
  run) shift; run_on_device run "$@" ;;
  sanitize) run_on_device sanitize ;;
  predict) run_on_device predict ;;
  *) echo "usage: scripts/gpu_check.sh prepare | run [BENCH_OPTION...] | predict | sanitize"; exit 2 ;;
esac
