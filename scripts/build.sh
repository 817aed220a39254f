#!/usr/bin/env bash
# Configures and builds everything into build/ (override with BUILD_DIR). Extra arguments go to cmake's
# configure step, e.g. scripts/build.sh -DENGINE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
if [[ ! -f $build_dir/CMakeCache.txt || $# -gt 0 ]]; then
  cmake -S . -B "$build_dir" -G Ninja "$@"
fi
cmake --build "$build_dir" -j"$(nproc)"
