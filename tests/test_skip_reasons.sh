#!/usr/bin/env bash
# scripts/test.sh prints why each skipped test skipped (ctest itself says only
# "***Skipped"): a toy ctest project with a test that skips with a reason, one
# that skips silently and one that passes, through scripts/skip_reasons.sh.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(toy NONE)
enable_testing()
add_test(NAME lab_why COMMAND bash -c "echo starting; echo 'lab_why: promtool missing (run scripts/setup.sh)' >&2; exit 77")
add_test(NAME lab_mute COMMAND bash -c "exit 77")
add_test(NAME fine COMMAND true)
set_tests_properties(lab_why lab_mute PROPERTIES SKIP_RETURN_CODE 77)
CM
cmake -S "$TMP" -B "$TMP/b" >/dev/null || { echo "cmake failed"; exit 1; }
ctest --test-dir "$TMP/b" >"$TMP/out" 2>&1
bash "$ROOT/scripts/skip_reasons.sh" "$TMP/out" "$TMP/b/Testing/Temporary/LastTest.log" >"$TMP/why"
cat "$TMP/why"
fail=0
grep -qx '  lab_why: lab_why: promtool missing (run scripts/setup.sh)' "$TMP/why" || { echo "not ok - the reason of lab_why"; fail=1; }
grep -qx '  lab_mute: (printed no reason)' "$TMP/why" || { echo "not ok - a silent skip said so"; fail=1; }
grep -q 'fine' "$TMP/why" && { echo "not ok - a passing test listed"; fail=1; }
exit $fail
