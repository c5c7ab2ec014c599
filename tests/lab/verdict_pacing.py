#!/usr/bin/env python3
"""Verdicts of the deterministic lab tests (test_clockless, test_horizon,
test_dp_tcp, test_lab_10k) from what the daemon, the kernel and the capture
count over a judged window: a status -j and the link counters of DEV and
of its peer before (NAME.s0, NAME.dev0, NAME.peer0) and after it (NAME.s1,
NAME.dev1, NAME.peer1): tests/lab/window.sh.

A window is judged only where the machine let it be measured: no frame
passed unpaced (the daemon stalled past its 100 ms heartbeat), none dropped
by the veth (DEV counts it: the receiving softirq starved), none dropped by
the capture. Otherwise `loaded` names the
figures; the test retries once, then skips (exit 77). Underruns never make a
window unjudgeable: the byte clock cuts their time out (design §3.7) and a
real-time figure gets it put back (underrun_bytes).

  verdict_pacing.py settled NAME              exit 0 once NAME's window balances:
      nothing backlogged, and what left DEV (sent + dropped) is what the
      daemon counted (wire + gap frames) plus what TC passed unpaced
  verdict_pacing.py captured NAME             exit 0 once the capture NAME (its
      tcpdump's last SIGUSR1 report, NAME.tcpdump) took in every frame the
      peer received in the window NAME
  verdict_pacing.py loaded NAME [CAPTURE]     prints why NAME's window cannot be
      judged (nothing: it can), exit 0 either way
  verdict_pacing.py TEST ARGS...              TEST's checks, "ok   - WHAT" or
      "FAIL - WHAT" lines (window.sh's window_checks counts them), and figures
      clockless AUTO BYTE RATE_BPS   horizon INF H50 RATE_BPS
      tcp TMP                        tenk TMP CLASSES RATE_BPS JUDGE(0|1)
  verdict_pacing.py clock STATUS_JSON [KEY...]
      one line: the status's clock, its clock_reason (spaces as _), and the
      daemon's KEYs
  verdict_pacing.py behind PREFILL_JSON STEADY_JSON CLASSES RATE_BPS SECONDS
      why the classes were not all backlogged SECONDS into the steady offer
      (the sender fell short by more than the prefill), empty if they were
"""
import json
import re
import sys
from pathlib import Path

from verdict import Json, check, figure, load


def classes(status: Json) -> dict[str, Json]:
    return {c["class"]: c for c in status["classes"]}


class Window:
    """Counter deltas between NAME.s0/.dev0 and NAME.s1/.dev1."""

    def __init__(self, name: str) -> None:
        self.s0: Json = load(f"{name}.s0")
        self.s1: Json = load(f"{name}.s1")
        tx0 = load(f"{name}.dev0")[0]["stats64"]["tx"]
        tx1 = load(f"{name}.dev1")[0]["stats64"]["tx"]
        self.dev_packets: int = tx1["packets"] - tx0["packets"]
        self.dev_dropped: int = tx1["dropped"] - tx0["dropped"]
        rx0 = load(f"{name}.peer0")[0]["stats64"]["rx"]
        rx1 = load(f"{name}.peer1")[0]["stats64"]["rx"]
        self.peer_packets: int = rx1["packets"] - rx0["packets"]
        self.peer_dropped: int = rx1["dropped"] - rx0["dropped"]  # PAUSE frames too

    def daemon(self, key: str) -> int:
        return int(self.s1["daemon"][key] - self.s0["daemon"][key])

    def cls(self, ids: list[str], key: str) -> int:
        c0, c1 = classes(self.s0), classes(self.s1)
        return sum(int(c1[i][key] - (c0[i][key] if i in c0 else 0)) for i in ids)

    def passed(self) -> int:
        return self.cls([c["class"] for c in self.s1["classes"]], "tc_passed")

    def backlog(self) -> int:
        return sum(int(c["backlog_frames"]) for c in self.s1["classes"])

    def balances(self) -> bool:
        return (self.dev_packets + self.dev_dropped
                == self.daemon("wire_frames") + self.daemon("gap_frames") + self.passed())

    def loaded(self, capture_drops: int = 0) -> list[str]:
        why = []
        if self.passed():
            why.append(f"{self.passed()} frames passed unpaced: the daemon stalled > 100 ms")
        # What DEV counted: the peer's rx "dropped" also counts every PAUSE
        # frame no capture took (no protocol handles them), and its received
        # count is after GRO.
        if self.dev_dropped:
            why.append(f"{self.dev_dropped} frames dropped by the veth: the receiver starved")
        if capture_drops:
            why.append(f"{capture_drops} frames dropped by the capture")
        return why


