#!/usr/bin/env bash
# Sets up, builds and runs pspxdp's main job on its embedded default:
#   1. the paper's experiments replayed through the engine on a simulated
#      1 Gbit/s wire (pspxdp simulate);
#   2. the netns lab (lab/lab.sh): pspxdp attached to a veth wire between two
#      namespaces, three paced UDP classes and a greedy unclassified flow,
#      everything captured and judged on the byte clock.
# Options after -- go to lab/lab.sh (e.g. -- --seconds 5 --keep /tmp/lab).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh >/dev/null
BUILD_DIR=${BUILD_DIR:-build}
[[ ${1:-} == -- ]] && shift
"$BUILD_DIR/user/pspxdp" simulate
echo
if [[ $EUID -ne 0 ]]; then
    echo "(the netns lab needs root: sudo $0)"
    exit 0
fi
BUILD_DIR=$PWD/$BUILD_DIR exec bash lab/lab.sh "$@"
