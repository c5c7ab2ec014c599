#!/usr/bin/env bash
# cmake --install --strip into a DESTDIR puts the binary, the man page, the
# bash completion and the systemd unit where a Debian host expects them, and
# they are usable: the binary is stripped and runs, --version names the git
# revision, the man page renders without warnings (man -l) and covers every
# command and the exit status rule, the completion loads in bash and
# completes, the unit starts the installed binary with /etc/pspxdp/DEV.conf
# and passes systemd-analyze verify and security. `cpack -G DEB` packs the
# same into a .deb with its dependencies from dpkg-shlibdeps. Needs no root
# and no systemd as PID 1 (nothing here starts the unit: tests/lab/test_service.sh
# runs its ExecStart with its capabilities).
set -u
BUILD=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
DEST=$(mktemp -d)
trap 'rm -rf "$DEST"' EXIT
source "$SRC/lab/netns.sh" # psp_check, psp_finish
DESTDIR=$DEST/root cmake --install "$BUILD" --prefix /usr --strip >"$DEST/install.log" 2>&1 ||
    { cat "$DEST/install.log"; exit 1; }
BIN=$DEST/root/usr/sbin/pspxdp MAN=$DEST/root/usr/share/man/man8/pspxdp.8
UNIT=$DEST/root/usr/lib/systemd/system/pspxdp@.service
COMPLETION=$DEST/root/usr/share/bash-completion/completions/pspxdp
psp_check "binary in /usr/sbin" test -x "$BIN"
psp_check "... stripped (no symbol table, no debug info)" \
    bash -c "! readelf -S '$BIN' | grep -qE '\.symtab|\.debug_info'"
psp_check "it runs: $("$BIN" --version)" bash -c "'$BIN' --version | grep -qE '^pspxdp [0-9]+\.[0-9]+\.[0-9]+ \(git [^ )]+\)$'"
if REV=$(git -C "$SRC" describe --tags --always 2>/dev/null); then
    psp_check "... and names the checkout's revision ($REV)" bash -c "'$BIN' --version | grep -qF '(git $REV)'"
fi

psp_check "man page in man8" test -s "$MAN"
psp_check "man page renders without warnings" \
    bash -c "[ -z \"\$(groff -man -Tutf8 -ww -z '$MAN' 2>&1)\" ]"
MANTEXT=$DEST/man.txt
MANWIDTH=100 man -l "$MAN" >"$MANTEXT" 2>"$DEST/man.err"
psp_check "man -l renders it, no messages" bash -c "[[ -s '$MANTEXT' && ! -s '$DEST/man.err' ]]"
for c in $("$BIN" --help | awk '/^Commands:/ {on = 1; next} on && !NF {exit} on {print $1}'); do
    psp_check "man page covers pspxdp $c" grep -q "^\.SS \"pspxdp $c " "$MAN"
done
psp_check "man page covers daemon (internal) too" grep -q '^\.SS "pspxdp daemon ' "$MAN"
psp_check "man page states the exit status rule (0, 1, 2)" python3 "$SRC/tests/man_exit_status.py" "$MANTEXT"

psp_check "bash completion installed" test -s "$COMPLETION"
# complete WORDS...: what bash offers after the words (the last one being typed).
complete_words() {
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _pspxdp; echo "${COMPREPLY[*]}"' \
        _ "$COMPLETION" "$@"
}
psp_check "completes filter words (pspxdp filter add lo d -> dst dport dscp)" \
    test "$(complete_words pspxdp filter add lo d)" = "dst dport dscp"
psp_check "completes protocol names after proto" \
    test "$(complete_words pspxdp filter add lo proto ud)" = "udp udplite"
psp_check "completes class words (pspxdp class add lo 1:1 500mbit l -> limit)" \
    test "$(complete_words pspxdp class add lo 1:1 500mbit l)" = "limit"
psp_check "completion registered for pspxdp" \
    bash -c "source '$COMPLETION' && complete -p pspxdp | grep -q -- '-F _pspxdp pspxdp'"
