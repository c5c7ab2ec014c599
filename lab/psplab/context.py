"""What every experiment is handed: the run's options, its lab and where
its results go."""
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field

from .net import Lab


@dataclass
class RunContext:
    full: bool
    seconds: float          # capture length per UDP run
    tcp_seconds: int        # iperf3 length
    line_rate: str          # the wire's rate M (tc syntax, as given)
    bottleneck: str         # the bottleneck's rate B (tc syntax, as given)
    delay_ms: float         # one-way delay of the return path
    daemon_rt: int          # SCHED_FIFO priority of pspxdp's daemon, 0: attach's own (deadline)
    pspxdp: str             # the binary
    traffic: str            # lab/psp_traffic
    out: str                # results root
    started: datetime.datetime
    command: str            # as the results' README quotes it
    keep_pcaps: bool
    lab: Lab
    work: str               # the raw files' directory
    progress: Callable[[str], None]
    # --json: every experiment's rows by experiment, printed at the end
    summary: dict[str, object] = field(default_factory=dict)
