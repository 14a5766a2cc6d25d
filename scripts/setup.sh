#!/usr/bin/env bash
# Create .venv with a Python that works with the Qt binding, install the package with its
# extras, and make sure the system has lavapipe (Vulkan on the CPU) and Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."

# PySide6 6.12 is broken on CPython 3.11 (see docs): require 3.12+.
find_python() {
    for cand in "${PYTHON:-}" python3.12 python3.13 python3 \
                "$HOME"/.pyenv/versions/3.12*/bin/python3.12 "$HOME"/.pyenv/versions/3.13*/bin/python3.13 \
                /usr/bin/python3.13 /usr/bin/python3.12; do
        [ -n "$cand" ] || continue
        if command -v "$cand" >/dev/null 2>&1 && \
           "$cand" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
            command -v "$cand"; return 0
        fi
    done
    return 1
}

missing=()
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || missing+=(mesa-vulkan-drivers libvulkan1)
command -v Xvfb >/dev/null 2>&1 || missing+=(xvfb)
dpkg -s libxcb-cursor0 >/dev/null 2>&1 || missing+=(libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxkbcommon-x11-0 libxcb-image0 libxcb-render-util0 libxcb-shape0 libegl1 libgl1 libfontconfig1 libdbus-1-3)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing system packages: ${missing[*]}"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "setup: please install these system packages (as root): apt-get install ${missing[*]}"
    fi
fi

if [ ! -x .venv/bin/python ]; then
    PYBIN=$(find_python) || { echo "setup: need Python >= 3.12 (PySide6 6.12 breaks on 3.11)"; exit 1; }
    echo "setup: creating .venv with $PYBIN"
    "$PYBIN" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
# pip's exit status matters, its chatter about unused index locations does not
set -o pipefail
.venv/bin/python -m pip install -q -e '.[dev]' 2>&1 | { grep -v "^WARNING: Location" || true; }
echo "setup: done ($(.venv/bin/python --version))"
