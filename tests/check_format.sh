#!/usr/bin/env bash
# Every tracked C and C++ source is as .clang-format (Debian 12's
# clang-format 14) lays it out. A difference fails, naming file and line:
# `clang-format -i FILE` mends it. Exit 77 = skipped (no clang-format, or
# not a git checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format missing (run scripts/setup.sh)" >&2; exit 77; }
files=$(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' 2>/dev/null) || { echo "format: not a git checkout" >&2; exit 77; }
# shellcheck disable=SC2086 # one word a file (no spaces in the tree's names)
clang-format --dry-run --Werror $files
echo "format: $(wc -w <<<"$files") files as .clang-format lays them out"
