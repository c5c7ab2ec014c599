"""What every lab verdict script shares (tests/lab/*.py): a check's line as
lab/netns.sh's psp_verdict counts it, a figure's line, a JSON file read.

    from verdict import check, figure, load

The scripts run as `python3 tests/lab/NAME.py`, which puts this directory
first on sys.path.
"""
import json
from typing import Any

Json = dict[str, Any]


def check(what: str, ok: bool) -> bool:
    """Prints "ok   - WHAT" or "FAIL - WHAT" (psp_verdict counts the FAIL
    lines); returns ok."""
    print(f"{'ok   - ' if ok else 'FAIL - '}{what}")
    return ok


def figure(line: str) -> None:
    """A figure printed beside the checks, not judged."""
    print(f"     {line}")


def load(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
