#!/usr/bin/env bash
# Sets up, builds and runs pspxdp's main job on its embedded default:
#   1. the paper's experiments replayed through the engine on a simulated
#      1 Gbit/s wire (pspxdp simulate);
#   2. the lab's quick set (lab/lab.sh): pspxdp beside tbf, htb and no shaping
#      on one veth wire between network namespaces, judged by pspxdp analyze
#      (byte clock and real time), and TCP through a small-buffer bottleneck;
#      tables on stdout, CSV/PNG under build/results/<date>-<what>/ (scratch:
#      the checkout stays clean). --publish writes docs/results/ instead, the
#      results the README cites.
# Ends with a three-line verdict: what was shown, where the files are, what next.
# Options after -- go to lab/lab.sh (e.g. -- --full, -- --out /tmp/results).
set -euo pipefail
cd "$(dirname "$0")/.."
LAB_ARGS=()
while (($#)); do
    case $1 in
    --publish) LAB_ARGS+=(--publish) ;;
    --) shift; LAB_ARGS+=("$@"); break ;;
    -h | --help) sed -n '2,12s/^# \{0,1\}//p' "$0"; echo "usage: $0 [--publish] [-- LAB_OPTIONS]"; exit 0 ;;
    *) echo "run.sh: unknown option \"$1\" (usage: $0 [--publish] [-- LAB_OPTIONS])" >&2; exit 2 ;;
    esac
    shift
done
BUILD_DIR=${BUILD_DIR:-build}
bash scripts/setup.sh
# ninja shows its progress: one status line on a terminal, a line per step
# otherwise (the first build compiles ~110 files: minutes on 2 cores).
echo "run: building into $BUILD_DIR/"
bash scripts/build.sh
echo
"$BUILD_DIR/user/pspxdp" simulate
echo
if [[ $EUID -ne 0 ]]; then
    echo "shown:   the paper's experiments replayed through the engine (the table above)"
    echo "files:   none written; the netns lab needs root"
    echo "next:    sudo $0   (the lab: pspxdp beside tbf, htb and no shaping on a veth wire)"
    exit 0
fi
rc=0
BUILD_DIR=$PWD/$BUILD_DIR bash lab/lab.sh "${LAB_ARGS[@]}" || rc=$?
# Where lab.sh wrote (its --out, --publish, else its default).
OUT=$BUILD_DIR/results
for ((i = 0; i < ${#LAB_ARGS[@]}; i++)); do
    case ${LAB_ARGS[i]} in
    --publish) OUT=docs/results ;;
    --out) OUT=${LAB_ARGS[i + 1]:-} ;;
    --out=*) OUT=${LAB_ARGS[i]#--out=} ;;
    esac
done
echo
if ((rc == 0)); then
    echo "shown:   the paper's experiments replayed, then pspxdp beside tbf, htb and no shaping on one veth wire (tables above)"
else
    echo "shown:   the paper's experiments replayed; the lab stopped (exit $rc, its messages above)"
fi
echo "files:   $OUT/<date>-<what>/ (README.md with the tables, CSV, PNG, the machine and the command)"
echo "next:    ./scripts/run.sh -- --full (every experiment), ./scripts/test.sh (every test), or pace a device: README \"Quick start: pace a device\""
exit $rc
