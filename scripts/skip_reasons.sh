#!/usr/bin/env bash
# skip_reasons.sh CTEST_OUTPUT LAST_TEST_LOG: for every test ctest reported
# "***Skipped", its reason: the last line of its output in ctest's log
# (Testing/Temporary/LastTest.log). A skip without a line says so.
set -u
out=$1 log=$2
mapfile -t skipped < <(sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*\*\*\*Skipped.*/\1/p' "$out")
((${#skipped[@]})) || exit 0
echo "Skipped, and why:"
for t in "${skipped[@]}"; do
    why=$(awk -v t="$t" '
        $0 ~ "^[0-9]+/[0-9]+ Test: " t "$" { on = 1; next }
        on && /^Output:$/ { getline; cap = 1; next }
        cap && /^<end of output>$/ { print last; exit }
        cap && NF { last = $0 }' "$log")
    echo "  $t: ${why:-(printed no reason)}"
done
