#!/usr/bin/env bash
# The pspxdp lab: two network namespaces joined by a veth "wire". pspxdp is
# attached to the sender's end; three paced UDP classes are each offered more
# than their rate, and a greedy unclassified flow fills the rest through the
# default (normal) class. Everything arriving on the receiver's end is
# captured, PAUSE gap frames included, and judged with `pspxdp analyze` on
# the byte clock. Prints a per-class table (or JSON with --json).
#
#   lab/lab.sh [--line-rate RATE] [--seconds S] [--json] [--keep DIR]
#
# Everything it creates carries the prefix psp-lab / psl and is removed on
# exit, even on failure. Traffic only flows between its own namespaces.
set -u

usage() {
    cat <<EOF
usage: lab/lab.sh [--line-rate RATE] [--seconds S] [--json] [--keep DIR]
  --line-rate RATE  the wire rate M given to pspxdp attach (default 1gbit)
  --seconds S       how long each sender runs (default 3)
  --json            print one JSON object instead of the table
  --keep DIR        keep the capture, logs and reports in DIR
EOF
}

LINE_RATE=1gbit
SECONDS_RUN=3
JSON=0
KEEP=
while (($#)); do
    case $1 in
    --line-rate) LINE_RATE=${2:?--line-rate needs RATE}; shift 2 ;;
    --seconds) SECONDS_RUN=${2:?--seconds needs S}; shift 2 ;;
    --json) JSON=1; shift ;;
    --keep) KEEP=${2:?--keep needs DIR}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "lab: unknown argument \"$1\"" >&2; usage >&2; exit 2 ;;
    esac
done
[[ $SECONDS_RUN =~ ^[0-9]+$ ]] && ((SECONDS_RUN >= 1 && SECONDS_RUN <= 60)) ||
    { echo "lab: --seconds must be a whole number in 1..60" >&2; exit 2; }

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=${BUILD_DIR:-$HERE/../build}
PSPXDP=${PSPXDP:-$BUILD_DIR/user/pspxdp}
TRAFFIC=${TRAFFIC:-$BUILD_DIR/lab/psp_traffic}
source "$HERE/netns.sh"
psp_require lab "$PSPXDP" "$TRAFFIC" -- ip tcpdump nstat python3 nsenter

TAG=psp-lab$$
SRC=$TAG-s
DST=$TAG-d
DEV=psl$$a   # the sender's end of the wire: what pspxdp paces
PEER=psl$$b  # the receiver's end
N="nsenter --net=/run/netns/$SRC"
D="nsenter --net=/run/netns/$DST"
WORK=$(mktemp -d /tmp/psp-lab.XXXXXX)
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    psp_teardown "$PSPXDP" $SRC $DST $DEV
    if [[ -n $KEEP ]]; then
        mkdir -p "$KEEP" && cp -a "$WORK"/. "$KEEP"/
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "lab: $*" >&2; exit 1; }
say() { ((JSON)) || echo "$*" >&2; }

# --- the wire
psp_make_wire $SRC $DST $DEV $PEER 10.77.0 || die "cannot build the wire"

# --- pspxdp
say "attaching pspxdp to $DEV at $LINE_RATE ..."
$N "$PSPXDP" attach $DEV --line-rate "$LINE_RATE" --queues 8 >"$WORK/attach.log" 2>&1 ||
    die "attach failed: $(cat "$WORK/attach.log")"
# Each class is offered well above its rate, so its socket ring fills within
# the warm-up and stays full: the capture then sees a continuously
# backlogged class, the case the paper measured.
CLASSES=("1:1 500mbit 5001 650mbit" "1:2 250mbit 5002 400mbit" "1:3 50mbit 5003 100mbit")
GREEDY_PORT=5009
GREEDY_RATE=300mbit
for c in "${CLASSES[@]}"; do
    read -r id rate port _ <<<"$c"
    $N "$PSPXDP" class set $DEV "$id" "$rate" || die "class set $id $rate failed"
    $N "$PSPXDP" filter add $DEV proto udp dport "$port" classid "$id" || die "filter for $id failed"
