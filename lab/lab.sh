#!/usr/bin/env bash
# The pspxdp lab: pspxdp beside tbf, htb and no shaping on one veth wire
# between network namespaces (sender - wire - router - bottleneck -
# receivers, ACKs back through a delay line), judged by `pspxdp analyze`.
#
#   lab/lab.sh            the quick set: side by side (one flow; three flows),
#                         TCP through the bottleneck at two FIFO sizes
#   lab/lab.sh --full     every experiment: rate sweep, five classes, 96 flows,
#                         side by side, TCP at FIFO 16 KB ... 4 MB
#   lab/lab.sh --help     every option
#
# Results: $BUILD_DIR/results/<date>-<what>/ (--publish: docs/results/, the
# ones the README cites; tables in README.md, CSV, PNG, the
# machine and the exact command). Needs root and a build (scripts/build.sh).
# Everything it creates carries the prefix psp-lab<pid> / pl<pid> and is
# removed on exit, even on failure or Ctrl-C. Exit 77: cannot run here.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=${BUILD_DIR:-$HERE/../build}
export BUILD_DIR
# Debian's python3 (python3-matplotlib is installed for it, scripts/setup.sh).
PYTHON=${PYTHON:-/usr/bin/python3}
# The driver is the package lab/psplab; -B: no __pycache__ in the checkout (run as root).
export PYTHONPATH=$HERE${PYTHONPATH:+:$PYTHONPATH}
LAB=("$PYTHON" -B -m psplab)
for arg in "$@"; do
    [[ $arg == -h || $arg == --help ]] && exec "${LAB[@]}" --help
done
"${LAB[@]}" --check-args "$@" || exit
source "$HERE/netns.sh"
psp_require lab "${PSPXDP:-$BUILD_DIR/user/pspxdp}" "$BUILD_DIR/lab/psp_traffic" "$BUILD_DIR/lab/psp_delay" \
    -- ip tc ss tcpdump iperf3 ethtool nsenter ping chrt "$PYTHON"
"$PYTHON" -c "import matplotlib" 2>/dev/null ||
    { echo "lab: python3-matplotlib missing (run scripts/setup.sh)" >&2; exit 77; }
exec "${LAB[@]}" "$@"
