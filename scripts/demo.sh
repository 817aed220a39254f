#!/usr/bin/env bash
# Installs what is missing, builds, and runs a smoke pass of the binaries. (The served demo replaces this
# once serverd can load a model.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
bin=${BUILD_DIR:-build}

"$bin"/fetchd/fetchd --version
"$bin"/serverd/serverd --help | head -n 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetchd pull resolves a local directory to: $("$bin"/fetchd/fetchd pull --model "$work")"