done
sleep 0.2

# --- senders, then (after a warm-up that fills every class's ring) the
# capture: the measured window lies wholly inside the backlogged period.
WARMUP=1
say "offering UDP: $(printf '%s; ' "${CLASSES[@]}")greedy ${GREEDY_RATE} unclassified"
$D "$TRAFFIC" sink 5001,5002,5003,$GREEDY_PORT --seconds $((SECONDS_RUN + WARMUP + 4)) \
    >"$WORK/sink.json" &
PIDS+=($!)
SINK_PID=$!
$D nstat -n >/dev/null 2>&1 # reset nstat's history: the report below is this run's
sleep 0.3
SEND_PIDS=()
for c in "${CLASSES[@]}"; do
    read -r id rate port offered <<<"$c"
    $N "$TRAFFIC" send 10.77.0.2 "$port" --rate "$offered" --size 1472 \
        --seconds $((SECONDS_RUN + WARMUP + 1)) >"$WORK/send-$port.json" &
    SEND_PIDS+=($!)
done
$N "$TRAFFIC" send 10.77.0.2 $GREEDY_PORT --rate $GREEDY_RATE --size 1472 \
    --seconds $((SECONDS_RUN + WARMUP + 1)) >"$WORK/send-$GREEDY_PORT.json" &
SEND_PIDS+=($!)
PIDS+=("${SEND_PIDS[@]}")
sleep $WARMUP
say "capturing ${SECONDS_RUN}s on $PEER (PAUSE frames included) ..."
$D tcpdump -i $PEER -Q in -s 128 -B 262144 -w "$WORK/capture.pcap" >/dev/null 2>"$WORK/tcpdump.log" &
TCPDUMP_PID=$!
PIDS+=($TCPDUMP_PID)
sleep "$SECONDS_RUN"
kill -INT "$TCPDUMP_PID" 2>/dev/null
wait "$TCPDUMP_PID" 2>/dev/null
wait "${SEND_PIDS[@]}"
# Let the paced queues drain before reading the counters.
for _ in $(seq 50); do
    $N "$PSPXDP" status $DEV -j >"$WORK/status.json" 2>/dev/null || break
    python3 -c "import json,sys; d=json.load(open('$WORK/status.json')); sys.exit(0 if all(c.get('backlog_frames',0)==0 for c in d.get('classes',[])) else 1)" 2>/dev/null && break
    sleep 0.1
done
wait "$SINK_PID"
$N "$PSPXDP" status $DEV -j >"$WORK/status.json" 2>/dev/null
$D nstat -az UdpInCsumErrors UdpInErrors UdpRcvbufErrors >"$WORK/nstat.txt" 2>/dev/null

# --- judge
FLOWS=()
for c in "${CLASSES[@]}"; do
    read -r id rate port _ <<<"$c"
    FLOWS+=(--flow "$id=proto udp dport $port" --target "$id=$rate")
done
FLOWS+=(--flow "default=proto udp dport $GREEDY_PORT")
"$PSPXDP" analyze "$WORK/capture.pcap" --line-rate "$LINE_RATE" "${FLOWS[@]}" -j \
    >"$WORK/byte-clock.json" || die "analyze (byte clock) failed"
"$PSPXDP" analyze "$WORK/capture.pcap" --real-time "${FLOWS[@]}" -j \
    >"$WORK/real-time.json" || die "analyze (real time) failed"

python3 - "$WORK" "$LINE_RATE" "$JSON" "${CLASSES[@]}" "default normal $GREEDY_PORT $GREEDY_RATE" <<'PY'
import json, re, sys
# classes: "CLASSID RATE PORT OFFERED", the paced ones, then the default (normal) one
work, line_rate, as_json, classes = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]

def rate_bps(text):
    m = re.fullmatch(r"(\d+)(kbit|mbit|gbit)", text)
    return int(m.group(1)) * {"kbit": 10**3, "mbit": 10**6, "gbit": 10**9}[m.group(2)]

