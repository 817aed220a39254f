#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test but those labelled slow or llamacpp (the latter need
# scripts/install-llamacpp-peer.sh first: ctest --test-dir build -L llamacpp).
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit  or  scripts/test.sh -R Gguf.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-test-peers.sh
BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh -DMODELSERVE_WERROR=ON
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" -LE '^(slow|llamacpp)$' "$@"
