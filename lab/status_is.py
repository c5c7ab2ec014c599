#!/usr/bin/env python3
"""Whether a Python expression holds for a `pspxdp status -j` (lab/netns.sh's
psp_status_is and psp_json_is).

  status_is.py EXPRESSION [FILE]     FILE (default stdin): the status JSON

The expression sees d, the status object, and c("1:1"), a class's object
in it. Exit 0 when it holds, 1 when not (or the JSON or the expression
cannot be read), printing nothing.
"""
import json
import sys
from typing import Any


def holds(expression: str, text: str) -> bool:
    d = json.loads(text)

    def c(name: str) -> Any:
        return next(x for x in d["classes"] if x["class"] == name)
    return bool(eval(expression, {"d": d, "c": c}))


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if len(argv) == 3:
            with open(argv[2]) as f:
                text = f.read()
        else:
            text = sys.stdin.read()
        return 0 if holds(argv[1], text) else 1
    except Exception:  # noqa: BLE001 - a status that cannot be judged does not hold
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
