#!/usr/bin/env bash
# Sets up, builds and runs pspxdp's main job on its embedded default:
#   1. the paper's experiments replayed through the engine on a simulated
#      1 Gbit/s wire (pspxdp simulate);
#   2. the lab's quick set (lab/lab.sh): pspxdp beside tbf, htb and no shaping
#      on one veth wire between network namespaces, judged by pspxdp analyze
#      (byte clock and real time), and TCP through a small-buffer bottleneck;
#      tables on stdout, CSV/PNG under docs/results/<date>-<what>/.
# Options after -- go to lab/lab.sh (e.g. -- --full, -- --out /tmp/results).
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
