#!/usr/bin/env bash
# Data path v2 at scale: 10,000 paced classes on the 1 Gbit/s lab wire.
#
# Each class is one UDP flow (its own destination port) paced at 50 kbit/s
# and offered a little more (2 %), after a prefill that gives every class a
# backlog of a few frames; a greedy unclassified flow fills the rest of the
# wire through the default (normal) class. Everything arriving on the
# receiving end is captured, PAUSE frames included, and `pspxdp analyze`
# judges every class on the byte clock:
#   - byte-clock rate error <= 0.01 % and burstiness <= 2 MTU at 50 kbit/s,
#     for each of the 10,000 classes;
#   - nothing lost that is not counted: what TC handed over is what the
#     pacer took (or the kernel counted as dropped), what it took is what it
#     sent plus its counted drops, and what it sent is what left DEV;
#   - detach afterwards leaves nothing.
# Set-up writes the classes in one `class set --file` and the 10,000 port
# filters as one change (psp_port_filters in lab/netns.sh).
# Exit 77 = skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../lab/netns.sh"
psp_require test_lab_10k "$PSPXDP" "$TRAFFIC" -- ip tcpdump bpftool python3 nsenter timeout

CLASSES=${CLASSES:-10000}
RATE_BPS=50000
RATE=50kbit
PAYLOAD=1000                   # 1046 L2 bytes: ~6 frames/s per class
FIRST_PORT=20001
PREFILL_FRAMES=6               # per class, before the measured window
OFFERED_PCT=102                # steady offer, % of the class rate
WARMUP=2 CAPTURE=${CAPTURE:-8} # seconds
GREEDY_RATE=300mbit GREEDY_PORT=5009
T0=$(date +%s.%N)
elapsed() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$T0"; }

psp_lab_begin tk 10.83.0

# class i (1-based): 2:<i in hex>, UDP destination port FIRST_PORT + i - 1.
classid() { printf '2:%x' "$1"; }

# --rt: on a loaded machine (CI runs other tests, builds) a normal-priority
# daemon starved past the heartbeat timeout lets TC pass frames unpaced.
# --clock byte --gap-horizon inf: judged on the byte clock, which is the
# wire's time only where gap frames fill every idle byte (the paper's rule;
# a veth gets clockless by default, and the default 50 us horizon idles).
psp_check "attach (buffer 192 MiB: every class holds a few frames; SCHED_FIFO)" \
    $N "$PSPXDP" attach $DEV --line-rate 1gbit --buffer $((192 << 20)) --rt --clock byte --gap-horizon inf
for ((i = 1; i <= CLASSES; ++i)); do echo "$(classid $i) $RATE"; done >"$TMP/classes"
psp_check "class set --file: $CLASSES classes at $RATE" $N "$PSPXDP" class set $DEV --file "$TMP/classes"
psp_check "$CLASSES port filters" psp_port_filters $DEV $FIRST_PORT $CLASSES 2 1
sleep 0.3
$N "$PSPXDP" status $DEV -j >"$TMP/s0.json"
psp_check "the daemon serves all $CLASSES classes" python3 -c "
import json, sys; d = json.load(open('$TMP/s0.json'))
served = sum(1 for c in d['classes'] if c['class'].startswith('2:') and c['state'] == 'served')
sys.exit(served != $CLASSES)"
echo "     set-up done at $(elapsed) s"
$N ip -s -j link show $DEV >"$TMP/dev0.json" # what DEV sent before (the wire's own ping)

# Prefill: PREFILL_FRAMES per class as fast as the pacer takes them, then the
# steady offer and the greedy flow; the capture starts after the warm-up.
run_s=$((WARMUP + CAPTURE + 2))
$N timeout 20 "$TRAFFIC" send 10.83.0.2 $FIRST_PORT --ports $CLASSES --size $PAYLOAD \
    --rate 300mbit --count $((CLASSES * PREFILL_FRAMES)) --seconds 10 >"$TMP/prefill.json"