psp_check "completes a command (pspxdp att -> attach)" test "$(complete_words pspxdp att)" = attach
psp_check "completes options (attach --cl -> --clock --clockless)" \
    test "$(complete_words pspxdp attach --cl)" = "--clock --clockless"
psp_check "completes a choice (attach --clock '' -> auto byte none)" \
    test "$(complete_words pspxdp attach lo --clock '')" = "auto byte none"
psp_check "completes class's sub-commands (class '' -> add set change del show)" \
    test "$(complete_words pspxdp class '')" = "add set change del show"
psp_check "completes a device (detach l -> lo among them)" \
    bash -c "[[ ' $(complete_words pspxdp detach l) ' == *' lo '* ]]"

psp_check "systemd unit installed" test -s "$UNIT"
psp_check "unit attaches with /etc/pspxdp/DEV.conf" \
    grep -q '^ExecStart=/usr/sbin/pspxdp attach %I --foreground --config /etc/pspxdp/%I.conf$' "$UNIT"
psp_check "unit detaches after stop" grep -q '^ExecStopPost=-/usr/sbin/pspxdp detach %I$' "$UNIT"
# Without DEV.conf the unit fails loudly (no ConditionPathExists skip), and
# that failure, bad input, is not retried.
psp_check "unit does not skip silently without DEV.conf" bash -c "! grep -q '^ConditionPathExists=' '$UNIT'"
psp_check "unit does not retry bad input (exit 2)" grep -qx 'RestartPreventExitStatus=2' "$UNIT"
psp_check "attach --config of a missing file: exit 2, one line naming the file" \
    bash -c "out=\$('$BIN' attach lo --foreground --config '$DEST/none.conf' 2>&1); rc=\$?; [[ \$rc -eq 2 && \$(wc -l <<<\"\$out\") -eq 1 && \$out == *'$DEST/none.conf'* ]] || { echo \"rc \$rc: \$out\"; false; }"
psp_check "unit restarts on failure" grep -q '^Restart=on-failure$' "$UNIT"
psp_check "unit is Type=notify" grep -q '^Type=notify$' "$UNIT"
psp_check "example configuration installed" test -s "$DEST/root/usr/share/doc/pspxdp/example.conf"
# Copied as it says, it must not slow a faster NIC to 1 Gbit/s.
psp_check "example configuration sets no line rate (DEV's speed counts)" \
    bash -c "! grep -q '^line-rate' '$DEST/root/usr/share/doc/pspxdp/example.conf'"
