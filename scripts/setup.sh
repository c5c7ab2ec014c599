#!/usr/bin/env bash
# Installs every Debian package pspxdp needs to build, test and run its lab;
# with --lint also ruff (the Python linter, not in Debian 12, from PyPI) into
# $BUILD_DIR/python-tools: only the test command (scripts/test.sh) lints, the
# Quick start's lab (scripts/run.sh) does not need it.
# Idempotent: quiet and quick when everything is already there.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LINT=0
case ${1:-} in
--lint) LINT=1 ;;
"") ;;
-h | --help) echo "usage: $0 [--lint]   (--lint: also ruff into \${BUILD_DIR:-build}/python-tools)"; exit 0 ;;
*) echo "setup.sh: unknown option \"$1\" (usage: $0 [--lint])" >&2; exit 2 ;;
esac

PKGS=(
  build-essential cmake ninja-build pkg-config
  clang llvm clang-format
  libbpf-dev libxdp-dev bpftool xdp-tools
  liburing-dev catch2 libpcap-dev nlohmann-json3-dev
  iproute2 ethtool tcpdump iperf3 iputils-ping strace
  python3 python3-matplotlib python3-mypy python3-scapy python3-venv
  ccache
  libsystemd-dev
  prometheus libcpp-httplib-dev curl jq
  etcd-server libcurl4-openssl-dev libssl-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# bpffs is needed for pins; it may be unmounted on a fresh machine (docs/design.md §9.1).
if [[ $(id -u) -eq 0 ]] && ! mountpoint -q /sys/fs/bpf; then
  mount -t bpf bpf /sys/fs/bpf
fi

# ruff from PyPI, pinned, in a venv of Debian's python3 (the lab's) under the
# build directory: the checkout stays clean. tests/lint_python.sh runs it.
((LINT)) || exit 0
RUFF_VERSION=0.17.5
TOOLS=${BUILD_DIR:-$ROOT/build}/python-tools
if [[ $("$TOOLS/bin/ruff" --version 2>/dev/null) != "ruff $RUFF_VERSION" ]]; then
  echo "setup: installing ruff $RUFF_VERSION into $TOOLS"
  /usr/bin/python3 -m venv --clear "$TOOLS"
  "$TOOLS/bin/pip" install -q --disable-pip-version-check "ruff==$RUFF_VERSION"
fi
