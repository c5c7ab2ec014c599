"""An agent's rate log (`pspxdp group join --log FILE`: "REALTIME_NS RATE_BPS"
a line) and what its rates allow: the cluster lab tests' and benchmarks'."""

RateLog = list[tuple[int, int]]


def read_rate_log(path: str) -> RateLog:
    """An agent's rate log: (REALTIME_NS, RATE_BPS) per line."""
    with open(path) as f:
        return [(int(t), int(r)) for t, r in (line.split() for line in f if line.strip())]


def share_bytes(log: RateLog, a_ns: int, b_ns: int) -> int:
    """Bytes the rates of a rate log (0 before its first line) allow from A to B."""
    total, rate, at = 0, 0, a_ns
    for t, r in [*log, (b_ns, 0)]:
        if t > at:
            end = min(t, b_ns)
            total += rate * (end - at)
            at = end
        if t >= b_ns:
            break
        rate = r
    return total // 8 // 1_000_000_000


def share_at(log: RateLog, t_ns: int) -> int:
    """The rate applied at T (0 before the log's first line)."""
    rate = 0
    for t, r in log:
        if t > t_ns:
            break
        rate = r
    return rate
