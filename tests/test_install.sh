#!/usr/bin/env bash
# cmake --install into a DESTDIR puts the binary, the man page and the
# systemd unit where a Debian host expects them, and they are usable: the
# binary runs, the man page renders without warnings and covers every
# command, the unit starts the installed binary with /etc/pspxdp/DEV.conf.
set -u
BUILD=${1:?usage: test_install.sh BUILD_DIR}
DEST=$(mktemp -d)
trap 'rm -rf "$DEST"' EXIT
source "$(cd "$(dirname "$0")" && pwd)/../lab/netns.sh" # psp_check, psp_finish
DESTDIR=$DEST cmake --install "$BUILD" --prefix /usr >"$DEST.log" 2>&1 ||
    { cat "$DEST.log"; rm -f "$DEST.log"; exit 1; }
rm -f "$DEST.log"
BIN=$DEST/usr/sbin/pspxdp MAN=$DEST/usr/share/man/man8/pspxdp.8
UNIT=$DEST/usr/lib/systemd/system/pspxdp@.service
psp_check "binary in /usr/sbin" test -x "$BIN"
psp_check "it runs" bash -c "'$BIN' --version | grep -q '^pspxdp [0-9]'"
psp_check "man page in man8" test -s "$MAN"
psp_check "man page renders without warnings" \
    bash -c "[ -z \"\$(groff -man -Tutf8 -ww -z '$MAN' 2>&1)\" ]"
for c in $("$BIN" --help | awk '/^Commands:/ {on = 1; next} on && !NF {exit} on {print $1}'); do
    psp_check "man page covers pspxdp $c" grep -q "^\.SS \"pspxdp $c " "$MAN"
done
psp_check "man page covers daemon (internal) too" grep -q '^\.SS "pspxdp daemon ' "$MAN"
psp_check "systemd unit installed" test -s "$UNIT"
psp_check "unit attaches with /etc/pspxdp/DEV.conf" \
    grep -q '^ExecStart=/usr/sbin/pspxdp attach %I --foreground --config /etc/pspxdp/%I.conf$' "$UNIT"
psp_check "unit detaches after stop" grep -q '^ExecStopPost=-/usr/sbin/pspxdp detach %I$' "$UNIT"
psp_check "unit restarts on failure" grep -q '^Restart=on-failure$' "$UNIT"
GUNIT=$DEST/usr/lib/systemd/system/pspxdp-group@.service
psp_check "cluster unit joins with /etc/pspxdp/DEV.group" \
    grep -q '^ExecStart=/usr/sbin/pspxdp group join %I $PSPXDP_GROUP$' "$GUNIT"
psp_check "example configuration installed" test -s "$DEST/usr/share/doc/pspxdp/example.conf"
psp_finish
