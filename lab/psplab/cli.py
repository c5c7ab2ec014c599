"""What the lab's two commands (`python3 -m psplab`, `python3 -m psplab
cluster`) share: the option parser that fails in one line, the option
types, and the guard that bounds a run in time and always cleans up. Also
the subcommand table of the helper scripts the lab tests and benchmarks run
(tests/lab/*.py, bench/*.py; lab/netns.sh puts lab/ on PYTHONPATH)."""
import argparse
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NoReturn, TypeVar

from .units import parse_rate_bps


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line naming the offending word, exit 2
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


@dataclass(frozen=True)
class Sub:
    """A helper script's subcommand: the names of its arguments (strings, in
    order; the last `optional` of them may be left out) and what runs it,
    given them; with `more`, the last one takes one or more words, given as
    a list. run's answer is the exit status (None: 0)."""
    args: tuple[str, ...]
    run: Callable[..., int | None]
    optional: int = 0
    more: bool = False


def subcommands(doc: str | None, argv: list[str], table: dict[str, Sub]) -> int:
    """Runs the subcommand argv[1] of a helper script with argv[2:]; a wrong
    word or count of arguments is one line and exit 2, --help prints doc."""
    parser = Parser(prog=Path(argv[0]).name, description=doc,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, sub in table.items():
        p = commands.add_parser(name)
        for i, arg in enumerate(sub.args):
            if sub.more and i == len(sub.args) - 1:
                p.add_argument(arg, nargs="+")
            elif i >= len(sub.args) - sub.optional:
                p.add_argument(arg, nargs="?")
            else:
                p.add_argument(arg)
    ns = parser.parse_args(argv[1:])
    sub = table[ns.command]
    given = [getattr(ns, a) for a in sub.args]
    return sub.run(*[a for a in given if a is not None]) or 0


def rate(text: str) -> str:
    """A tc rate as the CLI reads it, kept as written (tc and pspxdp get it)."""
    try:
        parse_rate_bps(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


Number = TypeVar("Number", int, float)


def number_in(kind: Callable[[str], Number], lo: Number, hi: Number) -> Callable[[str], Number]:
    """An argparse type: kind(text) within lo..hi."""

    def convert(text: str) -> Number:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'"{text}": expected a number, {lo:g}..{hi:g}') from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f'"{text}": expected {lo:g}..{hi:g}')
        return v
    return convert


def guarded(who: str, body: Callable[[], None], cleanup: Callable[[], None], alarm_s: int) -> int:
    """Runs body, stopped as by ^C on SIGTERM or after alarm_s (SIGALRM); a
    failure is reported with its traceback; cleanup runs whatever happened,
    with SIGTERM and SIGINT ignored. Returns 0, 130 (stopped) or 1 (failed)."""
    def on_signal(sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(alarm_s)
    rc = 0
    try:
        body()
    except KeyboardInterrupt as e:
        print(f"{who}: stopped ({e})", file=sys.stderr)
        rc = 130
    except Exception as e:  # noqa: BLE001 - report, clean up, fail
        traceback.print_exc()
        print(f"{who}: failed: {e}", file=sys.stderr)
        rc = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cleanup()
    return rc
