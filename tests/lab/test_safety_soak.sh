#!/usr/bin/env bash
# The soak (tests/soak/soak.sh) in its short CI form: 45 s at half the
# offered rates. The full one: SOAK_SECONDS=600 bash tests/soak/soak.sh
# Exit 77 = skipped.
export SOAK_SECONDS=${SOAK_SECONDS:-45} SOAK_SCALE=${SOAK_SCALE:-0.5}
exec bash "$(cd "$(dirname "$0")" && pwd)/../soak/soak.sh"
