#!/usr/bin/env bash
# Build the wheel, install it (not editable) in a fresh venv and run both commands from a
# folder outside the tree: the check that `pip install .` works from any directory.
#
# The fresh venv gets only the wheel; its dependencies come from .venv through a .pth line
# (a plain path, so .venv's editable-install hook is not loaded and cannot shadow the wheel).
# Usage: scripts/check_wheel.sh [PYTHON]   (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${1:-$ROOT/.venv/bin/python}
start=$SECONDS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/wheel-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_wheel: FAILED: $*" >&2; exit 1; }

# build from a copy of the tracked (and new, not ignored) files: no stale build/ output
mkdir "$tmp/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | \
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | \
        tar --null -T - -cf - | tar -xf - -C "$tmp/src"
else  # not a git checkout (an unpacked archive): everything but build outputs
    tar --exclude=./.venv --exclude=./build --exclude=./dist --exclude='*.egg-info' \
        --exclude=__pycache__ -cf - . | tar -xf - -C "$tmp/src"
fi
"$PY" -m pip wheel -q --no-deps -w "$tmp/dist" "$tmp/src" >"$tmp/build.log" 2>&1 \
    || { cat "$tmp/build.log" >&2; fail "pip wheel"; }
wheel=$(ls "$tmp"/dist/inference_workbench-*.whl) || fail "no wheel built"
"$PY" - "$wheel" <<'PYEOF' || fail "the wheel lacks package data"
import sys
import zipfile

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
want = ["workbench/resources/digits_cnn.onnx", "workbench/resources/icons/workbench.svg",
        "workbench/resources/samples/digit_3.png", "shaders/compute/matmul.wgsl"]
missing = [f for f in want if f not in names]
sys.exit(f"not in the wheel: {missing}" if missing else 0)
PYEOF

"$PY" -m venv --without-pip "$tmp/venv"
deps=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$deps" >"$site/_check_wheel_deps.pth"
"$PY" -m pip --python "$tmp/venv/bin/python" install -q --no-deps --no-index "$wheel" \
    || fail "pip install of the wheel"

mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$tmp/xdg}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
where=$("$tmp/venv/bin/python" -c 'import engine, workbench; print(engine.__file__, workbench.__file__)')
case "$where" in
    "$site"/engine/*" $site"/workbench/*) ;;
    *) fail "the venv imports the engine from $where, not from the installed wheel" ;;
esac
"$tmp/venv/bin/inference-engine" ops >"$tmp/ops.txt" 2>&1 || { cat "$tmp/ops.txt" >&2; fail "inference-engine ops"; }
grep -q "^native op types:" "$tmp/ops.txt" || fail "inference-engine ops printed no summary"
"$tmp/venv/bin/inference-workbench" --headless --repeat 1 >"$tmp/headless.txt" 2>&1 \
    || { cat "$tmp/headless.txt" >&2; fail "inference-workbench --headless"; }
for want in "feeding sample samples/digit_3.png" "== CPU: median"; do
    grep -q "$want" "$tmp/headless.txt" || { cat "$tmp/headless.txt" >&2; fail "no '$want'"; }
done
echo "check_wheel: ok ($(basename "$wheel"), installed and run from outside the tree in" \
     "$((SECONDS - start)) s)"
