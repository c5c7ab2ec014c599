#!/usr/bin/env bash
# The cluster lab's quick form (python3 -m psplab cluster --quick, < 3 min)
# in CI. Real-time figures (rates, completion times, drops at the
# bottleneck) are printed, not asserted: this VM's timers and other work
# make them noise. Asserted, for what is deterministic:
#   - every run of the 2-to-2 (§5.3, pspxdp+pspxdp and tbf+tbf) and of the
#     all-to-all (none, tbf, pspxdp) ran and moved data, with no sender
#     error (every byte of every all-to-all transfer arrived: the sender
#     waits for the sink's close);
#   - pspxdp's counters account for every frame on every paced host: each
#     frame the class took was sent, dropped (counted) or is queued, each
#     frame TC handed it was taken, lost in the rings (counted) or passed
#     unpaced (counted); no UMEM accounting failure;
#   - the pspxdp group runs (when the build has `pspxdp group` and etcd is
#     installed): `pspxdp group check` replays every host's applied-rate log
#     against the budget: 0 violations;
#   - the simulation at 10-60 hosts: the checker finds 0 violations of
#     the budget and every demand step converged;
#   - the results were written (CSV, PNG, README.md per experiment).
# Exit 77 = skipped (not root / not built / no matplotlib).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
source "$ROOT/lab/netns.sh"
psp_require test_cluster_lab "$PSPXDP" "$DELAY" "$BUILD_DIR/lab/psp_cluster_scale" -- tc iperf3 ethtool ping
PYTHON=${PYTHON:-/usr/bin/python3}
$PYTHON -c 'import matplotlib' 2>/dev/null ||
    { echo "test_cluster_lab: python3-matplotlib missing (run scripts/setup.sh)" >&2; exit 77; }
psp_begin clab
PYTHONPATH="$ROOT/lab" BUILD_DIR="$BUILD_DIR" $PYTHON -m psplab cluster --quick --json \
    --out "$TMP/results" >"$TMP/summary.json"
rc=$?
psp_check "python3 -m psplab cluster --quick ran (exit $rc)" test $rc -eq 0
psp_verdict $PYTHON "$HERE/verdict_cluster_lab.py" "$TMP/summary.json" "$TMP/results"
psp_finish
