#!/usr/bin/env bash
# `make run [MODEL=path.onnx]`: the window when there is a display; otherwise the same main
# job in the terminal (load the model, run it on every available backend, print timings).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
MODEL=${1:-}
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
    exec "$PY" -m workbench ${MODEL:+"$MODEL"}
fi

echo "No display found (DISPLAY / WAYLAND_DISPLAY unset): running headless."
echo "For the window, run on a desktop, or under a virtual display:"
echo "    xvfb-run -a make run${MODEL:+ MODEL=$MODEL}     (then look at it with e.g. x11vnc)"
echo "    or: ssh -X, then make run"
echo "Screenshots of the window: make screenshots (writes docs/screenshots/*.png)"
echo
exec "$PY" -m workbench --headless ${MODEL:+"$MODEL"}
