#!/usr/bin/env bash
# Installs the Debian packages the trainer builds with and its scripts and script tests use
# (python3, python3-matplotlib for scripts/plot.py, python3-protobuf for the TensorBoard
# test's decoder, xz), when they are missing.
# Idempotent; prints what it does. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(g++ cmake ninja-build pkg-config libgtest-dev libyaml-cpp-dev libopenblas-dev
          libopenmpi-dev openmpi-bin python3 python3-matplotlib python3-numpy python3-protobuf
          xz-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