def wire_counts(name: str, w: Window, a: Json, ids: list[str]) -> None:
    """What the capture saw is what the daemon sent in the window (judged
    windows have no drop): every frame, the gap frames, the class's frames."""
    gaps, wire, tx = w.daemon("gap_frames"), w.daemon("wire_frames"), w.cls(ids, "tx_frames")
    got = sum(f["frames"] for f in a["flows"] if f["name"] != "other")
    check(f"{name}: the wire carried what the daemon counted: {a['frames']} frames "
          f"(daemon {wire} + {gaps} gap), {a['gap_frames']} PAUSE, class {got} (daemon {tx})",
          a["frames"] == wire + gaps and a["gap_frames"] == gaps and got == tx and tx > 0)


def rate_err_pct(f: Json, rate_bps: int) -> float:
    return float((f["mean_rate_bps"] - rate_bps) / rate_bps * 100) if f["mean_rate_bps"] else -100.0


def pause_share(w: Window) -> float:
    gap = w.daemon("gap_bytes")
    return gap / max(1, gap + w.daemon("wire_frame_bytes") + w.daemon("planned_idle_bytes"))


def clockless(auto: str, byte: str, rate_bps: int) -> None:
    for name in (auto, byte):
        w, a = Window(name), load(f"{name}.json")
        f = a["flows"][0]
        d = w.s1["daemon"]
        figure(f"{name.rsplit('/', 1)[-1]}: veth: DEV sent {w.dev_packets} (+ {w.dev_dropped} dropped), "
              f"peer got {w.peer_packets} (+ {w.peer_dropped} dropped)")
        figure(f"{name.rsplit('/', 1)[-1]}: clock {w.s1['clock']} ({w.s1['clock_reason']}); capture "
              f"{a['frames']} frames, {a['gap_frames']} PAUSE; daemon {w.daemon('gap_frames')} gap "
              f"frames, {w.daemon('underruns')} underruns, {w.daemon('late_wakeups')} late wake-ups "
              f"(longest {d['late_max_ns'] / 1e3:.0f} us); real time (not judged: timing, see "
              f"bench/run_horizon.sh): {f['frames']} frames, {rate_err_pct(f, rate_bps):+.3f} %, "
              f"burst {f['max_burst_at_target_mtu'] or 0:.2f} MTU")
        wire_counts(name.rsplit('/', 1)[-1], w, a, ["1:1"])
    a, w = load(f"{auto}.json"), Window(auto)
    check(f"clockless: no PAUSE frame on the wire (capture {a['gap_frames']}, daemon {w.daemon('gap_frames')})",
          a["gap_frames"] == 0 and w.daemon("gap_frames") == 0)
    a, w = load(f"{byte}.json"), Window(byte)
    check(f"--clock byte: gap frames again ({a['gap_frames']} PAUSE)", a["gap_frames"] > 0)