offer_bps=$((CLASSES * RATE_BPS * OFFERED_PCT / 100))
$N timeout $((run_s + 10)) "$TRAFFIC" send 10.83.0.2 $FIRST_PORT --ports $CLASSES --size $PAYLOAD \
    --rate ${offer_bps}bit --seconds $run_s >"$TMP/steady.json" &
PIDS+=($!)
$N timeout $((run_s + 10)) "$TRAFFIC" send 10.83.0.2 $GREEDY_PORT --size 1472 \
    --rate $GREEDY_RATE --seconds $run_s >"$TMP/greedy.json" &
PIDS+=($!)
sleep $WARMUP
$D tcpdump -i $PEER -Q in -s 64 -B 131072 -w "$TMP/capture.pcap" >/dev/null 2>"$TMP/tcpdump.log" &
TCPDUMP=$!
PIDS+=($TCPDUMP)
sleep "$CAPTURE"
kill -INT $TCPDUMP
wait $TCPDUMP 2>/dev/null
echo "     capture done at $(elapsed) s"
# The senders stop; the prefill's backlog drains at the class rate (a few s).
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
PIDS=()
for _ in $(seq 200); do
    $N "$PSPXDP" status $DEV -j >"$TMP/s1.json" 2>/dev/null
    python3 -c "import json,sys; d=json.load(open('$TMP/s1.json')); sys.exit(0 if all(c['backlog_frames']==0 for c in d['classes']) else 1)" && break
    sleep 0.2
done
sleep 0.2 # the kernel's counts are published every 100 ms
$N "$PSPXDP" status $DEV -j >"$TMP/s1.json"
$N ip -s -j link show $DEV >"$TMP/dev.json"

# The byte-clock judge: one flow and one target per class.
{
    for ((i = 1; i <= CLASSES; ++i)); do
        echo "flow c$i=proto udp dport $((FIRST_PORT + i - 1))"
        echo "target c$i=$RATE"
    done
    echo "flow greedy=proto udp dport $GREEDY_PORT"
} >"$TMP/flows"
"$PSPXDP" analyze "$TMP/capture.pcap" --line-rate 1gbit --flows-file "$TMP/flows" -j \
    >"$TMP/analyze.json" || echo "FAIL - analyze"
echo "     analysis done at $(elapsed) s"

python3 - "$TMP" $CLASSES $RATE_BPS >"$TMP/verdict" <<'PY'
import json, re, sys
tmp, n, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = json.load(open(f"{tmp}/analyze.json"))
st = json.load(open(f"{tmp}/s1.json"))
dev0 = json.load(open(f"{tmp}/dev0.json"))[0]["stats64"]["tx"]
dev = {k: v - dev0[k] for k, v in json.load(open(f"{tmp}/dev.json"))[0]["stats64"]["tx"].items()}
m = re.search(r"(\d+) packets? dropped by kernel", open(f"{tmp}/tcpdump.log").read())
capture_drops = int(m.group(1)) if m else -1
flows = {f["name"]: f for f in a["flows"]}
worst_err, worst_burst, missing, bad = 0.0, 0.0, [], []
for i in range(1, n + 1):
    f = flows.get(f"c{i}")
    if not f or f["frames"] < 3:
        missing.append(i)
        continue
    err = abs(f["mean_rate_bps"] - rate) / rate * 100
    burst = f["max_burst_at_target_mtu"]
    worst_err, worst_burst = max(worst_err, err), max(worst_burst, burst)
    if err > 0.01 or burst > 2.0:
        bad.append((i, f["frames"], round(err, 4), round(burst, 3)))
