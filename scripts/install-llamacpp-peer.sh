#!/usr/bin/env bash
# Installs llama.cpp as a test peer into tests/llamacpp/node_modules (git-ignored): node-llama-cpp and its
# prebuilt Linux x64 CPU binaries, exactly as tests/llamacpp/package-lock.json pins them
# (npm install --omit=optional from the lock, which must not change). The CUDA, Vulkan
# and other platforms' prebuilt packages (optional dependencies of node-llama-cpp) are left out, and no
# install script runs, so nothing is downloaded or compiled outside npm's pinned tarballs. About 85 MB.
# Skips the install when the lock file has not changed since. Not part of scripts/test.sh: run it before
# scripts/bench-vs-llamacpp.sh or `ctest -L llamacpp`.
set -euo pipefail
cd "$(dirname "$0")/../tests/llamacpp"

if [[ $(uname -s)/$(uname -m) != Linux/x86_64 ]]; then
  echo "install-llamacpp-peer: only the Linux x86_64 CPU prebuilt is pinned; this is $(uname -s)/$(uname -m)" >&2
  exit 1
fi
stamp=node_modules/.package-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi
echo "install-llamacpp-peer: npm install from the lock in tests/llamacpp (node-llama-cpp, CPU prebuilt only)" >&2
# Not `npm ci`: node-llama-cpp 3.22.1 names optional packages (macOS, Windows, riscv64) that were never
# published at 3.22.1, so the lock cannot list them and `npm ci` refuses it as out of sync. `npm install`
# with --omit=optional reads the same lock (exact tarballs and integrity hashes); the lock must come out of
# it unchanged, or the install is refused.
# --ignore-scripts: node-llama-cpp's postinstall would otherwise fetch and build llama.cpp's sources when
# it finds no usable prebuilt binary; the scripts that use it ask for the prebuilt only (build: "never").
saved=$(mktemp)
trap 'rm -f "$saved"' EXIT
cp package-lock.json "$saved"
npm install --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error
if ! cmp -s package-lock.json "$saved"; then
  cp "$saved" package-lock.json
  echo "install-llamacpp-peer: npm changed tests/llamacpp/package-lock.json (restored); the pinned versions" \
    "did not install as locked: check 'npm --version' (npm 9 or later) and the lock" >&2
  exit 1
fi
for package in node-llama-cpp @node-llama-cpp/linux-x64; do
  got=$(node -p "require('./node_modules/$package/package.json').version")
  want_version=$(node -p "require('./package.json').dependencies['$package']")
  if [[ $got != "$want_version" ]]; then
    echo "install-llamacpp-peer: $package $got installed, the lock pins $want_version" >&2
    exit 1
  fi
done
echo "$want" >"$stamp"