def horizon(inf: str, h50: str, rate_bps: int) -> None:
    for name, h in ((inf, "inf"), (h50, "50us")):
        w, a = Window(name), load(f"{name}.json")
        f = a["flows"][0]
        share = pause_share(w)
        figure(f"H={h}: PAUSE share {share * 100:.1f} % of the wire (counters), {w.daemon('gap_frames')} "
              f"gap frames, {w.daemon('planned_idles')} planned idles, {w.daemon('late_wakeups')} late "
              f"wake-ups ({w.daemon('late_ns') / 1e3:.0f} us), {w.daemon('underruns')} underruns "
              f"({w.daemon('underrun_bytes')} byte times); class: {f['frames']} frames, "
              f"{rate_err_pct(f, rate_bps):+.4f} %, burst {f['max_burst_at_target_mtu'] or 0:.2f} MTU "
              f"({'byte clock' if h == 'inf' else 'hybrid clock: timing, not judged; bench/run_horizon.sh'})")
        wire_counts(f"H={h}", w, a, ["1:1"])
        if h == "inf":
            check(f"H=inf: PAUSE share {share:.4f} >= 0.80 (the paper's rule fills the wire)", share >= 0.80)
            # The byte clock is the daemon's: an underrun's time is cut out
            # of both (design 3.7), so the class is exact on it.
            err, burst = rate_err_pct(f, rate_bps), f["max_burst_at_target_mtu"]
            check(f"H=inf: byte clock: rate within 0.01 % ({err:+.4f} %), burstiness "
                  f"{'?' if burst is None else f'{burst:.3f}'} <= 2 MTU",
                  abs(err) <= 0.01 and burst is not None and burst <= 2.0)
        else:
            check(f"H=50us: PAUSE share {share:.4f} <= 0.10", share <= 0.10)


TCP_ROWS = {"ecn": ["1:1"], "no-ecn": ["1:1"], "ecn-4": ["1:1"],
            "ecn-10c": [f"1:{i + 16:x}" for i in range(1, 11)]}
TCP_PORTS = {"ecn": [5201], "no-ecn": [5201], "ecn-4": [5201], "ecn-10c": list(range(5211, 5221))}


def tcp(tmp: str) -> None:
    """One table row per scenario; the checks are on "ecn"."""
    figure(f"{'scenario':9} {'classes':>7} {'rate Mbit/s':>11} {'L2 Mbit/s':>9} {'% of rate':>9} "
          f"{'retrans':>7} {'drops':>6} {'kernel':>6} {'underrun ms':>11} {'CE marks':>8} "
          f"{'backlog KB max/mean':>19} {'threshold KB':>12}")
    for name, ids in TCP_ROWS.items():
        w = Window(f"{tmp}/{name}")
        c1 = classes(w.s1)
        rate = sum(c1[i]["rate_bps"] for i in ids)
        secs, retrans = 0.0, 0
        for p in TCP_PORTS[name]:
            j = load(f"{tmp}/{name}.{p}.json")
            secs = max(secs, j["end"]["sum_sent"]["seconds"])
            retrans += j["end"]["sum_sent"].get("retransmits", 0)
        # What the pacer sent (L2 + FCS: the class's unit) over the run with
        # the time the daemon lost to underruns put back: a late daemon costs
        # real-time rate (design 3.7), not TCP's back pressure.
        underrun_s = w.daemon("underrun_bytes") * 8 / w.s1["line_rate_bps"]
        l2 = w.cls(ids, "tx_bytes") * 8 / max(1e-3, secs - underrun_s)
        drops = sum(w.cls(ids, k) for k in c1[ids[0]] if k.startswith("drop_"))  # every cause
        kernel = w.daemon("socket_ring_full") + w.daemon("socket_fill_empty")
        backlogs: list[int] = []
        for line in Path(f"{tmp}/{name}.samples").read_text().splitlines():
            try:
                s = classes(json.loads(line))
            except ValueError:
                continue
            backlogs += [s[i]["backlog_bytes"] for i in ids]
        bmax = max(backlogs, default=0) / 1e3
        bmean = sum(backlogs) / max(1, len(backlogs)) / 1e3
        thr = c1[ids[0]]["rate_bps"] * 0.004 / 8 / 1e3  # the default 4 ms at the class rate
        pct = l2 / rate * 100
        ce = w.cls(ids, "ce_marked")
        figure(f"{name:9} {len(ids):>7} {rate / 1e6:>11.0f} {l2 / 1e6:>9.1f} {pct:>9.1f} {retrans:>7} "
              f"{drops:>6} {kernel:>6} {underrun_s * 1e3:>11.1f} {ce:>8} {bmax:>9.0f}/{bmean:<9.0f} "
              f"{thr:>12.0f}")
        if name == "ecn":
            # TCP's throughput and retransmits follow this machine's timing
            # (a starved receiver, a late daemon): printed, not judged.
            checks = [(drops + kernel == 0, f"no drop anywhere ({drops} pacer, {kernel} kernel)"),
                      (ce > 0, f"CE marks counted ({ce})"),
                      (bmax <= 4 * thr, f"backlog bounded near the threshold (max {bmax:.0f} KB, "
                       f"threshold {thr:.0f} KB)")]
    for ok, what in checks:
        check(f"ECN, one flow: {what}", ok)


