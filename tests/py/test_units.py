"""psplab.units.parse_rate_bps against the pspxdp binary's parse_rate_bps
(`pspxdp analyze EMPTY.pcap -j --line-rate=RATE` prints line_rate_bps or
refuses with the parser's message): the same value or the same refusal for
every rate of the table. PSPXDP names the binary."""

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from psplab.units import fmt_rate, parse_rate_bps

RATES = [
    "500mbit", "1gbit", "1.5gbit", "980mbit", "64kbit", "1", "1bit", "+1kbit", "10MBit", "1GBIT",
    "1kibit", "1.5kibit", "3mibit", "1gibit", "1tibit", "1tbit", "1bps", "0.125bps", "1.5kbps",
    "1mbps", "1gbps", "1tbps", "1kibps", "1mibps", "1gibps", "1tibps", ".5kbit", "5.kbit",
    "1.001kbit", "1.000000000000000000000000001kbit", "1.0001kbit", "0.5bit", "0.1bps",
    "18446744073709551615", "18446744073709551615bit", "18446744073709551616",
    "2305843009213693951bps", "2305843009213693952bps", "99999999999999999999999tbit",
    "0", "0bit", "0.0mbit", "-1mbit", "-0", "", ".", "+", "mbit", "1e3", "1e3kbit", "1 mbit",
    "1mbit/s", "500mbits", "500M", "1.5gb", "2kib", "5KBps",
    "1furlong", "1.2.3mbit", '1"x', "1\\bit", "1\tbit", "1\nbit", "1\x7fbit", "1\u00b5bit",
    "\u0661mbit",
]

# A pcap header and no frame: analyze parses its options, reads nothing.
EMPTY_PCAP = bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000")
CLI_PREFIX = "pspxdp analyze: option --line-rate: "


def cli_rate(pspxdp: str, pcap: str, text: str) -> int | str:
    """The binary's value, or its message without the command's prefix."""
    r = subprocess.run([pspxdp, "analyze", pcap, "-j", f"--line-rate={text}"],
                       capture_output=True, text=True, errors="surrogateescape", timeout=30)
    if r.returncode == 0:
        value = json.loads(r.stdout)["line_rate_bps"]
        assert isinstance(value, int)
        return value
    message = r.stderr.strip()
    return message.removeprefix(CLI_PREFIX)


def py_rate(text: str) -> int | str:
    try:
        return parse_rate_bps(text)
    except ValueError as e:
        return str(e)


class RateParserTest(unittest.TestCase):
    def test_same_as_the_binary(self) -> None:
        pspxdp = os.environ.get("PSPXDP")
        if not pspxdp:
            self.skipTest("PSPXDP (the pspxdp binary) not set")
        with tempfile.TemporaryDirectory() as tmp:
            pcap = Path(tmp) / "empty.pcap"
            pcap.write_bytes(EMPTY_PCAP)
            for text in RATES:
                with self.subTest(rate=text):
                    self.assertEqual(py_rate(text), cli_rate(pspxdp, str(pcap), text))

    def test_fmt_rate_parses_back(self) -> None:
        for bps in (1, 999, 1000, 1500, 64000, 1_500_000, 500_000_000, 10**9, 3 * 10**12):
            with self.subTest(bps=bps):
                self.assertEqual(parse_rate_bps(fmt_rate(bps)), bps)


if __name__ == "__main__":
    unittest.main()
