"""A UDP flow of a run: where it goes, the rate it is shaped to, what its
sender offers (run.py measures it, shapers.py sets a shaper up for it)."""
from dataclasses import dataclass

from .units import parse_rate_bps


@dataclass
class Flow:
    name: str
    dst: str
    port: int
    rate: str          # the target (tc syntax)
    offered: str       # what the sender offers
    start: float = 0.0  # on/off schedule, seconds from the sender's start
    stop: float = 0.0   # 0: until the end

    @property
    def rate_bps(self) -> int:
        return parse_rate_bps(self.rate)

    def selector(self, proto: str = "udp") -> str:
        return f"dst {self.dst} proto {proto} dport {self.port}"

    def spec(self) -> str:
        s = f"{self.dst}:{self.port}:{self.offered}"
        return s + (f":{self.start}:{self.stop}" if self.stop else "")