def tenk(tmp: str, n: int, rate: int, judge: bool) -> None:
    """The 10,000-class run: the byte clock per class over the capture (the
    window cap.*), the accounting over the whole run (since attach).

    A class paces exactly while it is backlogged: every frame follows the
    one before by its period on the byte clock. A class that emptied (its
    share of a loaded sender came late) resumes later than a period, never
    earlier: so each class's fastest frame-to-frame rate must be its rate
    (within 0.01 %, neither faster nor slower), and its mean rate is judged
    only where no interval was longer (backlogged throughout)."""
    a = load(f"{tmp}/analyze.json")
    run = Window(f"{tmp}/run")
    st, d = run.s1, run.s1["daemon"]
    flows = {f["name"]: f for f in a["flows"]}
    worst_err, worst_burst, missing, bad, emptied = 0.0, 0.0, [], [], 0
    for i in range(1, n + 1):
        f = flows.get(f"c{i}")
        if not f or f["frames"] < 3:
            missing.append(i)
            continue
        fastest = (f["rate_n_max_bps"] - rate) / rate * 100
        burst = f["max_burst_at_target_mtu"] or 0.0
        if f["rate_n_min_bps"] < rate * (1 - 1e-4):
            emptied += 1
            err = fastest
        else:
            err = rate_err_pct(f, rate)
        worst_err, worst_burst = max(worst_err, abs(err), abs(fastest)), max(worst_burst, burst)
        if abs(err) > 0.01 or abs(fastest) > 0.01 or burst > 2.0:
            bad.append((i, f["frames"], round(err, 4), round(fastest, 4), round(burst, 3)))
    cls = st["classes"]
    tc, rx, tx = (sum(c[k] for c in cls) for k in ("tc_frames", "rx_frames", "tx_frames"))
    drops = {k: sum(c[k] for c in cls) for k in cls[0] if k.startswith("drop_")}
    kernel = d["socket_ring_full"] + d["socket_fill_empty"] + st["xdp"]["no_socket"]
    backlog = run.backlog()
    # Packets TC passed unpaced (daemon stalled past its heartbeat) go to
    # DEV directly: UDP here, one frame each.
    passed = sum(c["tc_passed"] for c in cls)
    cap = Window(f"{tmp}/cap")
    figure(f"capture: {a['frames']} frames ({a['gap_frames']} PAUSE), {capture_drops(f'{tmp}/capture')} dropped by "
          f"the capture; daemon in its window: {cap.daemon('underruns')} underruns "
          f"({cap.daemon('underrun_bytes')} byte times, cut out of the byte clock)")
    figure(f"classes judged: {n - len(missing)} of {n} ({emptied} emptied for a while: their mean not "
          f"judged); worst rate error {worst_err:.5f} %, worst burst {worst_burst:.3f} MTU at {rate} "
          f"bit/s; {len(bad)} outside the bounds (class, frames, error %, fastest %, burst) {bad[:5]}")
    figure(f"greedy: {flows.get('greedy', {}).get('mean_rate_bps', 0) / 1e6:.1f} Mbit/s (byte clock)")
    figure(f"TC handed over {tc} frames; pacer took {rx} (+ kernel drops {kernel}, unknown tags "
          f"{d['unknown_class']}); sent {tx}, drops {drops}, backlog {backlog}")
    figure(f"DEV sent {run.dev_packets} frames (+ {run.dev_dropped} dropped); the pacer counted "
          f"{d['wire_frames']} frames + {d['gap_frames']} gaps, TC passed {passed} unpaced; UMEM "
          f"accounting failures {d['accounting_failures']}")
    if judge:
        check(f"every class in the capture ({n - len(missing)} of {n} with >= 3 frames)", not missing)
        check(f"every class on the byte clock: frame to frame at its rate and, backlogged "
              f"throughout, on average within 0.01 % (worst {worst_err:.5f} %); burstiness <= 2 MTU "
              f"(worst {worst_burst:.3f}) at {rate} bit/s", not bad)
    check("nothing lost uncounted (TC -> pacer -> DEV)", tc == rx + kernel and d["rx_frames"] == rx + d["unknown_class"]
          and rx == tx + sum(drops.values()) + backlog
          and run.dev_packets + run.dev_dropped == d["wire_frames"] + d["gap_frames"] + passed
          and d["accounting_failures"] == 0)