classes = [c for c in st["classes"] if c["class"].startswith("2:")]
d = st["daemon"]
tc = sum(c["tc_frames"] for c in st["classes"])
rx = sum(c["rx_frames"] for c in st["classes"])
tx = sum(c["tx_frames"] for c in st["classes"])
drops = {k: sum(c[k] for c in st["classes"]) for k in st["classes"][0] if k.startswith("drop_")}
kernel = d["socket_ring_full"] + d["socket_fill_empty"] + st["xdp"]["no_socket"]
backlog = sum(c["backlog_frames"] for c in st["classes"])
# Packets TC passed unpaced (daemon starved past the heartbeat timeout) go
# to DEV directly: UDP here, one frame each.
passed = sum(c["tc_passed"] for c in st["classes"])
print(f"capture: {a['frames']} frames ({a['gap_frames']} PAUSE), {capture_drops} dropped by the capture")
print(f"classes judged: {n - len(missing)} of {n}; worst rate error {worst_err:.5f} %, worst burst "
      f"{worst_burst:.3f} MTU at {rate} bit/s; {len(bad)} outside the bounds {bad[:5]}")
print(f"greedy: {flows.get('greedy', {}).get('mean_rate_bps', 0) / 1e6:.1f} Mbit/s")
print(f"TC handed over {tc} frames; pacer took {rx} (+ kernel drops {kernel}, unknown tags "
      f"{d['unknown_class']}); sent {tx}, drops {drops}, backlog {backlog}")
print(f"DEV sent {dev['packets']} frames (+ {dev['dropped']} dropped); the pacer counted "
      f"{d['wire_frames']} frames + {d['gap_frames']} gaps, TC passed {passed} unpaced; UMEM "
      f"accounting failures {d['accounting_failures']}")
# The measurement needs every class backlogged: a sender that fell behind
# (an overloaded machine) leaves classes idle, and then no pacer is judged.
steady = json.load(open(f"{tmp}/steady.json"))
behind = steady["offered_bps"] < n * rate
print(f"steady offer: {steady['offered_bps'] / 1e6:.2f} Mbit/s for {n * rate / 1e6:.0f} Mbit/s "
      f"of classes{' - FELL BEHIND' if behind else ''}")
ok_cap = capture_drops == 0 and not missing
ok_judge = not bad
ok_counts = (tc == rx + kernel and d["rx_frames"] == rx + d["unknown_class"]
             and rx == tx + sum(drops.values()) + backlog
             and dev["packets"] + dev["dropped"] == d["wire_frames"] + d["gap_frames"] + passed
             and d["accounting_failures"] == 0)
print(f"RESULT {int(ok_cap)} {int(ok_judge)} {int(ok_counts)} {int(behind)}")
PY
sed 's/^/     /' "$TMP/verdict" | grep -v RESULT
read -r _ ok_cap ok_judge ok_counts behind <<<"$(grep RESULT "$TMP/verdict")"
psp_check "complete capture, every class in it" test "${ok_cap:-0}" = 1
if [[ ${behind:-1} == 1 ]]; then
    echo "     the senders could not keep the classes backlogged (machine overloaded):" \
        "precision not judged"
else
    psp_check "every class: byte-clock rate error <= 0.01 %, burstiness <= 2 MTU at $RATE" \
        test "${ok_judge:-0}" = 1
fi
psp_check "nothing lost uncounted (TC -> pacer -> DEV)" test "${ok_counts:-0}" = 1
t_detach=$(date +%s.%N)
DPID=$(cat /run/pspxdp/$DEV.pid)
cp /run/pspxdp/$DEV.log "$TMP/daemon.log" # detach removes it
tail -f --pid="$DPID" /run/pspxdp/$DEV.log >"$TMP/daemon-end.log" 2>/dev/null &
psp_check "detach" $N "$PSPXDP" detach $DEV
echo "     detach took $(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$t_detach") s;" \
    "daemon: $(grep -ho 'shutdown:.*\|released in.*' "$TMP/daemon-end.log" | tr '\n' ' ')"
psp_check "nothing left: no pins, no pacer veths, no run files" bash -c \
    "test ! -e /sys/fs/bpf/pspxdp/$DEV && ! $N ip -br link | grep -q '^psp' && ! ls /run/pspxdp/$DEV.* 2>/dev/null | grep -q ."
echo "     total $(elapsed) s"
echo "$PSP_FAILS failure(s)"
[[ $PSP_FAILS -eq 0 ]]
