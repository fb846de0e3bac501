#!/bin/sh
# Installs what the TensorFlow.js gradient peer (scripts/peers/tfjs/) needs, if
# anything is missing; quick and silent when everything is there:
#   - Debian's nodejs and npm, when `node` or `npm` is not on PATH;
#   - from npm, @tensorflow/tfjs at the version scripts/peers/tfjs/package.json
#     pins, into scripts/peers/tfjs/node_modules, with `npm ci --ignore-scripts`
#     (the lock file's exact tree): pure JavaScript, its CPU backend included;
#     no tfjs-node (native TensorFlow) and nothing for a GPU is installed or
#     used, and no install script runs.
# Exit status: 0, or 1 when something cannot be installed (with a message;
# `npm ping` tells whether the npm registry answers).
set -eu
here=$(dirname "$0")
dir="$here/peers/tfjs"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    sh "$here/install-deps.sh" nodejs npm
fi

want=$(sed -n 's/.*"@tensorflow\/tfjs": *"\([^"]*\)".*/\1/p' "$dir/package.json")
have=$(cd "$dir" && node -p "require('@tensorflow/tfjs/package.json').version" 2>/dev/null || true)
if [ "$have" != "$want" ]; then
    echo "refenc: installing @tensorflow/tfjs $want from npm into $dir/node_modules" >&2
    if ! (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
        if ! (cd "$dir" && npm ping --loglevel=error >/dev/null 2>&1); then
            echo "refenc: the npm registry does not answer (npm ping failed): @tensorflow/tfjs $want cannot be installed; make certify-tfjs-grad needs it once, then runs offline" >&2
        else
            echo "refenc: npm could not install @tensorflow/tfjs $want (the registry answers; see npm's message above)" >&2
        fi
        exit 1
    fi
fi
# the package must load here and its pure-JavaScript CPU backend initialise
(cd "$dir" && node -e "const tf = require('@tensorflow/tfjs'); tf.enableProdMode();
  tf.setBackend('cpu').then((ok) => process.exit(ok ? 0 : 1), () => process.exit(1))") ||
    { echo "refenc: @tensorflow/tfjs $want is installed in $dir/node_modules but its cpu backend does not load" >&2; exit 1; }
