#!/usr/bin/env bash
# Set up placement_env in ./.venv on a fresh Debian machine with Python 3.11.
#   bash setup.sh          the package with TensorFlow (CPU build) and the agents' torch (CPU build) and SB3
#   bash setup.sh --dev    the same plus the test tools and Ray
set -euo pipefail
cd "$(dirname "$0")"
extras="tf-cpu,agents"
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
# The Scotch static mapper (scotch_gmap on Debian, gmap elsewhere), used by the scotch/mincut baselines.
# Optional: without it everything else works and those two baselines say how to install it.
if command -v scotch_gmap >/dev/null 2>&1 || { command -v gmap >/dev/null 2>&1 && gmap -V 2>&1 </dev/null | grep -q gpart; }; then
    :
elif ! command -v apt-get >/dev/null 2>&1; then
    echo "setup.sh: the Scotch mapper is missing and apt-get is not available; install Scotch for the" \
         "scotch/mincut baselines (Debian/Ubuntu: apt-get install scotch); continuing without it" >&2
elif [ "$(id -u)" -eq 0 ]; then
    { apt-get install -y scotch >/dev/null || { apt-get update >/dev/null && apt-get install -y scotch >/dev/null; }; } \
        || echo "setup.sh: 'apt-get install -y scotch' failed; the scotch/mincut baselines need it; continuing" >&2
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    { sudo -n apt-get install -y scotch >/dev/null \
        || { sudo -n apt-get update >/dev/null && sudo -n apt-get install -y scotch >/dev/null; }; } \
        || echo "setup.sh: 'sudo apt-get install -y scotch' failed; the scotch/mincut baselines need it; continuing" >&2
else
    echo "setup.sh: the Scotch mapper is missing; for the scotch/mincut baselines run as root:" \
         "apt-get install scotch (continuing without it)" >&2
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$extras]"
echo "setup.sh: placement_env installed in .venv with extras [$extras]" >&2
