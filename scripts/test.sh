#!/usr/bin/env bash
# Sets up, builds and runs every test: unit, BPF (bpf_prog_test_run) and the netns lab.
# Needs root for the BPF and lab tests; without it they report "skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --lint # ruff too: lint_python runs it
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure "$@"
