#!/usr/bin/env bash
# Installs every Debian package pspxdp needs to build, test and run its lab.
# Idempotent: quiet and quick when everything is already there.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  clang llvm
  libbpf-dev libxdp-dev bpftool xdp-tools
  liburing-dev catch2 libpcap-dev nlohmann-json3-dev
  iproute2 ethtool tcpdump iperf3 iputils-ping
  python3 python3-matplotlib
  ccache
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
