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
psp_verdict $PYTHON - "$TMP/summary.json" "$TMP/results" <<'PY'
import glob, json, sys
def check(what, ok):
    print(("ok   - " if ok else "FAIL - ") + what)
d = json.load(open(sys.argv[1]))
pair = d.get("pair", [])
combos = sorted({r["combo"] for r in pair})
check(f"2-to-2: the shaper pairs ran ({', '.join(combos)})", len(combos) >= 2 and len(pair) == 2 * len(combos))
for r in pair:
    print(f"     2-to-2 {r['combo']}, host {r['host']} ({r['shaper']}): {r['both_on_bps']/1e6:.1f} Mbit/s "
          f"while both on, {r['retransmits']} retransmits, bottleneck drops {r['bottleneck_drops']}")
    check(f"2-to-2 {r['combo']}, host {r['host']}: data through", r["mean_bps"] > 0)
    if r["shaper"] == "pspxdp":
        check(f"2-to-2 {r['combo']}, host {r['host']}: pspxdp's counters account for every frame",
              r["accounted"] is True)
a2a = d.get("alltoall", [])
check(f"all-to-all: {len(a2a)} shapers ran ({', '.join(r['shaper'] for r in a2a)})", len(a2a) >= 2)
for r in a2a:
    print(f"     all-to-all {r['shaper']}: {r['mean_s']:.2f} s per round {r['completion_s']}, bottleneck "
          f"drops {r['bottleneck_drops']}, retransmits {r['retransmits']}")
    check(f"all-to-all {r['shaper']}: every round complete, every byte delivered (no sender error)",
          r["sender_errors"] == 0 and len(r["completion_s"]) == r["rounds"])
    if r["shaper"].startswith("pspxdp"):
        check(f"all-to-all {r['shaper']}: pspxdp's counters account for every frame on every host",
              r["accounted"] is True)
dyn = d.get("dynamic", {})
if "skipped" in dyn:
    print(f"skip - pspxdp group (dynamic): {dyn['skipped']}")
else:
    print(f"     dynamic: {dyn.get('verdict')}, bottleneck drops {dyn.get('bottleneck_drops')}")
    for r in dyn.get("changes", []):
        print(f"     dynamic t={r['t_s']} s {r['change']}: converged {r['converge_ms']} ms, utilisation "
              f"{r['utilisation']}, fairness {r['fairness']}")
    check(f"pspxdp group: the checker's verdict over every host's applied-rate log: "
          f"{dyn.get('violations')} violations", dyn.get("violations") == 0)
    check("pspxdp group: pspxdp's counters account for every frame on every host", dyn.get("accounted") is True)
for r in a2a:
    if r["violations"] is not None:
        check(f"all-to-all {r['shaper']}: the checker's verdict: {r['violations']} violations",
              r["violations"] == 0)
scale = [r for r in d.get("scale", []) if not r.get("estimated")]
check(f"scale: the simulation ran at {[r['hosts'] for r in scale]} hosts", len(scale) >= 2)
for r in scale:
    print(f"     scale {r['hosts']} hosts: {r['writes_per_s']:.1f} etcd writes/s, converge p95 "
          f"{r['converge_p95_ms']} ms, allocate() {r['allocate_us']:.0f} us")
    check(f"scale {r['hosts']} hosts: 0 violations of the budget ({r['violations']}), every step "
          f"converged ({r['steps']} steps)", r["violations"] == 0 and r["converge_max_ms"] is not None)
res = sys.argv[2]
pngs, readmes = glob.glob(f"{res}/cluster-*/*.png"), glob.glob(f"{res}/cluster-*/README.md")
check(f"results written: {len(pngs)} plots, {len(readmes)} README.md", len(pngs) >= 3 and len(readmes) >= 3)
PY
psp_finish
