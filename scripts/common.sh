#!/usr/bin/env bash
# Shared by the scripts: repo root, build helpers and the root-safe mpirun flags.
# Source it. The trainer chooses its own OpenMP wait policy (Note [OpenMP wait policy] in
# runtime/openmp_wait.cpp); an OMP_WAIT_POLICY set by the caller wins.
repo_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

# configure_and_build BUILD_DIR [TARGET...]: Release build of the targets (all when none).
configure_and_build() {
  local build_dir=$1; shift
  cmake -S "$(repo_root)" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  if [ $# -gt 0 ]; then
    cmake --build "$build_dir" --parallel "$(nproc)" --target "$@"
  else
    cmake --build "$build_dir" --parallel "$(nproc)"
  fi
}

# run_benchmark TARGET JSON [ARGS...]: sets up, builds bench/TARGET (Release), prints the
# machine, and runs it from the repo root writing JSON.
run_benchmark() {
  local target=$1 json=$2; shift 2
  local root; root=$(repo_root)
  "$root/scripts/setup.sh" >/dev/null
  configure_and_build "$root/build/release" "$target" >/dev/null
  cd "$root"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  "$root/build/release/bench/$target" "$json" "$@"
}

# trainer_and_corpus NUM_TOKENS: sets up, builds the Release trainer, and makes a scratch folder
# (removed on exit) holding the synthetic corpus `data` of NUM_TOKENS tokens; sets $trainer and
# $work. For the benchmarks that train on the generated corpus.
trainer_and_corpus() {
  local root; root=$(repo_root)
  "$root/scripts/setup.sh" >/dev/null
  configure_and_build "$root/build/release" trainer >/dev/null
  trainer="$root/build/release/trainer/trainer"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$trainer" prepare-data --synthetic --num-tokens "$1" --output-prefix "$work/data" >/dev/null
}

# corpus_benchmark NUM_TOKENS [STEPS] [REPEATS] <<'PY' ... PY: trainer_and_corpus NUM_TOKENS,
# the machine line, then the Python program on stdin with scripts/ on its path; it reads the
# run's root, trainer, work, steps (default 6), repeats (default 3) and mpirun flags from
# bench_args.py. For the benchmarks that compare the trainer's predictions with its runs.
corpus_benchmark() {
  local tokens=$1 steps=${2:-6} repeats=${3:-3}
  local root; root=$(repo_root)
  trainer_and_corpus "$tokens" </dev/null
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
    "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
  PYTHONPATH="$root/scripts" /usr/bin/python3 - "$root" "$trainer" "$work" "$steps" "$repeats" \
    "$(mpirun_flags)"
  echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# mpirun with the flags this machine needs: root is allowed, ranks may exceed cores.
mpirun_flags() {
  local flags=(--oversubscribe --bind-to none)
  if [ "$(id -u)" -eq 0 ]; then flags+=(--allow-run-as-root); fi
  echo "${flags[@]}"
}