psp_check "/etc/pspxdp made, for the unit's DEV.conf" test -d "$DEST/root/etc/pspxdp"
if command -v systemd-analyze >/dev/null; then
    # An instance of the template naming the DESTDIR's binary (verify checks
    # that what ExecStart= names is executable); the man page is not looked
    # up in the host's man database.
    sed "s|/usr/sbin/pspxdp|$BIN|g" "$UNIT" >"$DEST/pspxdp@eth0.service"
    psp_check "systemd-analyze verify passes" \
        bash -c "out=\$(systemd-analyze verify --man=no '$DEST/pspxdp@eth0.service' 2>&1); [[ -z \$out ]] || { echo \"\$out\"; false; }"
    SCORE=$(systemd-analyze security --offline=true "$DEST/pspxdp@eth0.service" 2>&1 |
        sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p')
    psp_check "systemd-analyze security: exposure ${SCORE:-?} (9.6 UNSAFE before) below 3.0" \
        awk -v s="${SCORE:-0}" 'BEGIN { exit !(0 < s && s < 3.0) }'
else
    echo "skip - systemd-analyze not installed: verify and security not checked"
fi

# The .deb, from the same build (cpack runs the install rules into its own DESTDIR).
if (cd "$DEST" && cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$DEST/pkg" >"$DEST/cpack.log" 2>&1); then
    DEB=$(ls "$DEST"/pkg/pspxdp_*.deb 2>/dev/null | head -1)
    psp_check "cpack -G DEB made $(basename "${DEB:-no .deb}") ($(du -k "${DEB:-/dev/null}" | cut -f1) KB)" test -s "${DEB:-}"
    dpkg-deb -c "$DEB" | awk '{print $6}' >"$DEST/deb.files"
    for f in ./usr/sbin/pspxdp ./usr/share/man/man8/pspxdp.8 ./usr/share/bash-completion/completions/pspxdp \
        ./usr/lib/systemd/system/pspxdp@.service ./usr/share/doc/pspxdp/example.conf ./etc/pspxdp/; do
        psp_check "... holds $f" grep -qx "$f" "$DEST/deb.files"
    done
    DEPENDS=$(dpkg-deb -f "$DEB" Depends)
    echo "     Depends (dpkg-shlibdeps): $DEPENDS"
    for lib in libbpf1 libxdp1 libpcap0.8 libsystemd0 libc6 libstdc++6; do
        psp_check "... depends on $lib" bash -c "[[ ', $DEPENDS,' == *', $lib'[' ,']* ]]"
    done
    psp_check "... dpkg -I: package pspxdp, section net" \
        bash -c "dpkg -I '$DEB' | grep -q '^ Package: pspxdp$' && dpkg -I '$DEB' | grep -q '^ Section: net$'"
    psp_check "... dpkg -I: postinst and postrm (systemctl daemon-reload)" \
        bash -c "dpkg-deb -I '$DEB' postinst | grep -q daemon-reload && dpkg-deb -I '$DEB' postrm | grep -q daemon-reload"
    # postinst creates the group whose members read the pins (share_pins in
    # attach), once: run with stubs that record what it would change.
    dpkg-deb -e "$DEB" "$DEST/control"
    STUB=$DEST/stub
    mkdir -p "$STUB"
    printf '#!/bin/sh\n[ -e %s/have-group ] && echo pspxdp:x:999:\n[ -e %s/have-group ]\n' "$STUB" "$STUB" >"$STUB/getent"
    printf '#!/bin/sh\necho "$*" >>%s/addgroup.calls\n: >%s/have-group\n' "$STUB" "$STUB" >"$STUB/addgroup"
    printf '#!/bin/sh\nexit 0\n' >"$STUB/systemctl"
    chmod +x "$STUB"/*
    psp_check "... postinst configure creates the system group pspxdp" \
        bash -c "PATH='$STUB':\$PATH sh '$DEST/control/postinst' configure && grep -qx -- '--system --quiet pspxdp' '$STUB/addgroup.calls'"
    psp_check "... and not again when it exists (an upgrade)" \
        bash -c "PATH='$STUB':\$PATH sh '$DEST/control/postinst' configure && test \$(wc -l <'$STUB/addgroup.calls') -eq 1"
    dpkg-deb -x "$DEB" "$DEST/deb"
    psp_check "... its unit names /usr/sbin/pspxdp (not the staging directory)" \
        grep -q '^ExecStart=/usr/sbin/pspxdp attach ' "$DEST/deb/usr/lib/systemd/system/pspxdp@.service"
    psp_check "... its binary stripped ($(du -k "$DEST/deb/usr/sbin/pspxdp" | cut -f1) KB; the build's $(du -k "$BUILD/user/pspxdp" | cut -f1) KB)" \
        bash -c "! readelf -S '$DEST/deb/usr/sbin/pspxdp' | grep -qE '\.symtab|\.debug_info'"
else
    cat "$DEST/cpack.log"
    psp_check "cpack -G DEB" false
fi
GUNIT=$DEST/root/usr/lib/systemd/system/pspxdp-group@.service
psp_check "cluster unit joins with /etc/pspxdp/DEV.group" \
    grep -q '^ExecStart=/usr/sbin/pspxdp group join %I $PSPXDP_GROUP$' "$GUNIT"
psp_finish
