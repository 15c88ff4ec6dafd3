#!/usr/bin/env bash
# Set up placement_env in ./.venv on a fresh Debian machine with Python 3.11.
#   bash setup.sh          the package with TensorFlow (CPU build)
#   bash setup.sh --dev    the same plus the test tools
set -euo pipefail
cd "$(dirname "$0")"
extras="tf-cpu"
for arg in "$@"; do
    case "$arg" in
        --dev) extras="$extras,dev" ;;
        *) echo "setup.sh: unknown option '$arg' (accepted: --dev)" >&2; exit 2 ;;
    esac
done
python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "setup.sh: needs Python >= 3.11 as '$python' (set PYTHON=/path/to/python3.11)" >&2; exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$extras]"
echo "setup.sh: placement_env installed in .venv with extras [$extras]" >&2
