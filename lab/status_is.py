#!/usr/bin/env python3
"""Whether a Python expression holds for a `pspxdp status -j` (lab/netns.sh's
psp_status_is and psp_json_is), or its value.

  status_is.py EXPRESSION [FILE]          FILE (default stdin): the status JSON
  status_is.py --print EXPRESSION [FILE]  prints the expression's value

The expression sees d, the status object, c("1:1"), a class's object in
it, and for `status -j` without DEV (a list of devices) dev("eth0"), the
device's object (None when it is not listed). Exit 0 when it holds (or,
with --print, was printed), 1 when not (or the JSON or the expression
cannot be read), printing nothing.
"""
import json
import sys
from typing import Any


def value(expression: str, text: str) -> Any:
    d = json.loads(text)

    def c(name: str) -> Any:
        return next(x for x in d["classes"] if x["class"] == name)

    def dev(name: str) -> Any:
        return next((x for x in d if x["dev"] == name), None)
    return eval(expression, {"d": d, "c": c, "dev": dev})


def main(argv: list[str]) -> int:
    show = len(argv) > 1 and argv[1] == "--print"
    a = argv[2:] if show else argv[1:]
    if len(a) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if len(a) == 2:
            with open(a[1]) as f:
                text = f.read()
        else:
            text = sys.stdin.read()
        v = value(a[0], text)
    except Exception:  # noqa: BLE001 - a status that cannot be judged does not hold
        return 1
    if show:
        print(v)
        return 0
    return 0 if v else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
