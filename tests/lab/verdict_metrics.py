#!/usr/bin/env python3
"""test_metrics' verdict: the Prometheus text of `stats --format prometheus`
against the same moment's `stats -j`: every per-class counter, the sums,
the omitted classes, the gauges.

  verdict_metrics.py STATS_JSON PROM_TEXT MAX_CLASSES
"""
import math
import re
import sys

from verdict import Json, check, load


def judge(stats: Json, prom: str, max_classes: int) -> None:
    series: dict[tuple[str, str | None], float] = {}
    for line in prom.splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.fullmatch(r'([a-z_]+)\{([^}]*)\} (\S+)', line)
        assert m, f"not a sample line: {line!r}"
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        series[(m.group(1), labels.get("class"))] = float(m.group(3))
    config = {"slot", "rate_bps", "limit_bytes", "limit_ns", "ce_threshold_ns", "measured_rate_bps",
              "burst_bytes", "burst_mtus", "ceil_bps", "prio"}
    gauges = {"active_flows", "sparse_flows", "bulk_flows"}
    classes = stats["classes"]
    shown = classes[:max_classes]
    bad: list[str] = []
    compared = 0
    for c in shown:
        for k, v in c.items():
            if k in config or isinstance(v, bool) or not isinstance(v, int):
                continue
            gauge = k.startswith("backlog_") or k in gauges
            if k.endswith("_ns"):  # base units: seconds
                k, v = k[:-3] + "_seconds", v / 1e9
            name = "pspxdp_class_" + k + ("" if gauge else "_total")
            got = series.get((name, c["class"]))
            compared += 1
            if got is None or abs(got - v) > 1e-9 * max(1.0, abs(v)):
                bad.append(f'{name}{{class="{c["class"]}"}} {got} != stats -j {v}')
    check(f"{compared} per-class series equal stats -j's counters ({len(shown)} classes)" +
          "".join("\n     " + b for b in bad[:5]), not bad and compared > 0)
    tx = next(c for c in classes if c["class"] == "1:1")["tx_bytes"]
    check(f"1:1 sent bytes (pspxdp_class_tx_bytes_total {tx:.0f})", tx > 0 or max_classes == 0)
    left_out = [c["class"] for c in classes[max_classes:]]
    check(f"no per-class series for the {len(left_out)} classes left out",
          not any(k[1] in left_out for k in series))
    check(f"pspxdp_classes_omitted is {len(left_out)}",
          series.get(("pspxdp_classes_omitted", None)) == len(left_out))
    check("pspxdp_classes_tx_bytes sums every class",
          series.get(("pspxdp_classes_tx_bytes", None)) == sum(c["tx_bytes"] for c in classes))
    for c in shown:
        if series.get(("pspxdp_class_rate_bytes_per_second", c["class"])) != c["rate_bps"] // 8:
            check(f'{c["class"]}: rate_bytes_per_second is rate_bps / 8', False)
        if series.get(("pspxdp_class_ceil_bytes_per_second", c["class"])) != c["ceil_bps"] // 8:
            check(f'{c["class"]}: ceil_bytes_per_second is ceil_bps / 8', False)
    check("pspxdp_line_rate_bytes_per_second is line_rate_bps / 8",
          series.get(("pspxdp_line_rate_bytes_per_second", None)) == stats["line_rate_bps"] // 8)
    check("pacer alive, heartbeat age a number",
          series.get(("pspxdp_pacer_alive", None)) == 1
          and not math.isnan(series.get(("pspxdp_heartbeat_age_seconds", None), math.nan)))
    check("clock info: clockless on a veth", 'pspxdp_clock_info{' in prom and 'clock="clockless"' in prom)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[2]) as f:
        prom = f.read()
    judge(load(argv[1]), prom, int(argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
