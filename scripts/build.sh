#!/usr/bin/env bash
# Configures and builds everything (BPF objects, skeletons, userspace, tests, benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
WERROR=OFF; [[ -n "${CI:-}" ]] && WERROR=ON
cmake -S . -B "$BUILD_DIR" -G Ninja -DPSPXDP_WERROR=$WERROR >/dev/null
cmake --build "$BUILD_DIR" -- -k 0
