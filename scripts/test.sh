#!/usr/bin/env bash
# Sets up, builds and runs every test: unit, BPF (bpf_prog_test_run) and the netns lab.
# Needs root for the BPF and lab tests; without it they report "skipped".
# ctest says "***Skipped" without the reason: each skipped test's reason (the
# last line it printed) follows ctest's summary, and is in ctest's log.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --lint # ruff too: lint_python runs it
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
set +e
ctest --test-dir "$BUILD_DIR" --output-on-failure "$@" | tee "$BUILD_DIR/ctest.out"
rc=${PIPESTATUS[0]}
set -e
bash scripts/skip_reasons.sh "$BUILD_DIR/ctest.out" "$BUILD_DIR/Testing/Temporary/LastTest.log"
exit "$rc"
