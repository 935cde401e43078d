#!/usr/bin/env bash
# Installs the Debian packages the trainer builds with and its scripts and script tests use
# (python3, python3-matplotlib for scripts/plot.py, python3-numpy for the Llama reference,
# python3-protobuf for the TensorBoard test's decoder, xz; node and python3-sentencepiece for
# the tokenizer references), when they are missing; then the npm reference tokenizers into
# .references/ (scripts/references/package.json). Idempotent; prints what it does. Needs root
# (or sudo) only when something is missing; the npm step only warns when the registry is
# unreachable.
set -euo pipefail

packages=(g++ cmake ninja-build pkg-config libgtest-dev libyaml-cpp-dev libopenblas-dev
          libopenmpi-dev openmpi-bin python3 python3-matplotlib python3-numpy python3-protobuf
          xz-utils libpcre2-dev libutf8proc-dev zlib1g-dev libzstd-dev libsentencepiece-dev
          nlohmann-json3-dev python3-sentencepiece zstd)
# node and npm: Debian's, unless a node with npm is already installed (e.g. NodeSource's).
if ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

root=$(cd "$(dirname "$0")/.." && pwd)
references="$root/.references"
if [ ! -f "$references/package.json" ] || ! cmp -s "$root/scripts/references/package.json" "$references/package.json" \
    || [ ! -d "$references/node_modules/tiktoken" ]; then
  mkdir -p "$references"
  cp "$root/scripts/references/package.json" "$references/package.json"
  if (cd "$references" && npm install --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
    echo "setup: reference tokenizers installed in .references/"
  else
    echo "setup: warning: npm install of the reference tokenizers failed; their tests will skip"
  fi
else
  echo "setup: reference tokenizers present"
fi
echo "setup: done"
