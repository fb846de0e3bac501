#!/bin/sh
# Installs what the ONNX Runtime peer (scripts/peers/ort/) needs, if anything
# is missing; quick and silent when everything is there:
#   - Debian packages: python3-onnx and python3-numpy (the model builder), and
#     nodejs and npm when `node` or `npm` is not on PATH;
#   - from npm, onnxruntime-node at the version scripts/peers/ort/package.json
#     pins, into scripts/peers/ort/node_modules, with `npm ci --ignore-scripts`:
#     its CPU library ships inside the package; its install script would only
#     download GPU builds.
# Exit status: 0, or 1 when something cannot be installed (with a message).
set -eu
here=$(dirname "$0")
dir="$here/peers/ort"

sh "$here/install-deps.sh" python3-onnx python3-numpy
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    sh "$here/install-deps.sh" nodejs npm
fi

want=$(sed -n 's/.*"onnxruntime-node": *"\([^"]*\)".*/\1/p' "$dir/package.json")
have=$(cd "$dir" && node -p "require('onnxruntime-node/package.json').version" 2>/dev/null || true)
if [ "$have" != "$want" ]; then
    echo "refenc: installing onnxruntime-node $want from npm into $dir/node_modules" >&2
    (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
        { echo "refenc: npm could not install onnxruntime-node $want" >&2; exit 1; }
fi
# the package must load here: its native library for this platform is inside it
(cd "$dir" && node -e "require('onnxruntime-node')") ||
    { echo "refenc: onnxruntime-node $want is installed in $dir/node_modules but does not load" >&2; exit 1; }
