#!/usr/bin/env bash
# ruff and mypy --strict (pyproject.toml) over every *.py under lab/, tests/,
# bench/ and scripts/: ctest lint_python. Any finding fails. TOOLS_DIR: where
# scripts/setup.sh --lint put ruff (default build/python-tools); mypy is Debian's,
# for /usr/bin/python3, the interpreter the lab runs.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${1:-$ROOT/build/python-tools}
cd "$ROOT"
[[ -x $TOOLS/bin/ruff ]] || { echo "lint_python: $TOOLS/bin/ruff missing (run scripts/setup.sh --lint)" >&2; exit 1; }
/usr/bin/python3 -c "import mypy" 2>/dev/null ||
    { echo "lint_python: python3-mypy missing (run scripts/setup.sh)" >&2; exit 1; }
mapfile -t files < <(find lab tests bench scripts -name '*.py' | sort)
((${#files[@]})) || { echo "lint_python: no Python files found" >&2; exit 1; }
rc=0
# Caches under TOOLS: the checkout stays clean.
"$TOOLS/bin/ruff" check --cache-dir "$TOOLS/ruff-cache" "${files[@]}" || rc=1
/usr/bin/python3 -m mypy --cache-dir "$TOOLS/mypy-cache" "${files[@]}" || rc=1
exit $rc
