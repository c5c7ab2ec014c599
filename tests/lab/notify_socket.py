#!/usr/bin/env python3
"""systemd's side of sd_notify for test_service: a datagram socket at SOCKET;
each message it receives appended to LOG as one line. Runs until killed.

  notify_socket.py SOCKET LOG
"""
import socket
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(argv[1])
        with open(argv[2], "a") as out:
            while True:
                out.write(s.recv(4096).decode().replace("\n", " ") + "\n")
                out.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