bc = json.load(open(f"{work}/byte-clock.json"))
rt = json.load(open(f"{work}/real-time.json"))
status = json.load(open(f"{work}/status.json"))
sink = json.load(open(f"{work}/sink.json"))
tcpdump_log = open(f"{work}/tcpdump.log").read()
m = re.search(r"(\d+) packets? dropped by kernel", tcpdump_log)
capture_drops = int(m.group(1)) if m else None
m = re.search(r"(\d+) packets? captured", tcpdump_log)
captured = int(m.group(1)) if m else None
nstat = {}
for line in open(f"{work}/nstat.txt"):
    parts = line.split()
    if len(parts) >= 2 and parts[0].startswith("Udp"):
        nstat[parts[0]] = int(parts[1])

def flows(report):
    return {f["name"]: f for f in report["flows"]}

bcf, rtf = flows(bc), flows(rt)
pacer = {c["class"]: c for c in status.get("classes", [])}
def sent(port):
    try:
        return json.load(open(f"{work}/send-{port}.json"))["sent"]
    except (OSError, ValueError, KeyError):
        return None

rows = []
for c in classes:
    cid, rate, port, _ = c.split()
    f, r = bcf.get(cid, {}), rtf.get(cid, {})
    target = rate_bps(rate) if rate != "normal" else 0
    mean = f.get("mean_rate_bps", 0.0)
    p = pacer.get(cid if cid != "default" else "1:ffff", {})
    rows.append({
        "class": cid, "target_bps": target, "frames": f.get("frames", 0),
        "mean_bps": mean,
        "error_pct": (mean - target) / target * 100 if target else None,
        "max_burst_mtu": f.get("max_burst_mtu"),
        "max_burst_at_target_mtu": f.get("max_burst_at_target_mtu"),
        "max_burst_bytes": f.get("max_burst_bytes"),
        "real_time_mean_bps": r.get("mean_rate_bps"),
        "sent": sent(port), "received": sink.get(port, {}).get("datagrams"),
        "pacer_drops": sum(v for k, v in p.items() if k.startswith("drop_")) if p else None,
    })
summary = {
    "line_rate": line_rate,
    "classes": rows,
    "gap_share": bc.get("gap_share"),
    "gap_frames": bc.get("gap_frames"),
    "frames_captured": captured,
    "capture_drops": capture_drops,
    "udp_csum_errors": nstat.get("UdpInCsumErrors"),
    "udp_rcvbuf_errors": nstat.get("UdpRcvbufErrors"),
    "status": status,
}
if as_json:
    print(json.dumps(summary))
    sys.exit(0)

def r(bps):
    return "-" if bps is None else (f"{bps/1e6:.3f}Mbit")
print(f"pspxdp lab: a {line_rate} veth wire between two namespaces, judged on the byte clock")
print(f"{'class':8} {'target':>10} {'frames':>8} {'measured':>14} {'error':>9} {'max burst':>10} {'@target':>9} {'real time':>14} {'sent':>8} {'recv':>8} {'drops':>7}")
for x in rows:
    err = "-" if x["error_pct"] is None else f"{x['error_pct']:+.3f}%"
    burst = "-" if x["max_burst_mtu"] is None else f"{x['max_burst_mtu']:.2f} MTU"
    at = "-" if x["max_burst_at_target_mtu"] is None else f"{x['max_burst_at_target_mtu']:.2f} MTU"
    tgt = "normal" if not x["target_bps"] else r(x["target_bps"])
    print(f"{x['class']:8} {tgt:>10} {x['frames']:>8} {r(x['mean_bps']):>14} {err:>9} {burst:>10} {at:>9} "
          f"{r(x['real_time_mean_bps']):>14} {str(x['sent']):>8} {str(x['received']):>8} {str(x['pacer_drops']):>7}")
print(f"gap frames: {summary['gap_frames']} ({(summary['gap_share'] or 0)*100:.2f}% of wire bytes); "
      f"captured {captured} frames, {capture_drops} dropped by the capture; "
      f"UDP checksum errors at the receiver: {summary['udp_csum_errors']}")
PY
