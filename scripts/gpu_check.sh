#!/usr/bin/env bash
# The GPU check, in two halves so no device minute is spent building:
#   scripts/gpu_check.sh prepare   (here, no GPU needed) builds the CUDA backend and its
#                                  gpu-labelled test binaries, and copies them with the
#                                  non-CUDA shared libraries they load into .gpu/ (git-ignored),
#                                  checking the size against the device tool's 64 MiB carry limit.
#   scripts/gpu_check.sh run       (on the GPU machine, from the repo root, with .gpu carried)
#                                  runs every GPU test binary, each under a time limit, and writes
#                                  one log per binary plus a JSON summary (tests passed/failed/skipped per
#                                  binary, device name) under $OUT.
# A device call then is:  run(command="bash scripts/gpu_check.sh run", carry=[".gpu"], timeout_s=480)
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
  for b in $binaries; do
    cp "$b" "$carry/bin/"
    # Shared libraries outside the CUDA toolkit (the GPU machine has CUDA, cuBLASLt, NCCL).
    ldd "$b" | awk '/=> \// {print $3}' | grep -vE 'libcuda|libcudart|libcublas|libnccl|/libc\.so|/libm\.so|ld-linux|libpthread|libdl|librt' \
      | while read -r lib; do cp -L "$lib" "$carry/lib/" 2>/dev/null || true; done
  done
  local size
  size=$(du -sm "$carry" | cut -f1)
  echo "gpu_check: $(ls "$carry/bin" | wc -l) binaries and $(ls "$carry/lib" | wc -l) libraries in .gpu (${size} MiB)"
  [ "$size" -lt 60 ] || { echo "gpu_check: .gpu is ${size} MiB, over the device tool's carry limit"; exit 1; }
  grep -qx '/.gpu/' "$root/.git/info/exclude" 2>/dev/null || true
}

run_on_device() {
  : "${OUT:?run on the device machine, where OUT is set}"
  export LD_LIBRARY_PATH="$carry/lib:${LD_LIBRARY_PATH:-}" OMP_WAIT_POLICY=passive
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/device.txt" 2>&1 || true
  local summary="$OUT/gpu_check.json" first=1
  echo "{\"device\": \"$(head -1 "$OUT/device.txt" | tr -d '"')\", \"binaries\": [" > "$summary"
  for b in "$carry"/bin/test_gpu_*; do
    local name log code
    name=$(basename "$b")
    log="$OUT/$name.log"
    set +e
    timeout 120 "$b" > "$log" 2>&1
    code=$?
    set -e
    [ $first -eq 1 ] || echo "," >> "$summary"
    first=0
    printf '{"binary": "%s", "exit_code": %d, "passed": %d, "failed": %d, "skipped": %d}' "$name" "$code" \
      "$(grep -c '^\[       OK \]' "$log")" "$(grep -c '^\[  FAILED  \]' "$log")" \
      "$(grep -c '^\[  SKIPPED \]' "$log")" >> "$summary"
    echo "$name: exit $code"
  done
  echo "]}" >> "$summary"
  cat "$summary"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run_on_device ;;
  *) echo "usage: scripts/gpu_check.sh prepare|run"; exit 2 ;;
esac
