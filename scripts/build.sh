#!/usr/bin/env bash
# Configures and builds everything (BPF objects, skeletons, userspace, tests, benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# -Werror always: a local build rejects what CI rejects (the CMake option
# stays OFF by default for packagers building with other compilers).
# ccache, when installed, shares compiled objects between checkouts (a
# developer's worktrees); CI starts without it and builds everything.
LAUNCHER=()
if command -v ccache >/dev/null; then
    export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
    LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DPSPXDP_WERROR=ON "${LAUNCHER[@]}" >/dev/null
cmake --build "$BUILD_DIR" -- -k 0
