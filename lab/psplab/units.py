"""tc rates, exactly as pspxdp's CLI reads them (user/core/units.cpp).

The lab does arithmetic on the rates it hands to tc and pspxdp; a float
parser would accept what the CLI refuses ("0.5bit" became 0) and round what
it keeps. This one follows the CLI's grammar and messages, in integers:
an optional "+", decimal digits with an optional fraction, a unit from tc's
table (case-insensitive; none: bit/s), a whole non-zero number of bit/s that
fits 64 bits. tests/py/test_units.py holds it to the binary on a table.
"""

_KI = 1024

# tc's table (tc/tc_util.c get_rate): "bps" is BYTES per second, hence x8.
RATE_UNITS: dict[str, int] = {
    "bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
    "kibit": _KI, "mibit": _KI**2, "gibit": _KI**3, "tibit": _KI**4,
    "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9, "tbps": 8 * 10**12,
    "kibps": 8 * _KI, "mibps": 8 * _KI**2, "gibps": 8 * _KI**3, "tibps": 8 * _KI**4,
}
_U64_MAX = 2**64 - 1


def quote(word: str) -> str:
    """A user's word in double quotes, escaped as core/quote.cpp does: a
    hostile word can neither span lines nor forge output."""
    out = []
    for b in word.encode("utf-8", "surrogateescape"):
        c = chr(b)
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\x{b:02x}")
    return '"' + "".join(out) + '"'


def _lower(s: str) -> str:
    """The C locale's tolower: ASCII letters only."""
    return "".join(c.lower() if c.isascii() else c for c in s)


def rate_suggestion(text: str) -> str:
    """What a refused rate was likely meant as, as the CLI says it
    (rate_suggestion in units.cpp): "500mbits", "500mbit/s" -> "500mbit";
    "500M", "500mb" -> 500mbit (bit/s) or 500mbps (bytes/s); "" otherwise."""
    pos = 0
    while pos < len(text) and (text[pos] in "0123456789.+"):
        pos += 1
    if pos == 0 or pos == len(text):
        return ""
    number, unit = text[:pos], _lower(text[pos:])
    for tail in ("/s", "ps", "s"):
        if len(unit) > len(tail) and unit.endswith(tail):
            stem = unit[:-len(tail)]
            if stem and stem in RATE_UNITS:
                return quote(number + stem)
    if len(unit) <= 3 and unit[0] in "kmgt" and (len(unit) == 1 or unit[1:] in ("b", "i", "ib")):
        b = unit.find("b")
        prefix = unit if b < 0 else unit[:b]
        return f"{quote(number + prefix + 'bit')} (bit/s), or {quote(number + prefix + 'bps')} (bytes/s)"
    return ""


def parse_rate_bps(text: str) -> int:
    """"500mbit" -> 500000000. ValueError with the CLI's message otherwise."""

    def bad(what: str) -> ValueError:
        guess = rate_suggestion(text)
        return ValueError(f"rate {quote(text)}: {what}" + (f": did you mean {guess}?" if guess else ""))

    expected = '(expected e.g. "500mbit")'
    if not text:
        raise bad(f"empty {expected}")
    if text[0] == "-":
        raise bad("negative rate")
    pos = 1 if text[0] == "+" else 0  # strtod (and so tc) accepts a plus sign

    def digits_from(start: int) -> str:
        end = start
        while end < len(text) and text[end] in "0123456789":
            end += 1
        return text[start:end]

    int_digits = digits_from(pos)
    pos += len(int_digits)
    frac_digits = ""
    if pos < len(text) and text[pos] == ".":
        frac_digits = digits_from(pos + 1)
        pos += 1 + len(frac_digits)
    if not int_digits and not frac_digits:
        raise bad(f"not a number {expected}")
    unit = text[pos:]
    # isalpha() alone would take non-ASCII letters, which the CLI's C locale does not.
    if not all(c.isascii() and c.isalpha() for c in unit):
        raise bad(f"unexpected {quote(unit)} after the number")
    if not unit:
        raise bad(f"no unit {expected}")
    factor = RATE_UNITS.get(unit.lower())
    if factor is None:
        raise bad("unknown unit " + quote(unit))
    scaled = int(int_digits + frac_digits) * factor
    point: int = 10 ** len(frac_digits)
    if scaled % point:
        raise bad("not a whole number of bit/s")
    whole = scaled // point
    if whole > _U64_MAX:
        raise bad("too large (over 64 bits of bit/s)")
    if whole == 0:
        raise ValueError(f"rate {quote(text)}: zero rate")
    return whole


def fmt_rate(rate_bps: int) -> str:
    """The largest of gbit, mbit, kbit that divides rate_bps exactly: parses
    back to the same number."""
    for unit, div in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if rate_bps >= div and rate_bps % div == 0:
            return f"{rate_bps // div}{unit}"
    return f"{rate_bps}bit"
