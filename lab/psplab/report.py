"""Tables (text and Markdown), CSV, plots (matplotlib) and the results
directory: <results root>/<date>-<what>/ (build/results; docs/results with
--publish) with the machine and the command."""
import csv
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

REAL_TIME_NOTE = ("real time: capture timestamps on a veth, i.e. the sending daemon's or qdisc's "
                  "timer, not a NIC's serialisation clock; this VM's timers jitter by up to "
                  "milliseconds")
BYTE_CLOCK_NOTE = ("byte clock: each frame's time is the wire bytes of every frame before it "
                   "(PAUSE gap frames included) over the line rate: what a NIC at that rate "
                   "would show (docs/design.md §5); defined only where gap frames fill the wire (pspxdp)")


NOTE_WIDTH = 100  # a table's notes on stdout wrap here


def mbit(bps: float | None, digits: int = 3) -> str:
    return "-" if bps is None else f"{bps / 1e6:.{digits}f}"


def num(v: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def as_dicts(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """Dataclass rows as the dicts csv() and the --json summary print."""
    return [dataclasses.asdict(r) for r in rows]


class Table:
    def __init__(self, title: str, headers: list[str], notes: Iterable[str] = ()) -> None:
        self.title, self.headers, self.notes = title, headers, list(notes)
        self.rows: list[list[str]] = []

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def text(self) -> str:
        w = [max(len(h), *(len(r[i]) for r in self.rows)) if self.rows else len(h)
             for i, h in enumerate(self.headers)]

        def line(cells: list[str]) -> str:
            return "  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(cells))
        out = [self.title, line(self.headers)] + [line(r) for r in self.rows]
        # Notes wrapped to a terminal's width (one ran to 364 characters).
        for n in self.notes:
            out += textwrap.wrap(n, NOTE_WIDTH, initial_indent="  note: ", subsequent_indent="        ",
                                 break_on_hyphens=False)
        return "\n".join(out)

    def markdown(self) -> str:
        out = [f"**{self.title}**", "", "| " + " | ".join(self.headers) + " |",
               "|" + "|".join("---" if i == 0 else "---:" for i in range(len(self.headers))) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        out += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(out)


def machine() -> str:
    def cmd(*a: str) -> str:
        try:
            return subprocess.run(a, capture_output=True, text=True, timeout=10).stdout.strip()
        except OSError:
            return "?"
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = Path("/proc/meminfo").read_text().split()[1]
    here = str(Path(__file__).resolve().parent.parent)
    commit = cmd("git", "-C", here, "describe", "--always", "--dirty")
    load = Path("/proc/loadavg").read_text().split()[:3]
    return (f"{platform.node()}: Linux {platform.release()}, {os.cpu_count()} x {cpu}, "
            f"{int(mem) // 1024} MiB RAM; {cmd('lsb_release', '-ds') or 'Linux'}; "
            f"pspxdp {commit}; load average {load}")


class Results:
    """One experiment's directory: tables, CSV, plots, README.md."""

    def __init__(self, root: str, what: str, command: str, started: datetime.datetime) -> None:
        self.dir = os.path.join(root, f"{started:%Y-%m-%d}-{what}")
        os.makedirs(self.dir, exist_ok=True)
        self.what, self.command, self.started = what, command, started
        self.tables: list[Table] = []
        self.files: list[str] = []

    def csv(self, name: str, rows: Sequence[Mapping[str, object]]) -> None:
        if not rows:
            return
        path = os.path.join(self.dir, name)
        keys = list(dict.fromkeys(k for r in rows for k in r))
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, keys)
            w.writeheader()
            # A list or mapping in a cell is written as JSON: readable back
            # (json.loads), None as null.
            w.writerows({k: json.dumps(v) if isinstance(v, list | tuple | dict) else v for k, v in r.items()}
                        for r in rows)
        self.files.append(name)

    def table(self, t: Table) -> None:
        self.tables.append(t)
        print(t.text())
        print()

    def plot_path(self, name: str) -> str:
        self.files.append(name)
        return os.path.join(self.dir, name)

    def save(self, fig: "Figure", name: str) -> None:
        fig.tight_layout()
        fig.savefig(self.plot_path(name), dpi=110)
        import matplotlib.pyplot as plt
        plt.close(fig)

    def finish(self, extra: str = "") -> None:
        with open(os.path.join(self.dir, "README.md"), "w") as f:
            f.write(f"# {self.what}\n\n")
            f.write(f"- date: {self.started:%Y-%m-%d %H:%M} UTC\n- machine: {machine()}\n")
            f.write(f"- command: `{self.command}`\n\n")
            if extra:
                f.write(extra.strip() + "\n\n")
            for t in self.tables:
                f.write(t.markdown() + "\n\n")
            for name in self.files:
                if name.endswith((".png", ".svg")):
                    f.write(f"![{name}]({name})\n\n")
            f.write("Files: " + ", ".join(self.files) + "\n")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, imported only when a plot is
    drawn (lab.sh --help and argument checks need no matplotlib)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
