#!/usr/bin/env bash
# Train on a config: scripts/train.sh [CONFIG.yaml] [--np N] [--set key=value ...]
# Sets up, builds (Release) if needed, prepares the synthetic default corpus when
# the config uses it and it is missing, then launches `trainer train` with mpirun.
set -euo pipefail
source "$(dirname "$0")/common.sh"
root=$(repo_root)
config="$root/configs/tiny.yaml"
np=""
if [ $# -gt 0 ] && [[ "$1" != --* ]]; then config=$1; shift; fi
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

"$root/scripts/setup.sh"
configure_and_build "$root/build/release" trainer
trainer="$root/build/release/trainer/trainer"

# The bundled configs train on a generated corpus under data/; make it once (block or flow
# style: `path: data/synthetic` or `data: {path: data/synthetic, ...}`).
# A `--set data.path=...` override replaces the config's path (the last one wins).
data_path=$(grep -v '^ *#' "$config" | grep -o 'path: *data/synthetic[^ ,}]*' | head -1 |
  sed 's/^path: *//' || true)
for ((i = 0; i + 1 < ${#args[@]}; ++i)); do
  if [ "${args[i]}" = --set ] && [[ "${args[i + 1]}" == data.path=* ]]; then
    data_path=${args[i + 1]#data.path=}
    [[ "$data_path" == data/synthetic* ]] || data_path=""
  fi
done
if [ -n "$data_path" ] && [ ! -f "$root/$data_path.idx" ]; then
  (cd "$root" && "$trainer" prepare-data --synthetic --output-prefix "$data_path")
fi

# Ranks: --np N, else 1 (the trainer checks N against tensor x context x pipeline x data).
np=${np:-1}
cd "$root"
exec mpirun $(mpirun_flags) -np "$np" "$trainer" train --config "$config" "${args[@]+"${args[@]}"}"
