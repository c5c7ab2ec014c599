#!/usr/bin/env bash
# The lab's quick set (lab/lab.sh, the README's main command) in CI: pspxdp,
# tbf, htb and no shaping side by side on one veth wire, and TCP through the
# bottleneck. Asserts the pacer's side only, on the byte clock (this VM's
# timers make real-time figures noise, and the comparison is reported, not
# asserted): for every paced class, in the one-flow and the three-flow runs,
#   - max burstiness at the class rate <= 2 MTU;
#   (a run where frames passed unpaced - fail-open after a daemon stall past
#   its 100 ms heartbeat, i.e. timing - or where a class got no frame through
#   while the daemon reported itself late - starved of CPU, its rings
#   overflowing, counted in "lost" - is reported, not judged; with no class
#   judged at all the set runs again, at most LAB_QUICK_RUNS times (default
#   3) and not past 480 s, and then fails with those figures: a machine too
#   loaded to judge anything is a failure, not a skip)
#   - while the class stayed backlogged (its sender kept up, see below): the
#     measured mean within 0.01 % of the class rate, max burstiness at the
#     window's mean <= 3 MTU (it adds the lateness difference of the window's
#     two ends);
#   - the capture is complete, and every row of the comparison was measured.
# Run as scripts/run.sh runs it (no --out): the results go to the scratch
# folder $BUILD_DIR/results, and the checkout is left as it was (git status
# --porcelain the same before and after: the committed docs/results/ are
# written only with --publish). This run's results are removed after (kept,
# with the raw files, on failure).
# Exit 77 = skipped (not root / not built).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
OUT=$(mktemp)
KEEP=$(mktemp -d /tmp/psp-lab-test.XXXXXX)
trap 'rm -f "$OUT"' EXIT
RESULTS=$(cd "${BUILD_DIR:-$HERE/../../build}" && pwd)/results
mkdir -p "$RESULTS"
mapfile -t EARLIER < <(ls "$RESULTS")
TREE=$(git -C "$HERE/../.." status --porcelain 2>&1)
RUNS=${LAB_QUICK_RUNS:-3}
T0=$SECONDS
judged=0 loaded="" took=0 ran=0
# This run's results (folders that were not there before; a folder of the
# same date and experiment was overwritten, and stays).
remove_results() {
    local dir
    for dir in "$RESULTS"/*/; do
        dir=${dir%/}
        [[ " ${EARLIER[*]} " == *" ${dir##*/} "* ]] || rm -rf "$dir"
    done
}
for ((run = 1; run <= RUNS; run++)); do
    # Not a run that would end past the ctest timeout (600 s).
    ((run > 1 && SECONDS - T0 + took > 480)) && break
    t_run=$SECONDS
    rm -rf "$KEEP/raw"
    bash "$HERE/../../lab/lab.sh" --json --keep "$KEEP/raw" >"$OUT"
    rc=$?
    took=$((SECONDS - t_run)) ran=$run
    [[ $rc -eq 77 ]] && { rm -rf "$KEEP"; exit 77; }
    NOW=$(git -C "$HERE/../.." status --porcelain 2>&1)
    psp_check "run $run: the checkout as it was (git status --porcelain unchanged)" test "$NOW" == "$TREE" ||
        diff <(echo "$TREE") <(echo "$NOW")
    psp_check "run $run: lab.sh ran (exit $rc)" test $rc -eq 0 || break
    psp_verdict /usr/bin/python3 "$HERE/verdict_lab_quick.py" "$OUT" "$RESULTS" "$KEEP/judged"
    ((PSP_FAILS)) && break
    { read -r judged; read -r why; } <"$KEEP/judged"
    ((${judged:-0} > 0)) && break
    loaded+="${loaded:+; }run $run: ${why:-no pspxdp class judged}"
    echo "     run $run judged no pspxdp class (the machine's load): ${why:-no figures}"
    remove_results
done
if ((PSP_FAILS)); then
    echo "results and raw files (captures, logs) kept in $KEEP"
    psp_finish
    exit
fi
rm -rf "$KEEP"
remove_results
psp_check "a pspxdp class judged in $ran run(s) (at most $RUNS)${loaded:+; too loaded to judge: $loaded}" \
    test "${judged:-0}" -gt 0
psp_finish