def behind(prefill_json: str, steady_json: str, n: int, rate: int, secs: int) -> str:
    """Why the classes were not all backlogged until the capture's end, secs
    into the steady offer (empty: they were): the sender fell short of their
    rate by more than the prefill gave them (an overloaded machine). The
    sender sends to the ports in turn: each class gets an even share."""
    prefill, steady = load(prefill_json), load(steady_json)
    prefill_bits = prefill["offered_bps"] * prefill["seconds"]
    offered = steady["offered_bps"]
    return "" if offered * secs + prefill_bits >= n * rate * secs else \
        f"the sender offered {offered / 1e6:.1f} of {n * rate / 1e6:.0f} Mbit/s: classes not backlogged"


def capture_drops(capture: str) -> int:
    """What psp_capture's tcpdump dropped (it prints it when it stops; a
    pcap file holds no drop counters). Unknown counts as one."""
    try:
        m = re.search(r"(\d+) packets? dropped by kernel", Path(f"{capture}.tcpdump").read_text())
    except OSError:
        return 1
    return int(m.group(1)) if m else 1


def main(argv: list[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "settled" and len(argv) == 3:
        w = Window(argv[2])
        return 0 if w.backlog() == 0 and w.balances() else 1
    if cmd == "captured" and len(argv) == 3:
        w = Window(argv[2])
        m = re.findall(r"(\d+) packets? captured", Path(f"{argv[2]}.tcpdump").read_text())
        return 0 if m and int(m[-1]) >= w.peer_packets else 1
    if cmd == "loaded" and len(argv) in (3, 4):
        drops = capture_drops(argv[3]) if len(argv) == 4 else 0
        print("; ".join(Window(argv[2]).loaded(drops)))
        return 0
    if cmd == "clockless" and len(argv) == 5:
        clockless(argv[2], argv[3], int(argv[4]))
        return 0
    if cmd == "horizon" and len(argv) == 5:
        horizon(argv[2], argv[3], int(argv[4]))
        return 0
    if cmd == "tcp" and len(argv) == 3:
        tcp(argv[2])
        return 0
    if cmd == "tenk" and len(argv) == 6:
        tenk(argv[2], int(argv[3]), int(argv[4]), argv[5] == "1")
        return 0
    if cmd == "clock" and len(argv) >= 3:
        st = load(argv[2])
        print(st["clock"], st["clock_reason"].replace(" ", "_"), *(st["daemon"][k] for k in argv[3:]))
        return 0
    if cmd == "behind" and len(argv) == 7:
        print(behind(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6])))
        return 0
    print(__doc__.split("\n\n")[-1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
