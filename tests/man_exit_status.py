#!/usr/bin/env python3
"""test_install: the man page (as text) states the exit status rule: 0, 1
and 2 each described, and the words "usage error", "the system failed" and
"nothing to do" under EXIT STATUS.

  man_exit_status.py MAN_TEXT         exit 0 when it does
"""
import re
import sys


def states_rule(text: str) -> bool:
    part = text.split("EXIT STATUS", 1)[1].split("SEE ALSO", 1)[0]
    return (all(re.search(rf"^\s+{n}\s+\S", part, re.M) for n in "012")
            and "usage error" in part and "the system failed" in part and "nothing to do" in part)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        return 0 if states_rule(f.read()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
