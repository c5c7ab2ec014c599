#!/usr/bin/env bash
# Sets up, builds and runs pspxdp's main job on its embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh >/dev/null
BUILD_DIR=${BUILD_DIR:-build}
exec "$BUILD_DIR/user/pspxdp" simulate "$@"
